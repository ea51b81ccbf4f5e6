#!/usr/bin/env node
// A terminal UI: shows every question askbusd brokers and sends back what you type, encoded as
// Gemini CLI's own dialog encodes it. An empty line skips a question; "!" dismisses the dialog.
import { createInterface } from "node:readline/promises";
import {
  buildAnswers, choiceAnswer, multiSelectAnswer, NotPending, subscribe, textAnswer, yesNoAnswer,
} from "askbus";

const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: process.stdin.isTTY });
const sub = subscribe({ client: "ui-example/1" });
sub.on("withdrawn", (req, reason) => console.log(`\n[${req.correlationId}] withdrawn: ${reason}`));
sub.on("disconnected", (e) => console.log(`[askbus] ${e.message}; reconnecting…`));

// Ctrl-C (a signal, or ^C read by the terminal's readline) and Ctrl-D leave quietly: the
// subscription closes, and the question on screen stays pending for any other UI.
function quit() {
  sub.close();
  rl.close();
  process.stdout.write("\n");
  process.exit(0);
}
process.once("SIGINT", quit);
process.once("SIGTERM", quit);
rl.once("SIGINT", quit);
rl.once("close", quit);

/** One answer, or null to dismiss, read from the terminal. */
async function read(q, signal) {
  console.log(`\n${q.header}: ${q.question}`);
  (q.options ?? []).forEach((o, i) => console.log(`  ${i + 1}. ${o.label}${o.description ? ` — ${o.description}` : ""}`));
  const hint = q.type === "yesno" ? "y/n or text" : q.type === "text" ? "text" : q.multiSelect ? "numbers, e.g. 1,3, or text" : "number or text";
  const line = (await rl.question(`> (${hint}) `, { signal })).trim();
  if (line === "!") return null;
  if (line === "") return undefined;
  if (q.type === "yesno" && /^(y|yes|n|no)$/i.test(line)) return yesNoAnswer(/^y/i.test(line));
  if (q.type === "choice") {
    const picks = line.split(",").map((s) => Number(s.trim()) - 1);
    if (picks.every((n) => Number.isInteger(n) && n >= 0 && n < q.options.length)) {
      return q.multiSelect ? multiSelectAnswer(q, picks) : choiceAnswer(q, picks[0]);
    }
  }
  return textAnswer(line); // "Other" for choice and yesno, the answer for text
}

for await (const req of sub) {
  console.log(`\n[${req.correlationId}] from ${req.producer.client ?? `pid ${req.producer.pid}`}`);
  try {
    const answers = [];
    let dismissed = false;
    for (const q of req.questions) {
      const a = await read(q, req.signal);
      if (a === null) { dismissed = true; break; }
      answers.push(a);
    }
    const outcome = dismissed ? await req.dismiss() : await req.answer(buildAnswers(answers));
    console.log(`[${req.correlationId}] ${outcome}`);
  } catch (e) {
    if (req.signal.aborted || e instanceof NotPending) continue; // gone: another UI, a timeout…
    throw e;
  }
}
