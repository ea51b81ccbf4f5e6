// history.js — the page's History view: the records askbusd keeps of every request (its
// store), with `askbus history`'s filters (since/until, project, agent, node, reason, kind,
// decided by, limit), newest first, and one record's whole timeline on click. The records come
// from askbus web's `history` route (the daemon's `history` frame, isolated by uid there). A
// record holds what agents sent (questions, commands): it goes in the page as text only
// (dom.js), never as HTML.

import { el } from './dom.js';

const $ = (sel) => document.querySelector(sel);

/** The form's fields, as the route's query names them. */
const FIELDS = ['since', 'until', 'project', 'agent', 'node', 'reason', 'kind', 'decidedBy', 'limit'];

const view = { open: false, records: [], cursor: null, query: '' };

/** Whether the History view is on screen (the pending view's keys then do nothing). */
export function isOpen() {
  return view.open;
}

const str = (v) => (typeof v === 'string' ? v : '');

/** What was asked, in one line: an approval's tool (and command), a question's first text. */
export function what(r) {
  if (r.kind === 'approval') {
    const tool = str(r.toolCall && r.toolCall.name) || 'a tool';
    const cmd = str(r.toolCall && r.toolCall.args && r.toolCall.args.command)
      || str(r.details && r.details.command);
    return cmd ? `${tool}: ${cmd}` : tool;
  }
  const q = Array.isArray(r.questions) ? r.questions[0] : null;
  return str(q && q.question) || '(redacted)';
}

/** Who decided: `human/web`, `rule`, `timeout`… */
export function decidedBy(r) {
  const d = r.decidedBy;
  if (!d || typeof d !== 'object') return '';
  return [str(d.kind), str(d.via)].filter(Boolean).join('/');
}

/** The answer or decision, in one line. */
export function outcome(r) {
  if (r.decision && typeof r.decision === 'object') return str(r.decision.outcome);
  if (r.answers && typeof r.answers === 'object') {
    return Object.entries(r.answers).map(([k, v]) => `${Number(k) + 1}: ${str(v)}`).join(' · ');
  }
  return '';
}

/** A record's timeline, oldest first: asked, the deadline, ended (how, by whom), delivered. */
export function timeline(r) {
  const rows = [[str(r.askedAt), `Asked by ${str(r.producer && r.producer.client) || 'an agent'} (uid ${r.producer ? r.producer.uid : '?'}, pid ${r.producer && r.producer.pid != null ? r.producer.pid : '-'})${r.node ? ` on node ${r.node}` : ''}`]];
  if (r.endedAt) {
    const by = decidedBy(r);
    const d = r.decidedBy && typeof r.decidedBy === 'object' ? r.decidedBy : {};
    const who = [by && `by ${by}`, d.client && `(${str(d.client)})`, d.uid != null && `uid ${d.uid}`,
      d.rule && `rule ${typeof d.rule === 'string' ? d.rule : JSON.stringify(d.rule)}`].filter(Boolean).join(' ');
    rows.push([str(r.endedAt), `Ended: ${str(r.reason)}${who ? ` ${who}` : ''}`]);
    const o = outcome(r);
    if (o) rows.push([str(r.endedAt), `${r.kind === 'approval' ? 'Decision' : 'Answers'}: ${o}`]);
    if (r.decision && typeof r.decision.message === 'string') rows.push([str(r.endedAt), `Message to the agent: ${r.decision.message}`]);
    rows.push(['', r.delivered ? 'Delivered to the agent' : 'Not delivered to the agent']);
  } else {
    rows.push([str(r.deadline), 'Pending; times out then']);
  }
  return rows;
}

function query() {
  const p = new URLSearchParams();
  for (const f of FIELDS) {
    const v = $(`#h-${f}`).value.trim();
    if (v) p.set(f, v);
  }
  return p;
}

