// app.js — the page of `askbus web`: the WebSocket to its server (one live UI of the daemon
// per tab, subscribed with the page's filter), the list of pending requests grouped by
// project, and the dialog that answers a question or decides an approval. The answer strings
// come from answers.js, the approval frames from approvals.js, the filter rules from
// filter.js; this file turns clicks and keys into their transitions and their results into
// frames. Every text from the bus is put in the page as text, never as HTML (dom.js).

import * as A from './answers.js';
import * as P from './approvals.js';
import * as F from './filter.js';
import { el, inline } from './dom.js';
import { body as approvalBody } from './approval-view.js';
import * as H from './history.js';

const $ = (sel) => document.querySelector(sel);

/** After a WebSocket reconnection, questions not replayed within this long are gone. */
const STALE_GRACE_MS = 1500;
const NOTICE_MS = 12000;

/** What the notice says when a request leaves the screen, after its headers. */
const REASONS = {
  answered: 'answered elsewhere (another tab or UI).',
  timeout: 'timed out: the agent stopped waiting.',
  withdrawn: 'withdrawn by the agent.',
  'producer-gone': 'the agent went away.',
  shutdown: 'askbusd shut down.',
  'daemon-down': 'askbusd stopped (the agent may ask again once it is back).',
  gone: 'no longer pending.',
  sent: 'sent: the agent has your answer.',
  allowed: 'allowed: the agent has your decision.',
  denied: 'denied: the agent has your decision.',
  dismissed: 'dismissed.',
  'too-late': 'too late: it was no longer pending.',
};

const app = {
  /** id → request: {id, kind ('question' | 'approval'), questions, approval, producer,
   * context, deadline, states, tab, status, stale} */
  requests: new Map(),
  /** What this page shows ({project, agent}); the daemon applies it to the subscription. */
  filter: {},
  /** The request `#q=ID` asks for, until it is shown or known to have ended. */
  focusId: null,
  /** Requests of the current replay still to come, until it is over (null: over). */
  replayLeft: null,
  replayTimer: 0,
  /** Projects and agents seen, offered by the filter's fields. */
  seen: { project: new Set(), agent: new Set() },
  current: null,
  ws: null,
  wsRetryMs: 500,
  /** Whether the WebSocket has delivered a `daemon connected` before (reconnections). */
  hadSession: false,
  staleTimer: 0,
  noticeTimer: 0,
};

// ---------------------------------------------------------------------------------------
// Connection.

