// One batched job as `stagecoach job status` shows it: state, attempts, stage, error, parent,
// children and every settlement report; fetched when opened.
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
        <dt>attempts</dt>
        <dd data-field="job-attempts">${job.attempts}</dd>
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
        <dd><code>${job.parent ?? '— (a root)'}</code></dd>
      </div>
      <div class="wide">
        <dt>children</dt>
        <dd>${job.children.length}</dd>
      </div>
      ${
        job.conflict
          ? html`<div class="wide">
              <dt>conflict</dt>
              <dd class="error">two different final outcomes (the first stands)</dd>
            </div>`
          : null
      }
    </dl>
    ${job.error ? html`<p><span class="error-type">${job.error.type}</span> <span class="error-message">${job.error.message}</span></p>` : null}
    <table class="list history">
      <thead>
        <tr>
          <th>at</th>
          <th>stage</th>
          <th>outcome</th>
          <th class="num">attempt</th>
        </tr>
      </thead>
      <tbody>
        ${job.history.map(
          (report, i) =>
            html`<tr key=${i} class=${report.retracted ? 'retracted' : ''}>
              <td>${new Date(report.at).toLocaleTimeString()}</td>
              <td>${report.stage}</td>
              <td data-field="outcome">${report.outcome}${report.retracted ? ' (retracted)' : ''}</td>
              <td class="num">${report.attempt}</td>
            </tr>`,
        )}
        ${
          job.history.length === 0
            ? html`<tr>
                <td class="empty" colspan="4">no settlement yet</td>
              </tr>`
            : null
        }
      </tbody>
    </table>
  </div>`;
}
