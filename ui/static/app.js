// The lockgate dashboard: reads the gateway's API with the viewer's token
// and shows what it is allowed to see. It only reads.
//
// The token: typed into a password field, kept in this tab's
// sessionStorage, sent only in the Authorization header of calls to this
// page's own origin (the Content-Security-Policy allows no other), never
// written into the page, a URL or the console.
//
// Everything the gateway returns is written with textContent, never as
// HTML: lock names, owners and subjects are other callers' data.
'use strict';

(() => {
  const TOKEN_KEY = 'lockgate.token';
  const LIST_EVERY_MS = 2000;
  const TICK_MS = 1000;
  // An event stream holds a connection, and a browser opens at most six
  // to one origin over HTTP/1.1: the rest are left for the listing and
  // the history.
  const MAX_STREAMS = 4;
  const MAX_PAGES = 10;

  const $ = (id) => document.getElementById(id);
  // The API's root, relative to this page (/ui/), so that a gateway
  // behind a path prefix works too.
  const root = new URL('..', document.baseURI);

  let token = '';
  let ns = '';
  let generation = 0; // moves on when the namespace or the token changes
  let listTimer = 0;
  const rows = new Map(); // lock name -> {tr, cells, deadline, stream}
  const gone = new Map(); // lock name -> when a stream saw it end
  let sem = null; // {name, holders: [{tr, cells, deadline}]}
  let sessionRows = []; // [{cells, deadline}]
  let listings = 0;
  // Sessions are read from the lock store (one read of the viewer's own
  // count), so less often than the listing.
  const SESSIONS_EVERY = 3;

  function api(path, opts = {}) {
    const headers = Object.assign({Authorization: 'Bearer ' + token}, opts.headers || {});
    return fetch(new URL(path, root), {
      headers,
      signal: opts.signal,
      cache: 'no-store',
      credentials: 'omit',
      redirect: 'error',
      referrerPolicy: 'no-referrer',
    });
  }

  const seg = encodeURIComponent;
  const lockPath = (name) => 'locks/' + seg(ns) + (name === undefined ? '' : '/' + seg(name));

  // problem words a failed answer: the problem's detail or title, which
  // the gateway never fills with a secret.
  async function problem(r) {
    try {
      const p = await r.json();
      return (p.title || 'error') + (p.detail ? ': ' + p.detail : '') + ' (' + r.status + ')';
    } catch {
      return 'the gateway answered ' + r.status;
    }
  }

  function text(el, s) {
    el.textContent = s;
    return el;
  }

  function el(tag, s, cls) {
    const e = document.createElement(tag);
    if (s !== undefined) e.textContent = s;
    if (cls) e.className = cls;
    return e;
  }

  function left(deadline) {
    const ms = deadline - performance.now();
    if (ms <= 0) return 'ending';
    const s = Math.ceil(ms / 1000);
    if (s < 120) return '≈ ' + s + ' s';
    const m = Math.floor(s / 60);
    return '≈ ' + m + ' min ' + (s % 60) + ' s';
  }

  // Token

  async function useToken(t) {
    token = t;
    let r;
    try {
      r = await api('ui/api/whoami');
    } catch (e) {
      token = '';
      text($('login-error'), 'the gateway did not answer: ' + e.message);
      return;
    }
    if (!r.ok) {
      token = '';
      sessionStorage.removeItem(TOKEN_KEY);
      text($('login-error'), await problem(r));
      return;
    }
    const who = await r.json();
    sessionStorage.setItem(TOKEN_KEY, t);
    text($('login-error'), '');
    showGrants(who, await namespaces());
    text($('who'), who.subject);
    $('who').hidden = false;
    $('forget').hidden = false;
    $('login').hidden = true;
    $('view').hidden = false;
    sessions();
    const exact = (who.namespaces || []).filter((g) => !g.includes('*'));
    if (exact.length === 1) pick(exact[0]);
  }

  // namespaces asks the gateway which namespaces the token may read: those
  // it grants by name, and those with held locks that a glob matches.
  async function namespaces() {
    try {
      const r = await api('ui/api/namespaces');
      if (r.ok) return (await r.json()).namespaces;
    } catch {
      // The grants by name are still offered.
    }
    return null;
  }

  function showGrants(who, named) {
    const grants = $('grants');
    const list = $('ns-list');
    grants.replaceChildren();
    list.replaceChildren();
    const globs = who.namespaces || [];
    if (globs.length === 0) grants.append(el('span', 'none', 'grant'));
    for (const g of globs) {
      if (g.includes('*')) grants.append(el('span', g, 'grant glob'));
    }
    const offered = named || globs.filter((g) => !g.includes('*'));
    for (const g of offered) {
      const b = el('button', g, 'grant');
      b.type = 'button';
      b.dataset.ns = g;
      b.addEventListener('click', () => pick(g));
      grants.append(b);
      const o = document.createElement('option');
      o.value = g;
      list.append(o);
    }
  }

  function forget() {
    sessionStorage.removeItem(TOKEN_KEY);
    token = '';
    stop();
    ns = '';
    $('view').hidden = true;
    $('who').hidden = true;
    $('forget').hidden = true;
    $('login').hidden = false;
    $('namespace').hidden = true;
    text($('error'), '');
    $('sessions').replaceChildren();
    sessionRows = [];
    text($('sessions-status'), '');
  }

  // Namespace

  function stop() {
    generation++;
    clearInterval(listTimer);
    listTimer = 0;
    for (const name of [...rows.keys()]) removeRow(name);
    gone.clear();
    hideSemaphore();
    $('history').hidden = true;
    $('contention').replaceChildren();
    text($('contention-status'), '');
    $('sem-list').replaceChildren();
    text($('sem-list-status'), '');
  }

  function pick(name) {
    name = name.trim();
    if (!name) return;
    stop();
    ns = name;
    $('ns').value = name;
    text($('ns-shown'), name);
    text($('locks-status'), 'loading');
    text($('error'), '');
    $('namespace').hidden = false;
    refresh();
    listTimer = setInterval(refresh, LIST_EVERY_MS);
  }

  async function refresh() {
    const gen = generation;
    const started = performance.now();
    const seen = new Map();
    try {
      let cursor = '';
      for (let page = 0; page < MAX_PAGES; page++) {
        const q = '?limit=100' + (cursor ? '&cursor=' + seg(cursor) : '');
        const r = await api(lockPath() + q);
        if (gen !== generation) return;
        if (!r.ok) {
          const why = await problem(r);
          if (gen !== generation) return;
          for (const name of [...rows.keys()]) removeRow(name);
          text($('error'), why);
          text($('locks-status'), 'not shown');
          return;
        }
        const body = await r.json();
        if (gen !== generation) return;
        for (const l of body.locks) seen.set(l.name, l);
        if (!body.next_cursor) break;
        cursor = body.next_cursor;
      }
    } catch (e) {
      if (gen === generation) text($('error'), 'the gateway did not answer: ' + e.message);
      return;
    }
    text($('error'), '');
    for (const [name, at] of gone) {
      if (at < started - 60000) gone.delete(name);
    }
    for (const name of [...rows.keys()]) {
      if (!seen.has(name)) removeRow(name);
    }
    for (const [name, info] of seen) {
      // A stream that saw the lock end after this listing began knows
      // better than the listing.
      if ((gone.get(name) || -1) > started) continue;
      showLock(name, info);
    }
    text($('locks-status'), rows.size === 0 ? 'no held lock' : rows.size === 1 ? '1 held lock' : rows.size + ' held locks');
    watchFirst();
    if (sem) showSemaphore(sem.name);
    contention(gen);
    if (listings++ % SESSIONS_EVERY === 0) sessions();
  }

  // Sessions

  // sessions shows the viewer's own live sessions: ids and leases.
  async function sessions() {
    const tok = token;
    let r;
    try {
      r = await api('ui/api/sessions');
    } catch (e) {
      text($('sessions-status'), 'the gateway did not answer: ' + e.message);
      return;
    }
    if (tok !== token) return;
    if (!r.ok) {
      text($('sessions-status'), await problem(r));
      return;
    }
    const body = await r.json();
    if (tok !== token) return;
    const tbody = $('sessions');
    tbody.replaceChildren();
    sessionRows = [];
    for (const ss of body.sessions) {
      const deadline = performance.now() + ss.ttl_ms;
      const tr = document.createElement('tr');
      tr.dataset.session = ss.id;
      const cells = {left: el('td', left(deadline), 'num left')};
      tr.append(el('td', ss.id, 'id'), cells.left, el('td', new Date(ss.expires_at).toLocaleString(), 'ends'));
      tbody.append(tr);
      sessionRows.push({cells, deadline});
    }
    const n = body.sessions.length;
    text($('sessions-status'), n === 0 ? 'no live session' : n === 1 ? '1 live session' : n + ' live sessions');
  }

  // Contention

  const SVG = 'http://www.w3.org/2000/svg';
  const MAX_SERIES = 12;
  const ROW_H = 36;
  const LABEL_W = 160;
  const STEP_W = 8;

  function svg(tag, attrs, s) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (s !== undefined) e.textContent = s;
    return e;
  }

  // contention draws what the gateway saw of the waits in the namespace
  // over the last minutes: per lock or semaphore, a bar per step as high
  // as the most callers waiting at once, and a line of the longest wait
  // that ended in it. The gateway counts them in memory: reading them
  // costs the backend nothing.
  async function contention(gen) {
    let c;
    try {
      const r = await api('ui/api/contention?namespace=' + seg(ns));
      if (gen !== generation) return;
      if (!r.ok) {
        text($('contention-status'), await problem(r));
        return;
      }
      c = await r.json();
    } catch (e) {
      if (gen === generation) text($('contention-status'), 'the gateway did not answer: ' + e.message);
      return;
    }
    if (gen !== generation) return;
    showServed(c.semaphores || []);
    const series = c.series.slice(0, MAX_SERIES);
    const steps = series.length ? series[0].points.length : 0;
    const width = LABEL_W + steps * STEP_W + 60;
    const pic = $('contention');
    pic.setAttribute('viewBox', '0 0 ' + width + ' ' + Math.max(ROW_H, series.length * ROW_H));
    pic.setAttribute('width', String(width));
    pic.setAttribute('height', String(Math.max(ROW_H, series.length * ROW_H)));
    pic.replaceChildren();
    let maxWaiters = 1;
    let maxWait = 1;
    for (const s of series) {
      for (const p of s.points) {
        maxWaiters = Math.max(maxWaiters, p.waiters);
        maxWait = Math.max(maxWait, p.wait_ms_max);
      }
    }
    series.forEach((s, i) => {
      const g = svg('g', {transform: 'translate(0,' + i * ROW_H + ')', 'data-lock': s.name, 'data-kind': s.kind,
        'data-waiting': s.waiting});
      const label = s.name + (s.kind === 'semaphore' ? ' (semaphore)' : '');
      g.append(svg('text', {x: 0, y: ROW_H / 2 + 4, class: 'label'}, label));
      g.append(svg('line', {x1: LABEL_W, x2: LABEL_W + steps * STEP_W, y1: ROW_H - 2, y2: ROW_H - 2, class: 'axis'}));
      const h = ROW_H - 8;
      let line = '';
      s.points.forEach((p, j) => {
        const x = LABEL_W + j * STEP_W;
        const bh = p.waiters === 0 ? 0 : Math.max(2, Math.round(h * p.waiters / maxWaiters));
        const bar = svg('rect', {x, y: ROW_H - 2 - bh, width: STEP_W - 1, height: bh, class: 'bar',
          'data-waiters': p.waiters, 'data-waits': p.waits, 'data-wait-max': p.wait_ms_max});
        bar.append(svg('title', {}, new Date(p.at).toLocaleTimeString() + ': ' + p.waiters + ' waiting at most, ' +
          p.waits + ' waits ended' + (p.waits ? ', longest ' + p.wait_ms_max + ' ms, mean ' + p.wait_ms_avg + ' ms' : '')));
        g.append(bar);
        if (p.waits > 0) {
          const y = ROW_H - 2 - Math.round(h * p.wait_ms_max / maxWait);
          line += (line ? ' L' : 'M') + (x + STEP_W / 2) + ' ' + y;
        }
      });
      if (line) g.append(svg('path', {d: line, class: 'wait'}));
      g.append(svg('text', {x: LABEL_W + steps * STEP_W + 6, y: ROW_H / 2 + 4, class: 'now'}, s.waiting + ' now'));
      pic.append(g);
    });
    text($('contention-status'), series.length === 0 ? 'no waits on this gateway in the last ' +
      Math.round(steps * c.step_ms / 60000 || 5) + ' minutes' :
      'bars: callers of this gateway waiting, at most, per ' + c.step_ms / 1000 + ' s (tallest ' + maxWaiters +
      '); line: the longest wait that ended (longest ' + maxWait + ' ms)');
  }

  // Locks

  function showLock(name, info) {
    let row = rows.get(name);
    if (!row) {
      const tr = document.createElement('tr');
      tr.dataset.lock = name;
      const cells = {};
      for (const k of ['name', 'subject', 'owner', 'value', 'left', 'fence', 'mode', 'waiters']) {
        cells[k] = el('td', '', k);
        tr.append(cells[k]);
      }
      cells.left.classList.add('num');
      cells.fence.classList.add('num');
      cells.waiters.classList.add('num');
      const b = el('button', 'History', 'history');
      b.type = 'button';
      b.addEventListener('click', () => showHistory(name));
      const td = el('td');
      td.append(b);
      tr.append(td);
      row = {tr, cells, deadline: 0, stream: null};
      rows.set(name, row);
      placeRow(name, tr);
    }
    gone.delete(name);
    const c = row.cells;
    text(c.name, name);
    text(c.subject, info.subject);
    text(c.owner, info.owner || '');
    text(c.value, info.value || '');
    text(c.fence, String(info.fencing_token));
    text(c.mode, info.mode + (info.holders_total > 1 ? ' (' + info.holders_total + ' holders)' : ''));
    text(c.waiters, String(info.waiters));
    row.deadline = performance.now() + info.ttl_ms;
    text(c.left, left(row.deadline));
  }

  // placeRow keeps the rows in name order, as the listing gives them.
  function placeRow(name, tr) {
    const body = $('locks');
    for (const other of body.children) {
      if (other.dataset.lock > name) {
        body.insertBefore(tr, other);
        return;
      }
    }
    body.append(tr);
  }

  function removeRow(name) {
    const row = rows.get(name);
    if (!row) return;
    if (row.stream) row.stream.abort();
    row.tr.remove();
    rows.delete(name);
  }

  function watchFirst() {
    let streams = 0;
    for (const row of rows.values()) if (row.stream) streams++;
    for (const [name, row] of rows) {
      if (streams >= MAX_STREAMS) return;
      if (row.stream || row.noStream) continue;
      streams++;
      watch(name, row);
    }
  }

  // watch follows a lock's event stream until the lock is no longer held
  // or its row goes; a cut stream resumes after the last event it had.
  async function watch(name, row) {
    const ctl = new AbortController();
    row.stream = ctl;
    const gen = generation;
    let last = null;
    while (!ctl.signal.aborted && gen === generation) {
      try {
        const headers = {Accept: 'text/event-stream'};
        if (last !== null) headers['Last-Event-ID'] = last;
        const r = await api(lockPath(name), {headers, signal: ctl.signal});
        if (!r.ok) {
          // A gateway without history (400), or too many watchers: the
          // listing keeps the row up to date.
          row.noStream = true;
          row.stream = null;
          return;
        }
        await readEvents(r.body, ctl.signal, (ev) => {
          if (ev.id !== null) last = ev.id;
          onEvent(name, ev);
        });
      } catch {
        if (ctl.signal.aborted) return;
      }
      await pause(1000, ctl.signal);
    }
  }

  function onEvent(name, ev) {
    if (!rows.has(name)) return;
    if (ev.event === 'state') {
      if (ev.data.held) showLock(name, ev.data.lock);
      else lockEnded(name);
      return;
    }
    // An event says what happened; the lock as it is now is one read away
    // (a shared lock stays held when one holder leaves).
    inspect(name);
  }

  async function inspect(name) {
    const gen = generation;
    try {
      const r = await api(lockPath(name));
      if (gen !== generation || !rows.has(name)) return;
      if (r.status === 404) {
        lockEnded(name);
        return;
      }
      if (r.ok) showLock(name, await r.json());
    } catch {
      // The next listing tells.
    }
  }

  function lockEnded(name) {
    gone.set(name, performance.now());
    removeRow(name);
    text($('locks-status'), rows.size === 0 ? 'no held lock' : rows.size === 1 ? '1 held lock' : rows.size + ' held locks');
  }

  // readEvents parses a server-sent event stream (the subset the gateway
  // writes: event, id, data lines; comments) and calls onEvent with each
  // event, its data decoded from JSON.
  async function readEvents(body, signal, onEvent) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    signal.addEventListener('abort', () => reader.cancel().catch(() => {}));
    let buf = '';
    let ev = {event: 'message', id: null, data: []};
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (ev.data.length > 0) {
            let data = null;
            try {
              data = JSON.parse(ev.data.join('\n'));
            } catch {
              data = null;
            }
            if (data !== null) onEvent({event: ev.event, id: ev.id, data});
          }
          ev = {event: 'message', id: ev.id, data: []};
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let v = colon < 0 ? '' : line.slice(colon + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (field === 'event') ev.event = v;
        else if (field === 'data') ev.data.push(v);
        else if (field === 'id') ev.id = v;
      }
    }
  }

  function pause(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  // History

  async function showHistory(name) {
    const gen = generation;
    text($('history-lock'), name);
    $('history-events').replaceChildren();
    text($('history-status'), 'loading');
    $('history').hidden = false;
    try {
      const r = await api(lockPath(name) + '/history');
      if (gen !== generation) return;
      if (!r.ok) {
        text($('history-status'), await problem(r));
        return;
      }
      const h = await r.json();
      if (gen !== generation) return;
      for (const e of h.events) {
        const tr = document.createElement('tr');
        tr.append(
          el('td', e.index === undefined ? '' : String(e.index), 'num'),
          el('td', e.event, 'event'),
          el('td', new Date(e.at).toLocaleString()),
          el('td', e.subject),
          el('td', e.owner || ''),
          el('td', String(e.fencing_token), 'num'),
        );
        $('history-events').append(tr);
      }
      text($('history-status'), h.limit === 0 ? 'this gateway keeps no history (--history 0)' :
        'the last ' + h.limit + ' events at most');
    } catch (e) {
      text($('history-status'), 'the gateway did not answer: ' + e.message);
    }
  }

  // Semaphores

  // showServed lists the semaphores this gateway served in the namespace,
  // each a button that shows its permits.
  function showServed(list) {
    const p = $('sem-list');
    p.replaceChildren();
    for (const s of list) {
      const b = el('button', s.name, 'sem');
      b.type = 'button';
      b.dataset.semaphore = s.name;
      b.title = 'last served ' + new Date(s.last_seen).toLocaleTimeString();
      b.addEventListener('click', () => showSemaphore(s.name));
      p.append(b);
    }
    text($('sem-list-status'), list.length === 0 ? 'none served by this gateway in the last five minutes' :
      list.length + ' served by this gateway in the last five minutes');
  }

  function hideSemaphore() {
    sem = null;
    $('sem').hidden = true;
    $('sem-holders').replaceChildren();
  }

  async function showSemaphore(name) {
    name = name.trim();
    if (!name) return;
    const gen = generation;
    let r;
    try {
      r = await api('semaphores/' + seg(ns) + '/' + seg(name));
    } catch (e) {
      text($('sem-summary'), 'the gateway did not answer: ' + e.message);
      return;
    }
    if (gen !== generation) return;
    sem = {name, holders: []};
    $('sem').hidden = false;
    const tbody = $('sem-holders');
    if (!r.ok) {
      tbody.replaceChildren();
      text($('sem-summary'), name + ': ' + (await problem(r)));
      return;
    }
    const s = await r.json();
    if (gen !== generation || !sem || sem.name !== name) return;
    text($('sem-summary'), name + ': ' + s.holders.length + ' of ' + s.limit + ' permits held, ' +
      s.waiters + ' waiting');
    tbody.replaceChildren();
    for (const h of s.holders) {
      const deadline = performance.now() + h.ttl_ms;
      const cells = {left: el('td', left(deadline), 'num left')};
      const tr = document.createElement('tr');
      tr.append(el('td', h.subject), el('td', h.owner || ''), cells.left, el('td', String(h.fencing_token), 'num'));
      tbody.append(tr);
      sem.holders.push({cells, deadline});
    }
  }

  function tick() {
    for (const row of rows.values()) text(row.cells.left, left(row.deadline));
    if (sem) for (const h of sem.holders) text(h.cells.left, left(h.deadline));
    for (const r of sessionRows) text(r.cells.left, left(r.deadline));
  }

  function onEnter(input, f) {
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') f();
    });
  }

  function start() {
    const submitToken = () => {
      const t = $('token').value.trim();
      // The field is emptied at once: the token lives in sessionStorage
      // only, never in the page.
      $('token').value = '';
      if (t) useToken(t);
    };
    $('use-token').addEventListener('click', submitToken);
    onEnter($('token'), submitToken);
    $('forget').addEventListener('click', forget);
    $('show').addEventListener('click', () => pick($('ns').value));
    onEnter($('ns'), () => pick($('ns').value));
    $('sem-show').addEventListener('click', () => showSemaphore($('sem-name').value));
    onEnter($('sem-name'), () => showSemaphore($('sem-name').value));
    $('history-close').addEventListener('click', () => {
      $('history').hidden = true;
    });
    setInterval(tick, TICK_MS);
    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (saved) useToken(saved);
  }

  start();
})();
