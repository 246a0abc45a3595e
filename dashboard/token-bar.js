// Who the page speaks as: signed in (a viewer's or the admin's token, for reads) and, once a
// confirmation asked for it, the admin token (for changes); a way to sign in or forget either.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { adminToken, readToken } from './api.js';

const html = htm.bind(h);

export function TokenBar({ onChange }) {
  const [text, setText] = useState('');
  if (adminToken.get() !== '') {
    return html`<span class="token">
      <span class="muted">admin token set for this tab</span>
      <button type="button" class="link" name="forget-token" onClick=${() => (adminToken.clear(), onChange())}>forget</button>
    </span>`;
  }
  if (readToken.get() !== '') {
    return html`<span class="token">
      <span class="muted">signed in for this tab</span>
      <button type="button" class="link" name="sign-out" onClick=${() => (readToken.clear(), onChange())}>sign out</button>
    </span>`;
  }
  const save = (event) => {
    event.preventDefault();
    if (text.trim() === '') return;
    readToken.set(text.trim());
    setText('');
    onChange();
  };
  return html`<form class="token" onSubmit=${save}>
    <label
      >token
      <input
        type="password"
        name="read-token"
        autocomplete="off"
        placeholder="admin or viewer token"
        value=${text}
        onInput=${(e) => setText(e.target.value)}
    /></label>
    <button type="submit" name="sign-in">sign in</button>
  </form>`;
}
