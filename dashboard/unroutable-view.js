// Everything no queue would take (a tenant never provisioned, a queue no stage declared, a
// draining queue), by queue and tenant, with a replay that sends on what can go now.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { count } from './format.js';
import { MessageBody } from './message-body.js';

const html = htm.bind(h);

export function UnroutableView({ depth, version, act }) {
  const [state, setState] = useState({ answer: null, error: null });
  // Peeked again when the depth the matrix polls changes, or after an action.
  useEffect(() => {
    let current = true;
    api.unroutable().then(
      (answer) => current && setState({ answer, error: null }),
      (err) => current && setState((previous) => ({ answer: previous.answer, error: err.message })),
    );
    return () => {
      current = false;
    };
  }, [depth, version]);
  const items = state.answer?.unroutable ?? [];
  const groups = new Map();
  for (const entry of items) {
    const key = `${entry.tenant ?? '(no tenant)'} / ${entry.queue}`;
    groups.set(key, (groups.get(key) ?? 0) + 1);
  }
  return html`<section class="panel" aria-label="unroutable jobs" id="unroutable">
    <h2>
      Unroutable <span class="num" data-field="unroutable-count">${count(depth)}</span>
      <span class="hint">kept, never dropped; replay once their tenant or queue exists</span>
      <span class="actions">
        <button
          type="button"
          data-action="replay"
          disabled=${!depth}
          onClick=${() =>
            act({
              title: 'Replay the unroutable jobs?',
              text: 'Each job whose tenant or queue exists now is sent on; the others stay here.',
              verb: 'Replay',
              run: () => api.replayUnroutable(),
              done: (r) => `${r.replayed} replayed, ${r.kept} kept`,
            })}
        >
          Replay all
        </button>
      </span>
    </h2>
    ${state.error !== null ? html`<p class="error">${state.error}</p>` : null}
    ${
      groups.size > 0
        ? html`<p class="groups">
            ${[...groups].map(([key, n]) => html`<span class="badge muted">${key}: ${n}</span> `)}
            ${state.answer.scanned > items.length ? html`<span class="muted">(first ${items.length} shown)</span>` : null}
          </p>`
        : null
    }
    ${
      items.length > 0
        ? html`<table class="list">
            <thead>
              <tr>
                <th>tenant</th>
                <th>queue</th>
                <th>type</th>
                <th>job</th>
                <th>attempt</th>
              </tr>
            </thead>
            <tbody>
              ${items.map(
                (entry) =>
                  html`<tr key=${entry.ref}>
                    <td>${entry.tenant ?? '—'}</td>
                    <td>${entry.queue}</td>
                    <td>${entry.type ?? '—'}</td>
                    <td><code class="id">${entry.id ?? ''}</code> <${MessageBody} load=${() => api.unroutableMessage(entry.ref)} /></td>
                    <td class="num">${entry.attempt ?? '—'}</td>
                  </tr>`,
              )}
            </tbody>
          </table>`
        : html`<p class="muted">none</p>`
    }
  </section>`;
}
