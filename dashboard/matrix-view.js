// The tenants x queues matrix: one row per tenant (a page of them), one column per tenant-scoped
// logical queue in pipeline order; shared queues in a strip of their own above it.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { backlogLevel, count, percent, queueLimits, rate } from './format.js';

const html = htm.bind(h);

/** One cell: counts, state and colours; a button, since it opens the queue's details. */
export function Cell({ cell, queue, tenant, selected, onSelect }) {
  const label = tenant ? `${tenant} ${queue}` : `${queue} (shared)`;
  if (cell === null) {
    return html`<td
      class="cell missing"
      data-queue=${queue}
      data-tenant=${tenant ?? ''}
      title="no such queue on the broker (not provisioned)"
    >
      —
    </td>`;
  }
  const variantOff = cell.variants.filter((v) => v.state !== cell.state);
  const classes = [
    'cell',
    `backlog-${backlogLevel(cell)}`,
    cell.dead > 0 ? 'has-dead' : '',
    cell.state !== 'active' ? `state-${cell.state}` : '',
    selected ? 'selected' : '',
  ];
  const idle = cell.ready > 0 && cell.consumers === 0 && cell.state === 'active';
  return html`<td class=${classes.join(' ')} data-queue=${queue} data-tenant=${tenant ?? ''} data-state=${cell.state}>
    <button type="button" class="cell-button" aria-label=${`details of ${label}`} onClick=${() => onSelect({ queue, tenant })}>
      <span class="line">
        <span class="num" data-field="ready" title="ready">${count(cell.ready)}</span>
        <span class="sep">·</span>
        <span class="num" data-field="unacked" title="in flight (delivered, not yet acknowledged)">${count(cell.unacked)}</span>
        ${cell.max_size_use !== null && cell.max_size_use >= 0.01 ? html`<span class="use" title="of max_size">${percent(cell.max_size_use)}</span>` : null}
      </span>
      <span class="line small">
        <span class=${idle ? 'warn' : ''} data-field="consumers" title=${idle ? 'jobs wait and no stage consumes' : 'consumers'}
          >${count(cell.consumers)} ⚙</span
        >
        <span data-field="rate" title="delivered per second (published per second)"
          >${rate(cell.deliver_rate)}/s${cell.publish_rate ? html` <span class="muted">(${rate(cell.publish_rate)} in)</span>` : null}</span
        >
      </span>
      ${
        cell.limits
          ? html`<span class="line small">
              <span data-field="limits" title="flow limits of the queue: jobs running / concurrency, starts per window"
                >${queueLimits(cell.limits)}</span
              >
            </span>`
          : null
      }
      <span class="line badges">
        ${
          cell.state !== 'active'
            ? html`<span class=${`badge ${cell.state}`} data-field="state">${cell.drained ? 'drained' : cell.state}</span>`
            : null
        }
        ${variantOff.map((v) => html`<span class=${`badge ${v.state}`} title="variant queue">${v.variant}: ${v.state}</span>`)}
        ${cell.dead > 0 ? html`<span class="badge dead" data-field="dead" title="dead letters">☠ ${count(cell.dead)}</span>` : null}
        ${cell.due > 0 ? html`<span class="badge due" title="waiting for a retry or a schedule">⏱ ${count(cell.due)}</span>` : null}
      </span>
    </button>
  </td>`;
}

function ColumnHead({ column }) {
  const by = column.read_by.length > 0 ? `read by ${column.read_by.join(', ')}` : 'no stage reads it';
  return html`<th scope="col" title=${by}>
    <span class="queue-name">${column.queue}</span>
    <span class="stage-names">${column.read_by.join(', ') || '—'}</span>
  </th>`;
}

export function SharedStrip({ matrix, selected, onSelect }) {
  if (matrix.shared.length === 0) return null;
  return html`<section class="panel shared" aria-label="shared queues">
    <h2>Shared queues <span class="hint">one queue for every tenant</span></h2>
    <table class="matrix">
      <thead>
        <tr>
          ${matrix.shared.map((column) => html`<${ColumnHead} key=${column.queue} column=${column} />`)}
        </tr>
      </thead>
      <tbody>
        <tr>
          ${matrix.shared.map(
            (column) =>
              html`<${Cell}
                key=${column.queue}
                cell=${column.cell}
                queue=${column.queue}
                tenant=${null}
                selected=${selected?.queue === column.queue && !selected.tenant}
                onSelect=${onSelect}
              />`,
          )}
        </tr>
      </tbody>
    </table>
  </section>`;
}

