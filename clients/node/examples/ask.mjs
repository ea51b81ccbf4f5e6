#!/usr/bin/env node
// Asks one question through askbusd and prints the answer and the tool result the model gets.
// Run a daemon (askbusd) and a UI (node examples/ui.mjs), then: node examples/ask.mjs
import { ask, AskbusError } from "askbus";

const questions = [
  {
    question: "Which database should the new service use?",
    header: "Database",
    type: "choice",
    options: [
      { label: "SQLite", description: "A single file; nothing to run" },
      { label: "PostgreSQL", description: "A server; best for many writers" },
    ],
  },
  { question: "Add a migration for the users table?", header: "Migrate", type: "yesno" },
];

try {
  const r = await ask(questions, { client: "ask-example/1", timeoutMs: 120_000 });
  console.log(`${r.reason}:`, r.answers);
  console.log(r.result.returnDisplay);
} catch (e) {
  if (!(e instanceof AskbusError)) throw e;
  console.error(`askbus: ${e.code}: ${e.message}`);
  process.exitCode = 1;
}
