import { Stage, type Job, type StageContext, type StageHandler } from '../src/index.js';
import { mark } from './bench-stages.js';

/**
 * The stages of the `peers` scenario (bench/peers.ts): trivial relays, one per hop, for each
 * stagecoach side: `xs` shared queues, `xt` one tenant's queues, `xv` one tenant's queue that has
 * variants (its jobs match none, so they take the variant router and its general queue).
 * Relay queues `<side>_r0` / `_r1` (drained one into the other, alternately); the pipeline's
 * ring `<side>_p0` .. `_p3` (each round moves the backlog three hops on).
 */
function relay(name: string, input: string, output: string): new () => StageHandler {
  class PeerRelay implements StageHandler {
    async handle(job: Job, ctx: StageContext): Promise<void> {
      mark(name);
      await ctx.emit(output, { type: job.type, args: job.args });
    }
  }
  Stage({ name, input, outputs: [output] })(PeerRelay);
  return PeerRelay;
}

/** The stage names of one side, by role: `relay(0)` drains r0 into r1; `pipe(k)` moves p_k to p_(k+1 mod 4). */
export const peerStageName = {
  relay: (side: string, from: 0 | 1): string => `${side}_r${from}${1 - from}`,
  pipe: (side: string, from: number): string => `${side}_p${from}${(from + 1) % 4}`,
};

export const XsR01 = relay('xs_r01', 'xs_r0', 'xs_r1');
export const XsR10 = relay('xs_r10', 'xs_r1', 'xs_r0');
export const XsP01 = relay('xs_p01', 'xs_p0', 'xs_p1');
export const XsP12 = relay('xs_p12', 'xs_p1', 'xs_p2');
export const XsP23 = relay('xs_p23', 'xs_p2', 'xs_p3');
export const XsP30 = relay('xs_p30', 'xs_p3', 'xs_p0');
export const XtR01 = relay('xt_r01', 'xt_r0', 'xt_r1');
export const XtR10 = relay('xt_r10', 'xt_r1', 'xt_r0');
export const XtP01 = relay('xt_p01', 'xt_p0', 'xt_p1');
export const XtP12 = relay('xt_p12', 'xt_p1', 'xt_p2');
export const XtP23 = relay('xt_p23', 'xt_p2', 'xt_p3');
export const XtP30 = relay('xt_p30', 'xt_p3', 'xt_p0');
export const XvR01 = relay('xv_r01', 'xv_r0', 'xv_r1');
export const XvR10 = relay('xv_r10', 'xv_r1', 'xv_r0');
