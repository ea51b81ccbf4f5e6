// dialog.js — the dialog that answers a question or decides an approval: its rendering,
// its keys, and the frames its buttons send. The answer strings come from answers.js, the
// approval frames from approvals.js. Every text from the bus is put in the page as text,
// never as HTML (dom.js).

import * as A from './answers.js';
import * as P from './approvals.js';
import { body as approvalBody } from './approval-view.js';
import { el, inline } from './dom.js';
import * as H from './history.js';
import { send } from './bus.js';
import { agentName, countdown, tick } from './queue.js';
import { $, app, clearNoticeSoon } from './state.js';

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

export function renderDialog(focus) {
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
export function renderDialogState() {
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

function isTextField(t) {
  return t instanceof HTMLTextAreaElement || (t instanceof HTMLInputElement && t.type === 'text');
}

export function onKey(e) {
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
