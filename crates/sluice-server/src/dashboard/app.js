// sluice dashboard: plain JavaScript, no build step, no dependencies.
//
// A hash router (#/, #/queue/NAME[?state=…, with the acked tab's search], #/dlq/NAME,
// #/message/QUEUE/ID, #/webhooks, #/schedules, #/topics, #/alerts) renders pages from the HTTP API
// v1, same origin. A sampler polls GET /v1/queues every few seconds for the tables; the charts show
// the server's own samples (GET /v1/history: the last 15 minutes on open, then what is new at each
// poll), so a page opened now shows the past. Any 401 goes to /ui/login.
'use strict';

const POLL_MS = 3000;
const PAGE = 50;
/** Bytes of each message's body the lists show (`preview_bytes` of /browse). */
const PREVIEW_BYTES = 120;
/** The charts' span; the server's `window_ms` replaces it once known. */
let windowMs = 15 * 60 * 1000;

// ---------- DOM and API helpers ----------

/** Builds an element: h('td', {class: 'num', 'data-label': 'Ready'}, 'text', child, ...). */
function h(tag, attrs, ...children) {
  const svg = ['svg', 'polyline', 'line', 'text', 'g'].includes(tag);
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const enc = encodeURIComponent;

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Calls the API same-origin; on a 401 goes to the login page. */
async function api(method, path, body) {
  const options = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    options.headers['Content-Type'] = 'application/json';
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  if (response.status === 401) {
    location.href = '/ui/login';
    throw new ApiError(401, 'unauthorized', 'not signed in');
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(response.status, error.code || 'error', error.message || response.statusText);
  }
  return data;
}

let noticeTimer;
function notice(text, bad) {
  const el = document.getElementById('notice');
  el.textContent = text;
  el.className = bad ? 'notice bad' : 'notice';
  el.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { el.hidden = true; }, bad ? 8000 : 4000);
}

/** Runs an action from a button, disabling it meanwhile and reporting errors. */
async function act(button, work) {
  if (button) button.disabled = true;
  try {
    await work();
  } catch (error) {
    notice(error.message, true);
  } finally {
    if (button) button.disabled = false;
  }
}

// ---------- formatting ----------

function fmtNum(n) {
  if (n === null || n === undefined) return '–';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: n < 10 ? 2 : n < 100 ? 1 : 0 });
}

function fmtDuration(ms) {
  if (ms === null || ms === undefined) return '–';
  const sign = ms < 0 ? '-' : '';
  let s = Math.floor(Math.abs(ms) / 1000);
  if (s < 1) return sign + Math.abs(ms) + 'ms';
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hr = Math.floor(s / 3600); s -= hr * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  const parts = d ? [d + 'd', hr + 'h'] : hr ? [hr + 'h', m + 'm'] : m ? [m + 'm', s + 's'] : [s + 's'];
  return sign + parts.join(' ');
}

/** A time relative to now: "5s ago", or "in 29s" for a time still to come (a delayed
 *  message's visibility, a retry's backoff), never a negative age. */
function ago(iso) {
  if (!iso) return '–';
  const ms = Date.now() - Date.parse(iso);
  return ms < 0 ? 'in ' + fmtDuration(-ms) : fmtDuration(ms) + ' ago';
}

function until(iso) {
  if (!iso) return '–';
  const ms = Date.parse(iso) - Date.now();
  return ms <= 0 ? 'now' : 'in ' + fmtDuration(ms);
}

/** A time shown relative, with the exact time on hover. */
function timeEl(iso, relative) {
  if (!iso) return '–';
  return h('time', { datetime: iso, title: new Date(iso).toLocaleString() }, (relative || ago)(iso));
}

function shortId(id) {
  return id ? id.slice(0, 8) + '…' + id.slice(-4) : '';
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

// ---------- tables ----------

/** A table from columns [{label, cell(row) -> node|text, num}], or a message when empty. */
function table(columns, rows, empty, rowAttrs) {
  if (!rows.length) return h('div', { class: 'empty table-wrap' }, empty || 'Nothing here.');
  const body = h('tbody', {});
  for (const row of rows) appendRow(body, columns, row, rowAttrs);
  return h('div', { class: 'table-wrap' },
    h('table', {},
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.num ? 'num' : null }, c.label)))),
      body));
}

/** A table whose rows stay the same elements from one update to the next (matched by
 * keyOf(row)), their cells refilled: a button in a row is not replaced under the pointer by a
 * refresh. A cell may return the same node at each update (a row's button), which stays put. */
function liveTable(columns, keyOf, empty, rowAttrs) {
  const el = h('div', {});
  const rows = new Map(); // key -> tr
  let body = null;
  const update = (list) => {
    if (!list.length) {
      rows.clear();
      body = null;
      el.replaceChildren(h('div', { class: 'empty table-wrap' }, empty || 'Nothing here.'));
      return;
    }
    if (!body) {
      body = h('tbody', {});
      el.replaceChildren(h('div', { class: 'table-wrap' },
        h('table', {},
          h('thead', {}, h('tr', {}, columns.map((c) => h('th', { class: c.num ? 'num' : null }, c.label)))),
          body)));
    }
    const seen = new Set();
    const order = list.map((row) => {
      const key = keyOf(row);
      seen.add(key);
      let tr = rows.get(key);
      if (!tr) {
        tr = h('tr', rowAttrs ? rowAttrs(row) : {},
          columns.map((c) => h('td', { class: c.cls || (c.num ? 'num' : null), 'data-label': c.label })));
        rows.set(key, tr);
      }
      columns.forEach((c, i) => {
        const td = tr.children[i];
        const content = c.cell(row);
        const node = content instanceof Node ? content : null;
        if (node && td.childNodes.length === 1 && td.firstChild === node) return;
        td.replaceChildren(...[content].flat().filter((x) => x !== undefined && x !== null && x !== false));
      });
      return tr;
    });
    for (const key of Array.from(rows.keys())) if (!seen.has(key)) rows.delete(key);
    const now = Array.from(body.children);
    if (now.length !== order.length || now.some((tr, i) => tr !== order[i])) body.replaceChildren(...order);
  };
  return { el, update };
}

function appendRow(body, columns, row, rowAttrs) {
  const tr = h('tr', rowAttrs ? rowAttrs(row) : {},
    columns.map((c) => h('td', { class: c.cls || (c.num ? 'num' : null), 'data-label': c.label }, c.cell(row))));
  body.append(tr);
  return tr;
}

// ---------- sampler: the tables' numbers now, the charts' history from the server ----------

const sampler = {
  // The server's samples, oldest first: [{at, queues: {name: {depth, ready, delayed, in_flight,
  // dlq, in_s, ack_s, fail_s, push: {delivered_s, failed_s}}}, hooks: {name: {received_s,
  // accepted_s, failed_s}}}]. `at` is by the server's clock.
  ring: [],
  lastAt: null,      // `at_ms` of the newest sample held
  clockOffset: 0,    // this browser's clock minus the server's
  latest: null,      // the last GET /v1/queues answer
  listeners: new Set(),
  timer: null,
  failures: 0,
};

/** Adds the samples of a GET /v1/history answer (all of them, or those since the last). */
function addHistory(out) {
  sampler.clockOffset = Date.now() - out.now_ms;
  windowMs = out.window_ms;
  const byAt = new Map();
  const sampleAt = (at) => {
    let entry = byAt.get(at);
    if (!entry) byAt.set(at, (entry = { at, queues: {}, hooks: {} }));
    return entry;
  };
  for (const q of out.queues) {
    for (const p of q.points) {
      sampleAt(p.at_ms).queues[q.name] = {
        depth: p.ready + p.delayed + p.in_flight,
        ready: p.ready, delayed: p.delayed, in_flight: p.in_flight,
        dlq: p.dead_lettered,
        in_s: p.enqueued_per_s, ack_s: p.acked_per_s, fail_s: p.failed_per_s,
        push: p.push ? { delivered_s: p.push.delivered_per_s, failed_s: p.push.failed_per_s } : null,
      };
    }
  }
  for (const w of out.webhooks) {
    for (const p of w.points) {
      sampleAt(p.at_ms).hooks[w.name] = { received_s: p.received_per_s, accepted_s: p.accepted_per_s, failed_s: p.failed_per_s };
    }
  }
  const fresh = Array.from(byAt.values()).filter((e) => sampler.lastAt === null || e.at > sampler.lastAt);
  fresh.sort((a, b) => a.at - b.at);
  sampler.ring.push(...fresh);
  if (sampler.ring.length) sampler.lastAt = sampler.ring[sampler.ring.length - 1].at;
  const cutoff = out.now_ms - windowMs;
  while (sampler.ring.length && sampler.ring[0].at < cutoff) sampler.ring.shift();
  // Every series the server holds is in the answer (with no points when nothing is newer): a
  // name missing from it was deleted, and a queue created again under it starts afresh.
  const living = new Set(out.queues.map((q) => q.name));
  const hooks = new Set(out.webhooks.map((w) => w.name));
  for (const entry of sampler.ring) {
    for (const name of Object.keys(entry.queues)) if (!living.has(name)) delete entry.queues[name];
    for (const name of Object.keys(entry.hooks)) if (!hooks.has(name)) delete entry.hooks[name];
  }
}

