// The schedules (docs/schedules.md, `stagecoach cron list`): each one's expression and zone, what
// it enqueues and for whom, its next and last run, how many jobs it enqueued, and its latest
// occurrences (jobs fired, occurrences skipped). Trigger, enable and disable are changes: confirmed
// in the page and sent with the admin token.
import { h } from 'preact';
import htm from 'htm';
import { api } from './api.js';
import { ago, count } from './format.js';
import { usePolled } from './polled.js';

const html = htm.bind(h);

const POLL_MS = 5000;

function whom(cron) {
  if (cron.tenant) return `tenant ${cron.tenant}`;
  if (!cron.tenants) return '—';
  return cron.tenants === '*' ? 'every tenant' : cron.tenants.join(', ');
}

function when(iso) {
  return iso ? html`<span title=${iso}>${new Date(iso).toLocaleString()}</span>` : '—';
}

/** The latest occurrences: fired (and skipped) counts, newest first. */
function Occurrences({ occurrences }) {
  if (!occurrences || occurrences.length === 0) return html`<span class="muted">none yet</span>`;
  return html`<ul class="occurrences">
    ${occurrences
      .slice(0, 5)
      .map(
        (o) =>
          html`<li key=${`${o.occurrence}|${o.manual}`} title=${o.job ?? ''}>
            ${ago(o.occurrence)}${o.manual ? ' (trigger)' : ''}: ${count(o.fired)}
            fired${o.skipped ? html`, <span class="alert">${count(o.skipped)} skipped</span>` : ''}
          </li>`,
      )}
  </ul>`;
}

function Actions({ cron, act }) {
  const label = cron.tenant ? `${cron.tenant}/${cron.name}` : cron.name;
  const toggle = cron.enabled
    ? { action: 'disable', verb: 'Disable', text: 'It stays registered and fires no more until enabled.' }
    : { action: 'enable', verb: 'Enable', text: 'It fires from its next occurrence on (what it missed while disabled is not caught up).' };
  return html`<div class="actions">
    <button
      type="button"
      data-action="trigger"
      onClick=${() =>
        act({
          title: `Fire ${label} now?`,
          verb: 'Trigger',
          text: `The leader enqueues one occurrence now, for ${whom(cron)}.`,
          run: () => api.triggerCron(cron.name, cron.tenant),
          done: () => `schedule ${label}: triggered`,
        })}
    >
      Trigger
    </button>
    <button
      type="button"
      data-action=${toggle.action}
      onClick=${() =>
        act({
          title: `${toggle.verb} ${label}?`,
          verb: toggle.verb,
          text: toggle.text,
          run: () => api.toggleCron(cron.name, cron.tenant, !cron.enabled),
          done: () => `schedule ${label}: ${toggle.action}d`,
        })}
    >
      ${toggle.verb}
    </button>
  </div>`;
}

/** `version` changes after every action: the list is read again at once. */
export function SchedulesView({ version, act }) {
  const { value, error, at } = usePolled(() => api.crons(), String(version), POLL_MS);
  return html`<section class="panel" aria-label="schedules" id="schedules">
    <h2>
      Schedules <span class="hint">recurring jobs, fired once per occurrence (and tenant) by the schedulers' leader</span>
      <span class=${error ? 'stale' : 'live'} data-field="schedules-live" title=${error ?? ''}
        >${error ? `stale: ${error}` : at ? `updated ${new Date(at).toLocaleTimeString()}` : 'reading the schedules stream…'}</span
      >
    </h2>
    ${value === null && error === null ? html`<p class="muted">loading…</p>` : null}
    ${
      value !== null && value.crons.length === 0
        ? html`<p class="muted">
            No schedules: add them under <code>schedules</code> in the configuration, with <code>stagecoach cron add</code> or
            <code>POST /ojs/v1/cron</code>.
          </p>`
        : null
    }
    ${
      value !== null && value.crons.length > 0
        ? html`<table class="list schedules">
            <thead>
              <tr>
                <th>schedule</th>
                <th>when</th>
                <th>enqueues</th>
                <th>for</th>
                <th>next run</th>
                <th>last run</th>
                <th class="num">runs</th>
                <th>latest occurrences</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              ${value.crons.map(
                (cron) =>
                  html`<tr key=${`${cron.tenant ?? ''}/${cron.name}`} data-schedule=${cron.name} class=${cron.enabled ? '' : 'muted'}>
                    <td>
                      <code>${cron.tenant ? `${cron.tenant}/` : ''}${cron.name}</code
                      >${cron.enabled ? null : html` <span class="badge paused">disabled</span>`}
                      ${cron.description ? html`<div class="muted">${cron.description}</div>` : null}
                    </td>
                    <td><code>${cron.expression}</code> <span class="muted">${cron.timezone}</span></td>
                    <td><code>${cron.type}</code> → ${cron.options.queue}${cron.batch ? ' (batch)' : ''}</td>
                    <td>${whom(cron)}${cron.spread ? html` <span class="muted">over ${cron.spread}</span>` : null}</td>
                    <td data-field="next-run">${when(cron.next_run_at)}</td>
                    <td data-field="last-run">${when(cron.last_run_at)}</td>
                    <td class="num" data-field="run-count">${count(cron.run_count)}</td>
                    <td><${Occurrences} occurrences=${cron.occurrences} /></td>
                    <td><${Actions} cron=${cron} act=${act} /></td>
                  </tr>`,
              )}
            </tbody>
          </table>`
        : null
    }
  </section>`;
}
