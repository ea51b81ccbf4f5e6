// state.js — what the page of `askbus web` knows (the pending requests, the filter, the
// current dialog, the WebSocket) as one object every module reads and updates, and the
// page-wide notices: the one-line notice, the screen reader's announcements and the tab's
// title.

export const $ = (sel) => document.querySelector(sel);

const NOTICE_MS = 12000;

export const app = {
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

/** Shows a one-line notice; it goes after a while, unless `sticky` (then the next dialog
 * that opens takes it away). */
export function setNotice(text, important, sticky) {
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

export function clearNoticeSoon() {
  // A notice stays readable a moment after the next dialog opens, then gets out of the way.
  if (app.noticeSticky) return;
  clearTimeout(app.noticeTimer);
  app.noticeTimer = setTimeout(() => {
    $('#notice').hidden = true;
  }, NOTICE_MS);
}

export function announce(text) {
  const a = $('#announce');
  a.textContent = '';
  // A fresh text node is announced again even when it repeats the last one.
  setTimeout(() => {
    a.textContent = text;
  }, 50);
}

export function updateTitle() {
  const n = app.requests.size;
  document.title = n ? `(${n}) askbus` : 'askbus';
}

/** What the page says once its access is gone (signed out, or `askbus web` restarted). */
export const SIGNED_OUT = 'Signed out (or askbus web restarted). For a new sign-in link, press Enter in the terminal where askbus web runs.';
