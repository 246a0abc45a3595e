// Every change is confirmed in the page, and asks for the admin token when none is kept yet.
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { adminToken } from './api.js';

const html = htm.bind(h);

/**
 * `pending` is { title, text, verb, danger, run, done }. Confirming keeps a token typed here for
 * the session; confirming with none still sends the request, so the server's refusal (and its
 * reason) is what the operator reads.
 */
export function ConfirmDialog({ pending, onConfirm, onCancel }) {
  const [token, setToken] = useState(adminToken.get());
  const needsToken = adminToken.get() === '';
  const confirm = (event) => {
    event.preventDefault();
    if (needsToken && token.trim() !== '') adminToken.set(token.trim());
    onConfirm(pending);
  };
  // Focus goes into the dialog (the token field, else Cancel: Enter never confirms by surprise), so Escape works.
  const first = useRef(null);
  useEffect(() => first.current?.focus(), []);
  const escape = (event) => {
    if (event.key === 'Escape') onCancel();
  };
  return html`<div class="overlay" role="presentation" onKeyDown=${escape}>
    <form class="dialog" role="dialog" aria-modal="true" aria-labelledby="confirm-title" onSubmit=${confirm}>
      <h2 id="confirm-title">${pending.title}</h2>
      <p>${pending.text}</p>
      ${
        needsToken
          ? html`<label class="token-field"
              >Admin token (STAGECOACH_ADMIN_TOKEN)
              <input ref=${first} type="password" name="token" autocomplete="off" value=${token} onInput=${(e) => setToken(e.target.value)}
            /></label>`
          : null
      }
      <div class="buttons">
        <button ref=${needsToken ? null : first} type="button" name="cancel" onClick=${onCancel}>Cancel</button>
        <button type="submit" name="confirm" class=${pending.danger ? 'danger' : 'primary'}>${pending.verb}</button>
      </div>
    </form>
  </div>`;
}