async function sample() {
  try {
    const since = sampler.lastAt === null ? '' : '?since_ms=' + sampler.lastAt;
    const [list, history] = await Promise.all([api('GET', '/v1/queues'), api('GET', '/v1/history' + since)]);
    sampler.latest = list.queues;
    sampler.failures = 0;
    addHistory(history);
    fillSearchQueues(list.queues);
    for (const listener of sampler.listeners) listener(list.queues);
  } catch (error) {
    sampler.failures += 1;
    if (sampler.failures === 2) notice('Cannot reach the server: ' + error.message, true);
  }
}

function startSampler() {
  sample();
  sampler.timer = setInterval(sample, POLL_MS);
}

/** Calls fn with the queue list now (if known) and after every poll, until the page changes. */
function onSample(fn) {
  sampler.listeners.add(fn);
  if (sampler.latest) fn(sampler.latest);
}

/** The series of one value of one queue (or of the sum over queues) over the window, by this
 * browser's clock. */
function series(pick, name) {
  return sampler.ring.map((s) => {
    let v = 0;
    if (name !== undefined) {
      const q = s.queues[name];
      v = q ? pick(q) : null;
    } else {
      for (const q of Object.values(s.queues)) v += pick(q) || 0;
    }
    return [s.at + sampler.clockOffset, v];
  });
}

/** The series of one value of one webhook endpoint. */
function hookSeries(pick, name) {
  return sampler.ring.map((s) => [s.at + sampler.clockOffset, s.hooks[name] ? pick(s.hooks[name]) : null]);
}

/** "15 min", "1 h": the window as the charts' axis says it. */
function windowLabel() {
  const minutes = windowMs / 60000;
  if (minutes < 1) return Math.round(windowMs / 1000) + ' s';
  return minutes < 60 ? fmtNum(minutes) + ' min' : fmtNum(minutes / 60) + ' h';
}

// ---------- charts: inline SVG ----------

/** A line chart of [{label, points: [[t, v]]}] over the last 15 minutes. The SVG stretches to
 * its box; the labels are HTML beside it so they keep their shape. */
