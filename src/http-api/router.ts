import type { IncomingMessage } from 'node:http';
import { ApiError } from './api-error.js';
import type { Caller, RouteAccess } from './bearer-auth.js';

/** What a handler answers: a status and a JSON body. */
export interface ApiResponse {
  status: number;
  body: unknown;
  /** Headers beside the ones every answer has (`Location` of a created job...). */
  headers?: Readonly<Record<string, string>>;
}

/** One request as handlers see it: the path parameters, the query, the raw request (for its body). */
export interface ApiRequest {
  params: Readonly<Record<string, string>>;
  query: URLSearchParams;
  req: IncomingMessage;
  /** Who sent it (bearer-auth.ts callerOf); anonymous when not told. */
  caller?: Caller;
}

export interface Route {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE' | 'PATCH';
  /** Path with `{name}` placeholders, e.g. `/ojs/v1/queues/{name}/config`. A literal segment wins over a placeholder. */
  path: string;
  /** Changes state: never a viewer's (checked before anything else is read). */
  mutating: boolean;
  /** Who may call it beside the admin (bearer-auth.ts; docs/security.md). @defaultValue 'operator' */
  access?: RouteAccess;
  handle(request: ApiRequest): Promise<ApiResponse>;
}

/** A route matched to a request. */
export interface Match {
  route: Route;
  params: Record<string, string>;
}

/**
 * Matches a method and path to a route. Unknown paths are 404 and known paths with another
 * method 405 (with the methods allowed), both as OJS errors. Literal segments are tried before
 * placeholders, so `/queues/_default/config` never reaches `/queues/{name}/config`.
 */
export class Router {
  private readonly routes: Array<Route & { segments: string[] }>;

  constructor(routes: readonly Route[]) {
    const literals = (route: Route): number => route.path.split('/').filter((s) => !s.startsWith('{')).length;
    this.routes = [...routes].sort((a, b) => literals(b) - literals(a)).map((route) => ({ ...route, segments: route.path.split('/') }));
  }

  match(method: string, pathname: string): Match {
    const segments = pathname.replace(/\/+$/, '').split('/');
    const allowed: string[] = [];
    for (const route of this.routes) {
      const params = matchSegments(route.segments, segments);
      if (params === undefined) continue;
      if (route.method === method) return { route, params };
      allowed.push(route.method);
    }
    if (allowed.length > 0) {
      throw new ApiError(405, 'INVALID_REQUEST', `${method} is not allowed on ${pathname} (allowed: ${[...new Set(allowed)].join(', ')})`, {
        allowed: [...new Set(allowed)],
      });
    }
    throw new ApiError(404, 'NOT_FOUND', `no such endpoint: ${pathname}`);
  }
}

function matchSegments(pattern: readonly string[], actual: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== actual.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, part] of pattern.entries()) {
    if (part.startsWith('{') && part.endsWith('}')) {
      let value: string;
      try {
        value = decodeURIComponent(actual[i]);
      } catch {
        return undefined;
      }
      if (value === '') return undefined;
      params[part.slice(1, -1)] = value;
    } else if (part !== actual[i]) return undefined;
  }
  return params;
}
