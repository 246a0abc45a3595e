/**
 * Where the batch fold keeps a batch: a batch is its tenant's and its id's, so the same batch id
 * reported by two tenants names two batches (docs/security.md, "Batch ids are per tenant"): a
 * tenant's producer may put any id in `meta.batch`, and no choice of one reaches, counts into,
 * refuses or reveals another tenant's batch or workflow. A batch of no tenant is kept under its
 * id; a tenant's under `<tenant>/<id>` (a batch id never holds `/`, a tenant slug neither).
 */
export function batchKey(tenant: string | undefined, id: string): string {
  return tenant === undefined ? id : `${tenant}/${id}`;
}