async function load(more) {
  const status = $('#history-status');
  const p = more ? new URLSearchParams(view.query) : query();
  if (!more) view.query = p.toString();
  if (more && view.cursor) p.set('cursor', view.cursor);
  status.textContent = 'Loading…';
  let body;
  let ok = false;
  try {
    const res = await fetch(`history?${p}`, { cache: 'no-store' });
    ok = res.ok;
    body = await res.json().catch(() => ({ error: `askbus web answered ${res.status}` }));
  } catch (e) {
    body = { error: `askbus web is not reachable (${e.message})` };
  }
  if (!ok) {
    status.textContent = `Not loaded: ${str(body && body.error) || 'unknown error'}`;
    return;
  }
  const records = Array.isArray(body.records) ? body.records : [];
  view.records = more ? view.records.concat(records) : records;
  view.cursor = typeof body.cursor === 'string' ? body.cursor : null;
  status.textContent = view.records.length
    ? `${view.records.length} record${view.records.length === 1 ? '' : 's'}, newest first${view.cursor ? '' : ' (all)'}`
    : 'No records match.';
  $('#history-more').hidden = !view.cursor;
  render();
}

function render() {
  const list = $('#history-list');
  list.replaceChildren(...view.records.map((r, i) => el('li', {}, el('button', {
    type: 'button',
    class: 'history-row',
    'data-id': str(r.correlationId),
    'aria-controls': 'history-detail',
    onclick: () => detail(i),
  }, [
    el('span', { class: 'h-when', text: str(r.askedAt) }),
    el('span', { class: `chip ${r.kind === 'approval' ? 'approve' : ''}`, text: r.kind === 'approval' ? 'Approval' : 'Question' }),
    r.context && r.context.project ? el('span', { class: 'chip project', text: str(r.context.project) }) : null,
    el('span', { class: 'h-what', text: what(r) }),
    el('span', { class: 'h-reason', text: [str(r.reason), decidedBy(r)].filter(Boolean).join(' · ') }),
  ]))));
}

function detail(i) {
  const r = view.records[i];
  const box = $('#history-detail');
  if (!r) {
    box.hidden = true;
    return;
  }
  const ctx = r.context && typeof r.context === 'object' ? r.context : {};
  const facts = [['Id', str(r.correlationId)], ['Kind', str(r.kind)], ['Project', str(ctx.project)],
    ['Agent', str(ctx.agent)], ['Title', str(ctx.title)], ['Directory', str(ctx.cwd)],
    ['Shown (SHA-256)', str(r.shownSha256)]].filter(([, v]) => v);
  const asked = [];
  if (Array.isArray(r.questions)) {
    for (const q of r.questions) asked.push(el('p', { class: 'h-question', text: `${str(q.header) ? `${str(q.header)}: ` : ''}${str(q.question)}` }));
  }
  if (r.toolCall) asked.push(el('pre', { class: 'json', text: JSON.stringify({ toolCall: r.toolCall, details: r.details ?? undefined }, null, 2) }));
  box.replaceChildren(
    el('h3', { id: 'history-detail-title', text: what(r) }),
    el('dl', { class: 'facts' }, facts.map(([k, v]) => el('div', { class: 'fact' }, [el('dt', { text: k }), el('dd', { text: v })]))),
    ...asked,
    el('h4', { text: 'Timeline' }),
    el('ol', { class: 'timeline' }, timeline(r).map(([at, text]) => el('li', {}, [
      at ? el('time', { text: at }) : null, ' ', el('span', { text }),
    ]))),
  );
  box.hidden = false;
  box.focus();
}

function toggle(open) {
  view.open = open;
  $('#history-view').hidden = !open;
  $('#main').hidden = open;
  $('#history').setAttribute('aria-pressed', String(open));
  if (open) {
    load(false);
    $('#h-since').focus();
  }
}

/** Wires the History button and the view's form. */
export function setupHistory() {
  $('#history').onclick = () => toggle(!view.open);
  $('#history-close').onclick = () => toggle(false);
  $('#history-form').onsubmit = (e) => {
    e.preventDefault();
    $('#history-detail').hidden = true;
    load(false);
  };
  $('#history-more').onclick = () => load(true);
  document.addEventListener('keydown', (e) => {
    if (view.open && e.key === 'Escape' && !e.isComposing) toggle(false);
  });
}