function lineChart(lines, unit) {
  const W = 600, H = 120, now = Date.now(), from = now - windowMs;
  let max = 0;
  for (const line of lines) for (const [, v] of line.points) if (v > max) max = v;
  max = max <= 0 ? 1 : niceCeil(max);
  const x = (t) => ((t - from) / windowMs) * W;
  const y = (v) => 4 + (1 - v / max) * (H - 8);
  const svg = h('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img' });
  const plot = h('div', { class: 'plot' }, svg);
  for (const frac of [0, 0.5, 1]) {
    svg.append(h('line', { class: 'grid-line', x1: 0, x2: W, y1: y(max * frac), y2: y(max * frac) }));
    const label = h('span', { class: 'y-label' }, fmtNum(max * frac) + (unit || ''));
    label.style.top = ((y(max * frac) / H) * 100).toFixed(1) + '%';
    plot.append(label);
  }
  lines.forEach((line, i) => {
    const pts = line.points.filter(([t, v]) => t >= from && v !== null).map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`);
    if (pts.length === 1) pts.unshift(pts[0].replace(/^[^,]+/, (s) => String(Number(s) - 3)));
    svg.append(h('polyline', { class: 's' + ((i % 6) + 1), points: pts.join(' ') }));
  });
  const legend = h('div', { class: 'legend' }, lines.map((line, i) => h('span', {}, h('i', { class: 's' + ((i % 6) + 1) }), line.label)));
  return h('div', { class: 'chart-box' }, plot, h('div', { class: 'x-labels' }, h('span', {}, '-' + windowLabel()), h('span', {}, 'now')), legend);
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

/** A sparkline of [[t, v]] over the window. */
function spark(points) {
  const W = 120, H = 24, now = Date.now(), from = now - windowMs;
  const vals = points.filter(([t, v]) => t >= from && v !== null);
  let max = 0;
  for (const [, v] of vals) if (v > max) max = v;
  max = max || 1;
  const pts = vals.map(([t, v]) => `${(((t - from) / windowMs) * W).toFixed(1)},${(H - 2 - (v / max) * (H - 4)).toFixed(1)}`);
  return h('svg', { class: 'spark', viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none' }, h('polyline', { points: pts.join(' ') }));
}

// ---------- router ----------

const app = () => document.getElementById('app');
let renderToken = 0;

function route() {
  sampler.listeners.clear();
  const token = ++renderToken;
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, query] = hash.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || '');
  const root = app();
  root.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  const nav = ['webhooks', 'schedules', 'topics', 'alerts'].includes(parts[0]) ? parts[0] : 'overview';
  document.querySelectorAll('nav a').forEach((a) => a.classList.toggle('active', a.dataset.nav === nav));
  let page;
  switch (parts[0]) {
    case undefined: page = overviewPage(root); break;
    case 'queue': page = queuePage(root, parts[1], params); break;
    case 'dlq': page = dlqPage(root, parts[1], params); break;
    case 'message': page = messagePage(root, parts[1], parts[2], params); break;
    case 'find': page = findPage(root, parts[1], params.get('m') || ''); break;
    case 'webhooks': page = webhooksPage(root); break;
    case 'schedules': page = schedulesPage(root); break;
    case 'topics': page = topicsPage(root); break;
    case 'alerts': page = alertsPage(root); break;
    default: root.replaceChildren(h('p', {}, 'No such page. ', h('a', { href: '#/' }, 'Queues')));
  }
  if (page) {
    page.catch((error) => {
      if (token !== renderToken) return;
      root.replaceChildren(h('div', { class: 'panel' }, h('b', {}, 'Error: '), error.message));
    });
  }
  return token;
}

const isCurrent = (token) => token === renderToken;

// ---------- page: overview ----------

/** Names of queues that are some queue's dead-letter queue, with their sources. */
function dlqSources(queues) {
  const sources = {};
  for (const q of queues) {
    const dlq = q.config.dead_letter_queue;
    if (dlq) (sources[dlq] = sources[dlq] || []).push(q.name);
  }
  return sources;
}

async function overviewPage(root) {
  const token = renderToken;
  const charts = h('div', { class: 'grid' });
  const list = h('div', {});
  root.replaceChildren(h('h1', {}, 'Queues'), charts, list);
  onSample((queues) => {
    if (!isCurrent(token)) return;
    const sources = dlqSources(queues);
    const main = queues.filter((q) => !sources[q.name]);
    const top = main.slice().sort((a, b) => depthOf(b) - depthOf(a)).slice(0, 6);
    charts.replaceChildren(
      h('div', { class: 'panel' }, h('b', {}, 'Depth'), h('span', { class: 'muted' }, ' ready + delayed + in flight'),
        lineChart(top.map((q) => ({ label: q.name, points: series((s) => s.depth, q.name) })))),
      h('div', { class: 'panel' }, h('b', {}, 'Throughput'), h('span', { class: 'muted' }, ' all queues, per second'),
        lineChart([
          { label: 'enqueued/s', points: series((s) => s.in_s) },
          { label: 'acked/s', points: series((s) => s.ack_s) },
          { label: 'failed/s', points: series((s) => s.fail_s) },
        ])));
    list.replaceChildren(stuckSummary(queues), queueTable(stuckFirst(queues), sources));
  });
}

/** What makes a queue stuck (the server decides: `stats.stuck`), as the overview says it. */
const STUCK_TEXT = {
  dead_letters: 'dead letters',
  paused: 'paused',
  depth: 'too deep',
  age: 'waiting too long',
};

const stuckOf = (q) => q.stats.stuck || [];

/** The queues, stuck ones first (most reasons first), each group in the server's name order. */
function stuckFirst(queues) {
  return queues.slice().sort((a, b) => stuckOf(b).length - stuckOf(a).length);
}

/** One line over the table: how many queues are stuck, or that none is. */
function stuckSummary(queues) {
  const stuck = queues.filter((q) => stuckOf(q).length);
  if (!queues.length) return h('span', {});
  return stuck.length
    ? h('p', { class: 'stuck-summary', 'data-stuck-count': String(stuck.length) },
      h('span', { class: 'badge bad' }, stuck.length === 1 ? '1 queue stuck' : stuck.length + ' queues stuck'),
      h('span', { class: 'muted' }, ' listed first: dead letters, paused, or over the depth or age threshold'))
    : h('p', { class: 'stuck-summary muted', 'data-stuck-count': '0' }, 'Nothing stuck.');
}

const depthOf = (q) => q.stats.ready + q.stats.delayed + q.stats.in_flight;

function queueTable(queues, sources) {
  return table([
    { label: 'Queue', cell: (q) => h('span', {},
      h('a', { href: '#/queue/' + enc(q.name), 'data-queue': q.name }, q.name),
      sources[q.name] ? h('span', { class: 'muted' }, ' DLQ of ' + sources[q.name].join(', ')) : null) },
    { label: 'Ready', num: true, cell: (q) => h('span', { 'data-field': 'ready' }, fmtNum(q.stats.ready)) },
    { label: 'Delayed', num: true, cell: (q) => h('span', { 'data-field': 'delayed' }, fmtNum(q.stats.delayed)) },
    { label: 'In flight', num: true, cell: (q) => h('span', { 'data-field': 'in_flight' }, fmtNum(q.stats.in_flight)) },
    { label: 'DLQ', num: true, cell: (q) => q.config.dead_letter_queue
      ? h('a', { href: '#/dlq/' + enc(q.name), 'data-field': 'dlq', class: q.stats.dead_lettered ? 'bad' : null },
        fmtNum(q.stats.dead_lettered || 0)) : '–' },
    { label: 'Oldest ready', num: true, cell: (q) => fmtDuration(q.stats.oldest_ready_age_ms) },
    { label: 'In/s', num: true, cell: (q) => fmtNum(q.stats.last_1m.enqueued_per_s) },
    { label: 'Acked/s', num: true, cell: (q) => fmtNum(q.stats.last_1m.acked_per_s) },
    { label: 'Failed/s', num: true, cell: (q) => fmtNum(q.stats.last_1m.failed_per_s) },
    { label: 'State', cell: (q) => stuckOf(q).length
      ? stuckOf(q).map((why) => h('span', { class: 'badge ' + (why === 'paused' ? 'paused' : 'bad'), 'data-stuck': why }, STUCK_TEXT[why] || why))
      : h('span', { class: 'badge ok' }, 'active') },
    { label: 'Depth, ' + windowLabel(), cell: (q) => spark(series((s) => s.depth, q.name)) },
  ], queues, 'No queues yet. Create one with PUT /v1/queues/{name} or `sluice queue create`.',
  (q) => ({ 'data-row': q.name, class: stuckOf(q).length ? 'stuck' : null }));
}

// ---------- page: queue ----------

const STATES = [
  ['ready', 'Ready'],
  ['waiting', 'Waiting in lane'],
  ['delayed', 'Delayed'],
  ['in_flight', 'In flight'],
  // Acked messages the queue keeps with their body (`keep_acked_ms`), searchable.
  ['acked', 'Acked'],
];

/** The search fields of the acked tab, as the hash and /browse both name them. */
const ACKED_SEARCH = ['message_id', 'id', 'key', 'since', 'until'];

async function queuePage(root, name, params) {
  const token = renderToken;
  const state = params.get('state') || 'ready';
  const base = '/v1/queues/' + enc(name);
  let queue = await api('GET', base);
  if (!isCurrent(token)) return;

  const header = h('div', {});
  const tabs = h('div', { class: 'tabs' });
  // The acked tab's note (kept for how long, or how to keep them) and search form.
  const above = h('div', {});
  const listing = h('div', {});
  root.replaceChildren(header, tabs, above, listing);
  // The acked tab's search, as in the hash: since and until as the datetime inputs give them.
  const search = {};
  for (const field of ACKED_SEARCH) search[field] = state === 'acked' ? (params.get(field) || '').trim() : '';
  const searching = ACKED_SEARCH.some((field) => search[field]);
  // The acked tab's note: how long the queue keeps acked messages, or how to keep them.
  const keepNote = h('p', { class: 'muted', 'data-field': 'keep-note' });
  let keepShown = null;
  function renderKeepNote() {
    const ms = queue.config.keep_acked_ms || 0;
    if (ms === keepShown) return;
    keepShown = ms;
    keepNote.className = ms > 0 ? 'muted' : 'panel keep-off';
    keepNote.replaceChildren(...(ms > 0
      ? [`Acked messages are kept for ${fmtEvery(ms)} after their ack, with their body, headers and result; newest ack first.`]
      : [`This queue does not keep acked messages: they are dropped at the ack. To keep them, set `,
        h('code', {}, 'keep_acked_ms'), ' in the queue definition (', h('code', {}, `PUT /v1/queues/${name}`), '), run ',
        h('code', {}, `sluice queue create ${name} --keep-acked 1h`), ', or set ', h('code', {}, `[queues.${name}] keep_acked_ms`),
        ' in the config file. Only messages acked after that are kept.']));
  }
  // How many messages are in each state: the header and the tabs both show these, and both are
  // drawn whenever a /browse answer brings new ones, so they never disagree.
  let counts = null;
  let countsAsked = 0; // /browse requests sent; an answer older than the one shown is dropped
  let countsShown = 0;

  // The tab links are made once and only their counts change, so a click never lands on a
  // link that a poll has just replaced.
  const tabLinks = STATES.map(([key]) => h('a', {
    href: `#/queue/${enc(name)}?state=${key}`, class: key === state ? 'active' : null, 'data-state': key,
  }));
  tabs.replaceChildren(...tabLinks);
  const renderTabs = () => {
    STATES.forEach(([key, label], i) => {
      // Kept acked messages are not among the counts.
      tabLinks[i].textContent = counts[key] === undefined ? label : `${label} (${fmtNum(counts[key])})`;
    });
  };

  const renderHeader = () => {
    const s = queue.stats;
    const c = queue.config;
    if (!counts) return;
    const pause = h('button', { 'data-action': s.paused ? 'resume' : 'pause', onclick: (e) => act(e.target, async () => {
      queue = await api('POST', base + (s.paused ? '/resume' : '/pause'));
      notice(s.paused ? 'Resumed ' + name : 'Paused ' + name);
      renderHeader();
    }) }, s.paused ? 'Resume' : 'Pause');
    const purge = h('button', { class: 'danger', 'data-action': 'purge', onclick: (e) => act(e.target, async () => {
      const count = counts.ready + counts.waiting + counts.delayed;
      if (!window.confirm(`Purge queue "${name}"? This removes all ${count.toLocaleString()} ready and delayed messages. In-flight messages stay with their consumers.`)) {
        notice('Purge cancelled');
        return;
      }
      const out = await api('POST', base + '/purge');
      notice(`Purged ${out.purged.toLocaleString()} messages (${out.in_flight} in flight kept)`);
      queue = await api('GET', base);
      await loadList(true);
    }) }, 'Purge…');
    header.replaceChildren(
      h('h1', {}, name, s.paused ? h('span', { class: 'badge paused' }, 'paused') : h('span', { class: 'badge ok' }, 'active'),
        pause, purge,
        c.dead_letter_queue ? h('a', { href: '#/dlq/' + enc(name) }, `Dead letters (${fmtNum(s.dead_lettered || 0)})`) : null),
      h('div', { class: 'panel stats' },
        stat(counts.ready, 'ready', 'ready'),
        c.ordering !== 'unordered' ? stat(counts.waiting, 'waiting in lane', 'waiting') : null,
        stat(counts.delayed, 'delayed', 'delayed'), stat(counts.in_flight, 'in flight', 'in_flight'),
        stat(fmtDuration(s.oldest_ready_age_ms), 'oldest ready'),
        stat(fmtNum(s.last_1m.enqueued_per_s) + ' / ' + fmtNum(s.last_1m.acked_per_s), 'in/s / acked/s (1m)'),
        stat(s.latency_ms ? fmtDuration(s.latency_ms.p95) : '–', 'p95 enqueue→ack'),
        stat(fmtNum(s.counters.deduplicated || 0), 'duplicates not stored'),
        stat(`${c.ordering}, ${c.max_attempts || '∞'} attempts, lease ${fmtDuration(c.visibility_timeout_ms)}${c.dedup === 'content' ? ', dedup by content' : ''}`, 'config'),
        stat(c.keep_acked_ms > 0 ? fmtEvery(c.keep_acked_ms) : 'off', 'keep acked', 'keep_acked')),
      h('div', { class: 'panel' }, lineChart([
        // History counts messages waiting in their lane as ready, as stats do.
        { label: c.ordering === 'unordered' ? 'ready' : 'ready + waiting', points: series((q) => q.ready, name) },
        { label: 'delayed', points: series((q) => q.delayed, name) },
        { label: 'in flight', points: series((q) => q.in_flight, name) },
      ])));
    if (state === 'acked') renderKeepNote();
  };
  /** Gets a /browse page; its counts, unless a newer answer's are shown already, go to the
   * header and the tabs at once. */
  const browsePage = async (url) => {
    const asked = ++countsAsked;
    const page = await api('GET', url);
    if (isCurrent(token) && asked > countsShown) {
      countsShown = asked;
      counts = page.counts;
      renderHeader();
      renderTabs();
    }
    return page;
  };
  onSample((queues) => {
    const fresh = queues.find((q) => q.name === name);
    if (fresh && isCurrent(token)) {
      queue = fresh;
      // The counts come from the same kind of answer as the tabs' (one message is enough).
      browsePage(`${base}/browse?state=${state}&limit=1`).catch((error) => notice(error.message, true));
    }
  });

  let cursor = null;
  let body = null;
  const columns = messageColumns(name, state);
  const rowAttrs = (m) => ({ 'data-id': m.message_id });
  const more = h('button', { 'data-action': 'more', onclick: (e) => act(e.target, () => loadList(false)) }, 'Load more');
  const refresh = h('button', { 'data-action': 'refresh', onclick: (e) => act(e.target, () => loadList(true)) }, 'Refresh');

  // The acked tab's search form.
  if (state === 'acked') {
    const input = (field, attrs) => h('input', { name: field, value: search[field], 'data-search': field, ...attrs });
    const inputs = {
      message_id: input('message_id', { type: 'search', placeholder: 'message id', class: 'mono', size: 20 }),
      id: input('id', { type: 'search', placeholder: 'idempotency key' }),
      key: input('key', { type: 'search', placeholder: 'key' }),
      since: input('since', { type: 'datetime-local' }),
      until: input('until', { type: 'datetime-local' }),
    };
    const form = h('form', { class: 'row', id: 'acked-search', onsubmit: (e) => {
      e.preventDefault();
      const q = new URLSearchParams({ state: 'acked' });
      for (const field of ACKED_SEARCH) {
        const value = inputs[field].value.trim();
        if (value) q.set(field, value);
      }
      // The same search again makes no hashchange: then the list is refreshed here.
      const before = location.hash;
      location.hash = `#/queue/${enc(name)}?${q}`;
      if (location.hash === before) act(e.submitter, () => loadList(true));
    } }, inputs.message_id, inputs.id, inputs.key,
    h('label', {}, 'acked since', inputs.since), h('label', {}, 'until', inputs.until),
    h('button', { type: 'submit' }, 'Search'),
    searching ? h('a', { href: `#/queue/${enc(name)}?state=acked`, 'data-action': 'clear' }, 'clear') : null);
    renderKeepNote();
    above.replaceChildren(keepNote, form);
  }

  /** The acked tab's search, as /browse takes it (times in RFC 3339, UTC). */
  const searchQuery = () => {
    let q = '';
    for (const field of ACKED_SEARCH) {
      const value = field === 'since' || field === 'until' ? toIso(search[field]) : search[field];
      if (value) q += `&${field}=${enc(value)}`;
    }
    return q;
  };

  async function loadList(reset) {
    if (reset) cursor = null;
    const url = `${base}/browse?state=${state}&limit=${PAGE}&preview_bytes=${PREVIEW_BYTES}` + searchQuery() + (cursor ? '&cursor=' + enc(cursor) : '');
    const page = await browsePage(url);
    if (!isCurrent(token)) return;
    if (reset || !body) {
      const empty = state !== 'acked' ? `No ${state.replace('_', ' ')} messages.`
        : searching ? 'No kept acked message matches.' : 'No acked messages kept.';
      const t = table(columns, page.messages, empty, rowAttrs);
      body = t.querySelector('tbody');
      listing.replaceChildren(t, h('div', { class: 'row' }, more, refresh,
        h('span', { class: 'muted' }, orderNote(state))));
    } else {
      for (const m of page.messages) appendRow(body, columns, m, rowAttrs);
    }
    cursor = page.next_cursor || null;
    more.hidden = !cursor;
  }
  try {
    await loadList(true);
  } catch (error) {
    // A search the server refuses (a message id that is not one, a bad time): said under the
    // form, which stays to correct it.
    if (!(searching && error.status === 422)) throw error;
    if (isCurrent(token)) listing.replaceChildren(h('div', { class: 'panel error', 'data-field': 'search-error' }, error.message));
  }
}