/** Filter, problems only, sort, page size and pages: readable at 1,000 tenants. */
function Controls({ matrix, query, setQuery }) {
  const [text, setText] = useState(query.filter);
  // Typing filters after a pause, not on every key (each change asks the server).
  useEffect(() => {
    const timer = setTimeout(() => {
      if (text !== query.filter) setQuery({ ...query, filter: text, offset: 0 });
    }, 250);
    return () => clearTimeout(timer);
  }, [text]);
  const { matched, total, offset, limit } = matrix.tenants;
  const first = matched === 0 ? 0 : offset + 1;
  const last = Math.min(offset + limit, matched);
  return html`<div class="controls">
    <label
      >Tenant <input type="search" name="filter" placeholder="filter tenants" value=${text} onInput=${(e) => setText(e.target.value)}
    /></label>
    <label class="check"
      ><input
        type="checkbox"
        name="problems"
        checked=${query.problems}
        onChange=${(e) => setQuery({ ...query, problems: e.target.checked, offset: 0 })}
      />
      only with dead letters or a queue not active</label
    >
    <label
      >Sort
      <select name="sort" value=${query.sort} onChange=${(e) => setQuery({ ...query, sort: e.target.value, offset: 0 })}>
        <option value="name">by name</option>
        <option value="backlog">most ready first</option>
        <option value="dead">most dead letters first</option>
      </select></label
    >
    <label
      >Rows
      <select name="limit" value=${String(query.limit)} onChange=${(e) => setQuery({ ...query, limit: Number(e.target.value), offset: 0 })}>
        ${[25, 50, 100, 200].map((n) => html`<option value=${String(n)}>${n}</option>`)}
      </select></label
    >
    <span class="pager">
      <button type="button" disabled=${offset === 0} onClick=${() => setQuery({ ...query, offset: Math.max(0, offset - limit) })}>
        ‹ prev
      </button>
      <span class="range" data-field="range">${first}–${last} of ${matched}${matched !== total ? ` (${total} tenants)` : ''}</span>
      <button type="button" disabled=${last >= matched} onClick=${() => setQuery({ ...query, offset: offset + limit })}>next ›</button>
    </span>
  </div>`;
}

export function MatrixView({ matrix, query, setQuery, selected, onSelect }) {
  return html`<section class="panel" aria-label="tenants and queues">
    <h2>Tenants × queues <span class="hint">ready · in flight, consumers, delivered/s; click a cell for its details and actions</span></h2>
    <${Controls} matrix=${matrix} query=${query} setQuery=${setQuery} />
    <div class="scroll">
      <table class="matrix" id="matrix">
        <thead>
          <tr>
            <th scope="col" class="tenant-col">tenant</th>
            ${matrix.columns.map((column) => html`<${ColumnHead} key=${column.queue} column=${column} />`)}
          </tr>
        </thead>
        <tbody>
          ${matrix.rows.map(
            (row) =>
              html`<tr key=${row.tenant} data-row=${row.tenant}>
                <th scope="row" class="tenant-col">
                  ${row.tenant}${row.configured ? null : html` <span class="badge muted" title="found on the broker, not configured">extra</span>`}
                </th>
                ${matrix.columns.map(
                  (column) =>
                    html`<${Cell}
                      key=${column.queue}
                      cell=${row.cells[column.queue]}
                      queue=${column.queue}
                      tenant=${row.tenant}
                      selected=${selected?.queue === column.queue && selected?.tenant === row.tenant}
                      onSelect=${onSelect}
                    />`,
                )}
              </tr>`,
          )}
          ${
            matrix.rows.length === 0
              ? html`<tr>
                  <td class="empty" colspan=${matrix.columns.length + 1}>no tenant matches</td>
                </tr>`
              : null
          }
        </tbody>
      </table>
    </div>
  </section>`;
}
