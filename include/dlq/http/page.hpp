// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
/// @file http/page.hpp
/// The console's one page: HTML, CSS and JavaScript embedded as strings (no build step, no
/// CDN, works without internet). Served by dlq::http::Console at `<prefix>/`,
/// `<prefix>/console.css` and `<prefix>/console.js`.
///
/// Invariant: the script renders every value from the store with textContent (never
/// innerHTML), and the Content-Security-Policy the console sends forbids inline script, so a
/// payload such as `<img src=x onerror=…>` shows as text and cannot run.
#pragma once

namespace dlq {
namespace http {

/// The page's HTML.
inline const char* page_html() {
  return R"DLQHTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dlq console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="console.css">
<script src="console.js" defer></script>
</head>
<body>
<header class="topbar">
  <div class="brand" id="home" title="Overview"><span class="logo">dlq</span><span class="brand-sub">dead-letter console</span></div>
  <div class="top-right">
    <span id="readonly-badge" class="badge badge-ro" hidden>read-only</span>
    <span id="version" class="muted"></span>
    <label class="auto"><input type="checkbox" id="auto-refresh" checked> auto-refresh</label>
    <button id="refresh" class="btn btn-ghost" type="button">Refresh</button>
  </div>
</header>
<div class="layout">
  <nav class="sidebar">
    <div class="side-title">Queues</div>
    <ul id="queue-list" class="queue-list"></ul>
    <div id="queues-empty" class="muted side-empty" hidden>No dead letters anywhere.</div>
  </nav>
  <main class="main">
    <section id="welcome">
      <div class="queue-head"><h1>Overview</h1><span id="overview-total" class="muted"></span></div>
      <div class="table-wrap">
        <table id="overview" class="table">
          <thead><tr><th>Queue</th><th class="num">Dead letters</th><th class="num">Corrupt</th><th class="num">Waiting in source</th><th class="num">Oldest dead letter</th></tr></thead>
          <tbody></tbody>
        </table>
        <div id="overview-empty" class="empty" hidden>No dead letters anywhere. Nice.</div>
      </div>
    </section>
    <section id="queue-view" hidden>
      <div class="queue-head">
        <h1 id="queue-title"></h1>
        <div class="queue-actions">
          <button id="btn-recover" class="btn btn-ghost mut" type="button" title="Finish replays that were interrupted">Recover</button>
          <button id="btn-purge" class="btn btn-danger-ghost mut" type="button">Purge…</button>
        </div>
      </div>
      <div class="cards">
        <div class="card"><div class="card-label">Dead letters</div><div class="card-value" id="stat-dead">–</div></div>
        <div class="card"><div class="card-label">Corrupt</div><div class="card-value" id="stat-corrupt">–</div></div>
        <div class="card"><div class="card-label">Waiting in source</div><div class="card-value" id="stat-waiting">–</div></div>
        <div class="card"><div class="card-label">Oldest dead letter</div><div class="card-value" id="stat-oldest">–</div></div>
      </div>
      <div class="tabs">
        <button class="tab active" id="tab-dead" type="button">Dead letters</button>
        <button class="tab" id="tab-corrupt" type="button">Corrupt <span id="tab-corrupt-count" class="pill"></span></button>
      </div>
      <div id="dead-pane">
        <form id="filters" class="filters" autocomplete="off">
          <input id="f-error" placeholder="Error contains…">
          <input id="f-error-type" placeholder="Error type">
          <input id="f-worker" placeholder="Worker">
          <input id="f-job-id" placeholder="Job id">
          <input id="f-payload" placeholder="Payload contains…">
          <input id="f-min-age" placeholder="Min age (15m)">
          <input id="f-max-age" placeholder="Max age (2d)">
          <button id="apply-filter" class="btn" type="submit">Filter</button>
          <button id="clear-filter" class="btn btn-ghost" type="button">Clear</button>
        </form>
        <div class="actionbar">
          <span id="selection-info" class="muted">No selection</span>
          <span class="spacer"></span>
          <button id="btn-replay-selected" class="btn btn-primary mut" type="button" disabled>Replay selected</button>
          <button id="btn-delete-selected" class="btn btn-danger mut" type="button" disabled>Delete selected</button>
          <button id="btn-replay-filter" class="btn btn-ghost mut" type="button">Replay all matching…</button>
          <button id="btn-delete-filter" class="btn btn-danger-ghost mut" type="button" hidden>Delete all matching…</button>
        </div>
        <div class="table-wrap">
          <table id="entries" class="table">
            <thead><tr>
              <th class="col-check"><input type="checkbox" id="select-all" title="Select the rows shown"></th>
              <th>Dead-lettered</th><th>Error</th><th>Worker</th><th class="num">Attempt</th><th>Job id</th><th>Payload</th>
            </tr></thead>
            <tbody></tbody>
          </table>
          <div id="entries-empty" class="empty" hidden>No matching dead letters.</div>
        </div>
        <div class="pager">
          <span id="scan-info" class="muted"></span>
          <span class="spacer"></span>
          <button id="load-more" class="btn btn-ghost" type="button" hidden>Load more</button>
        </div>
      </div>
      <div id="corrupt-pane" hidden>
        <p class="muted">Items replay set aside because they cannot be read. They are kept byte for byte; fix them by hand or purge them.</p>
        <div class="table-wrap">
          <table id="corrupt" class="table">
            <thead><tr><th>Id</th><th>Problem</th><th class="num">Size</th><th>Bytes</th></tr></thead>
            <tbody></tbody>
          </table>
          <div id="corrupt-empty" class="empty" hidden>The corrupt list is empty.</div>
        </div>
        <div class="pager"><span class="spacer"></span><button id="btn-purge-corrupt" class="btn btn-danger-ghost mut" type="button">Purge corrupt list…</button></div>
      </div>
    </section>
  </main>
</div>

<aside id="drawer" class="drawer" hidden>
  <div class="drawer-head">
    <div><div class="muted small">Dead letter</div><div id="drawer-id" class="mono"></div></div>
    <button id="drawer-close" class="btn btn-ghost" type="button" aria-label="Close">✕</button>
  </div>
  <div class="drawer-body">
    <dl id="drawer-fields" class="fields"></dl>
    <div class="section-title">Payload <span id="drawer-payload-kind" class="pill"></span></div>
    <pre id="drawer-payload" class="code"></pre>
    <div id="drawer-hex-wrap" hidden><div class="section-title">Hex</div><pre id="drawer-hex" class="code"></pre></div>
    <div class="section-title">Context</div>
    <pre id="drawer-context" class="code"></pre>
    <details><summary class="section-title">Stored envelope</summary><pre id="drawer-stored" class="code"></pre></details>
  </div>
  <div class="drawer-foot">
    <button id="drawer-replay" class="btn btn-primary mut" type="button">Replay</button>
    <button id="drawer-delete" class="btn btn-danger mut" type="button">Delete</button>
  </div>
</aside>

<div id="op-panel" class="op-panel" hidden>
  <div class="op-head"><strong id="op-title">Replay</strong><span id="op-state" class="badge"></span></div>
  <div class="progress"><div id="op-progress" class="progress-bar"></div></div>
  <div id="op-counts" class="small muted"></div>
  <div class="op-foot"><button id="op-cancel" class="btn btn-danger-ghost" type="button">Cancel</button><button id="op-close" class="btn btn-ghost" type="button" hidden>Close</button></div>
</div>

<div id="modal" class="modal-backdrop" hidden>
  <div class="modal" role="dialog" aria-modal="true">
    <h2 id="modal-title"></h2>
    <p id="modal-text"></p>
    <div id="modal-replay-opts" class="modal-opts" hidden>
      <label>Replay to queue <input id="confirm-to" placeholder="(the source queue)"></label>
      <label>Rate (entries/s, 0 = no limit) <input id="confirm-rate" type="number" min="0" value="0"></label>
    </div>
    <div id="modal-type-back" class="modal-opts" hidden>
      <label>Type the queue's name to confirm <input id="confirm-name" autocomplete="off"></label>
    </div>
    <div id="modal-token" class="modal-opts" hidden>
      <label>Access token <input id="token-input" type="password" autocomplete="off"></label>
    </div>
    <div id="modal-error" class="error-text" hidden></div>
    <div class="modal-foot">
      <button id="confirm-cancel" class="btn btn-ghost" type="button">Cancel</button>
      <button id="confirm-ok" class="btn btn-primary" type="button">OK</button>
    </div>
  </div>
</div>
<div id="toast" class="toast" hidden></div>
</body>
</html>
)DLQHTML";
}

/// The page's style sheet.
inline const char* page_css() {
  return R"DLQCSS(:root{--bg:#f6f7f9;--panel:#fff;--ink:#1f2430;--muted:#6b7280;--line:#e5e7eb;--brand:#4f46e5;--brand-d:#4338ca;--danger:#dc2626;--ok:#059669;--warn:#d97706;--sel:#eef2ff}
*{box-sizing:border-box}
html,body{margin:0;height:100%}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;background:var(--bg);color:var(--ink)}
.mono,.code,td.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px}
.muted{color:var(--muted)}.small{font-size:12px}
.topbar{height:52px;display:flex;align-items:center;justify-content:space-between;padding:0 20px;background:#111827;color:#e5e7eb}
.brand{display:flex;align-items:baseline;gap:10px;cursor:pointer}.logo{font-weight:800;font-size:18px;color:#fff;letter-spacing:.5px;background:var(--brand);padding:2px 8px;border-radius:6px}
.brand-sub{color:#9ca3af}.top-right{display:flex;align-items:center;gap:14px}.top-right .muted{color:#9ca3af}
.auto{color:#d1d5db;font-size:13px;display:flex;gap:6px;align-items:center}
.layout{display:flex;height:calc(100% - 52px)}
.sidebar{width:270px;flex:none;background:var(--panel);border-right:1px solid var(--line);overflow:auto;padding:14px 10px}
.side-title{font-size:11px;text-transform:uppercase;letter-spacing:.08em;color:var(--muted);padding:0 10px 8px}
.side-empty{padding:8px 10px}
.queue-list{list-style:none;margin:0;padding:0}
.queue-item{display:flex;align-items:center;justify-content:space-between;gap:8px;padding:9px 10px;border-radius:8px;cursor:pointer;margin-bottom:2px}
.queue-item:hover{background:#f3f4f6}.queue-item.active{background:var(--sel);color:var(--brand-d)}
.q-name{font-weight:600;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.q-sub{font-size:12px;color:var(--muted)}
.q-counts{display:flex;gap:4px;flex:none}
.pill{display:inline-block;min-width:22px;padding:1px 7px;border-radius:999px;background:#eef2ff;color:var(--brand-d);font-size:12px;font-weight:600;text-align:center}
.pill.red{background:#fee2e2;color:#b91c1c}.pill:empty{display:none}
.main{flex:1;overflow:auto;padding:22px 28px}
.bad-num{color:var(--danger);font-weight:600}
h1{font-size:22px;margin:0}
.queue-head{display:flex;align-items:center;justify-content:space-between;margin-bottom:16px}
.queue-actions{display:flex;gap:8px}
.cards{display:grid;grid-template-columns:repeat(4,minmax(0,1fr));gap:14px;margin-bottom:18px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:10px;padding:14px 16px}
.card-label{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.05em}
.card-value{font-size:24px;font-weight:700;margin-top:4px;font-variant-numeric:tabular-nums}
.tabs{display:flex;gap:4px;border-bottom:1px solid var(--line);margin-bottom:14px}
.tab{background:none;border:0;padding:9px 14px;font:inherit;color:var(--muted);cursor:pointer;border-bottom:2px solid transparent;margin-bottom:-1px}
.tab.active{color:var(--brand-d);border-bottom-color:var(--brand);font-weight:600}
.filters{display:grid;grid-template-columns:minmax(0,2fr) repeat(3,minmax(0,1fr)) minmax(0,1.5fr) repeat(2,minmax(0,1fr)) auto auto;gap:8px;margin-bottom:12px}
.filters input{min-width:0;width:100%}
@media (max-width:1100px){.filters{grid-template-columns:repeat(4,minmax(0,1fr))}}
input{font:inherit;padding:7px 10px;border:1px solid #d1d5db;border-radius:7px;background:#fff;color:var(--ink)}
input:focus{outline:2px solid #c7d2fe;border-color:var(--brand)}
.btn{font:inherit;font-weight:600;padding:7px 14px;border-radius:7px;border:1px solid #d1d5db;background:#fff;color:var(--ink);cursor:pointer;white-space:nowrap}
.btn:hover{background:#f9fafb}.btn:disabled{opacity:.45;cursor:default}
.btn-primary{background:var(--brand);border-color:var(--brand);color:#fff}.btn-primary:hover{background:var(--brand-d)}
.btn-danger{background:var(--danger);border-color:var(--danger);color:#fff}.btn-danger:hover{background:#b91c1c}
.btn-ghost{background:transparent}.topbar .btn-ghost{color:#e5e7eb;border-color:#374151}.topbar .btn-ghost:hover{background:#1f2937}
.btn-danger-ghost{background:transparent;color:var(--danger);border-color:#fca5a5}.btn-danger-ghost:hover{background:#fef2f2}
.actionbar{display:flex;align-items:center;gap:8px;margin-bottom:10px}.spacer{flex:1}
.table-wrap{background:var(--panel);border:1px solid var(--line);border-radius:10px;overflow:hidden}
.table{width:100%;border-collapse:collapse;table-layout:fixed}
.table th{font-size:12px;text-align:left;color:var(--muted);font-weight:600;background:#f9fafb;padding:9px 12px;border-bottom:1px solid var(--line)}
.table td{padding:9px 12px;border-bottom:1px solid #f1f2f4;vertical-align:top;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.table tbody tr{cursor:pointer}.table tbody tr:hover{background:#fafafa}.table tbody tr.selected{background:var(--sel)}
.table .num{text-align:right}.col-check{width:40px}.table td.col-check{text-overflow:clip}
#entries th:nth-child(2){width:130px}#entries th:nth-child(3){width:30%}#entries th:nth-child(4){width:110px}#entries th:nth-child(5){width:75px}#entries th:nth-child(6){width:120px}
.err-type{display:inline-block;font-size:11px;font-weight:700;color:#92400e;background:#fef3c7;border-radius:4px;padding:0 5px;margin-right:6px}
.err-msg{color:#991b1b}.corrupt-tag{font-size:11px;font-weight:700;color:#fff;background:var(--danger);border-radius:4px;padding:0 5px;margin-right:6px}
.empty{padding:34px;text-align:center;color:var(--muted)}
.pager{display:flex;align-items:center;gap:10px;padding:10px 2px}
.badge{font-size:11px;font-weight:700;text-transform:uppercase;letter-spacing:.05em;border-radius:999px;padding:2px 9px;background:#e5e7eb;color:#374151}
.badge-ro{background:#fbbf24;color:#111827}
.badge.running{background:#dbeafe;color:#1d4ed8}.badge.done{background:#d1fae5;color:#065f46}.badge.cancelled{background:#fef3c7;color:#92400e}.badge.failed{background:#fee2e2;color:#991b1b}
.drawer{position:fixed;top:0;right:0;bottom:0;width:min(640px,92vw);background:var(--panel);border-left:1px solid var(--line);box-shadow:-12px 0 30px rgba(17,24,39,.12);display:flex;flex-direction:column;z-index:20}
.drawer-head{display:flex;justify-content:space-between;align-items:flex-start;padding:16px 20px;border-bottom:1px solid var(--line)}
.drawer-body{flex:1;overflow:auto;padding:16px 20px}.drawer-foot{display:flex;gap:8px;padding:12px 20px;border-top:1px solid var(--line)}
.fields{display:grid;grid-template-columns:140px 1fr;gap:6px 12px;margin:0 0 16px}.fields dt{color:var(--muted)}.fields dd{margin:0;word-break:break-word;white-space:pre-wrap}
.section-title{font-size:12px;font-weight:700;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);margin:14px 0 6px}
.code{background:#0f172a;color:#e2e8f0;border-radius:8px;padding:12px;overflow:auto;max-height:360px;white-space:pre-wrap;word-break:break-all;margin:0}
.op-panel{position:fixed;right:20px;bottom:20px;width:380px;background:var(--panel);border:1px solid var(--line);border-radius:12px;box-shadow:0 10px 30px rgba(17,24,39,.18);padding:14px 16px;z-index:30}
.op-head{display:flex;justify-content:space-between;align-items:center;margin-bottom:10px}
.progress{height:8px;background:#e5e7eb;border-radius:999px;overflow:hidden;margin-bottom:8px}
.progress-bar{height:100%;width:0;background:var(--brand);transition:width .3s}
.op-foot{display:flex;justify-content:flex-end;gap:8px;margin-top:8px}
.modal-backdrop{position:fixed;inset:0;background:rgba(17,24,39,.45);display:flex;align-items:center;justify-content:center;z-index:40}
.modal{background:var(--panel);border-radius:12px;padding:20px 22px;width:min(460px,92vw);box-shadow:0 20px 50px rgba(0,0,0,.25)}
.modal h2{font-size:17px;margin:0 0 8px}.modal-opts{display:flex;flex-direction:column;gap:10px;margin:12px 0}
.modal-opts label{display:flex;flex-direction:column;gap:4px;font-size:13px;color:var(--muted)}
.modal-foot{display:flex;justify-content:flex-end;gap:8px;margin-top:16px}
.error-text{color:var(--danger);font-size:13px;margin-top:8px;white-space:pre-wrap}
.toast{position:fixed;left:50%;bottom:24px;transform:translateX(-50%);background:#111827;color:#fff;padding:9px 16px;border-radius:8px;z-index:50;max-width:80vw}
.toast.bad{background:var(--danger)}
[hidden]{display:none!important}
body.ro .mut{display:none!important}
)DLQCSS";
}

/// The page's script (plain ES2017, no dependencies).
inline const char* page_js() {
  return R"DLQJS('use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const S = { info: null, queues: [], queue: null, filter: {}, next: null, rows: [], seen: new Set(),
              selected: new Set(), examined: 0, op: null, opTimer: null, tab: 'dead', current: null };

  // Builds an element; strings become text nodes (never HTML).
  function el(tag, props, ...kids) {
    const n = document.createElement(tag);
    if (props) for (const k of Object.keys(props)) {
      if (k === 'class') n.className = props[k];
      else if (k === 'text') n.textContent = props[k];
      else if (k.startsWith('on')) n.addEventListener(k.slice(2), props[k]);
      else n.setAttribute(k, props[k]);
    }
    for (const c of kids) if (c !== null && c !== undefined) n.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    return n;
  }
  const fmt = (n) => (n === null || n === undefined) ? '–' : Number(n).toLocaleString('en-US');
  function age(s) {
    if (s === null || s === undefined) return '–';
    s = Math.max(0, s);
    if (s < 60) return Math.floor(s) + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor(s % 3600 / 60) + 'm';
    return Math.floor(s / 86400) + 'd ' + Math.floor(s % 86400 / 3600) + 'h';
  }
  function toast(msg, bad) {
    const t = $('toast'); t.textContent = msg; t.className = 'toast' + (bad ? ' bad' : ''); t.hidden = false;
    clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.hidden = true; }, bad ? 7000 : 3500);
  }

  // --- API ------------------------------------------------------------------------------
  function token() { return sessionStorage.getItem('dlq-token') || ''; }
  async function api(path, body) {
    const headers = {};
    if (token()) headers['Authorization'] = 'Bearer ' + token();
    const init = { headers, credentials: 'same-origin' };
    if (body !== undefined) { init.method = 'POST'; headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
    const r = await fetch(path, init);
    let data = null;
    try { data = await r.json(); } catch (e) { data = null; }
    if (r.status === 401) { askToken(data && data.error ? data.error.message : ''); throw new Error('unauthorized'); }
    if (!r.ok) { const m = data && data.error ? data.error.message : ('HTTP ' + r.status); const e = new Error(m); e.status = r.status; e.code = data && data.error && data.error.code; throw e; }
    return data;
  }
  const q = (o) => Object.keys(o).filter((k) => o[k] !== '' && o[k] !== null && o[k] !== undefined).map((k) => encodeURIComponent(k) + '=' + encodeURIComponent(o[k])).join('&');

  // --- modal ----------------------------------------------------------------------------
  let modalResolve = null;
  function modal(opts) {
    $('modal-title').textContent = opts.title; $('modal-text').textContent = opts.text || '';
    $('modal-replay-opts').hidden = !opts.replay; $('modal-type-back').hidden = !opts.typeBack; $('modal-token').hidden = !opts.token;
    $('modal-error').hidden = true; $('confirm-ok').textContent = opts.ok || 'OK';
    $('confirm-ok').className = 'btn ' + (opts.danger ? 'btn-danger' : 'btn-primary');
    $('confirm-name').value = ''; $('confirm-to').value = ''; $('confirm-rate').value = '0';
    $('confirm-cancel').hidden = !!opts.noCancel;
    $('modal').hidden = false;
    setTimeout(() => { const f = opts.typeBack ? $('confirm-name') : opts.token ? $('token-input') : $('confirm-ok'); f.focus(); }, 0);
    return new Promise((res) => { modalResolve = res; });
  }
  function closeModal(v) { $('modal').hidden = true; if (modalResolve) { const r = modalResolve; modalResolve = null; r(v); } }
  let asking = false;
  async function askToken(msg) {
    if (asking) return; asking = true;
    $('token-input').value = '';
    const ok = await modal({ title: 'Access token needed', text: msg || 'This console needs its access token.', token: true, ok: 'Sign in', noCancel: true });
    asking = false;
    if (ok) { sessionStorage.setItem('dlq-token', $('token-input').value); boot(); }
  }

  // --- queues ---------------------------------------------------------------------------
  async function loadQueues() {
    const d = await api('api/queues');
    S.info = d; S.queues = d.queues;
    document.body.classList.toggle('ro', !!d.read_only);
    $('readonly-badge').hidden = !d.read_only;
    $('version').textContent = 'dlq ' + d.version;
    const ul = $('queue-list'); ul.replaceChildren();
    for (const qs of d.queues) {
      const li = el('li', { class: 'queue-item' + (qs.name === S.queue ? ' active' : ''), 'data-queue': qs.name, onclick: () => selectQueue(qs.name) },
        el('div', { class: 'q-main' }, el('div', { class: 'q-name', text: qs.name, title: qs.name }), el('div', { class: 'q-sub', text: qs.oldest_age_seconds === null ? 'no readable entries' : 'oldest ' + age(qs.oldest_age_seconds) })),
        el('div', { class: 'q-counts' }, el('span', { class: 'pill', text: fmt(qs.dead), title: 'dead letters' }), qs.corrupt ? el('span', { class: 'pill red', text: fmt(qs.corrupt), title: 'corrupt' }) : null));
      ul.appendChild(li);
    }
    $('queues-empty').hidden = d.queues.length > 0;
    const ob = $('overview').tBodies[0]; ob.replaceChildren();
    let total = 0;
    for (const qs of d.queues) {
      total += qs.dead;
      ob.appendChild(el('tr', { 'data-queue': qs.name, onclick: () => selectQueue(qs.name) },
        el('td', { class: 'q-name', text: qs.name, title: qs.name }), el('td', { class: 'num', text: fmt(qs.dead) }),
        el('td', { class: 'num' + (qs.corrupt ? ' bad-num' : ''), text: fmt(qs.corrupt) }),
        el('td', { class: 'num', text: qs.waiting === null ? 'n/a' : fmt(qs.waiting) }),
        el('td', { class: 'num', text: age(qs.oldest_age_seconds) })));
    }
    $('overview-empty').hidden = d.queues.length > 0;
    $('overview-total').textContent = fmt(total) + ' dead letters in ' + d.queues.length + ' queue' + (d.queues.length === 1 ? '' : 's');
    if (S.queue) showStats(d.queues.find((x) => x.name === S.queue));
  }
  function showStats(s) {
    if (!s) { $('stat-dead').textContent = '0'; $('stat-corrupt').textContent = '0'; $('stat-oldest').textContent = '–'; $('tab-corrupt-count').textContent = ''; return; }
    $('stat-dead').textContent = fmt(s.dead); $('stat-corrupt').textContent = fmt(s.corrupt);
    $('stat-waiting').textContent = s.waiting === null ? 'n/a' : fmt(s.waiting);
    $('stat-oldest').textContent = age(s.oldest_age_seconds);
    $('tab-corrupt-count').textContent = s.corrupt ? fmt(s.corrupt) : '';
  }
  function selectQueue(name) {
    S.queue = name; $('welcome').hidden = true; $('queue-view').hidden = false;
    $('queue-title').textContent = name;
    for (const li of document.querySelectorAll('.queue-item')) li.classList.toggle('active', li.getAttribute('data-queue') === name);
    showStats(S.queues.find((x) => x.name === name));
    setTab('dead');
    reloadEntries();
  }
  function setTab(t) {
    S.tab = t; $('tab-dead').classList.toggle('active', t === 'dead'); $('tab-corrupt').classList.toggle('active', t === 'corrupt');
    $('dead-pane').hidden = t !== 'dead'; $('corrupt-pane').hidden = t !== 'corrupt';
    if (t === 'corrupt') loadCorrupt();
  }

  // --- entries --------------------------------------------------------------------------
  function readFilter() {
    return { error: $('f-error').value.trim(), error_type: $('f-error-type').value.trim(), worker: $('f-worker').value.trim(),
             job_id: $('f-job-id').value.trim(), payload: $('f-payload').value, min_age: $('f-min-age').value.trim(), max_age: $('f-max-age').value.trim() };
  }
  const filterSet = (f) => Object.keys(f).some((k) => f[k]);
  async function reloadEntries() {
    S.rows = []; S.seen = new Set(); S.selected = new Set(); S.next = null; S.examined = 0;
    $('entries').tBodies[0].replaceChildren(); updateSelection();
    await loadPage();
  }
  async function loadPage() {
    const name = S.queue; if (!name) return;
    $('load-more').disabled = true;
    try {
      const d = await api('api/entries?' + q(Object.assign({ queue: name, limit: 50, cursor: S.next || '' }, S.filter)));
      if (name !== S.queue) return;
      S.examined += d.examined; S.next = d.next;
      const tb = $('entries').tBodies[0];
      for (const e of d.entries) { if (S.seen.has(e.id)) continue; S.seen.add(e.id); S.rows.push(e); tb.appendChild(row(e)); }
      $('entries-empty').hidden = S.rows.length > 0 || !!d.next;
      $('load-more').hidden = !d.next; $('load-more').disabled = false;
      $('load-more').textContent = d.filtered && d.entries.length === 0 ? 'Keep searching' : 'Load more';
      $('scan-info').textContent = 'Showing ' + fmt(S.rows.length) + (d.filtered ? ' matching' : '') + ' of ' + fmt(d.total) +
        (d.filtered ? ' · scanned ' + fmt(Math.min(d.position, d.total)) + ' of ' + fmt(d.total) : '');
    } catch (e) { if (e.message !== 'unauthorized') { if (e.code === 'unknown_queue') { S.queue = null; $('queue-view').hidden = true; $('welcome').hidden = false; loadQueues().catch(() => {}); } toast(e.message, true); } }
  }
  function row(e) {
    const cb = el('input', { type: 'checkbox', class: 'row-check', 'aria-label': 'select' });
    cb.addEventListener('click', (ev) => { ev.stopPropagation(); toggle(e.id, cb.checked, tr); });
    const err = e.ok ? el('td', { title: (e.error_type ? e.error_type + ': ' : '') + e.error }, e.error_type ? el('span', { class: 'err-type', text: e.error_type }) : null, el('span', { class: 'err-msg', text: e.error }))
                     : el('td', { title: e.problem }, el('span', { class: 'corrupt-tag', text: 'CORRUPT' }), el('span', { class: 'err-msg', text: e.problem }));
    const tr = el('tr', { 'data-id': e.id, onclick: () => openEntry(e.id) },
      el('td', { class: 'col-check' }, cb),
      el('td', { title: e.dead_lettered_at || '' , text: e.ok ? age(e.age_seconds) + ' ago' : '–' }),
      err,
      el('td', { text: e.worker || '', title: e.worker || '' }),
      el('td', { class: 'num', text: e.ok ? String(e.attempt) : '' }),
      el('td', { class: 'mono', text: e.job_id || '', title: e.job_id || '' }),
      el('td', { class: 'mono payload-preview', text: e.preview, title: e.preview }));
    return tr;
  }
  function toggle(id, on, tr) {
    if (on) S.selected.add(id); else S.selected.delete(id);
    if (tr) tr.classList.toggle('selected', on);
    updateSelection();
  }
  function updateSelection() {
    const n = S.selected.size;
    $('selection-info').textContent = n ? n + ' selected' : 'No selection';
    $('btn-replay-selected').disabled = n === 0; $('btn-delete-selected').disabled = n === 0;
    $('select-all').checked = n > 0 && n === S.rows.length;
    $('btn-replay-filter').textContent = filterSet(S.filter) ? 'Replay all matching…' : 'Replay all…';
    $('btn-delete-filter').hidden = !filterSet(S.filter);
  }

  // --- drawer ---------------------------------------------------------------------------
  async function openEntry(id) {
    try {
      const d = await api('api/entry?' + q({ queue: S.queue, id }));
      S.current = d;
      $('drawer-id').textContent = d.id;
      const dl = $('drawer-fields'); dl.replaceChildren();
      const add = (k, v) => { if (v === undefined || v === null || v === '') return; dl.appendChild(el('dt', { text: k })); dl.appendChild(el('dd', { text: String(v) })); };
      if (!d.ok) add('Problem', d.problem);
      add('Error', d.error); add('Error type', d.error_type); add('Worker', d.worker); add('Attempt', d.attempt);
      add('Job id', d.job_id); add('Source queue', d.queue); add('Dead-lettered', d.dead_lettered_at ? d.dead_lettered_at + '  (' + age(d.age_seconds) + ' ago)' : '');
      add('Times dead-lettered', d.dead_letter_count || ''); add('Parked', d.parked ? 'yes' : '');
      add('Payload size', fmt(d.size) + ' bytes' + (d.truncated ? ' (shown in part)' : ''));
      $('drawer-payload-kind').textContent = d.payload_kind || '';
      $('drawer-payload').textContent = d.payload_text || '';
      $('drawer-hex-wrap').hidden = !d.payload_hex; $('drawer-hex').textContent = d.payload_hex || '';
      $('drawer-context').textContent = d.context === null || d.context === undefined ? '(none)' : JSON.stringify(d.context, null, 2);
      $('drawer-stored').textContent = d.stored_text || '';
      $('drawer').hidden = false;
    } catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); }
  }

  // --- operations -----------------------------------------------------------------------
  async function replay(body, what, count) {
    const ok = await modal({ title: 'Replay ' + what, text: 'Replay ' + count + ' from “' + S.queue + '” back to their queue? Each batch moves atomically; nothing is lost if this is interrupted.', replay: true, ok: 'Replay' });
    if (!ok) return;
    const to = $('confirm-to').value.trim(); const rate = Number($('confirm-rate').value) || 0;
    if (to) body.to = to; if (rate > 0) body.rate = rate;
    try { const op = await api('api/replay', Object.assign({ queue: S.queue }, body)); watch(op); } catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); }
  }
  function watch(op) {
    S.op = op; $('op-panel').hidden = false; $('op-cancel').hidden = false; $('op-cancel').disabled = false; $('op-close').hidden = true;
    renderOp(op); clearInterval(S.opTimer);
    S.opTimer = setInterval(async () => {
      try { const o = await api('api/operation?' + q({ id: S.op.id })); renderOp(o); if (o.state !== 'running') { clearInterval(S.opTimer); finished(o); } } catch (e) { /* keep polling */ }
    }, 400);
  }
  function renderOp(o) {
    if (o.kind === 'delete') {
      $('op-title').textContent = (o.dry_run ? 'Counting: ' : 'Delete: ') + o.queue;
      $('op-state').textContent = o.state; $('op-state').className = 'badge ' + o.state;
      const dp = o.progress; const tot = Math.max(o.requested, dp.examined);
      $('op-progress').style.width = (o.state === 'done' ? 100 : tot ? Math.min(100, Math.round(100 * dp.examined / tot)) : 0) + '%';
      $('op-counts').textContent = 'deleted ' + fmt(dp.deleted) + ' · matched ' + fmt(dp.matched) + ' · examined ' + fmt(dp.examined) + ' of ' + fmt(tot) + (o.error ? ' · ' + o.error.message : '');
      return;
    }
    $('op-title').textContent = (o.dry_run ? 'Dry run: ' : 'Replay: ') + o.queue + (o.to ? ' → ' + o.to : '');
    $('op-state').textContent = o.state; $('op-state').className = 'badge ' + o.state;
    const p = o.progress; const total = o.mode === 'ids' ? o.requested : Math.max(o.requested, p.examined + p.remaining);
    const done = o.mode === 'ids' ? p.replayed + (o.report ? o.report.skipped_total : 0) : p.examined;
    const pct = o.state === 'done' ? 100 : total ? Math.min(100, Math.round(100 * done / total)) : 0;
    $('op-progress').style.width = pct + '%';
    $('op-counts').textContent = 'replayed ' + fmt(p.replayed) + ' · examined ' + fmt(p.examined) + ' of ' + fmt(total) +
      (p.set_aside ? ' · set aside ' + fmt(p.set_aside) : '') + (o.rate ? ' · ' + o.rate + '/s' : '') +
      (o.error ? ' · ' + o.error.message : '');
  }
  function finished(o) {
    $('op-cancel').hidden = true; $('op-close').hidden = false;
    const r = o.report;
    if (r && o.kind === 'delete') toast((o.state === 'cancelled' ? 'Cancelled: ' : 'Done: ') + fmt(r.deleted) + ' deleted');
    else if (r) toast((o.state === 'cancelled' ? 'Cancelled: ' : 'Done: ') + fmt(r.replayed) + ' replayed' + (r.skipped_total ? ', ' + fmt(r.skipped_total) + ' skipped' : ''));
    else if (o.error) toast(o.error.message, true);
    refresh();
  }

  // --- actions --------------------------------------------------------------------------
  async function deleteIds(ids) {
    const ok = await modal({ title: 'Delete ' + ids.length + ' dead letter' + (ids.length > 1 ? 's' : ''), text: 'Delete ' + ids.length + ' entr' + (ids.length > 1 ? 'ies' : 'y') + ' from “' + S.queue + '” for good? They are not replayed.', ok: 'Delete', danger: true });
    if (!ok) return;
    try { const d = await api('api/delete', { queue: S.queue, ids }); toast('Deleted ' + d.deleted + (d.missing.length ? ' (' + d.missing.length + ' already gone)' : '')); $('drawer').hidden = true; refresh(); } catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); }
  }
  async function purge(list) {
    const ok = await modal({ title: 'Purge ' + (list === 'corrupt' ? 'the corrupt list of ' : '') + '“' + S.queue + '”', text: 'This deletes every ' + (list === 'corrupt' ? 'corrupt item' : 'dead letter') + ' of this queue for good.', typeBack: true, ok: 'Purge', danger: true });
    if (!ok) return;
    try { const d = await api('api/purge', { queue: S.queue, confirm: $('confirm-name').value, list }); toast('Purged ' + fmt(d.deleted)); refresh(); } catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); }
  }
  async function replayFilter() {
    const f = S.filter;
    if (!filterSet(f)) { const s = S.queues.find((x) => x.name === S.queue); return replay({ all: true }, 'all', fmt(s ? s.dead : 0) + ' dead letters (all present now)'); }
    // dry run first: the confirmation says exactly how many match now
    try {
      let op = await api('api/replay', { queue: S.queue, filter: f, dry_run: true });
      $('confirm-ok').disabled = false;
      toast('Counting matching entries…');
      while (op.state === 'running') { await new Promise((r) => setTimeout(r, 300)); op = await api('api/operation?' + q({ id: op.id })); }
      if (!op.report) { toast(op.error ? op.error.message : 'dry run failed', true); return; }
      replay({ filter: f }, 'matching entries', fmt(op.report.replayed) + ' matching entr' + (op.report.replayed === 1 ? 'y' : 'ies'));
    } catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); }
  }
  async function opResult(op) {
    while (op.state === 'running') { await new Promise((r) => setTimeout(r, 300)); op = await api('api/operation?' + q({ id: op.id })); }
    return op;
  }
  async function deleteFilter() {
    const f = S.filter; if (!filterSet(f)) return;
    try {
      toast('Counting matching entries…');
      const dry = await opResult(await api('api/discard', { queue: S.queue, filter: f, dry_run: true }));
      if (!dry.report) { toast(dry.error ? dry.error.message : 'count failed', true); return; }
      const n = dry.report.matched;
      const ok = await modal({ title: 'Delete ' + fmt(n) + ' matching dead letter' + (n === 1 ? '' : 's'), text: 'Delete the ' + fmt(n) + ' entr' + (n === 1 ? 'y' : 'ies') + ' of “' + S.queue + '” that match the filter, for good? They are not replayed.', ok: 'Delete', danger: true });
      if (!ok) return;
      watch(await api('api/discard', { queue: S.queue, filter: f }));
    } catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); }
  }
  async function loadCorrupt() {
    try {
      const d = await api('api/corrupt?' + q({ queue: S.queue, limit: 100 }));
      const tb = $('corrupt').tBodies[0]; tb.replaceChildren();
      for (const it of d.items) tb.appendChild(el('tr', null, el('td', { class: 'mono', text: it.id }), el('td', { text: it.problem || '' }), el('td', { class: 'num', text: fmt(it.size) }), el('td', { class: 'mono', text: it.preview, title: it.preview })));
      $('corrupt-empty').hidden = d.items.length > 0;
    } catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); }
  }
  async function refresh() {
    try { await loadQueues(); if (S.queue && S.tab === 'dead') await reloadEntries(); if (S.queue && S.tab === 'corrupt') await loadCorrupt(); }
    catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); }
  }
  async function boot() {
    try { await loadQueues(); if (S.queue) reloadEntries(); } catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); }
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('refresh').addEventListener('click', refresh);
    $('home').addEventListener('click', () => { S.queue = null; $('queue-view').hidden = true; $('welcome').hidden = false; $('drawer').hidden = true; loadQueues().catch(() => {}); });
    $('tab-dead').addEventListener('click', () => setTab('dead'));
    $('tab-corrupt').addEventListener('click', () => setTab('corrupt'));
    $('filters').addEventListener('submit', (ev) => { ev.preventDefault(); S.filter = readFilter(); reloadEntries(); });
    $('clear-filter').addEventListener('click', () => { for (const i of $('filters').querySelectorAll('input')) i.value = ''; S.filter = {}; reloadEntries(); });
    $('load-more').addEventListener('click', loadPage);
    $('select-all').addEventListener('change', (ev) => {
      const on = ev.target.checked;
      for (const tr of $('entries').tBodies[0].rows) { tr.querySelector('.row-check').checked = on; toggle(tr.getAttribute('data-id'), on, tr); }
    });
    $('btn-replay-selected').addEventListener('click', () => { const ids = Array.from(S.selected); replay({ ids }, 'selection', ids.length + ' selected entr' + (ids.length > 1 ? 'ies' : 'y')); });
    $('btn-delete-selected').addEventListener('click', () => deleteIds(Array.from(S.selected)));
    $('btn-replay-filter').addEventListener('click', replayFilter);
    $('btn-delete-filter').addEventListener('click', deleteFilter);
    $('btn-purge').addEventListener('click', () => purge('dead'));
    $('btn-purge-corrupt').addEventListener('click', () => purge('corrupt'));
    $('btn-recover').addEventListener('click', async () => { try { const d = await api('api/recover', { queue: S.queue }); toast('Recovered ' + d.fixed + ' item(s)'); refresh(); } catch (e) { if (e.message !== 'unauthorized') toast(e.message, true); } });
    $('drawer-close').addEventListener('click', () => { $('drawer').hidden = true; });
    $('drawer-replay').addEventListener('click', () => { if (S.current) replay({ ids: [S.current.id] }, 'this entry', '1 entry'); });
    $('drawer-delete').addEventListener('click', () => { if (S.current) deleteIds([S.current.id]); });
    $('op-cancel').addEventListener('click', async () => { if (!S.op) return; $('op-cancel').disabled = true; try { await api('api/cancel', { id: S.op.id }); } catch (e) { toast(e.message, true); } });
    $('op-close').addEventListener('click', () => { $('op-panel').hidden = true; });
    $('confirm-ok').addEventListener('click', () => closeModal(true));
    $('confirm-cancel').addEventListener('click', () => closeModal(false));
    document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') { if (!$('modal').hidden && !$('confirm-cancel').hidden) closeModal(false); else $('drawer').hidden = true; } });
    setInterval(() => { if ($('auto-refresh').checked && $('modal').hidden && !asking) loadQueues().catch(() => {}); }, 5000);
    boot();
  });
})();
)DLQJS";
}

}  // namespace http
}  // namespace dlq
