// The answer encoding of askbus web (cli/src/web/assets/answers.js), checked without a
// browser: every question type, the reference dialog's rules for Other, All of the above,
// yesno and text, and the frames the page sends.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import * as A from '../../cli/src/web/assets/answers.js';

const db = {
  question: 'Which database?',
  header: 'Database',
  type: 'choice',
  options: [
    { label: 'PostgreSQL', description: 'A server' },
    { label: 'SQLite', description: 'A file' },
    { label: 'DuckDB', description: 'Columns' },
  ],
};
const multi = { ...db, multiSelect: true };
const yesno = { question: 'Migrate?', header: 'Migrate', type: 'yesno' };
const text = { question: 'Name?', header: 'Name', type: 'text', placeholder: 'e.g. api' };

/** Applies transitions in turn, starting from a fresh state. */
function run(q, ...steps) {
  return steps.reduce((s, step) => step(s), A.initialState(q));
}

test('single choice: the picked label; picking again replaces it', () => {
  assert.equal(A.answerOf(db, A.initialState(db)), null);
  assert.equal(A.answerOf(db, run(db, (s) => A.pickOption(db, s, 1))), 'SQLite');
  const s = run(db, (s) => A.pickOption(db, s, 1), (s) => A.pickOption(db, s, 2));
  assert.equal(A.answerOf(db, s), 'DuckDB');
});

test('single choice Other: the trimmed text, and typing selects it', () => {
  let s = run(db, (s) => A.pickOption(db, s, 0), (s) => A.setOtherText(db, s, '  MariaDB \t'));
  assert.equal(s.picked, 'other');
  assert.equal(A.answerOf(db, s), 'MariaDB');
  // An option picked after typing wins, and the typed text does not leak into it.
  s = A.pickOption(db, s, 0);
  assert.equal(A.answerOf(db, s), 'PostgreSQL');
  // Other picked with blank text is unanswered; blank typing does not select Other.
  assert.equal(A.answerOf(db, run(db, (s) => A.pickOther(db, s), (s) => A.setOtherText(db, s, '   '))), null);
  assert.equal(run(db, (s) => A.pickOption(db, s, 2), (s) => A.setOtherText(db, s, ' ')).picked, 2);
  // JavaScript's trim, as the reference's: NBSP and BOM go too.
  assert.equal(A.answerOf(db, run(db, (s) => A.setOtherText(db, s, '\ufeff\u00a0x y\u00a0'))), 'x y');
});

test('multiSelect: checked labels in option order, then the Other text, joined by ", "', () => {
  const s = run(multi,
    (s) => A.pickOption(multi, s, 2),
    (s) => A.pickOption(multi, s, 0),
    (s) => A.setOtherText(multi, s, ' Redis '));
  assert.equal(s.otherChecked, true, 'typing checks Other');
  assert.equal(A.answerOf(multi, s), 'PostgreSQL, DuckDB, Redis');
  // Unchecking Other keeps its text out of the answer.
  assert.equal(A.answerOf(multi, A.pickOther(multi, s)), 'PostgreSQL, DuckDB');
  // A second pick unchecks.
  assert.equal(A.answerOf(multi, A.pickOption(multi, s, 0)), 'DuckDB, Redis');
  assert.equal(A.answerOf(multi, run(multi, (s) => A.setOtherText(multi, s, 'Only this'))), 'Only this');
  assert.equal(A.answerOf(multi, A.initialState(multi)), null);
  assert.equal(A.answerOf(multi, run(multi, (s) => A.pickOther(multi, s))), null, 'Other checked but empty');
});

test('All of the above checks every option and answers with their labels, never the phrase', () => {
  const all = run(multi, (s) => A.toggleAll(multi, s));
  assert.equal(A.allChecked(all), true);
  assert.equal(A.answerOf(multi, all), 'PostgreSQL, SQLite, DuckDB');
  assert.ok(!A.answerOf(multi, all).includes(A.ALL_LABEL));
  // With all checked it clears them; with some checked it checks the rest.
  assert.equal(A.answerOf(multi, A.toggleAll(multi, all)), null);
  const some = run(multi, (s) => A.pickOption(multi, s, 1), (s) => A.toggleAll(multi, s));
  assert.equal(A.answerOf(multi, some), 'PostgreSQL, SQLite, DuckDB');
  // Unchecking one leaves All unchecked, and Other still comes last.
  const most = run(multi, (s) => A.toggleAll(multi, s), (s) => A.pickOption(multi, s, 1),
    (s) => A.setOtherText(multi, s, 'Redis'));
  assert.equal(A.allChecked(most), false);
  assert.equal(A.answerOf(multi, most), 'PostgreSQL, DuckDB, Redis');
});

test('All of the above is offered only for a multiSelect of more than one option', () => {
  assert.equal(A.hasAllOfTheAbove(multi), true);
  assert.equal(A.hasAllOfTheAbove(db), false);
  assert.equal(A.hasAllOfTheAbove({ ...multi, options: [db.options[0]] }), false);
  assert.equal(A.hasAllOfTheAbove({ ...yesno, multiSelect: true }), false);
});