function connect() {
  const url = new URL('ws', location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.search = F.toSearch('', app.filter);
  url.hash = '';
  const ws = new WebSocket(url);
  app.ws = ws;
  ws.onopen = () => {
    app.wsRetryMs = 500;
  };
  ws.onmessage = (e) => {
    let frame;
    try {
      frame = JSON.parse(e.data);
    } catch {
      return;
    }
    handle(frame);
  };
  ws.onclose = (e) => {
    app.ws = null;
    if (app.signedOut) return;
    const stopped = e.code === 1001 && e.reason === 'askbus web stopped';
    setConn('lost', stopped ? 'askbus web stopped; reconnecting when it is back…'
      : 'Lost the connection to askbus web; reconnecting…');
    for (const r of app.requests.values()) r.stale = true;
    renderDialogState();
    setTimeout(retry, app.wsRetryMs);
    app.wsRetryMs = Math.min(app.wsRetryMs * 2, 5000);
  };
}

/** Reconnects, unless the server says this page's access is gone (a restart means a new
 * token, and only the new link can bring it). */
async function retry() {
  try {
    const res = await fetch(location.pathname, { method: 'HEAD', cache: 'no-store' });
    if (res.status === 401) {
      setConn('denied', SIGNED_OUT);
      return;
    }
  } catch {
    // The server is not back yet: the WebSocket attempt below fails and comes back here.
  }
  connect();
}

function send(frame) {
  if (!app.ws || app.ws.readyState !== WebSocket.OPEN) return false;
  app.ws.send(JSON.stringify(frame));
  return true;
}

function setConn(state, text) {
  const el = $('#conn');
  el.dataset.state = state;
  el.textContent = text;
  renderEmpty();
}

/** What the page says when no question is shown: only "No questions waiting" when it is
 * connected to askbusd and knows; otherwise why it cannot know. */
const EMPTY = {
  connecting: ['Connecting…', 'Reaching askbus web and askbusd.'],
  up: ['No questions waiting', 'When an agent asks you something, it appears here at once.'],
  down: ['askbusd is not running', 'Questions appear here once it is back (start it with `askbusd`, or as a service). Retrying…'],
  lost: ['Not connected', 'Lost the connection to askbus web; reconnecting…'],
  denied: ['This link no longer works', 'Open the new link askbus web printed when it started.'],
};

function renderEmpty() {
  const state = $('#conn').dataset.state;
  let [title, text] = EMPTY[state] || EMPTY.connecting;
  if (state === 'up' && !F.isEmpty(app.filter)) {
    title = 'Nothing waiting in this filter';
    text = `No question or approval for ${F.describe(app.filter)}. Others may be waiting: the filter hides them.`;
  }
  $('#empty-title').textContent = title;
  $('#empty-text').textContent = text;
}

// ---------------------------------------------------------------------------------------
// Frames from the bus.

function handle(f) {
  switch (f.type) {
    case 'daemon':
      if (f.state === 'connected') onSubscribed(f);
      else onDaemonDown(f);
      break;
    case 'ask-user-request':
      onRequest(f, 'question');
      break;
    case 'tool-confirmation-request':
      onRequest(f, 'approval');
      break;
    case 'ask-user-withdrawn':
    case 'tool-confirmation-withdrawn':
      close(f.correlationId, f.reason in REASONS ? f.reason : 'gone');
      break;
    case 'ask-user-ack':
      close(f.correlationId, f.outcome === 'dismissed' ? 'dismissed' : 'sent');
      break;
    case 'tool-confirmation-ack':
      close(f.correlationId, f.reason === 'dismissed' ? 'dismissed' : f.confirmed ? 'allowed' : 'denied');
      break;
    case 'error':
      onError(f);
      break;
    case 'rule-written': {
      // askbus web wrote the "always" rule before it sent the decision.
      const r = app.requests.get(f.correlationId);
      if (r && typeof f.rule === 'string') r.ruleWritten = f.rule;
      break;
    }
    default:
      break;
  }
}

function onSubscribed(f) {
  setConn('up', 'Connected');
  // The replay brings back what is still pending; the rest ended while we were away.
  if (app.hadSession) for (const r of app.requests.values()) r.stale = true;
  app.hadSession = true;
  // The replay is the next `pending` requests; one that ends first is skipped, so a short
  // replay is over when the grace period is.
  app.replayLeft = Math.max(0, Number(f.pending) || 0);
  clearTimeout(app.replayTimer);
  if (app.replayLeft === 0) replayDone();
  else app.replayTimer = setTimeout(replayDone, STALE_GRACE_MS);
  renderDialogState();
}

/** Every pending request has arrived: what did not come back has ended, and a `#q=ID` that
 * did not come is said to be over. */
function replayDone() {
  clearTimeout(app.replayTimer);
  app.replayLeft = null;
  for (const r of [...app.requests.values()]) if (r.stale) close(r.id, 'gone');
  if (app.focusId !== null && !app.requests.has(app.focusId)) {
    const id = app.focusId;
    app.focusId = null;
    const outside = F.isEmpty(app.filter) ? '' : ` (or it is not in this page's filter: ${F.describe(app.filter)})`;
    setNotice(`The request you opened (${id}) is no longer waiting: it was answered, timed out or withdrawn${outside}.`, true, true);
  }
}

function onDaemonDown(f) {
  const secs = Math.max(1, Math.round((f.retryMs || 1000) / 1000));
  setConn('down', `askbusd is not running; retrying in ${secs}s…`);
  $('#conn').title = f.error || '';
  for (const id of [...app.requests.keys()]) close(id, 'daemon-down');
}

function onRequest(f, kind) {
  if (typeof f.correlationId !== 'string') return;
  if (app.replayLeft !== null) {
    app.replayLeft -= 1;
    if (app.replayLeft <= 0) setTimeout(replayDone, 0);
  }
  const known = app.requests.get(f.correlationId);
  const deadline = Date.now() + (f.timeoutMs ?? 0);
  if (known) {
    // Replayed after a reconnection: keep what was typed.
    known.stale = false;
    known.deadline = deadline;
    if (app.focusId === known.id) focusRequested();
    renderQueue();
    renderDialogState();
    return;
  }
  const questions = kind === 'question' && Array.isArray(f.questions) ? f.questions : [];
  const context = f.context && typeof f.context === 'object' ? f.context : {};
  const r = {
    id: f.correlationId,
    kind,
    questions,
    approval: kind === 'approval' ? f : null,
    producer: f.producer || {},
    node: typeof f.node === 'string' ? f.node : null,
    context,
    deadline,
    states: questions.map(A.initialState),
    tab: 0,
    status: 'open',
    stale: false,
    reason: '',
  };
  app.requests.set(r.id, r);
  remember(context);
  announce(kind === 'approval' ? `${agentName(r)} asks to approve: ${P.summary(f)}`
    : `New question from ${agentName(r)}: ${questions.map((q) => q.header).join(', ')}`);
  notify(r);
  if (app.focusId === r.id) {
    focusRequested();
  } else if (!app.current) {
    const focusFree = !document.activeElement || document.activeElement === document.body;
    show(r.id, focusFree);
  } else {
    renderQueue();
  }
  updateTitle();
}

/** The `#q=ID` request has arrived: it is what the page shows. */
function focusRequested() {
  const id = app.focusId;
  app.focusId = null;
  show(id, true);
  $('#dialog-area').scrollIntoView({ block: 'start' });
}

/** Reads `#q=ID` (a link to one request, e.g. from a notification). */
function readHash() {
  const m = /^#q=(.+)$/.exec(location.hash);
  if (!m) return;
  let id;
  try {
    id = decodeURIComponent(m[1]);
  } catch {
    id = m[1];
  }
  if (app.requests.has(id)) {
    app.focusId = id;
    focusRequested();
    return;
  }
  app.focusId = id;
  // Already subscribed and past the replay: it is not pending (for this page).
  if (app.ws && app.replayLeft === null && $('#conn').dataset.state === 'up') replayDone();
}

function onError(f) {
  if (f.code === 'invalid-filter') {
    // The page checks the filter as the daemon does, so this is a rule that changed.
    setNotice(`Filter refused: ${f.message}. Showing all projects and agents.`, true);
    setFilter({});
    return;
  }
  const r = f.correlationId && app.requests.get(f.correlationId);
  if (r && f.code === 'not-pending') {
    close(r.id, 'too-late');
    return;
  }
  if (r && r.status === 'sending') {
    r.status = 'open';
    renderDialog(false);
  }
  setNotice(`Not sent: ${f.message}`, true);
}

/** A request left: drop it, and if it was on screen say why and show the next one. */
function close(id, why) {
  const r = app.requests.get(id);
  if (!r) return;
  app.requests.delete(id);
  updateTitle();
  const h = quoteHeaders(r);
  if (app.focusId === id) app.focusId = null;
  if (app.current === id) {
    const rule = why === 'allowed' && r.ruleWritten ? ` · rule written: ${r.ruleWritten}` : '';
    setNotice(`${h} — ${REASONS[why]}${rule}`, !['sent', 'dismissed', 'allowed', 'denied'].includes(why));
    const next = app.requests.keys().next();
    const focusWasInDialog = !document.activeElement || document.activeElement === document.body
      || $('#dialog').contains(document.activeElement);
    app.current = null;
    show(next.done ? null : next.value, focusWasInDialog);
  } else {
    announce(`${h} — ${REASONS[why]}`);
    renderQueue();
  }
}

// ---------------------------------------------------------------------------------------
// Answering.

function primary(r) {
  if (r.status !== 'open' || r.stale) return;
  const many = r.questions.length > 1;
  if (many && r.tab < r.questions.length) {
    goTab(r, r.tab + 1);
    return;
  }
  const answers = A.collectAnswers(r.questions, r.states);
  if (!many && Object.keys(answers).length === 0) {
    const q = r.questions[0];
    invalid(q && q.type === 'text' ? 'Type an answer first.' : 'Pick an option or type an answer first.');
    return;
  }
  if (send(A.answerFrame(r.id, answers))) sending(r);
}

function dismiss(r) {
  if (r.status !== 'open' || r.stale) return;
  if (send(r.kind === 'approval' ? P.dismissFrame(r.id) : A.dismissFrame(r.id))) sending(r);
}

/** Sends an approval's decision: `outcome`, with the typed reason if it is a denial. */
function decide(r, outcome) {
  if (r.status !== 'open' || r.stale) return;
  if (send(P.decisionFrame(r.id, outcome, r.reason, r.anyProject === true))) {
    r.sentOutcome = outcome;
    sending(r);
  }
}

function sending(r) {
  r.status = 'sending';
  renderDialogState();
}

function goTab(r, tab) {
  r.tab = Math.max(0, Math.min(tab, r.questions.length));
  renderDialog(true);
}

// ---------------------------------------------------------------------------------------
// Rendering.

/** Who asks: the agent the context names, else the client library's name. */
function agentName(r) {
  return r.context.agent || r.producer.client || 'An unnamed agent';
}

function quoteHeaders(r) {
  if (r.kind === 'approval') return `“${P.summary(r.approval)}”`;
  const hs = r.questions.map((q) => q.header).filter(Boolean);
  return hs.length ? `“${hs.join('”, “')}”` : 'The question';
}

/** Notes a request's project and agent for the filter's suggestions. */
function remember(context) {
  let changed = false;
  for (const key of ['project', 'agent']) {
    const v = context[key];
    if (typeof v !== 'string' || app.seen[key].has(v)) continue;
    app.seen[key].add(v);
    changed = true;
    // An agent is also filtered by its name alone (`gemini-cli` for `gemini-cli/0.61.0`).
    const name = key === 'agent' && v.includes('/') ? v.slice(0, v.indexOf('/')) : null;
    if (name) app.seen.agent.add(name);
  }
  if (!changed) return;
  for (const key of ['project', 'agent']) {
    $(`#filter-${key}-list`).replaceChildren(...[...app.seen[key]].sort().map((v) => el('option', { value: v })));
  }
}

function left(deadline) {
  const s = Math.max(0, Math.round((deadline - Date.now()) / 1000));
  if (s >= 3600) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  if (s >= 60) return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  return `${s}s`;
}

function countdown(r) {
  return el('span', { class: 'left', 'data-deadline': String(r.deadline), text: `${left(r.deadline)} left` });
}

function tick() {
  for (const e of document.querySelectorAll('[data-deadline]')) {
    const d = Number(e.dataset.deadline);
    e.textContent = `${left(d)} left`;
    e.classList.toggle('urgent', d - Date.now() < 30000);
  }
}

/** Shows request `id` (or the empty state), focusing its first control if `focus`. */
function show(id, focus) {
  app.current = id;
  renderQueue();
  renderDialog(focus);
}

/** The waiting list, grouped by project (groups in the order of their oldest request; the
 * requests without a project last); no group heading while no request names a project. */
function renderQueue() {
  const list = $('#queue-list');
  list.replaceChildren();
  const all = [...app.requests.values()];
  $('#queue').hidden = all.length < 2;
  $('#queue-count').textContent = String(all.length);
  const groups = new Map();
  for (const r of all) {
    const project = typeof r.context.project === 'string' ? r.context.project : '';
    if (!groups.has(project)) groups.set(project, []);
    groups.get(project).push(r);
  }
  const order = [...groups.keys()].filter((k) => k !== '');
  if (groups.has('')) order.push('');
  const headed = order.some((k) => k !== '');
  for (const project of order) {
    const items = groups.get(project).map((r) => el('li', { class: 'entry' }, el('button', {
      type: 'button',
      class: `item${r.kind === 'approval' ? ' approval' : ''}`,
      'aria-current': r.id === app.current ? 'true' : false,
      'data-id': r.id,
      onclick: () => show(r.id, true),
    }, [
      el('span', { class: 'chips' }, r.kind === 'approval'
        ? [el('span', { class: 'chip approve', text: 'Approve' }), el('span', { class: 'chip', text: P.summary(r.approval) })]
        : r.questions.map((q) => el('span', { class: 'chip', text: q.header || 'Question' }))),
      r.context.title ? el('span', { class: 'task', text: r.context.title }) : null,
      el('span', { class: 'who' }, [agentName(r), ' · ', countdown(r)]),
    ])));
    if (!headed) {
      list.append(...items);
      continue;
    }
    const name = project || 'No project';
    list.append(el('li', { class: 'group', 'data-project': project }, [
      el('h3', { class: 'group-name' }, [name, ' ', el('span', { class: 'count', text: String(items.length) })]),
      el('ol', { 'aria-label': name }, items),
    ]));
  }
}

/** Who asks, with what project and task, above the dialog; session, working directory and
 * the client library on demand. */
function renderFrom(r) {
  const c = r.context;
  const from = el('p', { class: 'from', id: 'dialog-from' }, [
    el('span', { class: 'agent', text: agentName(r) }),
    c.project ? el('span', { class: 'chip project', title: 'Project', text: c.project }) : null,
    el('span', { class: 'pid', text: `pid ${r.producer.pid ?? '?'}` }),
    // Federated: the node it was asked on (a pid alone names no machine).
    r.node ? el('span', { class: 'node', text: `on ${r.node}` }) : null,
    countdown(r),
  ]);
  const more = [
    ['Session', c.session],
    ['Directory', c.cwd],
    ['Client', c.agent && r.producer.client ? r.producer.client : null],
  ].filter(([, v]) => typeof v === 'string' && v);
  return [
    from,
    c.title ? el('p', { class: 'task', text: c.title }) : null,
    more.length ? el('details', { class: 'context' }, [
      el('summary', { text: more.map(([k]) => k.toLowerCase()).join(', ').replace(/^./, (x) => x.toUpperCase()) }),
      el('dl', { class: 'facts' }, more.map(([k, v]) => el('div', { class: 'fact' }, [el('dt', { text: k }), el('dd', {}, el('code', { text: v }))]))),
    ]) : null,
  ];
}

/** An approval's dialog: what the tool call would do, a reason for the agent, and the
 * outcomes it offers. */
function renderApproval(r, focus) {
  const a = r.approval;
  const form = el('form', {
    class: 'dialog approval',
    'data-id': r.id,
    'aria-labelledby': 'approval-title',
    'aria-describedby': 'dialog-from',
    novalidate: true,
    onsubmit: (e) => e.preventDefault(),
  });
  form.append(...renderFrom(r).filter(Boolean));
  form.append(approvalBody(a, r.context));
  const reason = el('textarea', {
    id: 'deny-reason',
    rows: '2',
    maxlength: String(P.MAX_MESSAGE),
    placeholder: 'Why not? The agent is told (optional)',
    'aria-label': 'Reason for denying, sent to the agent (optional)',
    oninput: (e) => {
      r.reason = e.target.value;
    },
  });
  reason.value = r.reason;
  form.append(el('div', { class: 'reason' }, [
    el('label', { for: 'deny-reason', text: 'Reason, if you deny' }),
    reason,
  ]));
  const rules = alwaysRules(r);
  if (rules) form.append(rules);
  const buttons = P.buttons(a.outcomes, a.askbusAlways).map((o, i) => el('button', {
    type: 'button',
    class: o === 'cancel' ? 'deny' : i === 0 ? 'primary allow' : 'secondary allow',
    'data-outcome': o,
    onclick: () => decide(r, o),
  }, [P.label(o), ' ', el('kbd', { text: String(i + 1) })]));
  form.append(el('div', { class: 'actions' }, [
    el('button', { type: 'button', class: 'secondary', id: 'dismiss', onclick: () => dismiss(r) },
      ['Dismiss ', el('kbd', { text: 'Esc' })]),
    ...buttons.reverse(),
  ]));
  $('#dialog').append(form);
  renderDialogState();
  tick();
  // Never an Allow button: Enter there would approve what was not read yet.
  if (focus) (form.querySelector('pre[tabindex]') || form.querySelector('.approval-body')).focus();
}

/** What each "always" button writes, before the tap: the rule, in the request's project
 * unless "In every project" is ticked. All of it text (the rule names the command). */
function alwaysRules(r) {
  const offers = P.alwaysOffers(r.approval.askbusAlways);
  if (!offers.length) return null;
  const box = el('div', { class: 'always-rules', id: 'always-rules' });
  const lines = () => offers.map((o) => {
    const rule = P.alwaysRule(offers, o.outcome, r.anyProject === true);
    return el('p', { class: 'always-rule', 'data-outcome': o.outcome }, [
      el('strong', { text: `${P.label(o.outcome)}: ` }),
      rule ? 'writes the rule ' : 'writes no askbus rule (the agent\'s own "always" only)',
      rule ? el('code', { text: rule }) : null,
    ]);
  });
  const list = el('div', { class: 'always-list' }, lines());
  box.append(list);
  if (offers.some((o) => typeof o.everyProject === 'string')) {
    const wide = el('input', {
      type: 'checkbox',
      id: 'always-every-project',
      onchange: (e) => {
        r.anyProject = e.target.checked;
        list.replaceChildren(...lines());
      },
    });
    wide.checked = r.anyProject === true;
    box.append(el('label', { class: 'always-wide', for: 'always-every-project' }, [wide, ' In every project']));
  }
  return box;
}

function renderDialog(focus) {
  const host = $('#dialog');
  host.replaceChildren();
  const r = app.current && app.requests.get(app.current);
  $('#empty').hidden = Boolean(r);
  if (!r) return;
  clearNoticeSoon();
  if (r.kind === 'approval') {
    renderApproval(r, focus);
    return;
  }
  const many = r.questions.length > 1;
  const onReview = many && r.tab === r.questions.length;
  const form = el('form', {
    class: 'dialog',
    'data-id': r.id,
    'aria-labelledby': 'dialog-from',
    novalidate: true,
    onsubmit: (e) => {
      e.preventDefault();
      primary(r);
    },
  });
  form.append(...renderFrom(r).filter(Boolean));
  if (many) form.append(renderTabs(r));
  const panel = el('div', { class: 'panel', id: 'panel', role: many ? 'tabpanel' : false,
    'aria-labelledby': many ? `tab-${r.tab}` : false });
  panel.append(onReview ? renderReview(r) : renderQuestion(r, r.tab));
  form.append(panel);
  form.append(el('p', { class: 'invalid', id: 'invalid', role: 'alert', hidden: true }));
  const primaryLabel = many && !onReview ? 'Next' : 'Submit';
  form.append(el('div', { class: 'actions' }, [
    el('button', { type: 'button', class: 'secondary', id: 'dismiss', onclick: () => dismiss(r) },
      ['Dismiss ', el('kbd', { text: 'Esc' })]),
    el('button', { type: 'submit', class: 'primary', id: 'primary' }, [primaryLabel, ' ', el('kbd', { text: 'Enter' })]),
  ]));
  host.append(form);
  form.querySelector('[role="tab"][aria-selected="true"]')?.scrollIntoView({ block: 'nearest', inline: 'nearest' });
  renderDialogState();
  tick();
  if (focus) {
    const first = panel.querySelector('input:checked, input, textarea') || $('#primary');
    first.focus();
  }
}

function renderTabs(r) {
  const tabs = el('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Questions' });
  const labels = r.questions.map((q) => q.header || 'Question').concat(['Review']);
  labels.forEach((label, i) => {
    const answered = i < r.questions.length && A.answerOf(r.questions[i], r.states[i]) !== null;
    tabs.append(el('button', {
      type: 'button',
      role: 'tab',
      id: `tab-${i}`,
      class: `tab${i === r.questions.length ? ' review-tab' : ''}`,
      'aria-selected': i === r.tab ? 'true' : 'false',
      'aria-controls': 'panel',
      tabindex: i === r.tab ? '0' : '-1',
      'data-answered': answered ? 'true' : false,
      onclick: () => goTab(r, i),
    }, [el('span', { class: 'tick', 'aria-hidden': 'true', text: answered ? '✓' : '' }), label]));
  });
  return tabs;
}

