// The details of one queue of one tenant (or one shared queue): its counts by physical queue,
// its state actions, its dead letters and what landed in unroutable for it.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { ago, count, queueLimits, rate, where } from './format.js';
import { MessageBody } from './message-body.js';

const html = htm.bind(h);

/**
 * Lists that are read by peeking at a queue (no statistics give them) are read again when the
 * numbers the matrix polls say they changed (`key`), or after an action: not every 2 s.
 */
function usePeeked(load, key) {
  const [state, setState] = useState({ items: null, error: null });
  useEffect(() => {
    let current = true;
    load().then(
      (items) => current && setState({ items, error: null }),
      (err) => current && setState((previous) => ({ items: previous.items, error: err.message })),
    );
    return () => {
      current = false;
    };
  }, [key]);
  return state;
}

function DeadLetters({ queue, tenant, cell, version, act }) {
  const { items, error } = usePeeked(
    () => api.deadLetters(queue, tenant).then((answer) => answer.dead_letters),
    `${queue}|${tenant}|${cell?.dead}|${version}`,
  );
  // The sampled count lags what a look at the queue found: either says there is something to act on.
  const total = Math.max(cell?.dead ?? 0, items?.length ?? 0);
  return html`<section class="letters" aria-label="dead letters">
    <h3>
      Dead letters <span class="num" data-field="dead-count">${count(cell?.dead ?? null)}</span>
      <span class="actions">
        <button
          type="button"
          data-action="retry"
          disabled=${total === 0}
          onClick=${() =>
            act({
              title: `Retry the dead letters of ${where(queue, tenant)}?`,
              text: `Every dead job goes back to ${queue} with a fresh attempt count; its error is kept in meta.errors.`,
              verb: 'Retry',
              run: () => api.retryDeadLetters(queue, tenant),
              done: (r) => `${r.retried} retried${r.kept ? `, ${r.kept} kept (not jobs, or refused for their tenant)` : ''}`,
            })}
        >
          Retry all
        </button>
        <button
          type="button"
          class="danger"
          data-action="purge"
          disabled=${total === 0}
          onClick=${() =>
            act({
              title: `Purge the dead letters of ${where(queue, tenant)}?`,
              text: 'They are deleted for good.',
              verb: 'Purge',
              danger: true,
              run: () => api.purgeDeadLetters(queue, tenant),
              done: (r) => `${r.purged} purged`,
            })}
        >
          Purge all
        </button>
      </span>
    </h3>
    ${error !== null ? html`<p class="error">${error}</p>` : null}
    ${items === null && error === null ? html`<p class="muted">loading…</p>` : null}
    ${items !== null && items.length === 0 ? html`<p class="muted">none</p>` : null}
    ${
      items !== null && items.length > 0
        ? html`<ol class="letter-list" id="dead-letters">
            ${items.map(
              (letter) =>
                html`<li key=${letter.ref} data-ref=${letter.ref}>
                  <div class="letter-head">
                    <span class="error-type">${letter.error?.type ?? 'no error recorded'}</span>
                    <span class="muted">attempt <b data-field="attempt">${letter.attempt ?? '—'}</b></span>
                    ${tenant ? null : html`<span class="muted">tenant <b>${letter.tenant ?? '—'}</b></span>`}
                    <span class="muted" title=${letter.dead_lettered_at ?? ''}>${ago(letter.dead_lettered_at)}</span>
                  </div>
                  <div class="error-message">${letter.error?.message ?? ''}</div>
                  <div class="letter-job">
                    <span class="type">${letter.type ?? '(not a job)'}</span>
                    <code>${letter.id ?? ''}</code>
                    <${MessageBody} load=${() => api.deadLetter(queue, tenant, letter.ref)} />
                  </div>
                </li>`,
            )}
          </ol>`
        : null
    }
  </section>`;
}

