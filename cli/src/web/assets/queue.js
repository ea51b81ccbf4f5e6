// queue.js — the list of pending requests grouped by project, which one is on screen, and
// the countdowns of their deadlines.

import * as P from './approvals.js';
import { el } from './dom.js';
import { renderDialog } from './dialog.js';
import { $, app } from './state.js';

/** Who asks: the agent the context names, else the client library's name. */
export function agentName(r) {
  return r.context.agent || r.producer.client || 'An unnamed agent';
}

export function quoteHeaders(r) {
  if (r.kind === 'approval') return `“${P.summary(r.approval)}”`;
  const hs = r.questions.map((q) => q.header).filter(Boolean);
  return hs.length ? `“${hs.join('”, “')}”` : 'The question';
}

/** Notes a request's project and agent for the filter's suggestions. */
export function remember(context) {
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

export function countdown(r) {
  return el('span', { class: 'left', 'data-deadline': String(r.deadline), text: `${left(r.deadline)} left` });
}

export function tick() {
  for (const e of document.querySelectorAll('[data-deadline]')) {
    const d = Number(e.dataset.deadline);
    e.textContent = `${left(d)} left`;
    e.classList.toggle('urgent', d - Date.now() < 30000);
  }
}

/** Shows request `id` (or the empty state), focusing its first control if `focus`. */
export function show(id, focus) {
  app.current = id;
  renderQueue();
  renderDialog(focus);
}

/** The waiting list, grouped by project (groups in the order of their oldest request; the
 * requests without a project last); no group heading while no request names a project. */
export function renderQueue() {
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