function renderQuestion(r, i) {
  const q = r.questions[i];
  const qid = `q${i}`;
  const fs = el('fieldset', { class: 'question', 'aria-describedby': `${qid}-hint` });
  // With tabs the header is on the selected tab; the legend still names it for screen readers.
  const many = r.questions.length > 1;
  fs.append(el('legend', {}, [
    el('span', { class: many ? 'sr-only' : 'chip', text: q.header || 'Question' }),
    el('span', { class: 'qtext' }, inline(q.question || '')),
  ]));
  if (A.isMulti(q)) fs.append(el('p', { class: 'hint', id: `${qid}-hint`, text: '(Select all that apply)' }));
  if (q.type === 'text') {
    const ta = el('textarea', {
      id: `${qid}-text`,
      rows: '3',
      placeholder: A.placeholderOf(q),
      'aria-label': `Your answer to ${q.header || 'the question'}`,
      oninput: (e) => {
        r.states[i] = A.setText(r.states[i], e.target.value);
        renderDialogState();
      },
    });
    ta.value = r.states[i].text;
    fs.append(ta);
    return fs;
  }
  const multi = A.isMulti(q);
  const type = multi ? 'checkbox' : 'radio';
  const opts = el('div', { class: 'options' });
  A.rowsOf(q).forEach((row, n) => {
    const num = el('span', { class: 'num', 'aria-hidden': 'true', text: n < 9 ? String(n + 1) : '' });
    const inputId = `${qid}-row${n}`;
    if (row.kind === 'other') {
      const box = el('input', {
        type, id: inputId, name: qid, 'data-row': String(n), 'aria-label': 'Other',
        onchange: () => {
          r.states[i] = A.pickOther(q, r.states[i]);
          renderDialogState();
          if (!multi) $(`#${qid}-other`).focus();
        },
      });
      const text = el('input', {
        type: 'text',
        id: `${qid}-other`,
        class: 'other-text',
        placeholder: A.placeholderOf(q),
        'aria-label': 'Other answer',
        autocomplete: 'off',
        oninput: (e) => {
          r.states[i] = A.setOtherText(q, r.states[i], e.target.value);
          renderDialogState();
        },
      });
      text.value = r.states[i].otherText;
      opts.append(el('div', { class: 'opt other' }, [box, num, text]));
      return;
    }
    const isAll = row.kind === 'all';
    const o = isAll ? { label: A.ALL_LABEL, description: A.ALL_DESCRIPTION } : A.optionsOf(q)[row.index];
    const descId = o.description ? `${inputId}-desc` : false;
    // Named by the label alone; the description is read as a description.
    const input = el('input', {
      type, id: inputId, name: qid, 'data-row': String(n),
      'aria-labelledby': `${inputId}-label`, 'aria-describedby': descId,
      onchange: () => {
        r.states[i] = isAll ? A.toggleAll(q, r.states[i]) : A.pickOption(q, r.states[i], row.index);
        renderDialogState();
      },
    });
    opts.append(el('label', { class: `opt${isAll ? ' all' : ''}`, for: inputId }, [
      input,
      num,
      el('span', { class: 'body' }, [
        el('span', { class: 'label', id: `${inputId}-label` }, inline(o.label)),
        o.description ? el('span', { class: 'desc', id: descId }, inline(o.description)) : null,
      ]),
    ]));
  });
  fs.append(opts);
  return fs;
}

