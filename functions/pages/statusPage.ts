import { createHash } from 'node:crypto';

/**
 * The status page's document (served by functions/statusPage.ts on both hosts). No build step: one HTML
 * document whose one <style> and one <script> are allowed by their SHA-256 in the Content-Security-Policy,
 * and uPlot's files from this app (never a CDN). It carries no data and no credential: everything it
 * shows it reads with `fetch` from the `ops/view/*` routes (the same handlers as the API's, without a
 * function key), with the browser's App Service session cookie in Azure and nothing on the embedded host.
 *
 * What it shows: campaigns with their progress; migrations filtered by status, campaign and resource id
 * (the API's own filters) and by phase and region (within the page fetched), paged with the API's
 * continuation; each migration's phase bar, ending where it stopped with the phase, code and reason of a
 * failed one, and a link to its resource's audit trail, rendered in the page; a write-lock hold histogram
 * and migrations over time (uPlot, drawn from the latest 500 migrations of the same filters); resources;
 * the embedded host's /api/metrics when there is one.
 */

/** Where the page's data routes and files live (functions/statusPage.ts declares them). */
export const VIEW_ROUTE = 'ops/view';
export const PAGE_ROUTE = 'status';
export const PAGE_PATH = `/api/${PAGE_ROUTE}`;

/** The tab's icon: a padlock on the header's colour. */
export const STATUS_PAGE_ICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1d2330"/>' +
  '<path d="M5.5 7V5.5a2.5 2.5 0 0 1 5 0V7" fill="none" stroke="#fff" stroke-width="1.4"/>' +
  '<rect x="4" y="7" width="8" height="6" rx="1" fill="#2f9e6e"/></svg>';

const css = `
:root { --bg:#f6f7f9; --card:#fff; --ink:#1d2330; --muted:#6b7385; --line:#e3e6ec;
        --prelock:#8fb3ff; --hardDelete:#f5b14c; --write:#e8685a; --ok:#2f9e6e; --bad:#d64545; --run:#3b6fd8; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; background:var(--bg); color:var(--ink); }
header { padding:18px 28px; background:#1d2330; color:#fff; display:flex; align-items:baseline; gap:16px; }
header h1 { margin:0; font-size:20px; font-weight:650; letter-spacing:.2px; }
header span { color:#aab3c5; font-size:13px; }
main { padding:20px 28px; display:grid; gap:18px; grid-template-columns: minmax(0,3fr) minmax(0,2fr); }
section { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px 16px; min-width:0; }
section.wide { grid-column: 1 / -1; }
h2 { margin:0 0 10px; font-size:15px; }
table { width:100%; border-collapse:collapse; }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:middle; white-space:nowrap; }
th { color:var(--muted); font-weight:600; font-size:12px; text-transform:uppercase; letter-spacing:.4px; }
td.bar { width:34%; min-width:180px; }
td.id { max-width:170px; overflow:hidden; text-overflow:ellipsis; }
td.why { white-space:normal; max-width:320px; font-size:12.5px; color:var(--bad); }
.badge { display:inline-block; padding:1px 8px; border-radius:999px; font-size:12px; font-weight:600; color:#fff; }
.Completed { background:var(--ok); } .Failed, .Conflict { background:var(--bad); } .Running, .Pending { background:var(--run); } .NoOp, .Cancelled { background:var(--muted); }
.Paused, .Cancelling { background:var(--hardDelete); color:#1d2330; }
.waiting { background:var(--hardDelete); color:#1d2330; margin-left:6px; }
.phase-prelock { background:var(--prelock); color:#1d2330; } .phase-hardDelete { background:var(--hardDelete); color:#1d2330; } .phase-write { background:var(--write); }
.none { color:var(--muted); }
.track { display:flex; align-items:center; height:14px; border-radius:7px; overflow:hidden; background:#eef0f4; }
.seg { height:100%; min-width:2px; }
.seg.prelock, .key-prelock { background:var(--prelock); } .seg.hardDelete, .key-hardDelete { background:var(--hardDelete); } .seg.write, .key-write { background:var(--write); }
.seg.moved, .key-moved { background:var(--ok); } .seg.unmoved, .key-unmoved { background:var(--bad); } .seg.dropped, .key-dropped { background:var(--muted); } .seg.running, .key-running { background:var(--prelock); }
.stop { flex:none; width:14px; height:14px; border-radius:7px; background:var(--bad); color:#fff; font-size:10px; line-height:14px; text-align:center; font-weight:700; }
td.counts { white-space:normal; color:var(--muted); font-size:12.5px; }
a { color:var(--run); } .filter { color:var(--muted); font-size:12.5px; margin:-4px 0 8px; }
.legend { display:flex; gap:14px; color:var(--muted); font-size:12px; margin-bottom:8px; flex-wrap:wrap; }
.legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:5px; vertical-align:-1px; }
form.filters { display:flex; flex-wrap:wrap; gap:8px; align-items:end; margin-bottom:10px; }
form.filters label { display:flex; flex-direction:column; font-size:11.5px; color:var(--muted); gap:2px; }
form.filters input, form.filters select, button { font:inherit; font-size:13px; padding:3px 6px; border:1px solid var(--line); border-radius:6px; background:#fff; }
button { cursor:pointer; } button:disabled { cursor:default; color:var(--muted); }
.pager { display:flex; gap:8px; align-items:center; margin-top:8px; color:var(--muted); font-size:12.5px; }
.scroll { overflow-x:auto; max-width:100%; }
.charts { display:grid; grid-template-columns: repeat(2, minmax(0,1fr)); gap:16px; }
.chart { min-height:230px; overflow-x:auto; max-width:100%; }
.metrics { display:grid; grid-template-columns: repeat(3, minmax(0,1fr)); gap:10px; }
.metric { border:1px solid var(--line); border-radius:8px; padding:10px; }
.metric b { display:block; font-size:18px; white-space:nowrap; }
.metric small { color:var(--muted); }
.mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size:12.5px; }
.empty { color:var(--muted); padding:10px 0; }
.notice { color:var(--bad); font-weight:600; }
/* narrow screens (a phone): one column; the tables scroll in their boxes */
@media (max-width: 760px) {
  main { grid-template-columns: minmax(0,1fr); padding:12px; gap:12px; }
  header { padding:12px; flex-wrap:wrap; }
  td.bar { min-width:120px; }
  .charts, .metrics { grid-template-columns: minmax(0,1fr); }
}
`;

