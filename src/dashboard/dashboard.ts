import type { IncomingMessage, ServerResponse } from 'node:http';
import { loadDashboardAssets } from './dashboard-assets.js';
import type { DashboardContext, DashboardRoute } from './dashboard-context.js';
import { dashboardRoutes } from './dashboard-routes.js';

/** The operators' web dashboard, as the admin server hosts it beside its API. */
export interface Dashboard {
  /** API routes for the admin server's router (its token rule and OJS error objects apply). */
  routes: DashboardRoute[];
  /** Answers a request for the page or its files and returns true; false leaves it to the API. */
  serve(req: IncomingMessage, res: ServerResponse): boolean;
}

/** Reads the page's files (a missing one fails the start) and builds the routes on the admin context. */
export async function loadDashboard(ctx: DashboardContext): Promise<Dashboard> {
  const assets = await loadDashboardAssets();
  return { routes: dashboardRoutes(ctx), serve: (req, res) => assets.handle(req, res) };
}
