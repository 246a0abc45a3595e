import { DEFAULT_AMQP_PRIORITY } from '../../job/amqp-priority.js';
import type { Delivery } from '../channels/delivery.js';

/**
 * The deliveries a dispatcher holds unstarted, in two parts: those that may start, by the
 * message's AMQP priority (higher first; amqp-priority.ts), first come first served within one,
 * and those whose flow-limit permit is not granted yet (docs/flow-control.md). A permit granted
 * moves its delivery behind those of its priority or higher. Every operation the dispatcher
 * makes per job is O(1) when jobs share a priority: with limits, most of a prefetch may be
 * waiting for tokens, and scanning it for every start cost more than the limit itself.
 */
export class WaitingLine {
  private readonly ready: Delivery[] = [];
  private readonly held = new Set<Delivery>();

  get length(): number {
    return this.ready.length + this.held.size;
  }

  /** Whether a delivery may start now. */
  get startable(): boolean {
    return this.ready.length > 0;
  }

  /** Whether a delivery waits for its permit. */
  get holding(): boolean {
    return this.held.size > 0;
  }

  push(delivery: Delivery): void {
    if (delivery.permit !== undefined && !delivery.permit.granted) this.held.add(delivery);
    else this.enter(delivery);
  }

  /** Its permit was granted: it may start, after those that could already. */
  granted(delivery: Delivery): void {
    if (this.held.delete(delivery)) this.enter(delivery);
  }

  /** Into the startable part, after every delivery of its priority or higher (found from the end). */
  private enter(delivery: Delivery): void {
    const priority = levelOf(delivery);
    let at = this.ready.length;
    while (at > 0 && levelOf(this.ready[at - 1] as Delivery) < priority) at--;
    this.ready.splice(at, 0, delivery);
  }

  /** The next delivery that may start, taken out of the line. */
  next(): Delivery | undefined {
    return this.ready.shift();
  }

  /** Takes `delivery` out of the line; false when it is not in it. */
  remove(delivery: Delivery): boolean {
    if (this.held.delete(delivery)) return true;
    const at = this.ready.indexOf(delivery);
    if (at < 0) return false;
    this.ready.splice(at, 1);
    return true;
  }

  /** Takes out and returns every delivery `which` picks (all of them without it). */
  takeAll(which: (delivery: Delivery) => boolean = () => true): Delivery[] {
    const taken: Delivery[] = [];
    // In arrival order where it is known: those that may start first, then those held.
    const held: Delivery[] = [];
    for (const delivery of this.held) {
      if (!which(delivery)) continue;
      this.held.delete(delivery);
      held.push(delivery);
    }
    const kept = this.ready.filter((delivery) => {
      if (!which(delivery)) return true;
      taken.push(delivery);
      return false;
    });
    this.ready.splice(0, this.ready.length, ...kept);
    return [...taken, ...held];
  }

  /** Takes out the deliveries whose permit has waited at least `ms` (performance.now clock). */
  takeOverdue(now: number, ms: number): Delivery[] {
    return this.takeAll((delivery) => delivery.permit !== undefined && !delivery.permit.granted && now - delivery.permit.since >= ms);
  }
}

/** A delivery's AMQP priority; a message without one was published as OJS priority 0. */
function levelOf(delivery: Delivery): number {
  const priority: unknown = delivery.message.properties.priority;
  return typeof priority === 'number' ? priority : DEFAULT_AMQP_PRIORITY;
}
