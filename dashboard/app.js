// The stagecoach operators' dashboard: Preact components written with htm (tagged templates),
// so the browser runs these files as they are, with no build step. Served by `stagecoach admin`.
import { h, render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { BatchDetails } from './batch-details.js';
import { BatchesView } from './batches-view.js';
import { WorkflowDetails } from './workflow-details.js';
import { WorkflowsView } from './workflows-view.js';
import { ConfirmDialog } from './confirm-dialog.js';
import { count } from './format.js';
import { JobDetails, JobsView } from './jobs-view.js';
import { LimitsView } from './limits-view.js';
import { MatrixView, SharedStrip } from './matrix-view.js';
import { QueueDetails } from './queue-details.js';
import { SchedulesView } from './schedules-view.js';
import { TokenBar } from './token-bar.js';
import { UnroutableView } from './unroutable-view.js';

const html = htm.bind(h);

/** Live updates: the matrix is read again this long after the last answer (never two at once). */
const POLL_MS = 2000;

function useMatrix(query, version) {
  const [state, setState] = useState({ matrix: null, error: null, at: null });
  const latest = useRef(query);
  latest.current = query;
  useEffect(() => {
    let stopped = false;
    let timer;
    const poll = async () => {
      const asked = latest.current;
      try {
        const matrix = await api.matrix(asked);
        if (!stopped && asked === latest.current) setState({ matrix, error: null, at: Date.now(), signIn: false });
      } catch (err) {
        // The last good numbers stay on screen, marked stale by the error beside them; a refusal
        // (no token, or one this server does not know) asks for a token instead.
        if (!stopped) setState((previous) => ({ ...previous, error: err.message, signIn: err.status === 401 }));
      }
      if (!stopped) timer = setTimeout(poll, POLL_MS);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [query, version]);
  return state;
}

/** A resource alarm of the broker: it blocks every publishing connection, so nothing moves until it clears. */
function AlarmBanner({ alarms }) {
  if (!alarms || alarms.length === 0) return null;
  return html`<p class="notice error" role="alert" data-field="alarm">
    Broker alarm: ${alarms.map((a) => `${a.resource} on ${a.node}`).join(', ')}. The broker blocks every connection that publishes until it
    clears: stages hold their jobs (nothing is lost) and resume by themselves.
  </p>`;
}

function Summary({ matrix, error, at }) {
  const t = matrix.totals;
  return html`<div class="summary">
    <span><b data-field="tenants">${matrix.tenants.total}</b> tenants</span>
    <span><b>${count(t.ready)}</b> ready</span>
    <span><b>${count(t.unacked)}</b> in flight</span>
    <span><b>${count(t.consumers)}</b> consumers</span>
    <span class=${t.dead > 0 ? 'alert' : ''}><b>${count(t.dead)}</b> dead</span>
    <span class=${matrix.unroutable > 0 ? 'alert' : ''}><b>${count(matrix.unroutable)}</b> unroutable</span>
    <span class=${error ? 'stale' : 'live'} data-field="live" title=${error ?? ''}
      >${error ? `stale: ${error}` : `live, updated ${new Date(at).toLocaleTimeString()}`}</span
    >
  </div>`;
}

/** Queues (the matrix), batches, workflows or jobs; the address keeps it (`#batches`, `#workflows`, `#jobs`, `#job=<id>`), so a reload or a link opens the same view. */
function ViewTabs({ view, setView }) {
  const tab = (name, label) =>
    html`<button
      type="button"
      role="tab"
      class=${view === name ? 'tab current' : 'tab'}
      aria-selected=${view === name}
      data-view=${name}
      onClick=${() => setView(name)}
    >
      ${label}
    </button>`;
  return html`<nav class="tabs" role="tablist">
    ${tab('queues', 'Queues')}${tab('batches', 'Batches')}${tab('workflows', 'Workflows')}${tab('jobs', 'Jobs')}${tab('schedules', 'Schedules')}
  </nav>`;
}

/** The view and job an address names: `#batches`, `#workflows`, `#jobs`, `#schedules`, `#job=<id>` (a job's page); else the queues. */
function fromHash(hash) {
  if (hash.startsWith('#job=')) return { view: 'jobs', job: decodeURIComponent(hash.slice('#job='.length)) };
  const named = { '#batches': 'batches', '#workflows': 'workflows', '#jobs': 'jobs', '#schedules': 'schedules' }[hash];
  return { view: named ?? 'queues', job: null };
}

function App() {
  const [view, setViewState] = useState(() => fromHash(location.hash).view);
  const [batch, setBatch] = useState(null);
  const [workflow, setWorkflow] = useState(null);
  const [job, setJobState] = useState(() => fromHash(location.hash).job);
  const setView = useCallback((name) => {
    history.replaceState(null, '', name === 'queues' ? location.pathname : `#${name}`);
    setViewState(name);
  }, []);
  const setJob = useCallback((id) => {
    history.replaceState(null, '', id === null ? '#jobs' : `#job=${encodeURIComponent(id)}`);
    setJobState(id);
  }, []);
  const [query, setQuery] = useState({ filter: '', problems: false, sort: 'name', offset: 0, limit: 50 });
  // Bumped after every action: the matrix and the peeked lists are read again at once.
  const [version, setVersion] = useState(0);
  const [selected, setSelected] = useState(null);
  const [pending, setPending] = useState(null);
  const [notice, setNotice] = useState(null);
  const { matrix, error, at, signIn } = useMatrix(query, version);

  const run = useCallback(async (action) => {
    setPending(null);
    try {
      const result = await action.run();
      setNotice({ kind: 'ok', text: action.done(result) });
    } catch (err) {
      const refused = err.status === 401 || err.status === 403;
      setNotice({ kind: 'error', text: `${refused ? 'Refused' : 'Failed'}: ${err.message}${err.code ? ` (${err.code})` : ''}` });
    }
    setVersion((v) => v + 1);
  }, []);

  if (matrix === null || signIn) {
    return html`<main>
      <h1>stagecoach</h1>
      <p class=${error ? 'error' : 'muted'}>${error ?? 'Reading the broker…'}</p>
      ${
        signIn
          ? html`<p>Sign in with the admin token or a viewer token (<code>stagecoach credentials &lt;name&gt; --role viewer</code>).</p>
              <${TokenBar} onChange=${() => setVersion((v) => v + 1)} />`
          : null
      }
    </main>`;
  }
  return html`<main>
    <header>
      <h1>stagecoach <span class="prefix" title="broker prefix">${matrix.prefix}</span></h1>
      <${Summary} matrix=${matrix} error=${error} at=${at} />
      <${TokenBar} onChange=${() => setVersion((v) => v + 1)} />
    </header>
    <${AlarmBanner} alarms=${matrix.alarms} />
    <${ViewTabs} view=${view} setView=${setView} />
    ${
      notice
        ? html`<p class=${`notice ${notice.kind}`} role="status">
            <span data-field="notice">${notice.text}</span>
            <button type="button" class="link" onClick=${() => setNotice(null)}>dismiss</button>
          </p>`
        : null
    }
    ${
      view === 'schedules'
        ? html`<div class="layout">
            <div class="main-column"><${SchedulesView} version=${version} act=${setPending} /></div>
          </div>`
        : view === 'jobs'
          ? html`<div class="layout">
              <div class="main-column"><${JobsView} selected=${job} onSelect=${setJob} /></div>
              ${job ? html`<${JobDetails} key=${job} id=${job} onClose=${() => setJob(null)} />` : null}
            </div>`
          : view === 'workflows'
            ? html`<div class="layout">
                <div class="main-column"><${WorkflowsView} selected=${workflow} onSelect=${setWorkflow} version=${version} /></div>
                ${
                  workflow
                    ? html`<${WorkflowDetails}
                        key=${workflow}
                        id=${workflow}
                        version=${version}
                        act=${setPending}
                        onClose=${() => setWorkflow(null)}
                      />`
                    : null
                }
              </div>`
            : view === 'batches'
              ? html`<div class="layout">
                  <div class="main-column"><${BatchesView} selected=${batch} onSelect=${setBatch} version=${version} /></div>
                  ${
                    batch
                      ? html`<${BatchDetails}
                          key=${batch}
                          id=${batch}
                          version=${version}
                          act=${setPending}
                          onClose=${() => setBatch(null)}
                        />`
                      : null
                  }
                </div>`
              : html`<div class="layout">
                  <div class="main-column">
                    <${SharedStrip} matrix=${matrix} selected=${selected} onSelect=${setSelected} />
                    <${MatrixView} matrix=${matrix} query=${query} setQuery=${setQuery} selected=${selected} onSelect=${setSelected} />
                    <${UnroutableView} depth=${matrix.unroutable} version=${version} act=${setPending} />
                    <${LimitsView} limits=${matrix.limits} />
                  </div>
                  ${
                    selected
                      ? html`<${QueueDetails}
                          key=${`${selected.queue}|${selected.tenant}`}
                          selected=${selected}
                          matrix=${matrix}
                          version=${version}
                          act=${setPending}
                          onClose=${() => setSelected(null)}
                        />`
                      : null
                  }
                </div>`
    }
    ${pending ? html`<${ConfirmDialog} pending=${pending} onConfirm=${run} onCancel=${() => setPending(null)} />` : null}
  </main>`;
}

const root = document.getElementById('app');
// The "Loading" placeholder goes: Preact renders beside what a container already holds.
root.replaceChildren();
render(html`<${App} />`, root);
