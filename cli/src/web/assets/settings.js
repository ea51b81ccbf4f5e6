// settings.js — what the person sets for this page: the filter (in the page and in its
// address; a change is a new subscription), notifications and the theme (both remembered in
// this browser), and signing out.

import * as P from './approvals.js';
import * as F from './filter.js';
import { connect, renderEmpty, setConn } from './bus.js';
import { renderDialogState } from './dialog.js';
import { agentName, show } from './queue.js';
import { $, app, setNotice, SIGNED_OUT, updateTitle } from './state.js';

export function setFilter(filter) {
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

export function setupFilter() {
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

export function notify(r) {
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

export function setupNotify() {
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

export function setupTheme() {
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

/** Sign out this browser, or every session (`all`): the server closes their WebSockets. */
export function setupSignOut() {
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
