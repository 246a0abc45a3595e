/**
 * How the dashboard names one message of a queue it only peeks at: its `message_id` (a job's
 * id), or `~<position>` for a message that has none (a body that is not a job, dead-lettered as
 * INVALID_PAYLOAD, is the one an operator most needs to read). A position is only good until the
 * queue changes; an id stays good as long as the message is there.
 */
export function messageRef(messageId: string | undefined, position: number): string {
  return messageId !== undefined && messageId !== '' ? messageId : `~${position}`;
}

/** The position a `~<n>` reference names, or undefined for a message id. */
export function positionOf(ref: string): number | undefined {
  const match = /^~(\d{1,6})$/.exec(ref);
  return match ? Number(match[1]) : undefined;
}
