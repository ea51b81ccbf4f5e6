/**
 * Answers encoded as the reference ask_user dialog (Gemini CLI) encodes them, so the model
 * reads a UI's answer exactly as it would read one given in the terminal: a choice's label;
 * for multiSelect the chosen labels in option order, then the "Other" text, joined by ", ";
 * "Yes"/"No" for yesno; free text trimmed.
 */

import type { Answers, Question } from "./protocol.js";

function optionLabels(q: Question): string[] {
  return (q.options ?? []).map((o) => o.label);
}

function labelOf(q: Question, choice: string | number): string {
  const labels = optionLabels(q);
  if (typeof choice === "number") {
    const label = labels[choice];
    if (label === undefined) throw new RangeError(`option ${choice} does not exist (the question has ${labels.length})`);
    return label;
  }
  if (!labels.includes(choice)) throw new RangeError(`${JSON.stringify(choice)} is not one of the options`);
  return choice;
}

/** A single choice, by option label or index. */
export function choiceAnswer(q: Question, choice: string | number): string {
  return labelOf(q, choice);
}

/** A multiSelect answer: the chosen options (indices, or labels naming their first option; any
 * order) in option order, then the trimmed "Other" text if any, joined by ", ". */
export function multiSelectAnswer(q: Question, chosen: Iterable<string | number>, otherText?: string): string {
  const labels = optionLabels(q);
  const indices = new Set<number>();
  for (const c of chosen) {
    labelOf(q, c);
    indices.add(typeof c === "number" ? c : labels.indexOf(c));
  }
  const parts = [...indices].sort((x, y) => x - y).map((i) => labels[i]!);
  const other = otherText?.trim();
  if (other) parts.push(other);
  return parts.join(", ");
}

/** A yesno answer. */
export function yesNoAnswer(yes: boolean): "Yes" | "No" {
  return yes ? "Yes" : "No";
}

/** A free-text answer (a text question, or the "Other" field of a choice or yesno), trimmed. */
export function textAnswer(text: string): string {
  return text.trim();
}

/** Builds the answers object from one entry per question; `undefined` and empty entries are
 * left out, as the dialog leaves out questions the user skipped. */
export function buildAnswers(perQuestion: ReadonlyArray<string | undefined>): Answers {
  const out: Answers = {};
  perQuestion.forEach((a, i) => {
    if (a !== undefined && a !== "") out[String(i)] = a;
  });
  return out;
}