function renderReview(r) {
  const answers = A.collectAnswers(r.questions, r.states);
  const missing = r.questions.length - Object.keys(answers).length;
  const box = el('div', { class: 'review' }, [el('h3', { text: 'Review your answers' })]);
  if (missing > 0) {
    box.append(el('p', { class: 'warn', text: `⚠ You have ${missing} unanswered question${missing > 1 ? 's' : ''}` }));
  }
  const dl = el('dl');
  r.questions.forEach((q, i) => {
    const a = answers[String(i)];
    dl.append(el('div', { class: 'row' }, [
      el('dt', { text: q.header || `Q${i + 1}` }),
      el('dd', { class: a === undefined ? 'missing' : '', text: a === undefined ? '(not answered)' : a }),
    ]));
  });
  box.append(dl);
  return box;
}

/** Brings what depends on the answers up to date without rebuilding inputs (focus and
 * half-typed text stay where they are). */
function renderDialogState() {
  const r = app.current && app.requests.get(app.current);
  const form = $('#dialog form');
  if (!r || !form) return;
  const busy = r.status !== 'open' || r.stale;
  form.classList.toggle('busy', busy);
  for (const c of form.querySelectorAll('input, textarea, button')) c.disabled = busy;
  if (r.kind === 'approval') {
    const b = r.status === 'sending' && form.querySelector(`[data-outcome="${r.sentOutcome}"]`);
    if (b) b.firstChild.textContent = 'Sending… ';
    return;
  }
  const primaryBtn = $('#primary');
  if (r.status === 'sending') primaryBtn.firstChild.textContent = 'Sending… ';
  if (r.tab < r.questions.length) {
    const q = r.questions[r.tab];
    const s = r.states[r.tab];
    for (const input of form.querySelectorAll('input[data-row]')) {
      const row = A.rowsOf(q)[Number(input.dataset.row)];
      if (row.kind === 'option') input.checked = A.isMulti(q) ? s.checked[row.index] : s.picked === row.index;
      else if (row.kind === 'all') input.checked = A.allChecked(s);
      else input.checked = A.isMulti(q) ? s.otherChecked : s.picked === 'other';
    }
  }
  r.questions.forEach((q, i) => {
    const tab = $(`#tab-${i}`);
    if (!tab) return;
    const answered = A.answerOf(q, r.states[i]) !== null;
    tab.dataset.answered = String(answered);
    tab.querySelector('.tick').textContent = answered ? '✓' : '';
  });
  const inv = $('#invalid');
  if (inv && !inv.hidden && A.collectAnswers(r.questions, r.states)['0'] !== undefined) inv.hidden = true;
}

