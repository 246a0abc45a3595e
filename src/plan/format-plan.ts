import type { ChangeAction, ChangeKind, Plan } from './plan.js';

const SECTIONS: ReadonlyArray<[ChangeKind, string]> = [
  ['tenant', 'tenants'],
  ['exchange', 'exchanges'],
  ['queue', 'queues'],
  ['binding', 'bindings'],
  ['policy', 'settings (policies)'],
  ['user', 'broker users'],
];
const ACTIONS: readonly ChangeAction[] = ['add', 'change', 'remove', 'recreate', 'retire'];

/** A plan for people: one section per kind, one line per change, and a closing count. */
export function formatPlan(plan: Plan): string {
  const lines = [`plan for prefix "${plan.prefix}" on virtual host "${plan.vhost}"`];
  const { configured, missing, extra } = plan.tenants;
  lines.push(
    `tenants: ${configured.length} configured${missing.length > 0 ? `, not provisioned: ${missing.join(', ')}` : ''}${
      extra.length > 0 ? `, not configured: ${extra.join(', ')}` : ''
    }`,
  );
  for (const [kind, title] of SECTIONS) {
    const changes = plan.changes.filter((change) => change.kind === kind);
    if (changes.length === 0) continue;
    lines.push(`${title}:`);
    for (const change of changes) lines.push(`  ${change.action.padEnd(8)} ${change.name}${change.detail ? `: ${change.detail}` : ''}`);
  }
  const states = Object.entries(plan.states.queues);
  lines.push(
    `states (not configuration: apply leaves them): ${
      states.length === 0 ? 'every queue active' : states.map(([queue, state]) => `${queue} ${state}`).join(', ')
    }`,
  );
  lines.push(summary(plan));
  return `${lines.join('\n')}\n`;
}

/** `nothing differs`, or the count per action. */
export function summary(plan: Plan): string {
  if (plan.changes.length === 0) return 'nothing differs';
  const by = (action: ChangeAction): number => plan.changes.filter((change) => change.action === action).length;
  const counts = ACTIONS.map((action) => [action, by(action)] as const).filter(([, n]) => n > 0);
  const applied = counts.filter(([action]) => action === 'add' || action === 'change' || action === 'remove');
  const manual = counts.filter(([action]) => action === 'recreate' || action === 'retire');
  const parts: string[] = [];
  if (applied.length > 0) parts.push(`${applied.map(([action, n]) => `${n} to ${action}`).join(', ')} (stagecoach apply)`);
  if (manual.length > 0) parts.push(`${manual.map(([action, n]) => `${n} to ${action}`).join(', ')} (by hand, see above)`);
  return `${plan.changes.length} difference${plan.changes.length === 1 ? '' : 's'}: ${parts.join('; ')}`;
}
