import { TenantMismatchError } from '../errors/errors.js';
import type { BrokerIdentities } from './broker-users.js';

/**
 * A stage's admission check with `security.tenantUsers`: the broker validated each job's
 * `user_id` (a publisher cannot claim another user's), so it names who published the job. A job
 * runs only when that user may act for the job's tenant: for a tenant-scoped queue the queue's
 * tenant, whatever the job claims; for a shared queue the tenant the job claims.
 */
export class PublisherCheck {
  /** For a tenant-scoped queue the allowed users are known up front: one Set lookup per job. */
  private readonly allowed: ReadonlySet<string> | undefined;

  constructor(
    private readonly identities: BrokerIdentities,
    private readonly queueTenant: string | undefined,
  ) {
    this.allowed = queueTenant === undefined ? undefined : identities.allowedFor(queueTenant);
  }

  /** Undefined when the job may run, else why not. */
  refusal(jobTenant: string | undefined, userId: unknown): TenantMismatchError | undefined {
    const tenant = this.queueTenant ?? jobTenant;
    const allowed =
      this.allowed === undefined ? this.identities.mayActFor(tenant, userId) : typeof userId === 'string' && this.allowed.has(userId);
    if (allowed) return undefined;
    const publisher = typeof userId === 'string' ? userId : undefined;
    const by = publisher === undefined ? 'carries no validated user_id' : `was published by broker user "${publisher}"`;
    const detail =
      tenant === undefined
        ? `a job without a tenant ${by}; only the operator and the internal user may publish one`
        : `a job for tenant "${tenant}" ${by}, which may not act for that tenant`;
    return new TenantMismatchError(tenant, publisher, detail);
  }
}
