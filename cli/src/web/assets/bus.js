// bus.js — the WebSocket to `askbus web` (one live UI of the daemon per tab, subscribed
// with the page's filter, reconnected with backoff) and what each frame from the bus does to
// the page: a request arrives, is replayed, ends or is refused, and the `#q=ID` link waits
// for its request.

import * as A from './answers.js';
import * as P from './approvals.js';
import * as F from './filter.js';
import { renderDialog, renderDialogState } from './dialog.js';
import { agentName, quoteHeaders, remember, renderQueue, show } from './queue.js';
import { notify, setFilter } from './settings.js';
import { $, announce, app, setNotice, SIGNED_OUT, updateTitle } from './state.js';

/** After a WebSocket reconnection, questions not replayed within this long are gone. */
const STALE_GRACE_MS = 1500;

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

export function connect() {
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

export function send(frame) {
  if (!app.ws || app.ws.readyState !== WebSocket.OPEN) return false;
  app.ws.send(JSON.stringify(frame));
  return true;
}

export function setConn(state, text) {
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

export function renderEmpty() {
  const state = $('#conn').dataset.state;
  let [title, text] = EMPTY[state] || EMPTY.connecting;
  if (state === 'up' && !F.isEmpty(app.filter)) {
    title = 'Nothing waiting in this filter';
    text = `No question or approval for ${F.describe(app.filter)}. Others may be waiting: the filter hides them.`;
  }
  $('#empty-title').textContent = title;
  $('#empty-text').textContent = text;
}

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
export function readHash() {
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