function stat(value, label, field) {
  return h('div', { class: 'stat' }, h('b', { 'data-field': field }, typeof value === 'number' ? fmtNum(value) : value), h('span', {}, label));
}

function orderNote(state) {
  return {
    ready: 'In delivery order: priority, then enqueue order.',
    waiting: 'Behind the message at the head of their lane (same key), oldest first.',
    delayed: 'By the time they become visible.',
    in_flight: 'By lease deadline: the first ones run out first.',
    acked: 'Newest ack first.',
  }[state];
}

/** A JSON value on one line, cut to `max` characters. */
function shortJson(value, max) {
  const text = JSON.stringify(value);
  return text.length > max ? text.slice(0, max - 1) + '…' : text;
}

function messageColumns(queue, state) {
  const link = (m) => h('a', { href: `#/message/${enc(queue)}/${m.message_id}`, class: 'mono', title: m.message_id }, shortId(m.message_id));
  // A text node: the body is shown as text, never as markup.
  const preview = { label: 'Body', cls: 'preview mono', cell: (m) => m.body_preview === undefined ? ''
    : h('span', { 'data-field': 'preview', title: m.body_preview }, m.body_preview) };
  if (state === 'acked') {
    return [
      { label: 'Message', cell: link },
      { label: 'Key', cell: (m) => m.key ? h('span', { 'data-field': 'key' }, m.key) : '' },
      { label: 'Idempotency key', cell: (m) => m.id ? h('span', { 'data-field': 'id' }, m.id) : '' },
      { label: 'Acked', cell: (m) => h('span', { 'data-field': 'acked_at' }, timeEl(m.acked_at)) },
      { label: 'Attempts', num: true, cell: (m) => m.attempts },
      { label: 'Result', cls: 'preview mono', cell: (m) => m.result === undefined ? ''
        : h('span', { 'data-field': 'result', title: shortJson(m.result, 1000) }, shortJson(m.result, 60)) },
      preview,
      { label: 'Kept until', cell: (m) => timeEl(m.kept_until, until) },
    ];
  }
  const cols = [
    { label: 'Message', cell: link },
    { label: 'Key', cell: (m) => m.key || '' },
    { label: 'Priority', num: true, cell: (m) => m.priority },
    { label: 'Attempts', num: true, cell: (m) => m.attempts },
    { label: 'Age', num: true, cell: (m) => fmtDuration(m.age_ms) },
    preview,
  ];
  if (state === 'delayed') cols.push({ label: 'Visible', cell: (m) => timeEl(m.visible_at, until) });
  if (state === 'in_flight') {
    cols.push({ label: 'Leased for', num: true, cell: (m) => fmtDuration(m.lease_age_ms) });
    cols.push({ label: 'Lease ends', cell: (m) => timeEl(m.lease_expires_at, until) });
  }
  cols.push({ label: 'First delivery', cell: (m) => timeEl(m.first_received_at) });
  cols.push({ label: 'Last error', cls: 'error', cell: (m) => m.last_error || '' });
  return cols;
}

// ---------- page: dead letters ----------

function toIso(local) {
  if (!local) return null;
  // A time the page cannot read (typed into the address) goes to the server as it is: its 422
  // says what is wrong, where a thrown RangeError would break the page.
  const at = new Date(local);
  return isNaN(at.getTime()) ? local : at.toISOString();
}