function invalid(text) {
  const p = $('#invalid');
  p.textContent = text;
  p.hidden = false;
}

/** Shows a one-line notice; it goes after a while, unless `sticky` (then the next dialog
 * that opens takes it away). */
function setNotice(text, important, sticky) {
  const n = $('#notice');
  n.textContent = text;
  n.hidden = false;
  n.classList.toggle('important', Boolean(important));
  clearTimeout(app.noticeTimer);
  app.noticeSticky = Boolean(sticky);
  if (sticky) return;
  app.noticeTimer = setTimeout(() => {
    n.hidden = true;
  }, NOTICE_MS);
}

function clearNoticeSoon() {
  // A notice stays readable a moment after the next dialog opens, then gets out of the way.
  if (app.noticeSticky) return;
  clearTimeout(app.noticeTimer);
  app.noticeTimer = setTimeout(() => {
    $('#notice').hidden = true;
  }, NOTICE_MS);
}

function announce(text) {
  const a = $('#announce');
  a.textContent = '';
  // A fresh text node is announced again even when it repeats the last one.
  setTimeout(() => {
    a.textContent = text;
  }, 50);
}

function updateTitle() {
  const n = app.requests.size;
  document.title = n ? `(${n}) askbus` : 'askbus';
}

// ---------------------------------------------------------------------------------------
// Keyboard.

