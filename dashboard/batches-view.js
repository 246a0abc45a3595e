// Every batch the tracking stream knows (its retention), newest first: tenant, state, counts and
// a progress bar; click one for its details. Read from the admin API's one stream follower.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { DirectiveBadge } from './batch-directives.js';
import { BatchProgress } from './batch-progress.js';
import { ago, count } from './format.js';
import { usePolled } from './polled.js';

const html = htm.bind(h);

const POLL_MS = 3000;
/** The latest batches the list asks for; `total` says how many there are. */
const LIMIT = 500;

/** `version` changes after every action: the list is read again at once. */
export function BatchesView({ selected, onSelect, version }) {
  const [filter, setFilter] = useState('');
  const [state, setState] = useState('');
  const { value, error, at } = usePolled(() => api.batches({ state, limit: LIMIT }), `${state}|${version}`, POLL_MS);
  const text = filter.trim().toLowerCase();
  const batches = (value?.batches ?? [])
    .filter((b) => text === '' || b.id.toLowerCase().includes(text) || (b.tenant ?? '').includes(text))
    .reverse();
  return html`<section class="panel" aria-label="batches" id="batches">
    <h2>
      Batches <span class="hint">jobs started together and everything they emitted, as the tracking stream tells</span>
      <span class=${error ? 'stale' : 'live'} data-field="batches-live" title=${error ?? ''}
        >${error ? `stale: ${error}` : at ? `updated ${new Date(at).toLocaleTimeString()}` : 'reading the tracking stream…'}</span
      >
    </h2>
    <div class="controls">
      <label
        >Batch or tenant
        <input type="search" name="batch-filter" placeholder="filter" value=${filter} onInput=${(e) => setFilter(e.target.value)}
      /></label>
      <label
        >State
        <select name="batch-state" value=${state} onChange=${(e) => setState(e.target.value)}>
          <option value="">all</option>
          <option value="running">running</option>
          <option value="completed">completed</option>
          <option value="cancelled">cancelled</option>
        </select></label
      >
      ${value && value.total > value.batches.length ? html`<span class="muted">latest ${value.batches.length} of ${value.total}</span>` : null}
    </div>
    ${value === null && error === null ? html`<p class="muted">loading…</p>` : null}
    ${
      value !== null
        ? html`<table class="list batches">
            <thead>
              <tr>
                <th>batch</th>
                <th>tenant</th>
                <th>state</th>
                <th>progress</th>
                <th class="num">known</th>
                <th class="num">completed</th>
                <th class="num">failed</th>
                <th class="num">in flight</th>
                <th>last report</th>
              </tr>
            </thead>
            <tbody>
              ${batches.map(
                (b) =>
                  html`<tr key=${b.id} data-batch=${b.id} class=${selected === b.id ? 'selected' : ''}>
                    <td>
                      <button type="button" class="link" aria-label=${`details of batch ${b.id}`} onClick=${() => onSelect(b.id)}>
                        ${b.id}
                      </button>
                    </td>
                    <td data-field="tenant">${b.tenant ?? '—'}</td>
                    <td><span class=${`badge ${b.state}`} data-field="state">${b.state}</span> <${DirectiveBadge} batch=${b} /></td>
                    <td><${BatchProgress} jobs=${b.jobs} /></td>
                    <td class="num" data-field="known">${count(b.jobs.known)}</td>
                    <td class="num" data-field="completed">${count(b.jobs.completed)}</td>
                    <td class=${`num ${b.jobs.failed > 0 ? 'error' : ''}`} data-field="failed">${count(b.jobs.failed)}</td>
                    <td class="num" data-field="in_flight">${count(b.jobs.in_flight)}</td>
                    <td class="muted" title=${b.last_seen ?? ''}>${ago(b.last_seen)}</td>
                  </tr>`,
              )}
              ${
                batches.length === 0
                  ? html`<tr>
                      <td class="empty" colspan="9">no batch${text || state ? ' matches' : ' yet (publish with --batch)'}</td>
                    </tr>`
                  : null
              }
            </tbody>
          </table>`
        : null
    }
  </section>`;
}