test('yesno: exactly Yes or No whatever options the model sent, or the Other feedback', () => {
  const odd = { ...yesno, options: [{ label: 'Sure', description: '' }, { label: 'Nope', description: '' }, { label: 'Later', description: '' }], multiSelect: true };
  assert.deepEqual(A.optionsOf(odd).map((o) => o.label), ['Yes', 'No']);
  assert.equal(A.isMulti(odd), false, 'yesno is never multiSelect');
  assert.equal(A.answerOf(odd, run(odd, (s) => A.pickOption(odd, s, 0))), 'Yes');
  assert.equal(A.answerOf(odd, run(odd, (s) => A.pickOption(odd, s, 1))), 'No');
  assert.equal(A.answerOf(odd, run(odd, (s) => A.setOtherText(odd, s, ' only on staging '))), 'only on staging');
  assert.deepEqual(A.rowsOf(odd), [{ kind: 'option', index: 0 }, { kind: 'option', index: 1 }, { kind: 'other' }]);
});

test('text: the trimmed text, inner spacing and newlines kept; blank is unanswered', () => {
  assert.equal(A.answerOf(text, A.setText(A.initialState(text), '  ship it\n')), 'ship it');
  assert.equal(A.answerOf(text, A.setText(A.initialState(text), 'a  b\nc')), 'a  b\nc');
  assert.equal(A.answerOf(text, A.setText(A.initialState(text), ' \n\t')), null);
  assert.deepEqual(A.rowsOf(text), []);
});

test('placeholders: the question\'s own, else the reference\'s hints', () => {
  assert.equal(A.placeholderOf(text), 'e.g. api');
  assert.equal(A.placeholderOf({ ...text, placeholder: '' }), 'Enter your response');
  assert.equal(A.placeholderOf(db), 'Enter a custom value');
  assert.equal(A.placeholderOf({ ...db, placeholder: 'Another engine' }), 'Another engine');
});

test('number keys pick rows in screen order: options, All of the above, Other', () => {
  assert.deepEqual(A.rowsOf(multi).map((r) => r.kind), ['option', 'option', 'option', 'all', 'other']);
  assert.equal(A.answerOf(db, run(db, (s) => A.pickRow(db, s, 1))), 'SQLite');
  assert.equal(run(db, (s) => A.pickRow(db, s, 3)).picked, 'other');
  assert.equal(A.answerOf(multi, run(multi, (s) => A.pickRow(multi, s, 3))), 'PostgreSQL, SQLite, DuckDB');
  assert.equal(run(multi, (s) => A.pickRow(multi, s, 4)).otherChecked, true);
  const s = A.initialState(db);
  assert.equal(A.pickRow(db, s, 9), s, 'no such row: nothing changes');
});

test('a label that is blank once trimmed does not count as an answer', () => {
  const q = { ...db, options: [{ label: ' ', description: '' }, { label: 'B', description: '' }] };
  assert.equal(A.answerOf(q, run(q, (s) => A.pickOption(q, s, 0))), null);
  // Labels are sent as they are, untrimmed, as the reference sends them.
  const q2 = { ...db, options: [{ label: ' Padded ', description: '' }, { label: 'B', description: '' }] };
  assert.equal(A.answerOf(q2, run(q2, (s) => A.pickOption(q2, s, 0))), ' Padded ');
});

test('the review leaves unanswered questions out; keys are question indices', () => {
  const qs = [db, text, yesno];
  const states = [
    run(db, (s) => A.pickOption(db, s, 0)),
    A.initialState(text),
    run(yesno, (s) => A.pickOption(yesno, s, 0)),
  ];
  const answers = A.collectAnswers(qs, states);
  assert.deepEqual(answers, { 0: 'PostgreSQL', 2: 'Yes' });
  assert.deepEqual(Object.keys(answers), ['0', '2']);
  assert.deepEqual(A.collectAnswers(qs, qs.map(A.initialState)), {});
});

test('the frames: an answer, and a dismissal with cancelled: true', () => {
  assert.deepEqual(A.answerFrame('c-1', { 0: 'x' }), {
    type: 'ask-user-response', correlationId: 'c-1', answers: { 0: 'x' },
  });
  assert.deepEqual(A.dismissFrame('c-1'), {
    type: 'ask-user-response', correlationId: 'c-1', answers: {}, cancelled: true,
  });
});

test('transitions never change the state they are given', () => {
  const s = Object.freeze({ ...A.initialState(multi), checked: Object.freeze([false, false, false]) });
  A.pickOption(multi, s, 0);
  A.toggleAll(multi, s);
  A.pickOther(multi, s);
  A.setOtherText(multi, s, 'x');
  assert.deepEqual(s.checked, [false, false, false]);
});