async function dlqPage(root, name, params) {
  const token = renderToken;
  const base = '/v1/queues/' + enc(name);
  const filters = { error: params.get('error') || '', since: params.get('since') || '', until: params.get('until') || '' };
  const query = () => {
    const q = new URLSearchParams();
    if (filters.error) q.set('error', filters.error);
    if (filters.since) q.set('since', toIso(filters.since));
    if (filters.until) q.set('until', toIso(filters.until));
    return q;
  };
  const replayFilter = () => {
    const body = {};
    if (filters.error) body.error = filters.error;
    if (filters.since) body.since = toIso(filters.since);
    if (filters.until) body.until = toIso(filters.until);
    return body;
  };

  const errorInput = h('input', { type: 'search', name: 'error', value: filters.error, placeholder: 'error contains…' });
  const sinceInput = h('input', { type: 'datetime-local', name: 'since', value: filters.since });
  const untilInput = h('input', { type: 'datetime-local', name: 'until', value: filters.until });
  const form = h('form', { class: 'row', onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    if (errorInput.value) q.set('error', errorInput.value);
    if (sinceInput.value) q.set('since', sinceInput.value);
    if (untilInput.value) q.set('until', untilInput.value);
    location.hash = `#/dlq/${enc(name)}` + (q.toString() ? '?' + q : '');
  } }, errorInput, h('label', {}, 'since', sinceInput), h('label', {}, 'until', untilInput),
  h('button', { type: 'submit' }, 'Filter'),
  (filters.error || filters.since || filters.until) ? h('a', { href: '#/dlq/' + enc(name) }, 'clear') : null);

  const confirmBox = h('div', {});
  const summary = h('span', { class: 'muted' });
  const replayAll = h('button', { 'data-action': 'replay-all', onclick: (e) => act(e.target, async () => {
    const dry = await api('POST', base + '/dlq/replay', { ...replayFilter(), dry_run: true });
    if (!isCurrent(token)) return;
    if (!dry.matched) {
      notice('No dead letters match.');
      return;
    }
    confirmBox.replaceChildren(h('div', { class: 'panel confirm row' },
      h('span', { 'data-field': 'matched' }, `${dry.matched.toLocaleString()} dead letters match${filtered() ? ' the filter' : ''}. Replay them into ${dry.target_queue || name}?`),
      h('button', { class: 'primary', 'data-action': 'confirm-replay-all', onclick: (ev) => act(ev.target, async () => {
        let total = 0;
        for (;;) {
          const out = await api('POST', base + '/dlq/replay', { ...replayFilter(), limit: 1000 });
          total += out.replayed;
          if (!out.more || !out.replayed) break;
        }
        confirmBox.replaceChildren();
        notice(`Replayed ${total.toLocaleString()} dead letters`);
        await load(true);
      }) }, `Replay ${dry.matched.toLocaleString()}`),
      h('button', { onclick: () => confirmBox.replaceChildren() }, 'Cancel')));
  }) }, 'Replay all matching…');
  const filtered = () => Boolean(filters.error || filters.since || filters.until);
  const purge = h('button', { class: 'danger', 'data-action': 'purge-dlq', onclick: (e) => act(e.target, async () => {
    if (!window.confirm(`Delete every dead letter of "${name}" (all of them, not only those the filter shows)?`)) return;
    const out = await api('DELETE', base + '/dlq');
    notice(`Deleted ${out.deleted.toLocaleString()} dead letters`);
    await load(true);
  }) }, 'Purge DLQ…');

  const listing = h('div', {});
  const more = h('button', { 'data-action': 'more', onclick: (e) => act(e.target, () => load(false)) }, 'Load more');
  root.replaceChildren(
    h('h1', {}, 'Dead letters of ', h('a', { href: '#/queue/' + enc(name) }, name)),
    h('div', { class: 'panel' }, form, h('div', { class: 'row' }, replayAll, purge, summary), confirmBox),
    listing, h('div', { class: 'row' }, more));

  let cursor = null;
  let body = null;
  const columns = [
    { label: 'Message', cell: (d) => h('a', { href: `#/message/${enc(name)}/${d.message_id}`, class: 'mono', title: d.message_id }, shortId(d.message_id)) },
    { label: 'Error', cls: 'error', cell: (d) => d.last_error || '' },
    { label: 'Attempts', num: true, cell: (d) => d.attempts },
    { label: 'First seen', cell: (d) => timeEl(d.first_seen_at) },
    { label: 'Dead-lettered', cell: (d) => timeEl(d.last_seen_at) },
    { label: 'Size', num: true, cell: (d) => d.body_bytes === undefined ? '' : fmtNum(d.body_bytes) + ' B' },
    { label: 'State', cell: (d) => h('span', { class: 'badge ' + d.state }, d.state) },
    { label: '', cell: (d) => h('span', { class: 'row' },
      h('button', { 'data-action': 'preview', onclick: (e) => act(e.target, () => togglePreview(e.target.closest('tr'), d)) }, 'Preview'),
      h('button', { 'data-action': 'replay', 'data-id': d.message_id, onclick: (e) => act(e.target, async () => {
        const out = await api('POST', `${base}/dlq/${d.message_id}/replay`, {});
        const created = out.results && out.results[0];
        notice(created ? `Replayed as ${created.message_id}` : 'Nothing replayed (it is being consumed, or gone)');
        e.target.closest('tr').remove();
      }) }, 'Replay'),
      h('button', { class: 'danger', 'data-action': 'delete', onclick: (e) => act(e.target, async () => {
        if (!window.confirm('Delete this dead letter for good?')) return;
        await api('DELETE', `${base}/dlq/${d.message_id}`);
        notice('Deleted ' + d.message_id);
        e.target.closest('tr').remove();
      }) }, 'Delete')) },
  ];

  async function togglePreview(tr, d) {
    const next = tr.nextElementSibling;
    if (next && next.classList.contains('detail')) {
      next.remove();
      return;
    }
    const full = await api('GET', `${base}/dlq/${d.message_id}`);
    tr.after(h('tr', { class: 'detail' }, h('td', { colspan: columns.length }, payloadView(full))));
  }

  async function load(reset) {
    if (reset) cursor = null;
    const q = query();
    q.set('limit', PAGE);
    if (cursor) q.set('cursor', cursor);
    const page = await api('GET', `${base}/dlq?${q}`);
    if (!isCurrent(token)) return;
    summary.textContent = `in ${page.dead_letter_queue}`;
    if (reset || !body) {
      const t = table(columns, page.entries, filtered() ? 'No dead letters match.' : 'The dead-letter queue is empty.',
        (d) => ({ 'data-id': d.message_id }));
      body = t.querySelector('tbody');
      listing.replaceChildren(t);
    } else {
      for (const d of page.entries) appendRow(body, columns, d, (x) => ({ 'data-id': x.message_id }));
    }
    cursor = page.next_cursor || null;
    more.hidden = !cursor;
  }
  await load(true);
}

/** Body and headers of a message, as readable JSON. */
function payloadView(p) {
  let body;
  if (p.body !== undefined) body = h('pre', { class: 'json', 'data-field': 'body' }, pretty(p.body));
  else if (p.body_base64 !== undefined) body = h('div', {}, h('span', { class: 'muted' }, 'bytes (base64)'), h('pre', { class: 'json' }, p.body_base64));
  else body = h('p', { class: 'muted' }, 'The body is no longer stored.');
  const headers = p.headers && Object.keys(p.headers).length
    ? h('pre', { class: 'json', 'data-field': 'headers' }, pretty(p.headers))
    : h('p', { class: 'muted' }, 'No headers.');
  return h('div', { class: 'grid' }, h('div', {}, h('b', {}, 'Body'), body), h('div', {}, h('b', {}, 'Headers'), headers));
}

// ---------- page: message ----------

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Finds a message by id or idempotency key, then shows its page. */
async function findPage(root, queue, text) {
  text = text.trim();
  const base = '/v1/queues/' + enc(queue) + '/messages';
  let status = null;
  if (UUID_RE.test(text)) {
    status = await api('GET', `${base}/${text}`).catch((e) => { if (e.status === 404) return null; throw e; });
  }
  if (!status) {
    status = await api('GET', `${base}?id=${enc(text)}`).catch((e) => { if (e.status === 404) return null; throw e; });
  }
  if (!status) {
    root.replaceChildren(h('div', { class: 'panel' }, `No message with id or idempotency key "${text}" in queue "${queue}".`));
    return;
  }
  location.replace(`#/message/${enc(queue)}/${status.message_id}`);
}

async function messagePage(root, queue, id) {
  const token = renderToken;
  const base = `/v1/queues/${enc(queue)}/messages/${enc(id)}`;
  const [status, payload, log] = await Promise.all([
    api('GET', base),
    api('GET', base + '/body').catch(() => null),
    api('GET', base + '/deliveries').catch(() => null),
  ]);
  if (!isCurrent(token)) return;
  const dead = status.dead_letter;
  const source = dead ? dead.source_queue : queue;
  const actions = h('span', { class: 'row' });
  if (status.state === 'dead') {
    actions.append(h('button', { 'data-action': 'replay', onclick: (e) => act(e.target, async () => {
      const out = await api('POST', `/v1/queues/${enc(source)}/dlq/${status.message_id}/replay`, {});
      const created = out.results && out.results[0];
      if (created) location.hash = `#/message/${enc(source)}/${created.message_id}`;
      else notice('Nothing replayed (it is being consumed, or gone)', true);
    }) }, 'Replay'), h('a', { href: '#/dlq/' + enc(source) }, 'Dead letters of ' + source));
  }
  if (status.kept_until) {
    actions.append(h('a', { href: `#/queue/${enc(status.queue)}?state=acked` }, 'Acked messages of ' + status.queue));
  }
  root.replaceChildren(
    h('h1', {}, 'Message ', h('span', { class: 'mono' }, status.message_id), h('span', { class: 'badge ' + status.state, 'data-field': 'state' }, status.state), actions),
    h('div', { class: 'grid' },
      h('div', { class: 'panel' }, h('dl', { class: 'kv' },
        kv('queue', h('a', { href: '#/queue/' + enc(status.queue) }, status.queue)),
        kv('idempotency key', status.id), kv('ordering key', status.key), kv('priority', status.priority),
        kv(dead ? 'attempts in ' + status.queue : 'attempts', status.attempts), kv('last error', status.last_error),
        status.result !== undefined ? kv('result', h('pre', { class: 'json', 'data-field': 'result' }, pretty(status.result))) : null,
        // An acked message its queue keeps (`keep_acked_ms`): body and result until then.
        kv('kept until', status.kept_until ? h('span', { 'data-field': 'kept_until' },
          h('time', { datetime: status.kept_until, title: status.kept_until }, new Date(status.kept_until).toLocaleString()),
          ' (' + until(status.kept_until) + ')') : null))),
      h('div', { class: 'panel' }, h('b', {}, 'Timeline'), timeline(status))),
    // replaceChildren writes a null out as the text "null": an empty text instead.
    log && log.deliveries.length ? deliveriesView(log.deliveries) : '',
    h('div', { class: 'panel' }, payload ? payloadView(payload) : h('p', { class: 'muted' }, 'The body could not be read.')));
}

