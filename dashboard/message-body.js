// A message's headers and body, fetched only when asked for: bodies can be large, and most of
// the time an operator needs the error, not the payload.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';

const html = htm.bind(h);

/** A "body" toggle; `load` fetches the message (dead letter or unroutable) when opened. */
export function MessageBody({ load }) {
  const [state, setState] = useState({ open: false, message: null, error: null });
  const toggle = async () => {
    if (state.open) {
      setState({ ...state, open: false });
      return;
    }
    setState({ open: true, message: null, error: null });
    try {
      setState({ open: true, message: await load(), error: null });
    } catch (err) {
      setState({ open: true, message: null, error: err.message });
    }
  };
  return html`<span class="body-toggle">
    <button type="button" class="link" onClick=${toggle}>${state.open ? 'hide body' : 'body'}</button>
    ${
      state.open
        ? html`<div class="message-body" data-field="body">
            ${state.error !== null ? html`<p class="error">${state.error}</p>` : null}
            ${state.message === null && state.error === null ? html`<p class="muted">loading…</p>` : null}
            ${
              state.message !== null
                ? html`<p class="muted">
                      ${state.message.content_type ?? 'no content type'}, ${state.message.size}
                      bytes${state.message.truncated ? ' (cut: only the first 256 KiB shown)' : ''}
                    </p>
                    <pre>${'body_json' in state.message ? JSON.stringify(state.message.body_json, null, 2) : state.message.body}</pre>
                    ${state.message.payload ? html`<${Payload} payload=${state.message.payload} />` : null}
                    <details>
                      <summary>headers</summary>
                      <pre>${JSON.stringify(state.message.headers, null, 2)}</pre>
                    </details>`
                : null
            }
          </div>`
        : null
    }
  </span>`;
}

/** The arguments of a job sent by reference, loaded from the payload store by the server. */
function Payload({ payload }) {
  const size = payload.size === null ? '' : `, ${payload.size} bytes`;
  let shown;
  if (!payload.stored) shown = html`<p class="error">the payload store no longer has it (deleted or swept)</p>`;
  else if (payload.truncated) shown = html`<p class="muted">stored; too large to show here (over 256 KiB)</p>`;
  else if (payload.error) shown = html`<p class="error">${payload.error}</p>`;
  else shown = html`<pre>${JSON.stringify(payload.args, null, 2)}</pre>`;
  return html`<div class="payload" data-field="payload">
    <p class="muted">arguments sent by reference: <code>${payload.ref}</code>${size}</p>
    ${shown}
  </div>`;
}
