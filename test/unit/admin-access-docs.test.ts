import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import type { AdminContext } from '../../src/http-api/admin-context.js';
import type { BindingContext } from '../../src/http-api/http-binding/binding-context.js';
import { bindingRoutes } from '../../src/http-api/http-binding/binding-routes.js';
import { adminRoutes } from '../../src/http-api/routes.js';
import type { DashboardContext } from '../../src/dashboard/dashboard-context.js';
import { dashboardRoutes } from '../../src/dashboard/dashboard-routes.js';
import { REPO_ROOT } from '../helpers/cli.js';

const WHO = { open: 'anyone', tenant: 'tenant', operator: 'operator' } as const;

describe('docs/security.md, "The admin port"', () => {
  it('lists every route of the admin port with who may call it, as the routes declare it', async () => {
    const text = await readFile(path.join(REPO_ROOT, 'docs/security.md'), 'utf8');
    const documented = new Map<string, string>();
    for (const [, route, who] of text.matchAll(/^\| `((?:GET|POST|PUT|DELETE|PATCH) [^`]+)` +\| (anyone|tenant|operator) +\|/gm))
      documented.set(route, who);
    const routes = [
      ...bindingRoutes({ testReset: true } as BindingContext),
      ...adminRoutes({} as AdminContext),
      ...dashboardRoutes({} as DashboardContext),
    ];
    // The dashboard's routes declare no access of their own: the operator's.
    const declared = new Map(
      routes.map((route) => [`${route.method} ${route.path}`, WHO[(route as { access?: keyof typeof WHO }).access ?? 'operator']]),
    );
    expect(Object.fromEntries(documented)).to.deep.equal(Object.fromEntries(declared));
  });
});