function isTextField(t) {
  return t instanceof HTMLTextAreaElement || (t instanceof HTMLInputElement && t.type === 'text');
}

function onKey(e) {
  if (e.isComposing || e.ctrlKey || e.metaKey || e.altKey) return;
  // The History view is on screen: a key never decides what is hidden behind it.
  if (H.isOpen()) return;
  const r = app.current && app.requests.get(app.current);
  if (!r || r.status !== 'open' || r.stale) return;
  const t = e.target;
  if (e.key === 'Escape') {
    e.preventDefault();
    dismiss(r);
    return;
  }
  if (r.kind === 'approval') {
    onApprovalKey(e, r);
    return;
  }
  if (e.key === 'Enter') {
    if (t instanceof HTMLButtonElement) return; // the button's own action
    if (t instanceof HTMLTextAreaElement && e.shiftKey) return; // a new line
    e.preventDefault();
    primary(r);
    return;
  }
  if (isTextField(t)) return;
  const many = r.questions.length > 1;
  if (many && (e.key === 'ArrowRight' || e.key === 'ArrowLeft')) {
    e.preventDefault();
    goTab(r, r.tab + (e.key === 'ArrowRight' ? 1 : -1));
    return;
  }
  if (/^[1-9]$/.test(e.key) && r.tab < r.questions.length) {
    const q = r.questions[r.tab];
    const n = Number(e.key) - 1;
    const rows = A.rowsOf(q);
    if (n >= rows.length) return;
    e.preventDefault();
    r.states[r.tab] = A.pickRow(q, r.states[r.tab], n);
    renderDialogState();
    // As in the terminal UI: a number that answers a single choice (an option, or Other
    // already typed) moves on, to the next question or, for a lone question, sends it.
    const single = q.type === 'yesno' || !q.multiSelect;
    const answered = A.collectAnswers([q], [r.states[r.tab]])[0] !== undefined;
    if (single && answered && (rows[n].kind === 'option' || rows[n].kind === 'other')) {
      primary(r);
      return;
    }
    if (rows[n].kind === 'other') $(`#q${r.tab}-other`).focus();
    else $(`#q${r.tab}-row${n}`).focus();
  }
}

