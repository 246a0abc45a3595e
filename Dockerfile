# One image for every stage: the command picks the stage and tenant, e.g.
#   docker run stagecoach run converter --tenant acme --variant pdf
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY stages ./stages
COPY scripts ./scripts
COPY schema ./schema
RUN npx tsc -p tsconfig.build.json

FROM node:20-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY schema ./schema
COPY config ./config
COPY stages/samples ./stages/samples
ENV STAGECOACH_CONFIG=/app/config/pipeline.json
USER node
ENTRYPOINT ["node", "/app/bin/stagecoach.js"]
CMD ["--help"]