function Unroutable({ queue, tenant, unroutable, version }) {
  const { items, error } = usePeeked(
    () => api.unroutable({ queue, tenant }).then((answer) => answer.unroutable),
    `${queue}|${tenant}|${unroutable}|${version}`,
  );
  return html`<section class="letters" aria-label="unroutable">
    <h3>Unroutable <span class="hint">jobs for ${where(queue, tenant)} that no queue took (replay them below)</span></h3>
    ${error !== null ? html`<p class="error">${error}</p>` : null}
    ${items !== null && items.length === 0 ? html`<p class="muted">none</p>` : null}
    ${
      items !== null && items.length > 0
        ? html`<table class="list">
            <thead>
              <tr>
                <th>type</th>
                <th>job</th>
                <th>attempt</th>
              </tr>
            </thead>
            <tbody>
              ${items.map(
                (entry) =>
                  html`<tr key=${entry.ref}>
                    <td>${entry.type ?? '—'}</td>
                    <td><code class="id">${entry.id ?? ''}</code> <${MessageBody} load=${() => api.unroutableMessage(entry.ref)} /></td>
                    <td class="num">${entry.attempt ?? '—'}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
        : null
    }
  </section>`;
}

const STATE_ACTIONS = [
  {
    action: 'pause',
    verb: 'Pause',
    target: 'paused',
    text: 'Stages stop taking its jobs (jobs in flight finish); it still takes new jobs.',
  },
  { action: 'resume', verb: 'Resume', target: 'active', text: 'Stages consume it again, and a draining queue takes new jobs again.' },
  {
    action: 'drain',
    verb: 'Drain',
    target: 'draining',
    text: 'It takes no new jobs (they are kept in unroutable) while stages empty it.',
  },
];

export function QueueDetails({ selected, matrix, version, act, onClose }) {
  const { queue, tenant } = selected;
  const cell = tenant
    ? (matrix.rows.find((row) => row.tenant === tenant)?.cells[queue] ?? null)
    : (matrix.shared.find((column) => column.queue === queue)?.cell ?? null);
  return html`<section class="panel details" aria-label="queue details" data-queue=${queue} data-tenant=${tenant ?? ''}>
    <h2>
      ${where(queue, tenant)}
      ${cell ? html`<span class=${`badge ${cell.state}`} data-field="state">${cell.drained ? 'drained' : cell.state}</span>` : null}
      <button type="button" class="link close" onClick=${onClose} aria-label="close the details">✕</button>
    </h2>
    ${
      cell === null
        ? html`<p class="muted">This tenant has no such queue on the broker (not provisioned, or not on this page of tenants).</p>`
        : html`<dl class="stats">
            <div>
              <dt>ready</dt>
              <dd data-field="ready">${count(cell.ready)}</dd>
            </div>
            <div>
              <dt>in flight</dt>
              <dd data-field="unacked">${count(cell.unacked)}</dd>
            </div>
            <div>
              <dt>consumers</dt>
              <dd>${count(cell.consumers)}</dd>
            </div>
            <div>
              <dt>in / out per s</dt>
              <dd>${rate(cell.publish_rate)} / ${rate(cell.deliver_rate)}</dd>
            </div>
            <div>
              <dt>waiting (retry, schedule)</dt>
              <dd>${count(cell.due)}</dd>
            </div>
            <div>
              <dt>suspects</dt>
              <dd>${count(cell.suspect)}</dd>
            </div>
            ${
              cell.limits
                ? html`<div class="wide">
                    <dt>flow limits (<code>${cell.limits.key}</code>)</dt>
                    <dd data-field="limits">${queueLimits(cell.limits)}</dd>
                  </div>`
                : null
            }
            ${cell.variants.map(
              (v) =>
                html`<div class="wide">
                  <dt>variant ${v.variant}</dt>
                  <dd>
                    ${count(v.ready)} ready · ${count(v.unacked)} in flight · ${count(v.consumers)} ⚙ ·
                    ${v.state}${v.limits ? ` · ${queueLimits(v.limits)}` : ''}
                  </dd>
                </div>`,
            )}
          </dl>`
    }
    <div class="actions state-actions">
      ${STATE_ACTIONS.map(
        (s) =>
          html`<button
            type="button"
            data-action=${s.action}
            disabled=${cell === null || (cell.state === s.target && cell.variants.every((v) => v.state === s.target))}
            onClick=${() =>
              act({
                title: `${s.verb} ${where(queue, tenant)}?`,
                text: s.text,
                verb: s.verb,
                danger: s.action === 'drain',
                run: () => api.setState(queue, tenant, s.action),
                done: () => `${where(queue, tenant)}: ${s.target}`,
              })}
          >
            ${s.verb}
          </button>`,
      )}
    </div>
    ${cell === null ? null : html`<${DeadLetters} queue=${queue} tenant=${tenant} cell=${cell} version=${version} act=${act} />`}
    <${Unroutable} queue=${queue} tenant=${tenant} unroutable=${matrix.unroutable} version=${version} />
  </section>`;
}
