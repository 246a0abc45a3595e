// How far a batch is: completed and failed jobs as parts of a bar whose whole is every job known.
// Widths go through the style object (CSSOM), which the page's Content-Security-Policy allows.
import { h } from 'preact';
import htm from 'htm';

const html = htm.bind(h);

const share = (part, whole) => (whole > 0 ? `${(100 * part) / whole}%` : '0%');

export function BatchProgress({ jobs }) {
  const settled = jobs.known - jobs.in_flight;
  const title = `${settled} of ${jobs.known} settled: ${jobs.completed} completed, ${jobs.failed} failed, ${jobs.in_flight} in flight`;
  // Settled jobs that neither completed nor failed (cancelled, say) fill the bar in grey.
  const other = Math.max(0, settled - jobs.completed - jobs.failed);
  return html`<span
    class="progress"
    role="progressbar"
    aria-valuemin="0"
    aria-valuemax=${jobs.known}
    aria-valuenow=${settled}
    title=${title}
    data-field="progress"
  >
    <span class="part completed" style=${{ width: share(jobs.completed, jobs.known) }}></span>
    <span class="part failed" style=${{ width: share(jobs.failed, jobs.known) }}></span>
    <span class="part other" style=${{ width: share(other, jobs.known) }}></span>
  </span>`;
}
