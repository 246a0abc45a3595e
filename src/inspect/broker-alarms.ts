import type { ManagementClient } from '../broker-management/management-client.js';

/** A resource alarm raised on a node of the broker. */
export interface BrokerAlarm {
  node: string;
  resource: 'memory' | 'disk';
}

/**
 * The resource alarms in force on the broker's nodes, read through the management API. While any
 * is raised, the broker blocks every connection of the cluster that publishes: stages hold their
 * jobs (nothing is lost) and resume by themselves once it clears. Null when the API does not say
 * (a user without the `monitoring` tag, a node not answering): the caller shows the queues anyway.
 */
export async function readBrokerAlarms(api: Pick<ManagementClient, 'listNodeAlarms'>): Promise<BrokerAlarm[] | null> {
  try {
    const nodes = await api.listNodeAlarms();
    return nodes.flatMap((node) => [
      ...(node.mem_alarm === true ? [{ node: node.name, resource: 'memory' as const }] : []),
      ...(node.disk_free_alarm === true ? [{ node: node.name, resource: 'disk' as const }] : []),
    ]);
  } catch {
    return null;
  }
}

/** One line per alarm for people, or nothing without one. */
export function formatAlarms(alarms: readonly BrokerAlarm[] | null): string {
  if (alarms === null) return '';
  return alarms
    .map(
      (alarm) =>
        `broker alarm: ${alarm.resource} on ${alarm.node}; the broker blocks every connection that publishes until it clears (stages hold their jobs, nothing is lost)\n`,
    )
    .join('');
}
