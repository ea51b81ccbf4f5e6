// A producer process for the crash-loop test (tests/e2e/crash_loop.rs): the Node twin of
// producer.py. It asks the questions listed in a file through the Node client (its Producer,
// which reconnects and resends under the same correlationId across daemon restarts) and
// appends one JSON line per event to its log, each with a single write(2), so a SIGKILL of
// anything leaves only whole lines:
//
//     {"ask": cid, "t": ms}                          before the question is sent
//     {"cid": cid, "reason": ..., "answers": {...}}   its one terminal outcome
//     {"cid": cid, "kind": "approval", "reason", "confirmed", "outcome", "message", "payload"}
//                                                     the same, for an approval
//     {"error": string, "cid": cid}                   an ask that rejected
//     {"dup": cid} / {"foreign": cid}                 wire-level violations (see below)
//     {"done": true}                                  every question has ended
//
// Usage: node producer.mjs CLIENT_DIST SOCKET NAME TODO_FILE LOG_FILE CONCURRENCY TIMEOUT_MS [APPROVE_EVERY]
//
// With APPROVE_EVERY = k > 0, every index with index % k == k - 1 is an approval (a
// tool-confirmation-request through Producer.confirm, toolFor(index), as producer.py's
// tool_for) instead of questions.
//
// CLIENT_DIST is the directory of the compiled client (its index.js). correlationIds are
// "NAME:INDEX". The client drops frames it cannot match, which would hide exactly what this
// test looks for, so its frame handler is wrapped to see every ask-user-response as it comes
// off the wire, per connection: a second one for one id on one connection is a duplicate
// terminal frame, one for an id this process never asked is another producer's.

import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [dist, socket, name, todoFile, logFile, concurrency, timeoutMs, approveArg] = process.argv.slice(2);
const approveEvery = Number(approveArg ?? 0);
const askbus = await import(pathToFileURL(path.join(dist, "index.js")).href);

const fd = fs.openSync(logFile, "a", 0o644);
const log = (fields) => fs.writeSync(fd, JSON.stringify(fields) + "\n");

// The same questions as producer.py's questions_for: one to three, of every type.
function questionsFor(index) {
  const choice = {
    question: `Which database for task ${index}?`,
    header: "Database",
    type: "choice",
    options: [
      { label: "SQLite", description: "A single file" },
      { label: "PostgreSQL", description: "A server" },
    ],
  };
  const yesno = { question: "Run the migration now?", header: "Migrate", type: "yesno" };
  const text = { question: "Name the new table", header: "Table", type: "text", placeholder: "e.g. accounts" };
  return [[choice], [choice, yesno], [text, yesno, choice]][index % 3];
}

// The tool call an approval asks about: producer.py's tool_for.
function toolFor(index) {
  const command = `make task-${index}`;
  return {
    toolCall: { name: "run_shell_command", args: { command } },
    details: { type: "exec", title: "Confirm Shell Command", command, rootCommand: "make", rootCommands: ["make"] },
    outcomes: ["proceed_once", "proceed_always", "modify_with_editor", "cancel"],
  };
}

const prefix = `${name}:`;
const todo = fs.readFileSync(todoFile, "utf8").split("\n").filter((l) => l.trim()).map(Number);
// waitForDaemon: a producer started while the test restarts the daemon waits for it.
const producer = new askbus.Producer({ socket, client: `crash-producer/${name}`, waitForDaemon: true });

const seen = new WeakMap();
const inner = producer.onFrame.bind(producer);
producer.onFrame = (conn, frame) => {
  if (frame.type === "ask-user-response" || frame.type === "tool-confirmation-response") {
    const cid = frame.correlationId;
    if (typeof cid !== "string" || !cid.startsWith(prefix)) log({ foreign: cid });
    else {
      let ids = seen.get(conn);
      if (!ids) seen.set(conn, (ids = new Set()));
      if (ids.has(cid)) log({ dup: cid });
      ids.add(cid);
    }
  }
  inner(conn, frame);
};

let next = 0;
async function worker() {
  while (next < todo.length) {
    const index = todo[next++];
    const cid = `${prefix}${index}`;
    log({ ask: cid, t: Date.now() });
    if (approveEvery && index % approveEvery === approveEvery - 1) {
      // confirm never rejects: a refused or lost request is a reason other than answered,
      // which the test fails on.
      const { toolCall, details, outcomes } = toolFor(index);
      const c = await producer.confirm(toolCall, { details, outcomes, correlationId: cid, timeoutMs: Number(timeoutMs) });
      log({
        cid: c.correlationId, kind: "approval", reason: c.reason, confirmed: c.confirmed, outcome: c.outcome,
        message: c.message ?? null, payload: c.payload ?? null, error: c.error === undefined ? null : String(c.error), t: Date.now(),
      });
      continue;
    }
    try {
      const r = await producer.ask(questionsFor(index), { correlationId: cid, timeoutMs: Number(timeoutMs) });
      log({ cid: r.correlationId, reason: r.reason, answers: r.answers, t: Date.now() });
    } catch (e) {
      log({ error: String(e), code: e?.code ?? null, cid });
    }
  }
}

await Promise.all(Array.from({ length: Number(concurrency) }, worker));
await producer.close();
log({ done: true });
