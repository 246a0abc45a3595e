import { OJS_MEDIA_TYPE } from '../../src/http-api/http-binding/ojs-media.js';

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** What one request answered: its status, its headers and its JSON body. */
export interface OjsAnswer {
  status: number;
  body: Json;
  headers: Headers;
}

/**
 * A request function as an OJS client sends it to a binding at `base`: the binding's media type,
 * a bearer token (`token`, unless the call gives another) and, when asked, `X-OJS-Tenant`.
 */
export function ojsClient(
  token: string,
): (base: string, method: string, route: string, body?: unknown, as?: { token?: string; tenant?: string }) => Promise<OjsAnswer> {
  return async (base, method, route, body, as = {}) => {
    const response = await fetch(`${base}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${as.token ?? token}`,
        accept: OJS_MEDIA_TYPE,
        ...(as.tenant === undefined ? {} : { 'x-ojs-tenant': as.tenant }),
        ...(body === undefined ? {} : { 'content-type': OJS_MEDIA_TYPE }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Json, headers: response.headers };
  };
}
