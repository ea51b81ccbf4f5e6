/**
 * The runnable examples run: each against a real daemon, with the other role played by this
 * package, as a user would try them.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Producer, subscribe } from "../src/index.js";
import { closeLater, Q_DB, Q_YESNO, startDaemon, within, type Daemon } from "./helpers.js";

const EXAMPLES = fileURLToPath(new URL("../../examples/", import.meta.url));

function run(script: string, socket: string) {
  const child = spawn(process.execPath, [EXAMPLES + script], {
    env: { ...process.env, ASKBUS_SOCKET: socket },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  const waitFor = async (re: RegExp) => {
    while (!re.test(out)) await within(new Promise((r) => child.stdout.once("data", r)), 10_000, `${script} printing ${re}`);
  };
  return { child, exited, waitFor, out: () => out, err: () => err };
}

/** A UI answering the first request with `answers`; resolves once subscribed, with the
 * answering loop boxed (an async function returning a promise would wait for it). */
async function answerOnce(socket: string, answers: Record<string, string>) {
  const sub = closeLater(subscribe({ socket }));
  await sub.ready;
  const loop = (async () => {
    for await (const req of sub) {
      await req.answer(answers);
      break;
    }
  })();
  return { loop };
}

describe("examples/", () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    await d.stop();
    d.cleanup();
  });

  test("ask.mjs prints the answer and the display text", async () => {
    const ui = await answerOnce(d.socket, { "0": "SQLite", "1": "Yes" });
    const ex = run("ask.mjs", d.socket);
    assert.equal(await within(ex.exited, 10_000, "ask.mjs"), 0, ex.err());
    await ui.loop;
    assert.match(ex.out(), /answered: \{ '0': 'SQLite', '1': 'Yes' \}/);
    assert.match(ex.out(), /Database → SQLite\n {2}Migrate → Yes/);
  });

  test("ui.mjs answers from what is typed, in the reference encoding", async () => {
    const ex = run("ui.mjs", d.socket);
    const p = closeLater(new Producer({ socket: d.socket }));
    const asked = p.ask([...Q_DB, ...Q_YESNO]);
    await ex.waitFor(/Which database\?[\s\S]*> \(/);
    ex.child.stdin.write("2\n");
    await ex.waitFor(/Deploy now\?[\s\S]*> \(/);
    ex.child.stdin.write("y\n");
    const r = await within(asked, 10_000, "answer from ui.mjs");
    assert.deepEqual(r.answers, { "0": "PostgreSQL", "1": "Yes" });
    await ex.waitFor(/answered/);
    ex.child.kill("SIGTERM");
    await ex.exited;
    p.close();
  });

  test("ui.mjs leaves quietly on Ctrl-C, and the question stays pending", async () => {
    const ex = run("ui.mjs", d.socket);
    const p = closeLater(new Producer({ socket: d.socket }));
    const asked = p.ask(Q_DB);
    await ex.waitFor(/Which database\?[\s\S]*> \(/);
    ex.child.kill("SIGINT");
    assert.equal(await within(ex.exited, 10_000, "ui.mjs after SIGINT"), 0, ex.err());
    assert.equal(ex.err(), "");
    // Still pending: another UI answers it.
    const ui = await answerOnce(d.socket, { "0": "SQLite" });
    assert.deepEqual((await within(asked, 10_000, "the other UI's answer")).answers, { "0": "SQLite" });
    await ui.loop;
  });

  test("ui.mjs leaves quietly when its input ends (Ctrl-D)", async () => {
    const ex = run("ui.mjs", d.socket);
    ex.child.stdin.end();
    assert.equal(await within(ex.exited, 10_000, "ui.mjs after end of input"), 0, ex.err());
    assert.equal(ex.err(), "");
  });
});
