// Every workflow the tracking stream knows (its retention), newest first: its kind, tenant,
// state and how far its steps got; click one for its steps (docs/workflows.md).
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { count } from './format.js';
import { usePolled } from './polled.js';

const html = htm.bind(h);

const POLL_MS = 3000;
const LIMIT = 500;

/** `steps_completed / steps_total` for a chain, `jobs_completed / jobs_total` for a group or batch. */
export function progressOf(workflow) {
  return workflow.type === 'chain'
    ? `${count(workflow.steps_completed)} / ${count(workflow.steps_total)} steps`
    : `${count(workflow.jobs_completed)} / ${count(workflow.jobs_total)} jobs`;
}

/** `version` changes after every action: the list is read again at once. */
export function WorkflowsView({ selected, onSelect, version }) {
  const [filter, setFilter] = useState('');
  const [state, setState] = useState('');
  const { value, error, at } = usePolled(() => api.workflows({ state, limit: LIMIT }), `${state}|${version}`, POLL_MS);
  const text = filter.trim().toLowerCase();
  const workflows = (value?.workflows ?? [])
    .filter(
      (w) =>
        text === '' || w.id.toLowerCase().includes(text) || (w.tenant ?? '').includes(text) || (w.name ?? '').toLowerCase().includes(text),
    )
    .reverse();
  return html`<section class="panel" aria-label="workflows" id="workflows">
    <h2>
      Workflows <span class="hint">chains, groups and batches of jobs, each step once the ones it waits for ended</span>
      <span class=${error ? 'stale' : 'live'} data-field="workflows-live" title=${error ?? ''}
        >${error ? `stale: ${error}` : at ? `updated ${new Date(at).toLocaleTimeString()}` : 'reading the tracking stream…'}</span
      >
    </h2>
    <div class="controls">
      <label
        >Workflow, name or tenant
        <input type="search" name="workflow-filter" placeholder="filter" value=${filter} onInput=${(e) => setFilter(e.target.value)}
      /></label>
      <label
        >State
        <select name="workflow-state" value=${state} onChange=${(e) => setState(e.target.value)}>
          <option value="">all</option>
          ${['pending', 'running', 'completed', 'failed', 'cancelled'].map((s) => html`<option value=${s}>${s}</option>`)}
        </select></label
      >
      ${value && value.total > value.workflows.length ? html`<span class="muted">latest ${value.workflows.length} of ${value.total}</span>` : null}
    </div>
    ${value === null && error === null ? html`<p class="muted">loading…</p>` : null}
    ${
      value !== null
        ? html`<table class="list batches workflows">
            <thead>
              <tr>
                <th>workflow</th>
                <th>name</th>
                <th>kind</th>
                <th>tenant</th>
                <th>state</th>
                <th>progress</th>
                <th class="num">jobs</th>
                <th class="num">in flight</th>
              </tr>
            </thead>
            <tbody>
              ${workflows.map(
                (w) =>
                  html`<tr key=${w.id} data-workflow=${w.id} class=${selected === w.id ? 'selected' : ''}>
                    <td>
                      <button type="button" class="link" aria-label=${`steps of workflow ${w.id}`} onClick=${() => onSelect(w.id)}>
                        ${w.id}
                      </button>
                    </td>
                    <td>${w.name ?? '—'}</td>
                    <td data-field="type">${w.type}</td>
                    <td data-field="tenant">${w.tenant ?? '—'}</td>
                    <td><span class=${`badge ${w.state}`} data-field="state">${w.state}</span></td>
                    <td data-field="progress">${progressOf(w)}</td>
                    <td class="num" data-field="known">${count(w.counts.known)}</td>
                    <td class="num" data-field="in_flight">${count(w.counts.in_flight)}</td>
                  </tr>`,
              )}
              ${
                workflows.length === 0
                  ? html`<tr>
                      <td class="empty" colspan="8">no workflow${text || state ? ' matches' : ' yet'}</td>
                    </tr>`
                  : null
              }
            </tbody>
          </table>`
        : null
    }
  </section>`;
}
