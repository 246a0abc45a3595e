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
# The library's dependencies, then those of the example pipeline (stages/). These are
# devDependencies of the package, so that `npm install stagecoach` does not bring them; here they
# become dependencies at the version package.json pins (and package-lock.json locks), and the
# development tools stay out. test/unit/package-dependencies.test.ts keeps this list complete.
ARG EXAMPLE_DEPENDENCIES="pdfjs-dist"
RUN npm ci --omit=dev --no-audit --no-fund \
 && for name in $EXAMPLE_DEPENDENCIES; do \
      npm pkg set "dependencies.$name=$(node -p "require('./package.json').devDependencies['$name']")" \
      && npm pkg delete "devDependencies.$name" || exit 1; \
    done \
 && npm install --omit=dev --no-audit --no-fund \
 && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY dashboard ./dashboard
COPY schema ./schema
COPY config ./config
COPY stages/samples ./stages/samples
ENV STAGECOACH_CONFIG=/app/config/pipeline.json
# The payload store's folder (config/pipeline.json: payloads.store.dir "../payloads"), the `node`
# user's: a volume mounted here (docker-compose.yml) is created with this owner.
RUN mkdir -p /app/payloads && chown node:node /app/payloads
USER node
ENTRYPOINT ["node", "/app/bin/stagecoach.js"]
CMD ["--help"]
