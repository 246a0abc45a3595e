// The flow limits' partitions of named limits and of jobs' own policies (`stagecoach limits`):
// what runs under each, and what it allows. A queue's own limits show in its cell instead.
import { h } from 'preact';
import htm from 'htm';
import { count, perWindow } from './format.js';

const html = htm.bind(h);

function concurrencyOf(report) {
  const c = report.concurrency;
  if (!c) return '—';
  // Tokens differ from the limit while a change is applied (a lowering waits for running jobs).
  return `${count(c.active)}/${c.limit}${c.tokens === c.limit ? '' : ` (${c.tokens} tokens)`}`;
}

function rateOf(report) {
  const r = report.rate;
  return r ? `${count(r.current_count)} of ${perWindow(r.limit, r.period_ms)}` : '—';
}

function throttleOf(report) {
  const t = report.throttle;
  return t ? `${perWindow(t.limit, t.period_ms)}${t.cooling ? ' (cooling)' : ''}` : '—';
}

/** Shown once the broker holds a partition (a job needed a token); nothing to show before. */
export function LimitsView({ limits }) {
  if (!limits || limits.total === 0) return null;
  return html`<section class="panel" aria-label="flow limits" id="limits">
    <h2>
      Limits <span class="num" data-field="limits-count">${count(limits.total)}</span>
      <span class="hint">partitions on the broker; a queue's own limits show in its cell</span>
    </h2>
    <table class="list">
      <thead>
        <tr>
          <th>key</th>
          <th>running / concurrency</th>
          <th>starts this window / rate</th>
          <th>throttle</th>
        </tr>
      </thead>
      <tbody>
        ${limits.items.map(
          (report) =>
            html`<tr key=${report.key} data-key=${report.key}>
              <td>
                <code>${report.key}</code
                >${report.configured ? null : html` <span class="badge muted" title="made by jobs' own rate_limit">job policy</span>`}
              </td>
              <td class="num" data-field="concurrency">${concurrencyOf(report)}</td>
              <td class="num" data-field="rate">${rateOf(report)}</td>
              <td data-field="throttle">${throttleOf(report)}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${limits.total > limits.items.length ? html`<p class="muted">first ${limits.items.length} shown: <code>stagecoach limits</code> lists every one</p>` : null}
  </section>`;
}
