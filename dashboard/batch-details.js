// One batch: its counts (every count the tracker keeps), what else it knows of the batch, and
// its failed jobs with their error, each opening to its `job status`; and its directives (pause,
// resume, cancel), confirmed first.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { BatchActions, DirectiveBadge } from './batch-directives.js';
import { BatchProgress } from './batch-progress.js';
import { ago, count } from './format.js';
import { JobStatus } from './job-status.js';
import { usePolled } from './polled.js';

const html = htm.bind(h);

const POLL_MS = 3000;
const FAILED_SHOWN = 100;

/** Fields shown in their own place (`paused`, `cancelled`: a badge); every other field of the batch is listed as it comes. */
const PLACED = new Set(['id', 'tenant', 'state', 'jobs', 'paused', 'cancelled']);

function Counts({ jobs }) {
  return html`<dl class="stats counts">
    ${Object.entries(jobs).map(
      ([name, n]) =>
        html`<div key=${name}>
          <dt>${name.replaceAll('_', ' ')}</dt>
          <dd data-field=${name} class=${name === 'failed' && n > 0 ? 'error' : ''}>${count(n)}</dd>
        </div>`,
    )}
  </dl>`;
}

function Facts({ batch }) {
  const facts = Object.entries(batch).filter(([name]) => !PLACED.has(name));
  return html`<dl class="stats facts">
    ${facts.map(
      ([name, value]) =>
        html`<div key=${name}>
          <dt>${name.replaceAll('_', ' ')}</dt>
          <dd data-field=${name} title=${typeof value === 'string' ? value : ''}>
            ${name.endsWith('_seen') && typeof value === 'string' ? ago(value) : typeof value === 'object' ? JSON.stringify(value) : String(value)}
          </dd>
        </div>`,
    )}
  </dl>`;
}

function FailedJobs({ id, failed }) {
  const [open, setOpen] = useState(null);
  // Read again when the failed count changes, not at every poll.
  const { value, error } = usePolled(() => api.batchJobs(id, { state: 'failed', limit: FAILED_SHOWN }), `${id}|${failed}`, 60_000);
  return html`<section aria-label="failed jobs">
    <h3>Failed jobs <span class="num">${count(failed)}</span> <span class="hint">dead-lettered or discarded</span></h3>
    ${error !== null ? html`<p class="error">${error}</p>` : null}
    ${value === null && error === null ? html`<p class="muted">loading…</p>` : null}
    ${value !== null && value.jobs.length === 0 ? html`<p class="muted">none</p>` : null}
    ${
      value !== null && value.jobs.length > 0
        ? html`<ol class="letter-list" id="failed-jobs">
              ${value.jobs.map(
                (job) =>
                  html`<li key=${job.id} data-job=${job.id}>
                    <div class="letter-head">
                      <span class="error-type" data-field="error-type">${job.error?.type ?? job.outcome ?? job.state}</span>
                      <span class="muted">attempt <b>${job.attempts}</b></span>
                    </div>
                    <div class="error-message" data-field="error-message">${job.error?.message ?? ''}</div>
                    <div class="letter-job">
                      <span class="type" data-field="type">${job.type ?? '—'}</span>
                      <span data-field="where">${job.stage ?? '—'} / ${job.queue ?? '—'}</span>
                      <code>${job.id}</code>
                      <button type="button" class="link" data-action="job-status" onClick=${() => setOpen(open === job.id ? null : job.id)}>
                        ${open === job.id ? 'hide status' : 'status'}
                      </button>
                    </div>
                    ${open === job.id ? html`<${JobStatus} id=${job.id} />` : null}
                  </li>`,
              )}
            </ol>
            ${value.total > value.jobs.length ? html`<p class="muted">first ${value.jobs.length} of ${value.total} shown</p>` : null}`
        : null
    }
  </section>`;
}

/** `version` changes after every action: the batch is read again at once. */
export function BatchDetails({ id, version, act, onClose }) {
  const { value: batch, error } = usePolled(() => api.batch(id), `${id}|${version}`, POLL_MS);
  return html`<section class="panel details" aria-label="batch details" data-batch=${id}>
    <h2>
      <span>batch <code>${id}</code></span>
      ${batch ? html`<span class=${`badge ${batch.state}`} data-field="state">${batch.state}</span> <${DirectiveBadge} batch=${batch} />` : null}
      <button type="button" class="link close" onClick=${onClose} aria-label="close the details">✕</button>
    </h2>
    ${error !== null ? html`<p class="error">${error}</p>` : null}
    ${
      batch === null
        ? error === null
          ? html`<p class="muted">loading…</p>`
          : null
        : html`<p class="muted">tenant <b data-field="tenant">${batch.tenant ?? '—'}</b></p>
            <${BatchActions} batch=${batch} act=${act} />
            <${BatchProgress} jobs=${batch.jobs} />
            <${Counts} jobs=${batch.jobs} />
            <${Facts} batch=${batch} />
            <${FailedJobs} id=${id} failed=${batch.jobs.failed} />`
    }
  </section>`;
}
