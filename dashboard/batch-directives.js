// A batch's directives (docs/batches.md, "Cancel, pause and resume"): the badge that says it is
// paused or being cancelled, and the Pause / Resume and Cancel buttons of its details, confirmed
// in the page and sent with the admin token like every other change.
import { h } from 'preact';
import htm from 'htm';
import { api } from './api.js';

const html = htm.bind(h);

/**
 * `paused`, or `cancelled` while the batch still runs (a cancelled batch that has completed says
 * so in its state badge already); nothing otherwise.
 */
export function DirectiveBadge({ batch }) {
  if (batch.cancelled && batch.state !== 'cancelled') {
    return html`<span
      class="badge cancelled"
      data-field="directive"
      title="cancel recorded: jobs not started are discarded; it completes as cancelled once nothing of it is in flight"
      >cancelled</span
    >`;
  }
  if (batch.paused) {
    return html`<span class="badge paused" data-field="directive" title="jobs of it that reach a stage are parked, not run">paused</span>`;
  }
  return null;
}

/** What resume and cancel did with the jobs the pause parked: `moved` sent on, `kept` not (logged by the server). */
const moved = (r) => `, ${r.moved} parked job${r.moved === 1 ? '' : 's'} sent on${r.kept ? `, ${r.kept} kept (see the admin log)` : ''}`;

/** Pause or Resume (by `paused`) and Cancel (while it runs); `act` opens the confirmation. */
export function BatchActions({ batch, act }) {
  const { id, state } = batch;
  const running = state === 'running';
  const pauseOrResume = batch.paused
    ? {
        action: 'resume',
        verb: 'Resume',
        text: 'The pause ends: the jobs it parked go back where they were going, and stages run its jobs again.',
        run: () => api.resumeBatch(id),
        done: (r) => `batch ${id}: resumed${moved(r)}`,
      }
    : {
        action: 'pause',
        verb: 'Pause',
        text: 'Jobs of it that reach any stage from now on are parked, not run; jobs running now finish.',
        run: () => api.pauseBatch(id),
        done: () => `batch ${id}: paused`,
      };
  return html`<div class="actions state-actions batch-actions">
    <button
      type="button"
      data-action=${pauseOrResume.action}
      disabled=${!batch.paused && (!running || batch.cancelled)}
      onClick=${() => act({ title: `${pauseOrResume.verb} batch ${id}?`, ...pauseOrResume })}
    >
      ${pauseOrResume.verb}
    </button>
    <button
      type="button"
      class="danger"
      data-action="cancel"
      disabled=${!running || batch.cancelled}
      onClick=${() =>
        act({
          title: `Cancel batch ${id}?`,
          text: `Jobs of batch ${id} not started yet are discarded where a stage meets them (reported cancelled); jobs running now finish. It cannot be undone.`,
          verb: 'Cancel the batch',
          danger: true,
          run: () => api.cancelBatch(id),
          done: (r) => `batch ${id}: cancelled${moved(r)}`,
        })}
    >
      Cancel
    </button>
  </div>`;
}
