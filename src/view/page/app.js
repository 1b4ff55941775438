// rollstat view: the page. Every text that comes from a rollout, a prompt, a run or a
// field name is put on the page as a text node, never parsed as HTML. Links are built
// here from the page's own routes only. Each view has its own URL (after the #), so a
// link in a chat opens the same view, and back and forward work.
'use strict';

const main = document.getElementById('main');
let renderCount = 0;

// ---- small helpers -------------------------------------------------------------------

// An element with attributes and children; strings become text nodes.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'href') e.setAttribute('href', String(v).startsWith('#') ? v : '#/');
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const k of kids.flat(Infinity)) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function fmt(x, digits = 4) {
  if (x === null || x === undefined) return '–';
  if (typeof x !== 'number') return String(x);
  if (Number.isInteger(x)) return String(x);
  return Number(x.toPrecision(digits)).toString();
}

function kb(n) {
  return n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + ' MB' : Math.max(1, Math.round(n / 1024)) + ' KB';
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

function link(route, params, ...kids) {
  return el('a', { href: '#' + route + query(params || {}) }, ...kids);
}

async function api(path, params) {
  const r = await fetch('/api/' + path + query(params || {}), { credentials: 'same-origin' });
  let body;
  try {
    body = await r.json();
  } catch (e) {
    throw new Error('the server answered ' + r.status);
  }
  if (!r.ok) throw new Error(body && body.error ? body.error : 'the server answered ' + r.status);
  return body;
}

function route() {
  const h = location.hash.replace(/^#/, '') || '/';
  const q = h.indexOf('?');
  const path = q < 0 ? h : h.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : h.slice(q + 1));
  return { path, params };
}

function show(...nodes) {
  main.replaceChildren(...nodes.flat().filter(Boolean));
}

function errorBox(e) {
  return el('p', { class: 'error', role: 'alert' }, e.message || String(e));
}

// A block of text, folded past 2,000 characters with "show all (N KB)"; text the server
// cut (`cut[ptr]` is its whole size) is fetched piece by piece when unfolded.
function textBlock(s, ptr, rolloutId, cut) {
  const whole = cut && ptr in cut ? cut[ptr] : null;
  const pre = el('div', { class: 't' });
  const fold = 2000;
  const size = whole !== null ? whole : new Blob([s]).size;
  if (s.length <= fold && whole === null) {
    pre.textContent = s;
    return pre;
  }
  pre.textContent = s.slice(0, fold) + '…';
  const btn = el('button', { class: 'more', type: 'button' }, 'show all (' + kb(size) + ')');
  btn.addEventListener('click', async () => {
    if (whole === null || rolloutId === null) {
      pre.textContent = s;
      btn.remove();
      return;
    }
    btn.disabled = true;
    try {
      let text = '';
      let from = 0;
      for (;;) {
        const p = await api('rollout/' + rolloutId + '/text', { ptr, from });
        text += p.text;
        pre.textContent = text;
        if (p.to >= p.total || p.to <= from) break;
        from = p.to;
        btn.textContent = 'loading… ' + kb(p.to) + ' of ' + kb(p.total);
      }
      btn.remove();
    } catch (e) {
      btn.replaceWith(errorBox(e));
    }
  });
  return el('div', {}, pre, btn);
}

// A value as indented JSON (strings inside it the server cut stay cut; the raw view
// has the whole line).
function jsonBlock(v) {
  return textBlock(JSON.stringify(v, null, 2), null, null, null);
}

function valueCell(v, ptr, rolloutId, cut) {
  if (typeof v === 'string') return textBlock(v, ptr, rolloutId, cut);
  if (v !== null && typeof v === 'object') return jsonBlock(v);
  return el('span', { class: 'i' }, fmt(v, 6));
}

function ptrKey(k) {
  return String(k).replace(/~/g, '~0').replace(/\//g, '~1');
}

// ---- overview ------------------------------------------------------------------------

async function overview(n) {
  const o = await api('overview');
  if (n !== renderCount) return;
  const runs = o.runs;
  const head = el('tr', {},
    el('th', {}, 'run'), el('th', { class: 'num' }, 'mean reward'), el('th', {}, '95% interval'),
    el('th', { class: 'num' }, 'tasks'), el('th', { class: 'num' }, 'rollouts'),
    el('th', { class: 'num' }, 'never solved'), el('th', { class: 'num' }, 'sometimes'),
    el('th', { class: 'num' }, 'always solved'), el('th', {}, 'against the baseline'), el('th', {}, 'failures'),
    el('th', {}, 'health'));
  const rows = runs.map((r) => {
    const slice = (s) => el('td', { class: 'num' },
      link('/tasks', { run: r.name, slice: s }, String(r.slices[s])));
    const vs = r.vs_baseline;
    const vsCell = r.baseline ? el('td', { class: 'note' }, 'baseline') : el('td', {},
      vs ? [fmt(vs.diff), ' [', fmt(vs.ci_low), ', ', fmt(vs.ci_high), '] p=', fmt(vs.p, 3),
        ' · ', link('/tasks', { run: r.name, flip: 'fail-pass' }, vs.fail_pass + ' fail→pass'),
        ' · ', link('/tasks', { run: r.name, flip: 'pass-fail' }, vs.pass_fail + ' pass→fail')] : '–');
    const fails = Object.entries(r.failures);
    return el('tr', {},
      el('td', {}, link('/tasks', { run: r.name }, el('span', { class: 'i' }, r.name))),
      el('td', { class: 'num' }, fmt(r.mean)),
      el('td', {}, r.ci_low === null ? '–' : '[' + fmt(r.ci_low) + ', ' + fmt(r.ci_high) + ']'),
      el('td', { class: 'num' }, String(r.tasks)), el('td', { class: 'num' }, String(r.rollouts)),
      slice('never'), slice('sometimes'), slice('always'), vsCell,
      el('td', {}, fails.length ? fails.map(([c, k], i) => [i ? ', ' : '',
        link('/tasks', { run: r.name, failure: c }, el('span', { class: 'i' }, c)), ' ' + k]) : '–'),
      el('td', { class: 'health' }, healthCell(r)));
  });
  show(
    el('h1', {}, 'Overview'),
    el('p', { class: 'note' }, o.rollouts + ' rollouts over ' + o.tasks + ' tasks in ' + o.files.length +
      ' file(s). A rollout is solved when its reward is at least ' + o.solved_at +
      ' (1 for a pass/fail reward); a run solved a task when its mean reward there is at least ' + o.solved_at +
      '. Intervals are the task-level 95% t intervals of rollstat compare. Every count opens its tasks.'),
    el('table', { id: 'runs' }, el('thead', {}, head), el('tbody', {}, rows)),
    o.notes.length ? [el('h2', {}, 'Notes'), el('ul', { class: 'notes' }, o.notes.map((t) => el('li', {}, t)))] : null,
    o.lake === null ? null : lakeSection(o.lake),
    el('h2', {}, 'Files'),
    el('ul', {}, o.files.map((f) => el('li', {}, el('span', { class: 'i' }, f.path), ' — ' + f.lines + ' lines, ' + kb(f.bytes)))),
  );
}

// The lake's sweeps: the served ones are the runs above; another opens with its command.
function lakeSection(lake) {
  return [
    el('h2', {}, 'Sweeps in the lake'),
    el('p', { class: 'note' }, 'Lake ', el('span', { class: 'i' }, lake.dir),
      '. A sweep not served here opens with rollstat view --lake DIR --sweep ID (repeat --sweep to compare sweeps).'),
    el('table', { id: 'sweeps' },
      el('tr', {}, el('th', {}, 'sweep'), el('th', {}, 'added'), el('th', {}, 'labels'), el('th', { class: 'num' }, 'rollouts'),
        el('th', { class: 'num' }, 'tasks'), el('th', { class: 'num' }, 'agents'), el('th', {}, '')),
      lake.sweeps.map((s) => el('tr', {},
        el('td', {}, el('span', { class: 'i' }, s.sweep)), el('td', {}, s.created_at),
        el('td', {}, Object.entries(s.labels).map(([k, v], i) => [i ? ', ' : '', el('span', { class: 'i' }, k + '=' + v)])),
        el('td', { class: 'num' }, String(s.rollouts)), el('td', { class: 'num' }, String(s.tasks)),
        el('td', { class: 'num' }, String(s.agents)),
        el('td', {}, s.served ? link('/tasks', { run: s.sweep }, 'served') : el('span', { class: 'note' }, '–'))))),
  ];
}

// A run's health verdicts, then each check that flagged rollouts, linked to its tasks.
function healthCell(r) {
  const h = r.health;
  if (h === null) return el('span', { class: 'note' }, 'not checked');
  const flagged = Object.entries(h.checks).filter(([, c]) => c.rollouts > 0);
  return [
    el('div', {}, h.healthy + ' healthy · ', el('span', { class: h.unhealthy ? 'fail' : '' }, h.unhealthy + ' unhealthy'),
      ' · ' + h.unobserved + ' unobserved'),
    flagged.length ? el('ul', { class: 'checks' }, flagged.map(([id, c]) => el('li', {},
      link('/tasks', { run: r.name, check: id }, el('span', { class: 'i' }, id)),
      ' ' + c.rollouts + ' rollouts in ' + c.tasks + ' tasks'))) : null,
  ];
}

// ---- tasks ---------------------------------------------------------------------------

const FILTERS = ['run', 'slice', 'min', 'max', 'flip', 'failure', 'check', 'q', 'sql', 'sort', 'order', 'page'];

async function taskList(n, params) {
  const p = {};
  for (const k of FILTERS) if (params.get(k)) p[k] = params.get(k);
  const o = await api('overview');
  if (n !== renderCount) return;
  let res = null;
  let err = null;
  try {
    res = await api('tasks', p);
  } catch (e) {
    err = e;
  }
  if (n !== renderCount) return;
  const runNames = o.runs.map((r) => r.name);
  const input = (name, attrs) => el('input', Object.assign({ name, value: p[name] || '' }, attrs));
  const select = (name, options) => {
    const s = el('select', { name }, options.map(([v, label]) => el('option', { value: v }, label)));
    s.value = p[name] || '';
    return s;
  };
  const form = el('form', { class: 'filters', id: 'filters' },
    el('label', {}, 'run', select('run', [['', '(baseline)'], ...runNames.map((r) => [r, r])])),
    el('label', {}, 'solved', select('slice', [['', 'any'], ['never', 'never'], ['sometimes', 'sometimes'], ['always', 'always']])),
    el('label', {}, 'mean ≥', input('min', { size: 5 })),
    el('label', {}, 'mean ≤', input('max', { size: 5 })),
    el('label', {}, 'against the baseline', select('flip', [['', 'any'], ['fail-pass', 'fail → pass'], ['pass-fail', 'pass → fail']])),
    el('label', {}, 'failure class', input('failure', { size: 12 })),
    o.runs[0].health === null ? null : el('label', {}, 'flagged by health check',
      select('check', [['', 'any'], ...Object.keys(o.runs[0].health.checks).map((c) => [c, c])])),
    el('label', {}, 'prompt contains', input('q', { class: 'wide', placeholder: 'text (any case)' })),
    el('label', {}, 'SQL WHERE over the tasks table', input('sql', { class: 'wide', placeholder: '"mean/reward" < 0.5 AND num_rollouts >= 4' })),
    el('label', {}, 'sort', select('sort', [['', 'task'], ['mean', 'mean reward'], ['solved', 'solved'], ['rollouts', 'rollouts']])),
    el('label', {}, 'order', select('order', [['', 'ascending'], ['desc', 'descending']])),
    el('button', { type: 'submit' }, 'Apply'),
    el('a', { href: '#/tasks' }, 'clear'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const next = {};
    for (const [k, v] of new FormData(form).entries()) if (v !== '') next[k] = v;
    location.hash = '#/tasks' + query(next);
  });
  if (err) {
    show(el('h1', {}, 'Tasks'), form, errorBox(err));
    return;
  }
  const page = res.page;
  const pages = Math.max(1, Math.ceil(res.total / res.size));
  const sortLink = (key, label) => {
    const desc = p.sort === key && p.order !== 'desc' ? 'desc' : '';
    return el('button', { class: 'sort', type: 'button', onclick: () => {
      location.hash = '#/tasks' + query(Object.assign({}, p, { sort: key, order: desc, page: '' }));
    } }, label);
  };
  const head = el('tr', {}, el('th', {}, sortLink('task', 'task')), el('th', {}, 'prompt'),
    res.runs.map((r) => el('th', { class: 'num' }, el('span', { class: 'i' }, r), ' mean · solved')));
  const body = res.rows.map((t) => el('tr', {},
    el('td', {}, link('/task/' + t.task, {}, String(t.task))),
    el('td', { class: 'prompt-cell' }, t.prompt),
    t.runs.map((s) => el('td', { class: 'num' }, s.n ? [fmt(s.mean, 3), ' · ',
      el('span', { class: s.k === s.n ? 'pass' : s.k === 0 ? 'fail' : '' }, s.k + '/' + s.n)] : '–'))));
  const go = (k) => location.hash = '#/tasks' + query(Object.assign({}, p, { page: k || '' }));
  const pager = el('div', { class: 'pager' },
    el('button', { type: 'button', disabled: page <= 0, onclick: () => go(page - 1) }, '‹ previous'),
    'page ' + (page + 1) + ' of ' + pages,
    el('button', { type: 'button', disabled: page + 1 >= pages, onclick: () => go(page + 1) }, 'next ›'));
  show(el('h1', {}, 'Tasks'), form,
    el('p', { id: 'matches' }, res.total + ' tasks match', ' (filters look at run ', el('span', { class: 'i' }, res.run),
      '; sort by ', sortLink('mean', 'mean'), ' or ', sortLink('solved', 'solved'), ')'),
    el('table', { id: 'tasks' }, el('thead', {}, head), el('tbody', {}, body)), pager);
}

// ---- one task ------------------------------------------------------------------------

async function taskPage(n, id, params) {
  const t = await api('task/' + encodeURIComponent(id));
  if (n !== renderCount) return;
  const a = params.get('a');
  const b = params.get('b');
  const standing = el('table', {}, el('tr', {}, el('th', {}, 'run'), el('th', { class: 'num' }, 'mean'), el('th', { class: 'num' }, 'solved')),
    t.runs.map((r, i) => el('tr', {}, el('td', {}, el('span', { class: 'i' }, r), r === t.baseline ? ' (baseline)' : ''),
      el('td', { class: 'num' }, fmt(t.standing[i].mean)), el('td', { class: 'num' }, t.standing[i].k + '/' + t.standing[i].n))));
  const prompt = t.prompt.map((m, i) => {
    const body = textBlock(m.text, '/prompt/' + i, t.rollouts[0].id, t.cut);
    if (m.role === 'user') return el('div', { class: 'item message' }, el('div', { class: 'kind' }, 'user'), body);
    return el('details', { class: 'item' }, el('summary', {}, el('span', { class: 'i' }, m.role), ' message'), body);
  });
  const fields = Object.entries(t.fields);
  const pick = (role, rid) => link('/task/' + t.task, Object.assign({ a, b }, { [role]: rid }), role.toUpperCase());
  const rollouts = el('table', { id: 'rollouts' },
    el('tr', {}, el('th', {}, 'run'), el('th', { class: 'num' }, 'repeat'), el('th', { class: 'num' }, 'reward'), el('th', {}, ''), el('th', {}, 'health'), el('th', {}, 'line'), el('th', {}, 'open')),
    t.rollouts.map((r) => el('tr', {},
      el('td', {}, el('span', { class: 'i' }, r.run)), el('td', { class: 'num' }, String(r.rollout)),
      el('td', { class: 'num' }, fmt(r.reward)),
      el('td', {}, r.masked ? el('span', { class: 'note' }, 'masked') : el('span', { class: r.solved ? 'pass' : 'fail' }, r.solved ? 'pass' : 'fail')),
      el('td', {}, healthOf(r.health)),
      el('td', {}, place(r)),
      el('td', {}, pick('a', r.id), ' ', pick('b', r.id), r.unavailable === null ? [' ', link('/rollout/' + r.id, {}, 'raw')] : null))));
  // Quick pairs: a pass beside a fail, the baseline's beside another run's.
  const pass = t.rollouts.find((r) => r.solved);
  const fail = t.rollouts.find((r) => !r.solved && !r.masked);
  const base = t.rollouts.find((r) => r.run === t.baseline);
  const other = t.rollouts.find((r) => r.run !== t.baseline);
  const quick = [];
  if (pass && fail) quick.push(link('/task/' + t.task, { a: pass.id, b: fail.id }, 'a pass beside a fail'));
  if (base && other) quick.push(link('/task/' + t.task, { a: base.id, b: other.id }, 'the baseline beside ' + other.run));
  const shownA = a !== null ? a : String(t.rollouts[0].id);
  const cards = el('div', { class: b !== null ? 'cards two' : 'cards', id: 'cards' });
  show(
    el('h1', {}, 'Task ' + t.task),
    el('p', {}, link('/tasks', {}, '‹ all tasks')),
    standing,
    el('h2', {}, 'Prompt'), prompt.length ? prompt
      : el('p', { class: 'note' }, t.prompt_unavailable !== null ? 'Not shown: ' + t.prompt_unavailable : 'no prompt in the rollout'),
    fields.length ? [el('h2', {}, 'Dataset fields'), el('table', { class: 'kv' }, fields.map(([k, v]) =>
      el('tr', {}, el('td', {}, el('span', { class: 'i' }, k)), el('td', {}, valueCell(v, '/fields/' + k, t.rollouts[0].id, t.cut)))))] : null,
    t.failures.length ? [el('h2', {}, 'Failures without a result'), el('ul', {}, t.failures.map((f) =>
      el('li', {}, el('span', { class: 'i' }, f.run), ': ', el('span', { class: 'i' }, f.class), ' ×' + f.count)))] : null,
    el('h2', {}, 'Rollouts (' + t.rollouts.length + ')'),
    quick.length ? el('p', {}, 'Side by side: ', quick.map((q, i) => [i ? ' · ' : '', q])) : null,
    rollouts, cards);
  const ids = b !== null ? [shownA, b] : [shownA];
  for (const rid of ids) {
    const slot = el('div', { class: 'card' }, el('p', { class: 'note' }, 'Loading rollout…'));
    cards.append(slot);
    rolloutCard(rid).then((c) => slot.replaceWith(c), (e) => slot.replaceChildren(errorBox(e)));
  }
}

// Where a rollout is: its file and line, or its row of a lake's table when its file is gone.
function place(r) {
  return [el('span', { class: 'i' }, r.file), r.unavailable === null ? ':' + r.line : ' row ' + r.line];
}

// A rollout's health verdict and the checks that flagged it (or could not judge it).
function healthOf(h) {
  if (h === null) return el('span', { class: 'note' }, '–');
  const cls = h.verdict === 'healthy' ? 'pass' : h.verdict === 'unhealthy' ? 'fail' : 'note';
  return el('span', { class: 'health-verdict' }, el('span', { class: cls }, h.verdict),
    h.flagged.length ? [': ', h.flagged.map((c, i) => [i ? ', ' : '', el('span', { class: 'i' }, c)])] : '',
    h.unobserved.length ? el('span', { class: 'note' }, ' (unobserved: ' + h.unobserved.join(', ') + ')') : '');
}

async function rolloutCard(id) {
  const r = await api('rollout/' + encodeURIComponent(id));
  const fields = Object.entries(r.fields);
  const card = el('div', { class: 'card rollout', 'data-id': r.id },
    el('div', { class: 'head' },
      el('strong', { class: 'i' }, r.run), 'repeat ' + r.rollout,
      el('span', {}, 'reward ', el('span', { class: r.masked ? 'note' : r.solved ? 'pass' : 'fail' }, fmt(r.reward, 6))),
      r.masked ? el('span', { class: 'note' }, 'masked') : null,
      r.health !== null ? el('span', {}, 'health ', healthOf(r.health)) : null,
      r.status !== null ? el('span', { class: 'note' }, 'status ', el('span', { class: 'i' }, String(r.status))) : null,
      el('span', { class: 'note' }, place(r), r.unavailable === null ? ' (' + kb(r.bytes) + ')' : ''),
      r.unavailable === null ? link('/rollout/' + r.id, {}, 'raw JSON') : null),
    fields.length ? el('details', { open: '' }, el('summary', {}, 'fields (' + fields.length + ')'),
      el('table', { class: 'kv' }, fields.map(([k, v]) => el('tr', {}, el('td', {}, el('span', { class: 'i' }, k)),
        el('td', {}, valueCell(v, '/' + ptrKey(k), r.id, r.cut)))))) : null,
    r.usage !== null ? el('details', {}, el('summary', {}, 'token usage'), jsonBlock(r.usage)) : null);
  if (r.unavailable !== null) {
    card.append(el('h3', {}, 'Transcript'), el('p', { class: 'note unavailable' }, 'Not shown: ' + r.unavailable));
    return card;
  }
  const items = el('div', { class: 'transcript' });
  card.append(el('h3', {}, 'Transcript (' + r.output_total + ' output items)'), items);
  appendItems(items, r, r.output, r.output_from);
  let next = r.output_from + (Array.isArray(r.output) ? r.output.length : 0);
  if (next < r.output_total) {
    const more = el('button', { class: 'more', type: 'button' }, 'show the next items');
    more.addEventListener('click', async () => {
      more.disabled = true;
      try {
        const page = await api('rollout/' + r.id, { from: next });
        appendItems(items, page, page.output, page.output_from);
        next = page.output_from + page.output.length;
        more.disabled = next >= page.output_total;
        more.textContent = more.disabled ? 'all items shown' : 'show the next items (' + (page.output_total - next) + ' more)';
      } catch (e) {
        more.replaceWith(errorBox(e));
      }
    });
    more.textContent = 'show the next items (' + (r.output_total - next) + ' more)';
    card.append(more);
  }
  if (r.trajectory !== null) {
    card.append(el('details', {}, el('summary', {}, 'ng_trajectory'), jsonBlock(r.trajectory)));
  }
  return card;
}

function appendItems(box, r, output, from) {
  if (!Array.isArray(output)) {
    if (output !== null) box.append(jsonBlock(output));
    return;
  }
  output.forEach((item, j) => box.append(itemView(item, from + j, r)));
}

// One output item, by its type.
function itemView(item, i, r) {
  const at = '/response/output/' + i;
  const type = item && typeof item === 'object' && typeof item.type === 'string' ? item.type : null;
  const box = el('div', { class: 'item ' + (['message', 'reasoning', 'function_call', 'function_call_output'].includes(type) ? type : 'other') });
  const kind = (...k) => box.append(el('div', { class: 'kind' }, ...k));
  if (type === 'message') {
    kind('message', item.role ? [' · ', el('span', { class: 'i' }, String(item.role))] : '');
    const parts = Array.isArray(item.content) ? item.content : [item.content];
    parts.forEach((c, j) => {
      if (typeof c === 'string') box.append(textBlock(c, at + '/content/' + j, r.id, r.cut));
      else if (c && typeof c.text === 'string') box.append(textBlock(c.text, at + '/content/' + j + '/text', r.id, r.cut));
      else if (c && typeof c.refusal === 'string') box.append(el('div', { class: 'kind' }, 'refusal'), textBlock(c.refusal, at + '/content/' + j + '/refusal', r.id, r.cut));
      else box.append(jsonBlock(c));
    });
  } else if (type === 'reasoning') {
    kind('reasoning');
    for (const key of ['summary', 'content']) {
      (Array.isArray(item[key]) ? item[key] : []).forEach((c, j) => {
        if (c && typeof c.text === 'string') box.append(textBlock(c.text, at + '/' + key + '/' + j + '/text', r.id, r.cut));
        else box.append(jsonBlock(c));
      });
    }
  } else if (type === 'function_call') {
    kind('function call · ', el('span', { class: 'i' }, String(item.name)), item.call_id ? [' · ', el('span', { class: 'i' }, String(item.call_id))] : '');
    let args = item.arguments;
    if (typeof args === 'string' && !(r.cut && (at + '/arguments') in r.cut)) {
      try {
        args = JSON.stringify(JSON.parse(args), null, 2);
      } catch (e) { /* shown as it is */ }
    }
    box.append(typeof args === 'string' ? textBlock(args, at + '/arguments', r.id, r.cut) : jsonBlock(args));
  } else if (type === 'function_call_output') {
    kind('function call output', item.call_id ? [' · ', el('span', { class: 'i' }, String(item.call_id))] : '');
    box.append(typeof item.output === 'string' ? textBlock(item.output, at + '/output', r.id, r.cut) : jsonBlock(item.output));
  } else {
    kind(type === null ? 'item' : el('span', { class: 'i' }, type));
    box.append(jsonBlock(item));
  }
  return box;
}

// ---- raw JSON ------------------------------------------------------------------------

async function rawPage(n, id) {
  const p = await api('rollout/' + encodeURIComponent(id) + '/raw');
  if (n !== renderCount) return;
  const pre = el('div', { class: 't', id: 'raw' });
  let text = p.text;
  if (p.to >= p.total) {
    try {
      text = JSON.stringify(JSON.parse(p.text), null, 2);
    } catch (e) { /* shown as it is */ }
  }
  pre.textContent = text;
  const parts = [el('h1', {}, 'Rollout ' + id), el('p', { class: 'note' }, el('span', { class: 'i' }, p.file), ':' + p.line + ' · ' + kb(p.total)), pre];
  if (p.to < p.total) {
    let from = p.to;
    const more = el('button', { class: 'more', type: 'button' }, 'load more (' + kb(p.total - from) + ' left)');
    more.addEventListener('click', async () => {
      const q = await api('rollout/' + encodeURIComponent(id) + '/raw', { from });
      pre.textContent += q.text;
      from = q.to;
      if (from >= q.total) more.remove();
      else more.textContent = 'load more (' + kb(q.total - from) + ' left)';
    });
    parts.push(more);
  }
  show(...parts);
}

// ---- the router ----------------------------------------------------------------------

async function render() {
  const n = ++renderCount;
  const { path, params } = route();
  try {
    let m;
    if (path === '/' || path === '') await overview(n);
    else if (path === '/tasks') await taskList(n, params);
    else if ((m = path.match(/^\/task\/(-?\d+)$/))) await taskPage(n, m[1], params);
    else if ((m = path.match(/^\/rollout\/(\d+)$/))) await rawPage(n, m[1]);
    else show(el('h1', {}, 'Not found'), el('p', {}, link('/', {}, 'Overview')));
  } catch (e) {
    if (n === renderCount) show(errorBox(e));
  }
  if (n === renderCount) main.setAttribute('data-ready', String(n));
}

window.addEventListener('hashchange', render);
render();
