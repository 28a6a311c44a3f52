import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * `GET /` on the embedded host: a status page with no build step. Campaigns with a progress bar (members
 * ended of total, by outcome), counts and ETA, each linking to its migrations (`#campaign=<id>` filters the
 * migrations table to `GET /api/migrations?campaignId=`); resources with their location and lock phase,
 * migrations in flight and recent ones with their phase timeline drawn as bars (pre-lock / hard-delete /
 * write), and the metrics of /api/metrics. It refreshes itself every second. Like every call it makes, it
 * sends no credential: the embedded host's loopback-only auth modes are what let it read.
 */

export const statusPageHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>routelock — status</title>
<style>
  :root { --bg:#f6f7f9; --card:#fff; --ink:#1d2330; --muted:#6b7385; --line:#e3e6ec;
          --prelock:#8fb3ff; --hardDelete:#f5b14c; --write:#e8685a; --ok:#2f9e6e; --bad:#d64545; --run:#3b6fd8; }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; background:var(--bg); color:var(--ink); }
  header { padding:18px 28px; background:#1d2330; color:#fff; display:flex; align-items:baseline; gap:16px; }
  header h1 { margin:0; font-size:20px; font-weight:650; letter-spacing:.2px; }
  header span { color:#aab3c5; font-size:13px; }
  main { padding:20px 28px; display:grid; gap:18px; grid-template-columns: minmax(0,3fr) minmax(0,2fr); }
  section { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px 16px; }
  section.wide { grid-column: 1 / -1; }
  h2 { margin:0 0 10px; font-size:15px; }
  table { width:100%; border-collapse:collapse; }
  th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:middle; white-space:nowrap; }
  th { color:var(--muted); font-weight:600; font-size:12px; text-transform:uppercase; letter-spacing:.4px; }
  td.bar { width:40%; min-width:200px; }
  td.id { max-width:170px; overflow:hidden; text-overflow:ellipsis; }
  .badge { display:inline-block; padding:1px 8px; border-radius:999px; font-size:12px; font-weight:600; color:#fff; }
  .Completed { background:var(--ok); } .Failed, .Conflict { background:var(--bad); } .Running, .Pending { background:var(--run); } .NoOp, .Cancelled { background:var(--muted); }
  .Paused, .Cancelling { background:var(--hardDelete); color:#1d2330; }
  .waiting { background:var(--hardDelete); color:#1d2330; margin-left:6px; }
  .phase-prelock { background:var(--prelock); color:#1d2330; } .phase-hardDelete { background:var(--hardDelete); color:#1d2330; } .phase-write { background:var(--write); }
  .none { color:var(--muted); }
  .track { display:flex; height:14px; border-radius:7px; overflow:hidden; background:#eef0f4; }
  .seg { height:100%; min-width:2px; }
  .seg.prelock { background:var(--prelock); } .seg.hardDelete { background:var(--hardDelete); } .seg.write { background:var(--write); }
  .seg.moved { background:var(--ok); } .seg.unmoved { background:var(--bad); } .seg.dropped { background:var(--muted); } .seg.running { background:var(--prelock); }
  td.counts { white-space:normal; color:var(--muted); font-size:12.5px; }
  a { color:var(--run); } .filter { color:var(--muted); font-size:12.5px; margin:-4px 0 8px; }
  .legend { display:flex; gap:14px; color:var(--muted); font-size:12px; margin-bottom:8px; }
  .legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:5px; vertical-align:-1px; }
  .metrics { display:grid; grid-template-columns: repeat(3, minmax(0,1fr)); gap:10px; }
  .metric { border:1px solid var(--line); border-radius:8px; padding:10px; }
  .metric b { display:block; font-size:18px; white-space:nowrap; }
  .metric small { color:var(--muted); }
  .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size:12.5px; }
  .empty { color:var(--muted); padding:10px 0; }
</style>
</head>
<body>
<header><h1>routelock</h1><span id="updated">loading…</span></header>
<main>
  <section class="wide">
    <h2>Campaigns</h2>
    <div class="legend"><span><i style="background:var(--ok)"></i>moved (completed, no-op)</span><span><i style="background:var(--bad)"></i>failed, conflict</span><span><i style="background:var(--muted)"></i>cancelled, skipped</span><span><i style="background:var(--prelock)"></i>running</span></div>
    <table><thead><tr><th>campaign</th><th>status</th><th>target</th><th>progress</th><th>ended</th><th>counts</th><th>eta</th><th>migrations</th></tr></thead><tbody id="campaigns"></tbody></table>
  </section>
  <section>
    <h2>Migrations</h2>
    <div class="filter" id="migrationFilter" hidden></div>
    <div class="legend"><span><i style="background:var(--prelock)"></i>pre-lock (convergence)</span><span><i style="background:var(--hardDelete)"></i>hard-delete lock</span><span><i style="background:var(--write)"></i>write lock</span></div>
    <table><thead><tr><th>migration</th><th>resource</th><th>status</th><th>phase</th><th>timeline</th><th>took</th></tr></thead><tbody id="migrations"></tbody></table>
  </section>
  <section>
    <h2>Lock metrics</h2>
    <div class="metrics" id="metrics"></div>
    <h2 style="margin-top:14px">Events</h2>
    <div id="events" class="mono"></div>
  </section>
  <section class="wide">
    <h2>Resources</h2>
    <table><thead><tr><th>resource</th><th>location</th><th>lock</th><th>write</th><th>delete</th><th>secondary</th></tr></thead><tbody id="routes"></tbody></table>
  </section>
</main>
<script>
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const where = (l) => l ? esc(l.region + (l.account ? '/' + l.account : '')) : '';
const secs = (a, b) => (Date.parse(b) - Date.parse(a)) / 1000;
function bar(m) {
  const t = m.timeline; if (!t.prelockAt) return '<span class="none">—</span>';
  const end = t.swappedAt || (m.status === 'Running' ? new Date().toISOString() : (t.writeAt || t.hardDeleteAt || t.prelockAt));
  const parts = [['prelock', t.prelockAt, t.hardDeleteAt || end], ['hardDelete', t.hardDeleteAt, t.writeAt || end], ['write', t.writeAt, end]]
    .filter(([, a, b]) => a && b).map(([k, a, b]) => [k, Math.max(0, secs(a, b))]);
  const total = parts.reduce((s, [, d]) => s + d, 0) || 1;
  return '<div class="track">' + parts.map(([k, d]) => '<div class="seg ' + k + '" title="' + k + ' ' + d.toFixed(1) + ' s" style="width:' + (100 * d / total).toFixed(2) + '%"></div>').join('') + '</div>';
}
const CAMPAIGN_SEGMENTS = [['moved', ['completed', 'noOp']], ['unmoved', ['failed', 'conflict']], ['dropped', ['cancelled', 'skipped']], ['running', ['running']]];
function progress(c) {
  const total = c.total || 1;
  return '<div class="track">' + CAMPAIGN_SEGMENTS.map(([k, states]) => [k, states.reduce((s, st) => s + (c[st] || 0), 0)])
    .filter(([, n]) => n > 0).map(([k, n]) => '<div class="seg ' + k + '" title="' + k + ' ' + n + '" style="width:' + (100 * n / total).toFixed(2) + '%"></div>').join('') + '</div>';
}
const ended = (c) => c.total - c.pending - c.running;
function counts(c) { return ['pending', 'running', 'completed', 'noOp', 'failed', 'conflict', 'cancelled', 'skipped'].filter((k) => c[k]).map((k) => k + ' ' + c[k]).join(' · ') || '—'; }
function eta(s) { if (s.status === 'Completed' || s.status === 'Cancelled' || s.etaSeconds == null) return '—'; const t = Math.round(s.etaSeconds); return t < 60 ? t + ' s' : t < 3600 ? Math.floor(t / 60) + ' min ' + (t % 60) + ' s' : Math.floor(t / 3600) + ' h ' + Math.floor((t % 3600) / 60) + ' min'; }
/** #campaign=<id> shows only that campaign's migrations; a hash that does not decode (\`%\`) is no filter, not a stopped page. */
const campaignFilter = () => { const m = /^#campaign=(.+)$/.exec(location.hash); if (!m) return null; try { return decodeURIComponent(m[1]); } catch { return null; } };
function campaignRows(list) {
  return list.items.length ? list.items.map((s) =>
    '<tr data-campaign="' + esc(s.campaignId) + '" data-status="' + esc(s.status) + '"><td class="mono id" title="' + esc(s.campaignId) + '">' + esc(s.campaignId) + '</td><td><span class="badge ' + esc(s.status) + '">' + esc(s.status) + '</span></td><td>' + where(s.target) +
    '</td><td class="bar">' + progress(s.counts) + '</td><td class="ended">' + ended(s.counts) + ' / ' + s.counts.total + '</td><td class="counts">' + esc(counts(s.counts)) + '</td><td class="eta">' + eta(s) +
    '</td><td><a class="migrations" href="#campaign=' + encodeURIComponent(s.campaignId) + '">show</a> · <a href="' + esc(s.migrationsUrl) + '">json</a></td></tr>').join('')
    : '<tr><td colspan="8" class="empty">No campaigns yet: POST /api/campaigns, or npx routelock campaign start</td></tr>';
}
// version 4: the write lock waits for the migration's cutover window (issue 19 §3)
function waiting(m) { return m.waitingForWindow ? '<span class="badge waiting" title="the write lock waits for its cutover window">waiting for window · opens ' + esc(m.waitingForWindow.nextOpening) + '</span>' : ''; }
function took(m) { const t = m.timeline; return t.prelockAt && t.swappedAt ? secs(t.prelockAt, t.swappedAt).toFixed(1) + ' s' : ''; }
function metric(name, d) { return '<div class="metric"><small>' + name + ' p50 / p99</small><b>' + (d.count ? d.p50.toFixed(2) + ' / ' + d.p99.toFixed(2) + ' s' : '—') + '</b><small>' + d.count + ' samples, max ' + (d.max ?? 0).toFixed(2) + ' s</small></div>'; }
async function refresh() {
  try {
    const only = campaignFilter();
    const migrationsUrl = '/api/migrations?limit=30' + (only ? '&campaignId=' + encodeURIComponent(only) : '');
    const [routes, migrations, metrics] = await Promise.all(['/api/routes?limit=200', migrationsUrl, '/api/metrics'].map((u) => fetch(u).then((r) => r.json())));
    // A host without campaign routes still shows everything else.
    const campaigns = await fetch('/api/campaigns?limit=20').then((r) => r.ok ? r.json() : { items: [] }, () => ({ items: [] }));
    document.getElementById('campaigns').innerHTML = campaignRows(campaigns);
    const filter = document.getElementById('migrationFilter');
    filter.hidden = !only;
    filter.innerHTML = only ? 'Migrations of campaign <b class="mono">' + esc(only) + '</b> · <a href="#">show all</a>' : '';
    document.getElementById('migrations').innerHTML = migrations.items.length ? migrations.items.map((m) =>
      '<tr data-migration="' + esc(m.migrationId) + '" data-status="' + esc(m.status) + '"><td class="mono id" title="' + esc(m.migrationId) + '">' + esc(m.migrationId) + '</td><td class="mono">' + esc(m.resourceId) + '</td><td><span class="badge ' + esc(m.status) + '">' + esc(m.status) + '</span></td><td>' + esc(m.phase) + waiting(m) + '</td><td class="bar">' + bar(m) + '</td><td>' + took(m) + '</td></tr>').join('')
      : '<tr><td colspan="6" class="empty">No migrations yet: POST /api/migrations</td></tr>';
    document.getElementById('routes').innerHTML = routes.items.length ? routes.items.map((r) =>
      '<tr><td class="mono">' + esc(r.resourceId) + '</td><td>' + where(r.location) + '</td><td>' + (r.lock ? '<span class="badge phase-' + esc(r.lock.phase) + '">' + esc(r.lock.phase) + '</span> → ' + where(r.lock.target) : '<span class="none">unlocked</span>') +
      '</td><td>' + esc(r.enforcement.write) + '</td><td>' + esc(r.enforcement.delete) + '</td><td>' + (r.secondary ? esc(r.secondary.role) + ' ' + where(r.secondary.location) : '') + '</td></tr>').join('')
      : '<tr><td colspan="6" class="empty">No routes yet: PUT /api/routes/{id}</td></tr>';
    document.getElementById('metrics').innerHTML = metric('write lock', metrics.writeLockSeconds) + metric('convergence wait', metrics.convergenceWaitSeconds) + metric('migration', metrics.migrationSeconds);
    const events = Object.entries(metrics.events);
    document.getElementById('events').innerHTML = (events.length ? events.map(([k, v]) => esc(k) + ' ' + v).join(' · ') : 'none yet') + (metrics.convergenceShortfalls ? ' · <b style="color:var(--bad)">' + metrics.convergenceShortfalls + ' convergence shortfall(s)</b>' : '');
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  } catch (e) { document.getElementById('updated').textContent = 'cannot reach the host: ' + e.message; }
}
refresh(); setInterval(refresh, 1000); window.addEventListener('hashchange', refresh);
</script>
</body>
</html>
`;

export function serveStatusPage(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(statusPageHtml);
}