const script = `
'use strict';
const body = document.body;
const API = body.dataset.api;
const METRICS = body.dataset.metrics;
const SIGN_IN = body.dataset.signIn || '';
const STATES = ['Pending', 'Running', 'Completed', 'Failed', 'Conflict', 'NoOp', 'Cancelled'];
const PHASES = ['starting', 'prelock', 'converging', 'hardDelete', 'write', 'swapped', 'released'];
const PHASE_TEXT = { starting: 'starting', prelock: 'pre-lock', converging: 'convergence wait', hardDelete: 'hard-delete lock', write: 'write lock', swapped: 'swap', released: 'release' };
const ENDED_BADLY = ['Failed', 'Conflict', 'Cancelled'];
/** An error as the workflow writes it: an optional step, a stable code, the message. */
const CODED = /^(?:[a-z][A-Za-z]*: )?([A-Z][A-Za-z]+): ([\\s\\S]*)$/;
const PAGE_SIZE = 25;
const SIGNED_IN_AT = 'routelock.statusPage.signInAt';
const CHART_SAMPLE = 500;
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const where = (l) => l ? esc(l.region + (l.account ? '/' + l.account : '')) : '';
const secs = (a, b) => (Date.parse(b) - Date.parse(a)) / 1000;

// ---- state: filters and the open audit trail live in the hash (#status=Failed&campaign=c&audit=r) ----
const KEYS = ['status', 'phase', 'region', 'campaign', 'resource', 'size', 'audit'];
const FILTERS = ['status', 'phase', 'region', 'campaign', 'resource'];
/** A part that does not decode (\`%\`) or a value the API would refuse is no filter, not a stopped page. */
function readHash() {
  const state = {};
  for (const part of location.hash.replace(/^#/, '').split('&')) {
    const at = part.indexOf('=');
    if (at < 1) continue;
    const key = part.slice(0, at);
    if (!KEYS.includes(key)) continue;
    let value;
    try { value = decodeURIComponent(part.slice(at + 1)); } catch { continue; }
    if (!value || value.length > 512) continue;
    if (key === 'status' && !STATES.includes(value)) continue;
    if (key === 'phase' && !PHASES.includes(value)) continue;
    if (key === 'size' && !(/^[0-9]{1,3}$/.test(value) && +value >= 1 && +value <= 200)) continue;
    state[key] = value;
  }
  return state;
}
function writeHash(state) {
  const parts = KEYS.filter((k) => state[k]).map((k) => k + '=' + encodeURIComponent(state[k]));
  location.hash = parts.join('&');
}
const hashWith = (changes) => '#' + KEYS.map((k) => [k, k in changes ? changes[k] : readHash()[k]]).filter(([, v]) => v).map(([k, v]) => k + '=' + encodeURIComponent(v)).join('&');

// ---- paging: the API's continuation tokens; "older" follows one, "newer" goes back ----
let pages = [undefined];
let nextContinuation = null;
let pagedFor = '';

// ---- reads: the session cookie (Azure) or nothing (embedded host); 401 means sign in again ----
class Refused extends Error {}
async function getJson(url, optional) {
  const r = await fetch(url, { credentials: 'same-origin', headers: { accept: 'application/json' } });
  if (r.status === 401) {
    // at most one sign-in a minute: a session App Service keeps refusing must not loop the browser
    if (SIGN_IN && Date.now() - (+sessionStorage.getItem(SIGNED_IN_AT) || 0) > 60000) {
      sessionStorage.setItem(SIGNED_IN_AT, String(Date.now()));
      location.assign(SIGN_IN);
      throw new Refused('signing in…');
    }
    if (SIGN_IN) throw new Refused('signed in, but its reads are refused (401): sign in again later, or check App Service authentication');
    throw new Refused('this host wants an identity the browser cannot send (ROUTELOCK_AUTH=entra): use the API with a bearer token');
  }
  if (r.status === 403) throw new Refused('your identity does not hold the app role Ops.Read');
  if (!r.ok) {
    if (optional) return null;
    const problem = await r.json().catch(() => ({}));
    throw new Error(problem.detail || ('HTTP ' + r.status));
  }
  return r.json();
}

// Every page of a list (its continuation followed), so the Resources search and the campaigns table
// reach every item, not the first page's; at most MAX_LISTED, and the table says when it stops there.
const MAX_LISTED = 5000;
async function everyPage(url, optional) {
  const items = [];
  let continuation = null;
  do {
    const page = await getJson(url + (continuation ? '&continuation=' + encodeURIComponent(continuation) : ''), optional);
    if (!page) return { items, complete: true };
    items.push(...page.items);
    continuation = page.continuation || null;
  } while (continuation && items.length < MAX_LISTED);
  return { items, complete: !continuation };
}

// ---- migrations ----
function stoppedOf(m) {
  if (!ENDED_BADLY.includes(m.status)) return null;
  if (m.stopped) {
    // a reason that repeats its step and code ("deltaCopy: ParticipantFailed: …") says them once
    const coded = CODED.exec(m.stopped.reason || '');
    const reason = coded && coded[1] === m.stopped.code ? coded[2] : m.stopped.reason;
    return { phase: m.stopped.phase, code: m.stopped.code, reason, at: m.stopped.at };
  }
  // before MigrationStatus.stopped: the phase its timeline reached (a failed one ends "released"), the
  // code its error starts with (after the step: "deltaCopy: ParticipantFailed: …") and its last attempt's end
  const t = m.timeline;
  const reached = t.writeAt ? 'write' : t.hardDeleteAt ? 'hardDelete' : t.prelockAt ? 'prelock' : 'starting';
  const attempts = m.attempts || [];
  const last = attempts[attempts.length - 1];
  const error = m.error || (last && last.reason) || '';
  const coded = CODED.exec(error);
  return {
    phase: m.phase === 'released' || m.phase === 'swapped' ? reached : m.phase,
    code: coded ? coded[1] : '',
    reason: coded ? coded[2] : error,
    at: last ? last.endedAt : null,
    attempts: attempts.length,
  };
}
function stoppedText(m, s) {
  const verb = m.status === 'Cancelled' ? 'cancelled' : m.status === 'Conflict' ? 'conflict' : 'failed';
  const why = [s.code, s.reason].filter(Boolean).join(' — ');
  return verb + ' in ' + (PHASE_TEXT[s.phase] || s.phase) + (why ? ': ' + why : '') + (s.attempts > 1 ? ' (attempt ' + s.attempts + ')' : '');
}
function endOf(m, stopped) {
  const t = m.timeline;
  if (t.swappedAt) return t.swappedAt;
  if (stopped && stopped.at) return stopped.at;
  if (m.status === 'Running' || m.status === 'Pending') return new Date().toISOString();
  return t.writeAt || t.hardDeleteAt || t.prelockAt;
}
function bar(m) {
  const t = m.timeline;
  const stopped = stoppedOf(m);
  const stop = stopped ? '<span class="stop" title="' + esc(stoppedText(m, stopped)) + '">✕</span>' : '';
  if (!t.prelockAt) return stopped ? '<div class="track">' + stop + '</div>' : '<span class="none">—</span>';
  const end = endOf(m, stopped);
  const parts = [['prelock', t.prelockAt, t.hardDeleteAt || end], ['hardDelete', t.hardDeleteAt, t.writeAt || end], ['write', t.writeAt, end]]
    .filter(([, a, b]) => a && b).map(([k, a, b]) => [k, Math.max(0, secs(a, b))]);
  const total = parts.reduce((s, [, d]) => s + d, 0) || 1;
  return '<div class="track">' + parts.map(([k, d]) => '<div class="seg ' + k + '" title="' + k + ' ' + d.toFixed(1) + ' s" data-w="' + (100 * d / total).toFixed(2) + '"></div>').join('') + stop + '</div>';
}
function waiting(m) { return m.waitingForWindow ? '<span class="badge waiting" title="the write lock waits for its cutover window">waiting for window · opens ' + esc(m.waitingForWindow.nextOpening) + '</span>' : ''; }
function took(m) { const t = m.timeline; return t.prelockAt && t.swappedAt ? secs(t.prelockAt, t.swappedAt).toFixed(1) + ' s' : ''; }
function migrationRow(m) {
  const stopped = stoppedOf(m);
  return '<tr data-migration="' + esc(m.migrationId) + '" data-status="' + esc(m.status) + '"><td class="mono id" title="' + esc(m.migrationId) + '">' + esc(m.migrationId) +
    '</td><td class="mono">' + esc(m.resourceId) + '</td><td>' + where(m.target) + '</td><td><span class="badge ' + esc(m.status) + '">' + esc(m.status) + '</span></td><td>' + esc(m.phase) + waiting(m) +
    '</td><td class="bar">' + bar(m) + '</td><td>' + took(m) + '</td><td class="why">' + (stopped ? esc(stoppedText(m, stopped)) : '') +
    '</td><td><a class="audit" href="' + esc(hashWith({ audit: m.resourceId })) + '">audit</a></td></tr>';
}

// ---- campaigns ----
const CAMPAIGN_SEGMENTS = [['moved', ['completed', 'noOp']], ['unmoved', ['failed', 'conflict']], ['dropped', ['cancelled', 'skipped']], ['running', ['running']]];
function progress(c) {
  const total = c.total || 1;
  return '<div class="track">' + CAMPAIGN_SEGMENTS.map(([k, states]) => [k, states.reduce((s, st) => s + (c[st] || 0), 0)])
    .filter(([, n]) => n > 0).map(([k, n]) => '<div class="seg ' + k + '" title="' + k + ' ' + n + '" data-w="' + (100 * n / total).toFixed(2) + '"></div>').join('') + '</div>';
}
const ended = (c) => c.total - c.pending - c.running;
function counts(c) { return ['pending', 'running', 'completed', 'noOp', 'failed', 'conflict', 'cancelled', 'skipped'].filter((k) => c[k]).map((k) => k + ' ' + c[k]).join(' · ') || '—'; }
function eta(s) { if (s.status === 'Completed' || s.status === 'Cancelled' || s.etaSeconds == null) return '—'; const t = Math.round(s.etaSeconds); return t < 60 ? t + ' s' : t < 3600 ? Math.floor(t / 60) + ' min ' + (t % 60) + ' s' : Math.floor(t / 3600) + ' h ' + Math.floor((t % 3600) / 60) + ' min'; }
function campaignRows(list) {
  return list.items.length ? list.items.map((s) =>
    '<tr data-campaign="' + esc(s.campaignId) + '" data-status="' + esc(s.status) + '"><td class="mono id" title="' + esc(s.campaignId) + '">' + esc(s.campaignId) + '</td><td><span class="badge ' + esc(s.status) + '">' + esc(s.status) + '</span></td><td>' + where(s.target) +
    '</td><td class="bar">' + progress(s.counts) + '</td><td class="ended">' + ended(s.counts) + ' / ' + s.counts.total + '</td><td class="counts">' + esc(counts(s.counts)) + '</td><td class="eta">' + eta(s) +
    '</td><td><a class="migrations" href="' + esc(hashWith({ campaign: s.campaignId })) + '">show</a></td></tr>').join('')
    : '<tr><td colspan="8" class="empty">No campaigns yet: POST /api/campaigns, or npx routelock campaign start</td></tr>';
}

// ---- audit trail of one resource (GET /api/routes/{id}/audit, through the view route) ----
function auditRows(trail) {
  return trail.items.length ? trail.items.map((a) =>
    '<tr data-audit-op="' + esc(a.op) + '"><td class="mono">' + esc(a.at) + '</td><td>' + esc(a.op) + '</td><td class="mono">' + esc(a.migrationId || '') + '</td><td>' + where(a.from) + (a.to ? ' → ' + where(a.to) : '') +
    '</td><td class="mono">' + esc(a.actorName || a.actor || '') + '</td><td class="why">' + esc(a.reason || '') + '</td></tr>').join('')
    : '<tr><td colspan="6" class="empty">No audit records for this resource yet.</td></tr>';
}

// ---- charts (uPlot) ----
const plots = {};
function plot(id, options, data) {
  const el = $(id);
  const width = Math.max(240, el.clientWidth || 320);
  if (!plots[id]) plots[id] = new uPlot({ width, height: 200, ...options }, data, el);
  else plots[id].setData(data);
}
const STEPS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300];
// Counts have whole-number ticks: uPlot's default steps include 0.2, 0.5 …
const COUNT_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];
let holdRange = [0, 1];
let timeRange = [0, 60];
function holdHistogram(migrations) {
  const holds = migrations.filter((m) => m.timeline.writeAt && m.timeline.swappedAt).map((m) => Math.max(0, secs(m.timeline.writeAt, m.timeline.swappedAt)));
  $('holdCount').textContent = holds.length ? holds.length + ' swapped migrations' : 'no swapped migration yet';
  const max = holds.reduce((a, b) => Math.max(a, b), 0);
  const step = STEPS.find((s) => max / s < 12) || 600;
  const buckets = Math.max(1, Math.floor(max / step) + 1);
  const xs = Array.from({ length: buckets }, (_, i) => +(i * step).toFixed(2));
  const ys = xs.map(() => 0);
  for (const h of holds) ys[Math.min(buckets - 1, Math.floor(h / step))] += 1;
  // An empty bucket is no bar (null), not a zero-height one drawn as a line along the axis.
  for (let i = 0; i < ys.length; i += 1) if (ys[i] === 0) ys[i] = null;
  holdRange = [0, +(buckets * step).toFixed(2)];
  plot('holdChart', {
    scales: { x: { time: false, range: () => holdRange }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    axes: [{ label: 'write-lock hold (s, bucket start)' }, { label: 'migrations', incrs: COUNT_STEPS }],
    series: [{ label: 'hold ≥ s' }, { label: 'migrations', stroke: '#e8685a', fill: 'rgba(232,104,90,0.85)', paths: uPlot.paths.bars({ size: [0.9, 80], align: 1 }), points: { show: false } }],
  }, [xs, ys]);
}
function timeOf(m) {
  const s = stoppedOf(m);
  const attempts = m.attempts || [];
  return (s && s.at) || m.timeline.swappedAt || (attempts.length ? attempts[attempts.length - 1].endedAt : null) || m.timeline.prelockAt;
}
function overTime(migrations) {
  const groups = { ended: ['Completed', 'NoOp'], failed: ['Failed', 'Conflict'], cancelled: ['Cancelled'], running: ['Running', 'Pending'] };
  const times = migrations.map((m) => [m, timeOf(m)]).filter(([, t]) => t).map(([m, t]) => [m, Math.floor(Date.parse(t) / 1000)]);
  const first = times.reduce((a, [, t]) => Math.min(a, t), Infinity);
  const last = times.reduce((a, [, t]) => Math.max(a, t), -Infinity);
  const bucket = !isFinite(first) ? 60 : Math.max(10, Math.ceil((last - first) / 30 / 10) * 10);
  const start = isFinite(first) ? Math.floor(first / bucket) * bucket : Math.floor(Date.now() / 1000 / 60) * 60;
  const n = isFinite(first) ? Math.floor((last - start) / bucket) + 1 : 1;
  const xs = Array.from({ length: n }, (_, i) => start + i * bucket);
  const series = Object.keys(groups).map(() => xs.map(() => 0));
  for (const [m, t] of times) {
    const g = Object.values(groups).findIndex((states) => states.includes(m.status));
    if (g >= 0) series[g][Math.min(n - 1, Math.floor((t - start) / bucket))] += 1;
  }
  timeRange = [xs[0] - bucket, xs[xs.length - 1] + bucket];
  $('timeBucket').textContent = 'per ' + (bucket >= 60 && bucket % 60 === 0 ? bucket / 60 + ' min' : bucket + ' s');
  const colors = ['#2f9e6e', '#d64545', '#6b7385', '#3b6fd8'];
  plot('timeChart', {
    scales: { x: { time: true, range: () => timeRange }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    axes: [{}, { label: 'migrations', incrs: COUNT_STEPS }],
    series: [{}, ...Object.keys(groups).map((label, i) => ({ label, stroke: colors[i], width: 2, fill: i === 0 ? 'rgba(47,158,110,0.15)' : undefined, points: { show: true, size: 5 } }))],
  }, [xs, ...series]);
}

function metric(name, d) { return '<div class="metric"><small>' + name + ' p50 / p99</small><b>' + (d.count ? d.p50.toFixed(2) + ' / ' + d.p99.toFixed(2) + ' s' : '—') + '</b><small>' + d.count + ' samples, max ' + (d.max ?? 0).toFixed(2) + ' s</small></div>'; }
function applyWidths(root) { for (const el of root.querySelectorAll('[data-w]')) el.style.width = el.dataset.w + '%'; }
function fill(id, html) { const el = $(id); el.innerHTML = html; applyWidths(el); }

function migrationQuery(state, limit, continuation) {
  const q = new URLSearchParams({ limit: String(limit) });
  if (state.status) q.set('status', state.status);
  if (state.campaign) q.set('campaignId', state.campaign);
  if (state.resource) q.set('resourceId', state.resource);
  if (continuation) q.set('continuation', continuation);
  return API + '/migrations?' + q;
}
const narrow = (state) => (m) => (!state.phase || m.phase === state.phase) && (!state.region || (m.target && m.target.region === state.region));

function showFilters(state) {
  for (const key of [...FILTERS, 'size']) {
    const input = $('f-' + key);
    if (document.activeElement !== input) input.value = state[key] || (key === 'size' ? String(PAGE_SIZE) : '');
  }
  const active = FILTERS.filter((k) => state[k]);
  $('migrationFilter').hidden = active.length === 0;
  $('migrationFilter').innerHTML = active.length ? 'Filtered: ' + active.map((k) => k + ' <b class="mono">' + esc(state[k]) + '</b>').join(' · ') + ' · <a href="' + esc(hashWith({ status: '', phase: '', region: '', campaign: '', resource: '' })) + '">show all</a>' : '';
}

let chartsAt = 0;
// The page reads the API's own list endpoints (its ops/view reads: the same handlers and roles), not an
// aggregate of its own that could drift from them: a tab makes one request a second (the migrations
// page) and every LISTS_MS the routes, campaigns and metrics.
const LISTS_MS = 5000;
let lists = null;
let listsAt = 0;
// One refresh counts at a time: a newer one (a click, a filter, the timer) supersedes an older one still
// waiting, whose answers are then dropped, so a slow older answer never overwrites a newer page or its
// continuation. The timer skips a tick while a refresh is out, so a slow store is not asked again and again.
let refreshSeq = 0;
let refreshing = false;
async function refresh() {
  const seq = ++refreshSeq;
  const current = () => seq === refreshSeq;
  refreshing = true;
  try {
    const state = readHash();
    const key = JSON.stringify([state.status, state.campaign, state.resource, state.size]);
    if (key !== pagedFor) { pages = [undefined]; pagedFor = key; }
    showFilters(state);
    // The migrations page every second; the lists and metrics, which change slower, every LISTS_MS.
    const listsDue = !lists || Date.now() - listsAt > LISTS_MS;
    const [migrations, fetched] = await Promise.all([
      getJson(migrationQuery(state, +(state.size || PAGE_SIZE), pages[pages.length - 1])),
      listsDue ? Promise.all([everyPage(API + '/routes?limit=200'), everyPage(API + '/campaigns?limit=100', true), getJson(METRICS, true)]) : null,
    ]);
    if (!current()) return;
    if (fetched) { lists = fetched; listsAt = Date.now(); }
    const [routes, campaigns, metrics] = lists;
    nextContinuation = migrations.continuation || null;
    $('older').disabled = !nextContinuation;
    $('newer').disabled = pages.length === 1;
    $('pageNo').textContent = 'page ' + pages.length;
    fill('campaigns', campaignRows(campaigns));
    const rows = migrations.items.filter(narrow(state));
    // A campaign whose members were skipped has no migration for them: say how many and why instead.
    const skips = state.campaign && !migrations.items.length ? await getJson(API + '/campaigns/' + encodeURIComponent(state.campaign), true) : null;
    if (!current()) return;
    const skipped = skips && skips.skipped ? 'Campaign ' + esc(state.campaign) + ': ' + skips.skipped.total + ' member(s) never started, skipped: ' + Object.entries(skips.skipped.byReason).map(([k, n]) => esc(k) + ' ' + n).join(', ') + '.' : '';
    fill('migrations', rows.length ? rows.map(migrationRow).join('')
      : '<tr><td colspan="9" class="empty" id="noMigrations">' + (migrations.items.length ? 'No migration on this page matches the phase or region filter.' : skipped || 'No migrations' + (FILTERS.some((k) => state[k]) ? ' match these filters.' : ' yet: POST /api/migrations')) + '</td></tr>');
    const regions = new Set(routes.items.map((r) => r.location && r.location.region).filter(Boolean));
    $('regions').innerHTML = [...regions].sort().map((r) => '<option value="' + esc(r) + '">').join('');
    const shown = routes.items.filter((r) => (!state.resource || r.resourceId.includes(state.resource)) && (!state.region || (r.location && r.location.region === state.region)));
    $('routeCount').textContent = routes.items.length + (routes.complete ? '' : '+') + ' routes' + (shown.length !== routes.items.length ? ', ' + shown.length + ' shown' : '') + (routes.complete ? '' : ' (the first ' + routes.items.length + ')');
    fill('routes', shown.length ? shown.map((r) =>
      '<tr data-resource="' + esc(r.resourceId) + '"><td class="mono">' + esc(r.resourceId) + '</td><td>' + where(r.location) + '</td><td>' + (r.lock ? '<span class="badge phase-' + esc(r.lock.phase) + '">' + esc(r.lock.phase) + '</span> → ' + where(r.lock.target) : '<span class="none">unlocked</span>') +
      '</td><td>' + esc(r.enforcement.write) + '</td><td>' + esc(r.enforcement.delete) + '</td><td>' + (r.secondary ? esc(r.secondary.role) + ' ' + where(r.secondary.location) : '') + '</td><td><a class="audit" href="' + esc(hashWith({ audit: r.resourceId })) + '">audit</a></td></tr>').join('')
      : '<tr><td colspan="7" class="empty">No routes' + (routes.items.length ? ' match' : ' yet: PUT /api/routes/{id}') + '</td></tr>');
    $('metricsSection').hidden = !metrics;
    if (metrics) {
      fill('metrics', metric('write lock', metrics.writeLockSeconds) + metric('convergence wait', metrics.convergenceWaitSeconds) + metric('migration', metrics.migrationSeconds));
      const events = Object.entries(metrics.events);
      $('events').innerHTML = (events.length ? events.map(([k, v]) => esc(k) + ' ' + v).join(' · ') : 'none yet') + (metrics.convergenceShortfalls ? ' · <b class="notice">' + metrics.convergenceShortfalls + ' convergence shortfall(s)</b>' : '');
    }
    $('auditSection').hidden = !state.audit;
    if (state.audit) {
      $('auditOf').textContent = state.audit;
      const trail = await getJson(API + '/routes/' + encodeURIComponent(state.audit) + '/audit?limit=100');
      if (!current()) return;
      fill('audit', auditRows(trail));
    }
    if (Date.now() - chartsAt > 4000) {
      chartsAt = Date.now();
      const sample = await getJson(migrationQuery(state, CHART_SAMPLE));
      if (!current()) return;
      const items = sample.items.filter(narrow(state));
      holdHistogram(items);
      overTime(items);
    }
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (e) {
    if (current()) $('updated').textContent = e instanceof Refused ? e.message : 'cannot reach the host: ' + e.message;
  } finally {
    if (current()) refreshing = false;
  }
}

$('filters').addEventListener('submit', (event) => {
  event.preventDefault();
  const state = readHash();
  for (const key of [...FILTERS, 'size']) state[key] = $('f-' + key).value.trim();
  if (state.size === String(PAGE_SIZE)) state.size = '';
  writeHash(state);
});
for (const id of ['f-status', 'f-phase']) $(id).addEventListener('change', () => $('filters').requestSubmit());
$('clear').addEventListener('click', () => writeHash({ audit: readHash().audit, size: readHash().size }));
$('closeAudit').addEventListener('click', () => writeHash({ ...readHash(), audit: '' }));
$('older').addEventListener('click', () => { if (nextContinuation) { pages.push(nextContinuation); refresh(); } });
$('newer').addEventListener('click', () => { if (pages.length > 1) { pages.pop(); refresh(); } });
$('f-status').innerHTML = '<option value="">any</option>' + STATES.map((s) => '<option>' + s + '</option>').join('');
$('f-phase').innerHTML = '<option value="">any</option>' + PHASES.map((p) => '<option value="' + p + '">' + esc(PHASE_TEXT[p]) + '</option>').join('');
refresh(); setInterval(() => { if (!refreshing) refresh(); }, 1000); window.addEventListener('hashchange', () => { chartsAt = 0; listsAt = 0; refresh(); });
`;

