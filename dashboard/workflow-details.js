// One workflow as its steps (docs/workflows.md): every step, nested as the workflow nests them,
// with its state, its job (opening to its `job status`), what it returned or the error it failed
// with; a batch's callbacks under it; and Cancel, confirmed first.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { count } from './format.js';
import { JobStatus } from './job-status.js';
import { usePolled } from './polled.js';
import { progressOf } from './workflows-view.js';

const html = htm.bind(h);

const POLL_MS = 2000;
const ENDED = new Set(['completed', 'failed', 'cancelled']);

function Step({ step, open, setOpen }) {
  const children = step.steps ?? step.jobs ?? [];
  const callbacks = Object.entries(step.callbacks ?? {});
  return html`<li data-step=${step.path} class="workflow-step">
    <div class="step-head">
      <span class="muted">${step.path}</span>
      <span class="type" data-field="type">${step.type}</span>
      <span class=${`badge ${step.state}`} data-field="state">${step.state}</span>
      ${step.queue ? html`<span class="muted">${step.queue}</span>` : null}
      ${step.counts && step.counts.known > 1 ? html`<span class="muted">${count(step.counts.known)} jobs, ${count(step.counts.in_flight)} in flight</span>` : null}
      ${
        step.job_id
          ? html`<button
              type="button"
              class="link"
              data-action="job-status"
              onClick=${() => setOpen(open === step.job_id ? null : step.job_id)}
            >
              ${open === step.job_id ? 'hide job' : 'job'}
            </button>`
          : null
      }
    </div>
    ${step.error ? html`<div class="error-message" data-field="error">${step.error.type}: ${step.error.message}</div>` : null}
    ${step.result !== undefined && step.result !== null ? html`<code class="result" data-field="result">${JSON.stringify(step.result).slice(0, 300)}</code>` : null}
    ${step.job_id && open === step.job_id ? html`<${JobStatus} id=${step.job_id} />` : null}
    ${children.length > 0 ? html`<${Steps} steps=${children} open=${open} setOpen=${setOpen} />` : null}
    ${
      callbacks.length > 0
        ? html`<${Steps}
            steps=${callbacks.map(([name, cb]) => ({ ...cb, type: `${name}: ${cb.type}` }))}
            open=${open}
            setOpen=${setOpen}
          />`
        : null
    }
  </li>`;
}

function Steps({ steps, open, setOpen }) {
  return html`<ol class="workflow-steps">
    ${steps.map((step) => html`<${Step} key=${step.path} step=${step} open=${open} setOpen=${setOpen} />`)}
  </ol>`;
}

/** `version` changes after every action: the workflow is read again at once. */
export function WorkflowDetails({ id, version, act, onClose }) {
  const [open, setOpen] = useState(null);
  const { value: workflow, error } = usePolled(() => api.workflow(id).then((body) => body.workflow), `${id}|${version}`, POLL_MS);
  const top = workflow ? [...(workflow.steps ?? workflow.jobs ?? [])] : [];
  const callbacks = workflow ? Object.entries(workflow.callbacks ?? {}).map(([name, cb]) => ({ ...cb, type: `${name}: ${cb.type}` })) : [];
  return html`<section class="panel details" aria-label="workflow details" data-workflow=${id}>
    <h2>
      <span>workflow <code>${id}</code></span>
      ${workflow ? html`<span class=${`badge ${workflow.state}`} data-field="state">${workflow.state}</span>` : null}
      <button type="button" class="link close" onClick=${onClose} aria-label="close the details">✕</button>
    </h2>
    ${error !== null ? html`<p class="error">${error}</p>` : null}
    ${
      workflow === null
        ? error === null
          ? html`<p class="muted">loading…</p>`
          : null
        : html`<p class="muted">
              ${workflow.type}${workflow.name ? html` <b>${workflow.name}</b>` : null}, tenant
              <b data-field="tenant">${workflow.tenant ?? '—'}</b>, ${progressOf(workflow)}, ${count(workflow.counts.known)} jobs in its
              batch ${workflow.parent_id ? html`, started by job <code>${workflow.parent_id}</code>` : null}
            </p>
            <div class="actions state-actions">
              <button
                type="button"
                class="danger"
                data-action="cancel"
                disabled=${ENDED.has(workflow.state)}
                onClick=${() =>
                  act({
                    title: `Cancel workflow ${id}?`,
                    text: 'Its steps not started yet never will; jobs running now finish. It cannot be undone.',
                    verb: 'Cancel the workflow',
                    danger: true,
                    run: () => api.cancelWorkflow(id),
                    done: () => `workflow ${id}: cancelled`,
                  })}
              >
                Cancel
              </button>
            </div>
            <${Steps} steps=${[...top, ...callbacks]} open=${open} setOpen=${setOpen} />`
    }
  </section>`;
}
