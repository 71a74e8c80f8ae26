'use strict';
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
    // a viewer token may only look (the server refuses its changes with 403 anyway)
    const ro = !!d.read_only || (!!d.caller && d.caller.role === 'viewer');
    document.body.classList.toggle('ro', ro);
    // purge needs an admin (an operator's click would get 403): shown to admins only
    document.body.classList.toggle('not-admin', !!d.caller && d.caller.role !== 'admin');
    $('readonly-badge').hidden = !ro;
    $('version').textContent = 'dlq ' + d.version;
    const ul = $('queue-list'); ul.replaceChildren();
    for (const qs of d.queues) {
      const li = el('li', { class: 'queue-item' + (qs.name === S.queue ? ' active' : ''), 'data-queue': qs.name, onclick: () => selectQueue(qs.name) },
        el('div', { class: 'q-main' }, el('div', { class: 'q-name', text: qs.name, title: qs.name }), el('div', { class: 'q-sub', text: qs.oldest_age_seconds === null ? 'no readable entries' : 'oldest ' + age(qs.oldest_age_seconds) })),
        el('div', { class: 'q-counts' }, el('span', { class: 'pill', text: fmt(qs.dead), title: 'dead letters' }), qs.corrupt ? el('span', { class: 'pill red', text: fmt(qs.corrupt), title: 'corrupt' }) : null));
      ul.appendChild(li);
    }
    $('queues-empty').hidden = d.queues.length > 0;
  const omitted = d.omitted_queues || 0;  // past the listing's cap (max_listed_queues)
  $('queues-omitted').hidden = omitted === 0;
  $('queues-omitted').textContent = fmt(omitted) + ' more queue' + (omitted === 1 ? '' : 's') + ' not shown';
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
    $('overview-total').textContent = fmt(total) + ' dead letters in ' + d.queues.length + ' queue' + (d.queues.length === 1 ? '' : 's') + (omitted ? ' (' + fmt(omitted) + ' more not shown)' : '');
    if (S.queue) showStats(d.queues.find((x) => x.name === S.queue));
  }
  function showStats(s) {
    if (!s) { $('stat-dead').textContent = '0'; $('stat-corrupt').textContent = '0'; $('stat-oldest').textContent = '–'; $('tab-corrupt-count').textContent = ''; return; }
    $('stat-dead').textContent = fmt(s.dead); $('stat-corrupt').textContent = fmt(s.corrupt);
    $('stat-waiting').textContent = s.waiting === null ? 'n/a' : fmt(s.waiting);
    $('stat-oldest').textContent = age(s.oldest_age_seconds);
    $('tab-corrupt-count').textContent = s.corrupt ? fmt(s.corrupt) : '';
  }
  function clearFilter() { for (const i of $('filters').querySelectorAll('input')) i.value = ''; S.filter = {}; }
  function selectQueue(name) {
    if (name !== S.queue) clearFilter();  // a filter belongs to the queue it was set on
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
                     : el('td', { title: e.problem }, el('span', { class: 'corrupt-tag', text: 'UNREADABLE', title: 'This entry cannot be read. It stays in the dead-letter list until a replay meets it and sets it aside to the corrupt list (the card “Set aside (corrupt)”).' }), el('span', { class: 'err-msg', text: e.problem }));
    const tr = el('tr', { 'data-id': e.id, onclick: () => openEntry(e.id) },
      el('td', { class: 'col-check' }, cb),
      el('td', { class: 'row-age', title: e.dead_lettered_at || '', text: e.ok ? age(e.age_seconds) + ' ago' : '–',
                 'data-age': e.ok && e.age_seconds !== null ? String(e.age_seconds) : '', 'data-at': String(performance.now()) }),
      err,
      el('td', { text: e.worker || '', title: e.worker || '' }),
      el('td', { class: 'num', text: e.ok ? String(e.attempt) : '' }),
      el('td', { class: 'mono', text: e.job_id || '', title: e.job_id || '' }),
      el('td', { class: 'mono payload-preview', text: e.preview, title: e.preview }));
    return tr;
  }
  // Redraws the rows' ages from the age the server gave plus the time since (no request).
  function tickAges() {
    const now = performance.now();
    for (const td of document.querySelectorAll('#entries td.row-age[data-age]')) {
      const a = td.getAttribute('data-age'); if (a === '') continue;
      const t = age(Number(a) + (now - Number(td.getAttribute('data-at'))) / 1000) + ' ago';
      if (td.textContent !== t) td.textContent = t;
    }
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
      const add = (k, v) => {
        if (v === undefined || v === null || v === '') return;
        const text = String(v); const dd = el('dd', { text });
        dl.appendChild(el('dt', { text: k })); dl.appendChild(dd);
        if (text.length > 400 || text.split('\n').length > 6) collapse(dd, text);
      };
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

  // A long field shows its first lines and a button to show it all (and to collapse again).
  function collapse(dd, text) {
    dd.classList.add('clamped');
    const b = el('button', { type: 'button', class: 'btn btn-ghost expand', text: 'Show all (' + fmt(text.split('\n').length) + ' lines)' });
    b.addEventListener('click', () => { const on = dd.classList.toggle('clamped'); b.textContent = on ? 'Show all (' + fmt(text.split('\n').length) + ' lines)' : 'Collapse'; });
    dd.insertAdjacentElement('afterend', el('dd', { class: 'expand-row' }, b));
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
      const n = op.report.replayed, aside = op.report.set_aside;
      if (n === 0) { toast('Nothing matches the filter: nothing to replay'); return; }
      replay({ filter: f }, 'matching entries', fmt(n) + ' matching entr' + (n === 1 ? 'y' : 'ies') +
        (aside ? ' (and set ' + fmt(aside) + ' unreadable entr' + (aside === 1 ? 'y' : 'ies') + ' aside to the corrupt list)' : ''));
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
    $('clear-filter').addEventListener('click', () => { clearFilter(); reloadEntries(); });
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
    setInterval(tickAges, 1000);
    setInterval(() => { if ($('auto-refresh').checked && $('modal').hidden && !asking) loadQueues().catch(() => {}); }, 5000);
    boot();
  });
})();