/** The push delivery log: one row per attempt, newest first, each opening to its request and answer. */
function deliveriesView(deliveries) {
  const headerList = (headers) => Object.keys(headers).length
    ? h('pre', { class: 'json' }, Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\n'))
    : h('p', { class: 'muted' }, 'No headers.');
  const rows = deliveries.slice().reverse().map((d) => {
    const ok = d.status >= 200 && d.status < 300;
    const outcome = d.status !== undefined ? `HTTP ${d.status}` : 'no answer';
    return h('details', { class: 'delivery', 'data-attempt': d.attempt },
      h('summary', {},
        h('span', { class: 'mono' }, `#${d.attempt}`),
        h('span', { class: 'badge ' + (ok ? 'ok' : 'bad'), 'data-field': 'status' }, outcome),
        h('span', { 'data-field': 'latency' }, `${fmtNum(d.latency_ms)} ms`),
        h('time', { datetime: d.at, title: d.at }, new Date(d.at).toLocaleString() + ' · ' + ago(d.at)),
        d.error ? h('span', { class: 'error', 'data-field': 'error' }, d.error) : null),
      h('div', { class: 'grid' },
        h('div', {}, h('b', {}, 'Request'), h('p', { class: 'mono' }, `${d.method} ${d.url}`), headerList(d.request_headers)),
        h('div', {}, h('b', {}, 'Response'),
          headerList(d.response_headers),
          d.response_headers_truncated ? h('p', { class: 'muted' }, 'More headers were left out.') : null,
          d.body_excerpt !== undefined
            ? h('pre', { class: 'json', 'data-field': 'excerpt' }, d.body_excerpt + (d.body_truncated ? '\n…' : ''))
            : h('p', { class: 'muted' }, d.status !== undefined ? 'Empty body.' : 'No answer.'))));
  });
  return h('div', { class: 'panel deliveries', 'data-section': 'deliveries' },
    h('b', {}, `Push deliveries (last ${deliveries.length})`), rows);
}

function kv(key, value) {
  if (value === undefined || value === null || value === '') return null;
  return [h('dt', {}, key), h('dd', {}, value)];
}

/** What the record knows of a message's life, in time order. */
function timeline(s) {
  const events = [];
  const add = (at, text, cls) => { if (at) events.push({ at, text, cls }); };
  const dead = s.dead_letter;
  add(s.enqueued_at, `Enqueued into ${dead ? dead.source_queue : s.queue}`);
  // Every failed attempt the record kept (nacks, leases that ran out, the move to the DLQ),
  // each on its own line: the failure that dead-lettered it is an attempt too, unless it was no
  // delivery (retention moving it, which repeats the last attempt's number).
  const failures = s.failures || [];
  let lastAttempt = 0;
  let inDlq = false;
  let deadErrorShown = false;
  for (const f of failures) {
    const where = inDlq ? ` in ${s.queue}` : '';
    if (!f.dead_lettered || f.attempt > lastAttempt) {
      add(f.at, `Attempt ${f.attempt}${where} failed${f.error ? ': ' + f.error : ''}`, 'bad');
      if (f.dead_lettered) deadErrorShown = true;
    }
    lastAttempt = f.attempt;
    if (f.dead_lettered) { inDlq = true; lastAttempt = 0; }
  }
  if (dead) {
    add(dead.first_seen_at, `First delivered from ${dead.source_queue}`);
    add(dead.last_seen_at, `Dead-lettered into ${s.queue} after ${dead.attempts} attempt${dead.attempts === 1 ? '' : 's'}` +
      (dead.last_error && !deadErrorShown ? `: ${dead.last_error}` : ''), 'bad');
  } else if (s.first_received_at) {
    add(s.first_received_at, 'First delivered');
  }
  if (s.attempts && (!dead || s.first_received_at)) {
    add(s.first_received_at || s.enqueued_at, `${s.attempts} deliver${s.attempts === 1 ? 'y' : 'ies'}${dead ? ' from the dead-letter queue' : ''} so far` +
      (s.last_error && !dead && !failures.length ? `; last failed: ${s.last_error}` : ''), s.last_error && !dead && !failures.length ? 'bad' : null);
  }
  if (s.state === 'in_flight') add(s.lease_expires_at, 'In flight: lease ends ' + until(s.lease_expires_at));
  if (s.state === 'delayed') add(s.visible_at, 'Delayed: visible ' + until(s.visible_at));
  if (s.state === 'ready') add(s.visible_at, 'Ready: waiting for a consumer');
  if (s.acked_at) add(s.acked_at, s.attempts > 1 ? `Acked (attempt ${s.attempts})` : 'Acked', 'ok');
  else if (s.finished_at) {
    const extra = s.state === 'replayed' && s.replayed_as ? ' as ' : '';
    events.push({ at: s.finished_at, text: `${s.state[0].toUpperCase()}${s.state.slice(1)}${extra}`, link: s.replayed_as, cls: s.state === 'replayed' ? 'ok' : null });
  }
  events.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  const source = dead ? dead.source_queue : s.queue;
  return h('ol', { class: 'timeline' }, events.map((e) => h('li', { class: e.cls },
    h('time', { datetime: e.at, title: e.at }, new Date(e.at).toLocaleString() + ' · ' + ago(e.at)),
    e.text, e.link ? h('a', { href: `#/message/${enc(source)}/${e.link}`, class: 'mono' }, e.link) : null)));
}

// ---------- page: webhooks and push ----------

async function webhooksPage(root) {
  const token = renderToken;
  const hooks = h('div', {});
  const pushes = h('div', {});
  root.replaceChildren(h('h1', {}, 'Webhook endpoints'), hooks, h('h1', {}, 'Push destinations'), pushes);

  const renderHooks = async () => {
    const out = await api('GET', '/v1/webhooks');
    if (!isCurrent(token)) return;
    hooks.replaceChildren(table([
      { label: 'Endpoint', cell: (w) => h('span', {}, h('b', {}, w.name), h('div', { class: 'mono muted' }, w.path)) },
      { label: 'Queue', cell: (w) => h('a', { href: '#/queue/' + enc(w.spec.queue) }, w.spec.queue) },
      { label: 'Scheme', cell: (w) => w.spec.verify.scheme },
      { label: 'Received', num: true, cell: (w) => fmtNum(w.stats.received) },
      { label: 'Accepted', num: true, cell: (w) => fmtNum(w.stats.accepted) },
      { label: 'Duplicates', num: true, cell: (w) => fmtNum(w.stats.duplicates) },
      { label: 'Ignored', num: true, cell: (w) => fmtNum(w.stats.ignored) },
      { label: 'Dead-lettered', num: true, cell: (w) => fmtNum(w.stats.dead_lettered) },
      { label: 'Rejected', cell: (w) => Object.entries(w.stats.rejected || {}).map(([reason, n]) => h('div', { class: 'error' }, `${reason}: ${fmtNum(n)}`)) },
      { label: 'Received/s, ' + windowLabel(), cell: (w) => h('span', { 'data-field': 'received-history' }, spark(hookSeries((p) => p.received_s, w.name))) },
    ], out.webhooks, 'No webhook endpoints. Define one with PUT /v1/webhooks/{name}.'));
  };

  onSample((queues) => {
    if (!isCurrent(token)) return;
    const withPush = queues.filter((q) => q.config.push);
    pushes.replaceChildren(table([
      { label: 'Queue', cell: (q) => h('a', { href: '#/queue/' + enc(q.name) }, q.name) },
      { label: 'URL', cls: 'mono', cell: (q) => q.config.push.url },
      { label: 'Delivered', num: true, cell: (q) => fmtNum(q.stats.push && q.stats.push.delivered) },
      { label: 'Retried', num: true, cell: (q) => fmtNum(q.stats.push && q.stats.push.retried) },
      { label: 'Failed', num: true, cell: (q) => fmtNum(q.stats.push && q.stats.push.failed_permanently) },
      { label: 'In flight', num: true, cell: (q) => fmtNum(q.stats.push && q.stats.push.in_flight) },
      { label: 'Last status', cell: (q) => q.stats.push && q.stats.push.last_status
        ? h('span', { class: 'badge ' + (q.stats.push.last_status < 300 ? 'ok' : 'bad') }, q.stats.push.last_status) : '–' },
      { label: 'p50 / p95', num: true, cell: (q) => q.stats.push && q.stats.push.latency_ms
        ? `${fmtDuration(q.stats.push.latency_ms.p50)} / ${fmtDuration(q.stats.push.latency_ms.p95)}` : '–' },
      { label: 'Last error', cls: 'error', cell: (q) => (q.stats.push && q.stats.push.last_error) || '' },
      { label: 'Delivered / failed per s, ' + windowLabel(), cell: (q) => h('span', {},
        spark(series((s) => s.push && s.push.delivered_s, q.name)),
        spark(series((s) => s.push && s.push.failed_s, q.name))) },
    ], withPush, 'No queue has a push destination.'));
    renderHooks().catch((error) => notice(error.message, true));
  });
}

// ---------- page: schedules ----------

/** An interval without its zero parts: "30s", "1m", "1h 30m", "1d", "1.5s". */
function fmtEvery(ms) {
  if (ms < 1000) return ms + 'ms';
  if (ms < 60000) return fmtNum(ms / 1000) + 's';
  const parts = [];
  let rest = ms;
  for (const [unit, size] of [['d', 86400000], ['h', 3600000], ['m', 60000], ['s', 1000], ['ms', 1]]) {
    const n = Math.floor(rest / size);
    rest -= n * size;
    if (n) parts.push(n + unit);
  }
  return parts.join(' ');
}

/** When a schedule runs: its cron pattern and time zone, or its interval. */
function scheduleWhen(spec) {
  if (spec.cron) return h('span', { 'data-field': 'when' }, h('code', {}, spec.cron), ' (' + (spec.timezone || 'UTC') + ')');
  if (spec.every_ms) return h('span', { 'data-field': 'when' }, 'every ' + fmtEvery(spec.every_ms));
  return '–';
}

async function schedulesPage(root) {
  const token = renderToken;
  const buttons = new Map(); // name -> its Pause/Resume button, kept across refreshes
  const button = (s) => {
    let b = buttons.get(s.name);
    if (!b) {
      b = h('button', { onclick: (e) => act(e.currentTarget, async () => {
        const resume = b.dataset.action === 'resume';
        await api('POST', `/v1/schedules/${enc(s.name)}/${resume ? 'resume' : 'pause'}`);
        notice((resume ? 'Resumed ' : 'Paused ') + s.name);
        await render();
      }) });
      buttons.set(s.name, b);
    }
    b.dataset.action = s.paused ? 'resume' : 'pause';
    b.textContent = s.paused ? 'Resume' : 'Pause';
    return b;
  };
  const listing = liveTable([
    { label: 'Schedule', cell: (s) => h('b', { 'data-field': 'name' }, s.name) },
    { label: 'Queue', cell: (s) => h('a', { href: '#/queue/' + enc(s.spec.queue), 'data-field': 'queue' }, s.spec.queue) },
    { label: 'When', cell: (s) => scheduleWhen(s.spec) },
    { label: 'Next run', cell: (s) => h('span', { 'data-field': 'next' }, timeEl(s.next_run_at, until)) },
    // `last_run_at` is also the time of the definition (runs up to it are done): the time
    // shown is the last run's enqueue, and "never" before the first.
    { label: 'Last run', cell: (s) => h('span', { 'data-field': 'last' }, s.runs
      ? (s.last_message_id
        ? h('a', { href: `#/message/${enc(s.spec.queue)}/${enc(s.last_message_id)}` }, timeEl(s.last_enqueued_at || s.last_run_at))
        : timeEl(s.last_enqueued_at || s.last_run_at))
      : 'never') },
    { label: 'Runs', num: true, cell: (s) => h('span', { 'data-field': 'runs' }, fmtNum(s.runs)) },
    { label: 'Skipped runs', num: true, cell: (s) => h('span', { 'data-field': 'skipped' }, fmtNum(s.skipped_runs)) },
    // One element: on a narrow screen each cell is a label and a value side by side.
    { label: 'State', cell: (s) => h('span', {},
      s.paused ? h('span', { class: 'badge paused', 'data-field': 'state' }, 'paused')
        : s.last_error ? h('span', { class: 'badge bad', 'data-field': 'state' }, 'failing')
          : h('span', { class: 'badge ok', 'data-field': 'state' }, 'active'),
      s.last_error ? h('span', { class: 'last-error', 'data-field': 'error' }, s.last_error) : null) },
    { label: '', cell: button },
  ], (s) => s.name, 'No schedules. Define one with PUT /v1/schedules/{name} or `sluice schedule set`.',
  (s) => ({ 'data-row': s.name }));
  root.replaceChildren(h('h1', {}, 'Schedules'), listing.el);

  // A refresh asked before the one shown answers late: it is dropped.
  let asked = 0;
  let shown = 0;
  const render = async () => {
    const mine = ++asked;
    const out = await api('GET', '/v1/schedules');
    if (!isCurrent(token) || mine < shown) return;
    shown = mine;
    for (const name of Array.from(buttons.keys())) {
      if (!out.schedules.some((s) => s.name === name)) buttons.delete(name);
    }
    listing.update(out.schedules);
  };
  await render();
  // Refreshed at each poll, as the other pages are.
  if (isCurrent(token)) sampler.listeners.add(() => render().catch((error) => notice(error.message, true)));
}

// ---------- page: topics ----------

/** A topic's subscriptions, one a line: the queue (a link to its page) and its jq filter, or
 * "all messages" without one. One element, the same from one refresh to the next while the
 * subscriptions stay the same: a link is not replaced under the pointer. */
function topicSubscriptions(cache, t) {
  const subs = t.spec.subscriptions || [];
  const key = JSON.stringify(subs);
  const held = cache.get(t.name);
  if (held && held.key === key) return held.node;
  const node = subs.length
    ? h('ul', { class: 'subs', 'data-field': 'subscriptions' }, subs.map((s) => h('li', { 'data-subscription': s.queue },
      h('a', { href: '#/queue/' + enc(s.queue), 'data-field': 'queue' }, s.queue),
      s.filter !== undefined && s.filter !== null && s.filter !== ''
        ? h('code', { 'data-field': 'filter', title: 'jq filter' }, s.filter)
        : h('span', { class: 'muted', 'data-field': 'all' }, 'all messages'))))
    : h('span', { class: 'muted', 'data-field': 'subscriptions' }, 'no subscriptions');
  cache.set(t.name, { key, node });
  return node;
}

async function topicsPage(root) {
  const token = renderToken;
  const subscriptions = new Map(); // name -> {key, node}, kept across refreshes
  const count = (field) => (t) => h('span', { 'data-field': field }, fmtNum(t.stats[field]));
  const listing = liveTable([
    { label: 'Topic', cell: (t) => h('b', { 'data-field': 'name' }, t.name) },
    { label: 'Subscriptions', cell: (t) => topicSubscriptions(subscriptions, t) },
    { label: 'Published', num: true, cell: count('published') },
    { label: 'Copies', num: true, cell: count('copies') },
    { label: 'Filtered', num: true, cell: count('filtered') },
    { label: 'Duplicates', num: true, cell: count('duplicates') },
  ], (t) => t.name, 'No topics. Define one with PUT /v1/topics/{name} or `sluice topic set`.',
  (t) => ({ 'data-row': t.name }));
  root.replaceChildren(h('h1', {}, 'Topics'), listing.el);

  // A refresh asked before the one shown answers late: it is dropped.
  let asked = 0;
  let shown = 0;
  const render = async () => {
    const mine = ++asked;
    const out = await api('GET', '/v1/topics');
    if (!isCurrent(token) || mine < shown) return;
    shown = mine;
    for (const name of Array.from(subscriptions.keys())) {
      if (!out.topics.some((t) => t.name === name)) subscriptions.delete(name);
    }
    listing.update(out.topics);
  };
  await render();
  // Refreshed at each poll, as the other pages are.
  if (isCurrent(token)) sampler.listeners.add(() => render().catch((error) => notice(error.message, true)));
}

// ---------- page: alerts ----------

/** A node made again only when `value` changes, else the one made before: kept from one
 * refresh to the next, so a link in it is not replaced under the pointer. `cache` maps a row's
 * name to its nodes by column. */
function keptNode(cache, name, column, value, build) {
  const id = JSON.stringify(value === undefined ? null : value);
  let row = cache.get(name);
  if (!row) cache.set(name, (row = new Map()));
  const held = row.get(column);
  if (held && held.id === id) return held.node;
  const node = build(value);
  row.set(column, { id, node });
  return node;
}

/** The queues an alert watches: names (links to their pages) and prefixes ending in `*`, or
 * every queue. */
function alertWatches(patterns) {
  if (!patterns || !patterns.length || patterns.includes('*')) {
    return h('span', { 'data-field': 'watches' }, 'every queue');
  }
  return h('ul', { class: 'lines', 'data-field': 'watches' }, patterns.map((p) => h('li', { 'data-watch': p },
    p.endsWith('*') ? h('code', { title: 'every queue whose name starts with ' + p.slice(0, -1) }, p)
      : h('a', { href: '#/queue/' + enc(p) }, p))));
}

/** What an alert notifies of: dead letters, a depth over a number, an oldest ready message
 * older than a time. */
function alertOn(spec) {
  const on = [];
  if (spec.dead_letters !== false) on.push(h('li', { 'data-on': 'dead_letters' }, 'dead letters'));
  if (spec.depth_above !== undefined && spec.depth_above !== null) {
    on.push(h('li', { 'data-on': 'depth' }, 'depth > ' + fmtNum(spec.depth_above)));
  }
  if (spec.oldest_ready_age_above_ms !== undefined && spec.oldest_ready_age_above_ms !== null) {
    on.push(h('li', { 'data-on': 'oldest_ready_age' }, 'oldest ready > ' + fmtEvery(spec.oldest_ready_age_above_ms)));
  }
  return h('ul', { class: 'lines', 'data-field': 'on' }, on);
}

/** Where an alert's notifications go, without its secrets: a Slack URL is one as a whole
 * (shown as "Slack" only), a webhook shows its host, a command its program, and an alert with
 * none keeps its notifications in its queue for a consumer of its own. */
function alertDestination(d) {
  d = d || {};
  if (d.slack_url) return h('span', { 'data-field': 'destination', 'data-kind': 'slack' }, 'Slack');
  if (d.webhook_url) {
    let host = '';
    try { host = new URL(d.webhook_url).host; } catch (error) { host = ''; }
    return h('span', { 'data-field': 'destination', 'data-kind': 'webhook' }, 'webhook',
      host ? [' ', h('span', { class: 'mono', 'data-field': 'host' }, host)] : null);
  }
  if (d.command && d.command.length) {
    return h('span', { 'data-field': 'destination', 'data-kind': 'command' }, 'command ',
      h('code', { 'data-field': 'program' }, d.command[0]));
  }
  return h('span', { 'data-field': 'destination', 'data-kind': 'queue', title: 'No destination: notifications wait in the alert\'s queue for a consumer' },
    'its queue');
}

/** The notifications an alert made: for dead letters (and how many they counted), and for
 * thresholds (firing and resolved). */
function alertSent(a) {
  const sent = a.sent || {};
  const spec = a.spec;
  const thresholds = (sent.depth || 0) + (sent.oldest_ready_age || 0);
  const watchesThresholds = (spec.depth_above !== undefined && spec.depth_above !== null)
    || (spec.oldest_ready_age_above_ms !== undefined && spec.oldest_ready_age_above_ms !== null);
  const lines = [];
  if (spec.dead_letters !== false || sent.dead_letters) {
    lines.push(h('li', {},
      h('b', { 'data-field': 'dead_letters' }, fmtNum(sent.dead_letters || 0)),
      ` dead-letter notification${sent.dead_letters === 1 ? '' : 's'} `,
      h('span', { class: 'muted' }, '(',
        h('span', { 'data-field': 'dead_letters_counted' }, fmtNum(sent.dead_letters_counted || 0)),
        ` dead letter${sent.dead_letters_counted === 1 ? '' : 's'} counted)`)));
  }
  if (watchesThresholds || thresholds) {
    lines.push(h('li', { title: `depth: ${fmtNum(sent.depth || 0)}, oldest ready: ${fmtNum(sent.oldest_ready_age || 0)} (firing and resolved)` },
      h('b', { 'data-field': 'thresholds' }, fmtNum(thresholds)),
      ` threshold notification${thresholds === 1 ? '' : 's'}`));
  }
  return h('ul', { class: 'lines', 'data-field': 'sent' }, lines);
}

/** The queues over a threshold now, each a link to its page. */
function alertFiring(firing) {
  if (!firing || !firing.length) return h('span', { class: 'muted', 'data-field': 'firing' }, 'none');
  return h('span', { class: 'firing', 'data-field': 'firing' }, firing.map((q) =>
    h('a', { href: '#/queue/' + enc(q), class: 'badge bad', 'data-firing': q }, q)));
}

/** The delivery of an alert's notifications through its queue: one element per alert, made
 * once, whose numbers are refilled at each refresh (its links stay put under the pointer). */
function alertDelivery(cache, a) {
  let held = cache.get(a.name);
  if (!held || held.queue !== a.queue) {
    const waiting = h('span', { 'data-field': 'waiting' });
    const delivered = h('span', { 'data-field': 'delivered' });
    const deliveredLabel = h('span', {});
    const retried = h('li', {}, h('span', { 'data-field': 'retried' }), ' retried');
    const error = h('li', { class: 'last-error', 'data-field': 'error' });
    const dead = h('span', { 'data-field': 'dead_lettered' });
    const deadLink = h('a', { href: '#/dlq/' + enc(a.queue), 'data-field': 'dlq' }, dead, ' dead-lettered');
    const node = h('div', { 'data-field': 'delivery' },
      h('a', { href: '#/queue/' + enc(a.queue), class: 'mono', 'data-field': 'queue' }, a.queue),
      h('ul', { class: 'lines' },
        h('li', {}, waiting, ' waiting'),
        h('li', {}, delivered, deliveredLabel),
        retried,
        h('li', {}, deadLink),
        error));
    const update = (alert) => {
      const s = alert.delivery;
      const push = s && s.push;
      const pending = s ? s.ready + s.delayed + s.in_flight : null;
      waiting.textContent = fmtNum(pending);
      delivered.textContent = fmtNum(s ? (push ? push.delivered : s.counters.acked) : null);
      deliveredLabel.textContent = push ? ' delivered' : ' acked';
      deliveredLabel.parentNode.title = push ? 'delivered to the destination' : 'acked by a consumer of ' + alert.queue;
      retried.hidden = !(push && push.retried);
      retried.firstChild.textContent = fmtNum(push ? push.retried : 0);
      dead.textContent = fmtNum(s ? s.dead_lettered || 0 : null);
      deadLink.classList.toggle('bad', Boolean(s && s.dead_lettered));
      // A failure matters while notifications still wait: then it is why.
      const failing = push && push.last_error && pending ? push.last_error : '';
      error.textContent = failing ? 'failing: ' + failing : '';
      error.hidden = !failing;
    };
    held = { queue: a.queue, node, update };
    cache.set(a.name, held);
  }
  held.update(a);
  return held.node;
}

async function alertsPage(root) {
  const token = renderToken;
  const nodes = new Map(); // name -> column -> {id, node}, kept across refreshes
  const deliveries = new Map(); // name -> its delivery cell, kept across refreshes
  const kept = (column, pick, build) => (a) => keptNode(nodes, a.name, column, pick(a), build);
  const listing = liveTable([
    { label: 'Alert', cell: (a) => h('b', { 'data-field': 'name' }, a.name) },
    { label: 'Watches', cell: kept('watches', (a) => a.spec.queues, alertWatches) },
    { label: 'Alerts on', cell: kept('on', (a) => a.spec, alertOn) },
    { label: 'Window', cell: (a) => h('span', { 'data-field': 'window' }, fmtEvery(a.spec.window_ms || 300000)) },
    { label: 'Destination', cell: kept('destination', (a) => a.spec.destination, alertDestination) },
    { label: 'Sent', cell: alertSent },
    { label: 'Last sent', cell: (a) => h('span', { 'data-field': 'last_sent' }, a.last_sent_at ? timeEl(a.last_sent_at) : 'never') },
    { label: 'Firing', cell: kept('firing', (a) => a.firing || [], alertFiring) },
    { label: 'Delivery', cell: (a) => alertDelivery(deliveries, a) },
  ], (a) => a.name, h('span', {},
    'No alerts. Define one with ', h('code', {}, 'PUT /v1/alerts/{name}'), ', ', h('code', {}, '[alerts.<name>]'),
    ' in the config file, or ', h('code', {}, 'sluice alert set'), '. See docs/alerts.md for what an alert watches and where it sends.'),
  (a) => ({ 'data-row': a.name }));
  root.replaceChildren(h('h1', {}, 'Alerts'), listing.el);

  // A refresh asked before the one shown answers late: it is dropped.
  let asked = 0;
  let shown = 0;
  const render = async () => {
    const mine = ++asked;
    const out = await api('GET', '/v1/alerts');
    if (!isCurrent(token) || mine < shown) return;
    shown = mine;
    const names = new Set(out.alerts.map((a) => a.name));
    for (const cache of [nodes, deliveries]) {
      for (const name of Array.from(cache.keys())) if (!names.has(name)) cache.delete(name);
    }
    listing.update(out.alerts);
  };
  await render();
  // Refreshed at each poll, as the other pages are.
  if (isCurrent(token)) sampler.listeners.add(() => render().catch((error) => notice(error.message, true)));
}

// ---------- search and start ----------

function fillSearchQueues(queues) {
  const select = document.getElementById('search-queue');
  const names = queues.map((q) => q.name);
  const current = Array.from(select.options).map((o) => o.value);
  if (names.join('\n') === current.join('\n')) return;
  const chosen = current.length ? select.value : queueOfPage();
  select.replaceChildren(...names.map((n) => h('option', { value: n }, n)));
  if (names.includes(chosen)) select.value = chosen;
}

/** The queue the page being viewed is about, if any. */
function queueOfPage() {
  const m = location.hash.match(/^#\/(?:queue|dlq|message|find)\/([^/?]+)/);
  return m ? decodeURIComponent(m[1]) : null;
}

function startSearch() {
  document.getElementById('search').addEventListener('submit', (e) => {
    e.preventDefault();
    const queue = document.getElementById('search-queue').value;
    const text = document.getElementById('search-text').value.trim();
    if (!queue || !text) return;
    location.hash = `#/find/${enc(queue)}?m=${enc(text)}`;
  });
  // Preselect the queue of the page being viewed.
  window.addEventListener('hashchange', () => {
    const queue = queueOfPage();
    const select = document.getElementById('search-queue');
    if (queue && Array.from(select.options).some((o) => o.value === queue)) select.value = queue;
  });
}

window.addEventListener('hashchange', route);
startSearch();
startSampler();
route();