/** An approval's keys: a number picks the button it shows (as in the terminal UI), Enter in
 * the reason field denies with it; elsewhere Enter is the focused button's own. */
function onApprovalKey(e, r) {
  const t = e.target;
  if (t instanceof HTMLTextAreaElement) {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      decide(r, 'cancel');
    }
    return;
  }
  if (isTextField(t) || !/^[1-9]$/.test(e.key)) return;
  const outcomes = P.buttons(r.approval.outcomes, r.approval.askbusAlways);
  const n = Number(e.key) - 1;
  if (n >= outcomes.length) return;
  e.preventDefault();
  decide(r, outcomes[n]);
}

// ---------------------------------------------------------------------------------------
// The filter (in the page and in its address).

function setFilter(filter) {
  app.filter = filter;
  history.replaceState(null, '', `${location.pathname}${F.toSearch(location.search, filter)}${location.hash}`);
  renderFilter();
  // What the new filter does not show leaves quietly; what it does is kept (with what was
  // typed) if the new subscription's replay brings it back.
  for (const r of [...app.requests.values()]) {
    if (!F.matches(filter, r.context)) {
      app.requests.delete(r.id);
      if (app.current === r.id) app.current = null;
    }
  }
  if (!app.current) {
    const next = app.requests.keys().next();
    app.current = next.done ? null : next.value;
  }
  show(app.current, false);
  updateTitle();
  // A new subscription with the new filter.
  if (app.ws) {
    const old = app.ws;
    old.onclose = null;
    old.close(1000, 'filter changed');
    app.ws = null;
  }
  for (const r of app.requests.values()) r.stale = true;
  setConn('connecting', 'Connecting…');
  connect();
}

