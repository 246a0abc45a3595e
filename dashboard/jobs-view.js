// Job search (docs/dashboard.md "Jobs"): by id, or by tenant, queue, state, type and tag, read from
// the job store through the admin API (`GET /ojs/v1/jobs`, the query `stagecoach job list`
// makes); a result opens the job's page (its `job status`), and the address keeps it
// (`#job=<id>`), so a link opens the same job.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { ago } from './format.js';
import { JobStatus } from './job-status.js';

const html = htm.bind(h);

/** Jobs per page: the API pages by id (creation order), `next_cursor` for the next. */
const PAGE = 50;
const STATES = ['scheduled', 'available', 'pending', 'active', 'completed', 'retryable', 'cancelled', 'discarded'];
const FIELDS = ['tenant', 'queue', 'type', 'tag'];

/** The search form; `onSearch` gets the filled fields only. */
function SearchForm({ onSearch }) {
  const [fields, setFields] = useState({ id: '', tenant: '', queue: '', state: '', type: '', tag: '' });
  const set = (name) => (e) => setFields({ ...fields, [name]: e.target.value });
  const submit = (e) => {
    e.preventDefault();
    const asked = {};
    for (const [name, value] of Object.entries(fields)) if (value.trim() !== '') asked[name] = value.trim();
    onSearch(asked);
  };
  return html`<form class="controls" id="job-search" onSubmit=${submit}>
    <label>Job id <input type="search" name="job-id" placeholder="UUIDv7" value=${fields.id} onInput=${set('id')} /></label>
    ${FIELDS.map(
      (name) =>
        html`<label key=${name}
          >${name[0].toUpperCase() + name.slice(1)} <input type="search" name=${`job-${name}`} value=${fields[name]} onInput=${set(name)}
        /></label>`,
    )}
    <label
      >State
      <select name="job-state" value=${fields.state} onChange=${set('state')}>
        <option value="">all</option>
        ${STATES.map((state) => html`<option key=${state} value=${state}>${state}</option>`)}
      </select></label
    >
    <button type="submit">Search</button>
  </form>`;
}

/** One page of results: `{ jobs, next_cursor }` from the list, or the one job an id names. */
async function search(asked, cursor) {
  if (asked.id !== undefined) {
    try {
      return { jobs: [await api.job(asked.id)] };
    } catch (err) {
      if (err.status === 404) return { jobs: [] };
      throw err;
    }
  }
  return api.jobs({ tenant: asked.tenant, queue: asked.queue, state: asked.state, type: asked.type, tag: asked.tag, limit: PAGE, cursor });
}

export function JobsView({ selected, onSelect }) {
  const [asked, setAsked] = useState(null);
  const [pages, setPages] = useState([]);
  const [result, setResult] = useState({ value: null, error: null });
  const cursor = pages.at(-1);
  useEffect(() => {
    if (asked === null) return undefined;
    let current = true;
    setResult({ value: null, error: null });
    search(asked, cursor).then(
      (value) => current && setResult({ value, error: null }),
      (err) => current && setResult({ value: null, error: err.message }),
    );
    return () => {
      current = false;
    };
  }, [asked, cursor]);
  const { value, error } = result;
  return html`<section class="panel" aria-label="jobs" id="jobs">
    <h2>Jobs <span class="hint">every tracked job, as the job store knows it (job status, job list)</span></h2>
    <${SearchForm}
      onSearch=${(query) => {
        setPages([]);
        setAsked(query);
      }}
    />
    ${error !== null ? html`<p class="error" data-field="jobs-error">${error}</p>` : null}
    ${asked === null ? html`<p class="muted">search by id, or by tenant, queue, state, type and tag (all jobs: search with none)</p>` : null}
    ${asked !== null && value === null && error === null ? html`<p class="muted">searching…</p>` : null}
    ${value !== null && value.jobs.length === 0 ? html`<p class="muted" data-field="jobs-none">no job matches</p>` : null}
    ${
      value !== null && value.jobs.length > 0
        ? html`<table class="list jobs" id="job-results">
              <thead>
                <tr>
                  <th>job</th>
                  <th>tenant</th>
                  <th>queue</th>
                  <th>type</th>
                  <th>state</th>
                  <th class="num">attempt</th>
                  <th>tags</th>
                  <th>created</th>
                </tr>
              </thead>
              <tbody>
                ${value.jobs.map(
                  (job) =>
                    html`<tr key=${job.id} data-job=${job.id} class=${selected === job.id ? 'selected' : ''}>
                      <td>
                        <a
                          href=${`#job=${encodeURIComponent(job.id)}`}
                          aria-label=${`job ${job.id}`}
                          onClick=${(e) => {
                            e.preventDefault();
                            onSelect(job.id);
                          }}
                          ><code>${job.id}</code></a
                        >
                      </td>
                      <td data-field="tenant">${job.tenant ?? '—'}</td>
                      <td data-field="queue">${job.queue ?? '—'}</td>
                      <td data-field="type">${job.type ?? '—'}</td>
                      <td><span class=${`badge ${job.state}`} data-field="state">${job.state}</span></td>
                      <td class="num">${job.attempt}</td>
                      <td data-field="tags">${(job.tags ?? []).length === 0 ? '—' : job.tags.join(', ')}</td>
                      <td title=${job.created_at ?? ''}>${job.created_at ? ago(job.created_at) : '—'}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
            <div class="controls">
              ${pages.length > 0 ? html`<button type="button" onClick=${() => setPages(pages.slice(0, -1))}>previous</button>` : null}
              ${
                value.next_cursor
                  ? html`<button type="button" data-action="next-jobs" onClick=${() => setPages([...pages, value.next_cursor])}>
                      next
                    </button>`
                  : null
              }
            </div>`
        : null
    }
  </section>`;
}

/** A job's page: its `job status` (state, attempts, stage, parent, children, result, errors). */
export function JobDetails({ id, onClose }) {
  return html`<section class="panel details" aria-label="job details" data-job-page=${id}>
    <h2>
      <span>job <code>${id}</code></span>
      <button type="button" class="link close" onClick=${onClose} aria-label="close the job">✕</button>
    </h2>
    <${JobStatus} id=${id} />
  </section>`;
}