const html = (attributes: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>routelock — status</title>
<link rel="icon" type="image/svg+xml" href="/api/${VIEW_ROUTE}/assets/favicon.svg">
<link rel="stylesheet" href="/api/${VIEW_ROUTE}/assets/uplot-css">
<style>${css}</style>
</head>
<body ${attributes}>
<header><h1>routelock</h1><span id="updated">loading…</span></header>
<main>
  <section class="wide">
    <h2>Campaigns</h2>
    <div class="legend"><span><i class="key-moved"></i>moved (completed, no-op)</span><span><i class="key-unmoved"></i>failed, conflict</span><span><i class="key-dropped"></i>cancelled, skipped</span><span><i class="key-running"></i>running</span></div>
    <div class="scroll"><table><thead><tr><th>campaign</th><th>status</th><th>target</th><th>progress</th><th>ended</th><th>counts</th><th>eta</th><th>migrations</th></tr></thead><tbody id="campaigns"></tbody></table></div>
  </section>
  <section class="wide">
    <h2>Migrations</h2>
    <form class="filters" id="filters">
      <label>status<select id="f-status"></select></label>
      <label>phase<select id="f-phase"></select></label>
      <label>target region<input id="f-region" list="regions" size="12"></label>
      <label>campaign<input id="f-campaign" size="16"></label>
      <label>resource id<input id="f-resource" size="20" placeholder="exact id"></label>
      <label>per page<input id="f-size" type="number" min="1" max="200" size="4"></label>
      <button type="submit" id="apply">apply</button><button type="button" id="clear">clear</button>
      <datalist id="regions"></datalist>
    </form>
    <div class="filter" id="migrationFilter" hidden></div>
    <div class="legend"><span><i class="key-prelock"></i>pre-lock (convergence)</span><span><i class="key-hardDelete"></i>hard-delete lock</span><span><i class="key-write"></i>write lock</span><span><i class="stop">✕</i>where it stopped</span></div>
    <div class="scroll"><table><thead><tr><th>migration</th><th>resource</th><th>target</th><th>status</th><th>phase</th><th>timeline</th><th>took</th><th>why it stopped</th><th>audit</th></tr></thead><tbody id="migrations"></tbody></table></div>
    <div class="pager"><button type="button" id="newer" disabled>← newer</button><span id="pageNo">page 1</span><button type="button" id="older" disabled>older →</button></div>
  </section>
  <section class="wide" id="auditSection" hidden>
    <h2>Audit trail of <span class="mono" id="auditOf"></span> <button type="button" id="closeAudit">close</button></h2>
    <div class="scroll"><table><thead><tr><th>at</th><th>op</th><th>migration</th><th>from → to</th><th>actor</th><th>reason</th></tr></thead><tbody id="audit"></tbody></table></div>
  </section>
  <section class="wide">
    <div class="charts">
      <div><h2>Write-lock hold <small class="none" id="holdCount"></small></h2><div class="chart" id="holdChart"></div></div>
      <div><h2>Migrations over time <small class="none" id="timeBucket"></small></h2><div class="chart" id="timeChart"></div></div>
    </div>
  </section>
  <section class="wide" id="metricsSection" hidden>
    <h2>Lock metrics</h2>
    <div class="metrics" id="metrics"></div>
    <h2>Events</h2>
    <div id="events" class="mono"></div>
  </section>
  <section class="wide">
    <h2>Resources <small class="none" id="routeCount"></small></h2>
    <div class="scroll"><table><thead><tr><th>resource</th><th>location</th><th>lock</th><th>write</th><th>delete</th><th>secondary</th><th>audit</th></tr></thead><tbody id="routes"></tbody></table></div>
  </section>
</main>
<script src="/api/${VIEW_ROUTE}/assets/uplot-js"></script>
<script>${script}</script>
</body>
</html>
`;

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * Nothing but this app: its one inline style and one inline script by hash, uPlot's files by `'self'`,
 * reads to this origin only; no frames, no forms posted anywhere, no plugins, no base rewriting.
 */
export const contentSecurityPolicy = [
  "default-src 'none'",
  `script-src 'self' ${sha256(script)}`,
  `style-src 'self' ${sha256(css)}`,
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const attribute = (value: string) =>
  value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

/**
 * The document. `signIn` is where the page sends the browser when a read answers 401 (App Service's
 * sign-in, under ROUTELOCK_AUTH=appservice); without it the page says the host wants another credential.
 */
export function statusPageDocument(options: { signIn?: string | undefined }): string {
  const attributes = [
    `data-api="/api/${VIEW_ROUTE}"`,
    'data-metrics="/api/metrics"',
    ...(options.signIn ? [`data-sign-in="${attribute(options.signIn)}"`] : []),
  ];
  return html(attributes.join(' '));
}
