// One tracked job as `stagecoach job status` shows it (docs/job-state.md): OJS state, attempt,
// stage, parent, children, progress, result and an error per failed attempt; fetched when opened.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';

const html = htm.bind(h);

export function JobStatus({ id }) {
  const [state, setState] = useState({ job: null, error: null });
  useEffect(() => {
    let current = true;
    api.job(id).then(
      (job) => current && setState({ job, error: null }),
      (err) => current && setState({ job: null, error: err.message }),
    );
    return () => {
      current = false;
    };
  }, [id]);
  const { job, error } = state;
  if (error !== null) return html`<div class="job-status"><p class="error">${error}</p></div>`;
  if (job === null) return html`<div class="job-status"><p class="muted">loading…</p></div>`;
  return html`<div class="job-status" data-job=${job.id}>
    <dl class="stats">
      <div>
        <dt>state</dt>
        <dd data-field="job-state">${job.state}</dd>
      </div>
      <div>
        <dt>outcome</dt>
        <dd data-field="outcome">${job.outcome}</dd>
      </div>
      <div>
        <dt>attempt</dt>
        <dd data-field="job-attempts">${job.attempt}</dd>
      </div>
      <div>
        <dt>last stage</dt>
        <dd>${job.stage ?? '—'}</dd>
      </div>
      <div>
        <dt>queue</dt>
        <dd>${job.queue ?? '—'}</dd>
      </div>
      <div class="wide">
        <dt>parent</dt>
        <dd><code>${job.parent_id ?? '— (a root)'}</code></dd>
      </div>
      <div class="wide">
        <dt>children</dt>
        <dd>${job.children.length}</dd>
      </div>
      ${
        job.progress !== undefined
          ? html`<div class="wide">
              <dt>progress</dt>
              <dd data-field="job-progress">
                ${job.progress === null ? '—' : `${Math.round(job.progress * 100)}%`}${job.progress_message === undefined ? '' : ` · ${job.progress_message}`}
              </dd>
            </div>`
          : null
      }
      ${
        (job.tags ?? []).length > 0
          ? html`<div class="wide">
              <dt>tags</dt>
              <dd data-field="job-tags">${job.tags.join(', ')}</dd>
            </div>`
          : null
      }
      ${
        job.result !== null
          ? html`<div class="wide">
              <dt>result</dt>
              <dd><code>${JSON.stringify(job.result)}</code></dd>
            </div>`
          : null
      }
    </dl>
    <table class="list history">
      <thead>
        <tr>
          <th>at</th>
          <th class="num">attempt</th>
          <th>error</th>
        </tr>
      </thead>
      <tbody>
        ${job.errors.map(
          (error) =>
            html`<tr key=${error.attempt}>
              <td>${new Date(error.at).toLocaleTimeString()}</td>
              <td class="num">${error.attempt}</td>
              <td><span class="error-type">${error.type}</span> <span class="error-message">${error.message}</span></td>
            </tr>`,
        )}
        ${
          job.errors.length === 0
            ? html`<tr>
                <td class="empty" colspan="3">no failed attempt</td>
              </tr>`
            : null
        }
      </tbody>
    </table>
  </div>`;
}
