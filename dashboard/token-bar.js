// Whether the page holds the admin token, and a way to set or forget it.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { adminToken } from './api.js';

const html = htm.bind(h);

export function TokenBar({ onChange }) {
  const [text, setText] = useState('');
  const held = adminToken.get() !== '';
  if (held) {
    return html`<span class="token">
      <span class="muted">admin token set for this tab</span>
      <button type="button" class="link" name="forget-token" onClick=${() => (adminToken.clear(), onChange())}>forget</button>
    </span>`;
  }
  const save = (event) => {
    event.preventDefault();
    if (text.trim() === '') return;
    adminToken.set(text.trim());
    setText('');
    onChange();
  };
  return html`<form class="token" onSubmit=${save}>
    <label
      >admin token
      <input
        type="password"
        name="admin-token"
        autocomplete="off"
        placeholder="needed for changes"
        value=${text}
        onInput=${(e) => setText(e.target.value)}
    /></label>
    <button type="submit">use</button>
  </form>`;
}