function renderFilter() {
  const on = !F.isEmpty(app.filter);
  $('#filter-summary').textContent = on ? `Showing ${F.describe(app.filter)}` : 'Showing all projects and agents';
  $('#filter-box').classList.toggle('active', on);
  $('#filter-clear').hidden = !on;
  for (const key of Object.keys(F.KEYS)) $(`#filter-${key}`).value = app.filter[key] || '';
  renderEmpty();
}

function setupFilter() {
  const { filter, problems } = F.fromSearch(location.search);
  app.filter = filter;
  if (problems.length) {
    setNotice(`Filter in the address ignored: ${problems.join('; ')}.`, true);
    history.replaceState(null, '', `${location.pathname}${F.toSearch(location.search, filter)}${location.hash}`);
  }
  $('#filter-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const next = {};
    const bad = [];
    for (const key of Object.keys(F.KEYS)) {
      const v = $(`#filter-${key}`).value.trim();
      if (!v) continue;
      const p = F.problem(key, v);
      if (p) bad.push(p);
      else next[key] = v;
    }
    const msg = $('#filter-invalid');
    msg.hidden = bad.length === 0;
    msg.textContent = bad.join('; ');
    if (bad.length) return;
    setFilter(next);
  });
  $('#filter-clear').addEventListener('click', () => setFilter({}));
  renderFilter();
}

// ---------------------------------------------------------------------------------------
// Notifications and theme (both remembered in this browser).

function notify(r) {
  if (!document.hidden || localStorage.getItem('askbus-notify') !== 'on') return;
  if (!('Notification' in window) || Notification.permission !== 'granted') return;
  const q = r.questions[0] || {};
  const n = r.kind === 'approval'
    ? new Notification(`${agentName(r)} asks to approve: ${P.toolName(r.approval)}`, {
      body: P.summary(r.approval).slice(0, 160),
      tag: r.id,
    })
    : new Notification(`${agentName(r)} asks: ${q.header || 'a question'}`, {
      body: String(q.question || '').slice(0, 160),
      tag: r.id,
    });
  n.onclick = () => {
    window.focus();
    if (app.requests.has(r.id)) show(r.id, true);
    n.close();
  };
}

function setupNotify() {
  const btn = $('#notify');
  if (!('Notification' in window) || !window.isSecureContext) return;
  btn.hidden = false;
  const sync = () => {
    const on = localStorage.getItem('askbus-notify') === 'on' && Notification.permission === 'granted';
    btn.setAttribute('aria-pressed', String(on));
    btn.textContent = on ? 'Notifying' : 'Notify me';
    btn.title = on ? 'A notification appears when a question arrives while this tab is hidden'
      : 'Get a notification when a question arrives while this tab is hidden';
  };
  btn.onclick = async () => {
    if (localStorage.getItem('askbus-notify') === 'on') {
      localStorage.removeItem('askbus-notify');
    } else {
      if (Notification.permission === 'default') await Notification.requestPermission();
      if (Notification.permission === 'granted') localStorage.setItem('askbus-notify', 'on');
    }
    sync();
  };
  sync();
}

const THEMES = ['auto', 'light', 'dark'];
const THEME_LABEL = { auto: 'Auto', light: 'Light', dark: 'Dark' };

function applyTheme(theme) {
  const root = document.documentElement;
  if (theme === 'auto') delete root.dataset.theme;
  else root.dataset.theme = theme;
  const btn = $('#theme');
  btn.textContent = THEME_LABEL[theme];
  btn.setAttribute('aria-label', `Theme: ${theme === 'auto' ? 'follow the system' : theme}. Change`);
}

function setupTheme() {
  let theme = localStorage.getItem('askbus-theme');
  if (!THEMES.includes(theme)) theme = 'auto';
  applyTheme(theme);
  $('#theme').onclick = () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    if (theme === 'auto') localStorage.removeItem('askbus-theme');
    else localStorage.setItem('askbus-theme', theme);
    applyTheme(theme);
  };
}

const SIGNED_OUT = 'Signed out (or askbus web restarted). For a new sign-in link, press Enter in the terminal where askbus web runs.';

/** Sign out this browser, or every session (`all`): the server closes their WebSockets. */
function setupSignOut() {
  const signOut = async (all) => {
    try {
      const res = await fetch(all ? 'logout?all=1' : 'logout', { method: 'POST', cache: 'no-store' });
      if (!res.ok && res.status !== 401) return;
    } catch {
      return;
    }
    app.signedOut = true;
    if (app.ws) app.ws.close();
    for (const r of app.requests.values()) r.stale = true;
    setConn('denied', SIGNED_OUT);
    renderDialogState();
  };
  $('#signout').onclick = () => signOut(false);
  $('#signout-all').onclick = () => signOut(true);
}

setupTheme();
setupSignOut();
setupNotify();
setupFilter();
H.setupHistory();
document.addEventListener('keydown', onKey);
window.addEventListener('hashchange', readHash);
setInterval(tick, 1000);
readHash();
connect();
