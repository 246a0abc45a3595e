import type { IncomingMessage } from 'node:http';
import type { CompiledConfig } from '../config/config.types.js';
import type { Logger } from '../logging/logger.js';
import type { PayloadStore } from '../payload/payload-store.js';
import type { ManagementClient } from '../broker-management/management-client.js';
import type { StageEndpoints } from '../topology/topology.types.js';

/**
 * What the dashboard's API routes need from the admin server that hosts them. The admin API's
 * own context has these members, so the server hands its context over as it is: the dashboard
 * reads the configuration, the stages and the management API exactly as the admin API does.
 */
export interface DashboardContext {
  /** The configuration file, read again for every request (a change made by anyone is seen). */
  configFile: { load(): Promise<CompiledConfig> };
  /** The configured stages' inputs and outputs: the pipeline order of the matrix's columns. */
  stages: readonly StageEndpoints[];
  log: Logger;
  api(config: CompiledConfig): ManagementClient;
  /** The payload store of the configuration at start: jobs sent by reference are shown with their arguments. */
  payloads: PayloadStore;
}

/** One request as a route sees it (the admin API's router hands these over). */
export interface DashboardRequest {
  params: Readonly<Record<string, string>>;
  query: URLSearchParams;
  req: IncomingMessage;
}

/** A JSON answer; errors are thrown as StagecoachErrors and answered as OJS error objects by the server. */
export interface DashboardResponse {
  status: number;
  body: unknown;
}

/**
 * A route in the admin API's router: `mutating` routes need the admin bearer token, checked by
 * the server before `handle` runs, the same rule as every change of the admin API.
 */
export interface DashboardRoute {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  path: string;
  mutating: boolean;
  handle(request: DashboardRequest): Promise<DashboardResponse>;
}
