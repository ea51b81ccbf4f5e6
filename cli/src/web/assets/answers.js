// answers.js — the answer encoding of Gemini CLI's ask_user dialog, as every askbus UI must
// produce it (proto/PROTOCOL.md), and the widget state it is computed from. Pure functions
// over plain objects: no DOM, so `node --test` checks it without a browser (tests/web/).
//
// The encoding:
// - choice, single: the picked option's label, or the trimmed "Other" text;
// - choice, multiSelect: the checked labels in option order, then the trimmed "Other" text
//   when its box is checked, joined by ", "; "All of the above" checks every option, so the
//   answer lists their labels and never the phrase;
// - yesno: "Yes" or "No" (options the model supplied are ignored), or the trimmed "Other"
//   feedback text;
// - text: the trimmed text;
// - an answer that is empty after trimming leaves the question unanswered, and unanswered
//   questions are left out of `answers`;
// - dismissing sends `cancelled: true`.

export const OTHER_HINT = 'Enter a custom value';
export const TEXT_HINT = 'Enter your response';
export const ALL_LABEL = 'All of the above';
export const ALL_DESCRIPTION = 'Select all options';

const YES_NO = Object.freeze([
  Object.freeze({ label: 'Yes', description: '' }),
  Object.freeze({ label: 'No', description: '' }),
]);

/** The options a question shows: Yes and No for yesno, whatever the model sent. */
export function optionsOf(q) {
  if (q.type === 'yesno') return YES_NO;
  return Array.isArray(q.options) ? q.options : [];
}

export function isMulti(q) {
  return q.type === 'choice' && q.multiSelect === true;
}

/** "All of the above" is offered for a multiSelect with more than one option. */
export function hasAllOfTheAbove(q) {
  return isMulti(q) && optionsOf(q).length > 1;
}

/** The hint in the free-text box: the question's placeholder, else the reference's. */
export function placeholderOf(q) {
  if (typeof q.placeholder === 'string' && q.placeholder !== '') return q.placeholder;
  return q.type === 'text' ? TEXT_HINT : OTHER_HINT;
}

/** The rows of a choice in screen order (what number keys 1…n pick); [] for text. */
export function rowsOf(q) {
  if (q.type === 'text') return [];
  const rows = optionsOf(q).map((_, i) => ({ kind: 'option', index: i }));
  if (hasAllOfTheAbove(q)) rows.push({ kind: 'all' });
  rows.push({ kind: 'other' });
  return rows;
}

/**
 * A question's fresh widget state. Choice: `picked` is an option index, 'other' or null
 * (single), `checked` one flag per option and `otherChecked` (multi), `otherText` the free
 * text. Text: `text`.
 */
export function initialState(q) {
  if (q.type === 'text') return { text: '' };
  return {
    picked: null,
    checked: optionsOf(q).map(() => false),
    otherChecked: false,
    otherText: '',
  };
}

/** Picks option `i`: selects it (single) or toggles it (multi). */
export function pickOption(q, s, i) {
  if (isMulti(q)) {
    const checked = s.checked.slice();
    checked[i] = !checked[i];
    return { ...s, checked };
  }
  return { ...s, picked: i };
}

/** Picks "Other": selects it (single) or toggles its box (multi). */
export function pickOther(q, s) {
  if (isMulti(q)) return { ...s, otherChecked: !s.otherChecked };
  return { ...s, picked: 'other' };
}

/** "All of the above": checks every option, or clears them all when all are checked. */
export function toggleAll(q, s) {
  const all = allChecked(s);
  return { ...s, checked: s.checked.map(() => !all) };
}

export function allChecked(s) {
  return s.checked.length > 0 && s.checked.every(Boolean);
}

/** Typing in the Other box selects Other (and, single, unselects the options), as the
 * reference does once the text is not blank. */
export function setOtherText(q, s, text) {
  const next = { ...s, otherText: text };
  if (text.trim() === '') return next;
  if (isMulti(q)) return { ...next, otherChecked: true };
  return { ...next, picked: 'other' };
}

export function setText(s, text) {
  return { ...s, text };
}

/** Picks row `n` (0-based, as `rowsOf` lists them), as a number key does. */
export function pickRow(q, s, n) {
  const row = rowsOf(q)[n];
  if (!row) return s;
  if (row.kind === 'option') return pickOption(q, s, row.index);
  if (row.kind === 'all') return toggleAll(q, s);
  return pickOther(q, s);
}

/** The answer to one question, or null while it is unanswered. */
export function answerOf(q, s) {
  if (q.type === 'text') return nonBlank(s.text.trim());
  const labels = optionsOf(q).map((o) => o.label);
  if (isMulti(q)) {
    const parts = labels.filter((_, i) => s.checked[i]);
    const other = s.otherText.trim();
    if (s.otherChecked && other !== '') parts.push(other);
    return nonBlank(parts.join(', '));
  }
  if (s.picked === 'other') return nonBlank(s.otherText.trim());
  if (typeof s.picked === 'number') return nonBlank(labels[s.picked] ?? '');
  return null;
}

/** The `answers` object of a response: question index → answer, unanswered left out. */
export function collectAnswers(questions, states) {
  const answers = {};
  questions.forEach((q, i) => {
    const a = answerOf(q, states[i]);
    if (a !== null) answers[String(i)] = a;
  });
  return answers;
}

/** The frame that answers a request. */
export function answerFrame(correlationId, answers) {
  return { type: 'ask-user-response', correlationId, answers };
}

/** The frame that dismisses a request (Esc). */
export function dismissFrame(correlationId) {
  return { type: 'ask-user-response', correlationId, answers: {}, cancelled: true };
}

// The reference drops an answer that is blank once trimmed.
function nonBlank(s) {
  return s.trim() === '' ? null : s;
}
