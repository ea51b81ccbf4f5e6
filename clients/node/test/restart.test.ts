/**
 * Daemon restarts lose no question (issue 8's guarantee, the clients' half): producers
 * reconnect and resend under the same correlationId, UIs reconnect and take the replay without
 * yielding a request twice, and an answer given while the daemon was down is delivered once.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { DaemonUnreachable, Producer, subscribe, type UiRequest } from "../src/index.js";
import { closeLater, delay, Q_DB, Q_YESNO, startDaemon, within } from "./helpers.js";

const FAST = { initialDelayMs: 20, maxDelayMs: 200 };

function collect(sub: ReturnType<typeof subscribe>) {
  const yielded: UiRequest[] = [];
  const waiters: Array<() => void> = [];
  const loop = (async () => {
    for await (const req of sub) {
      yielded.push(req);
      waiters.splice(0).forEach((w) => w());
    }
  })();
  const until = async (n: number) => {
    while (yielded.length < n) await within(new Promise<void>((r) => waiters.push(r)), 5000, `request #${n}`);
  };
  return { yielded, loop, until };
}

test("SIGKILL mid-ask, restart on the same socket: every question answered exactly once", async () => {
  let d = await startDaemon();
  const socket = d.socket;
  const p = closeLater(new Producer({ socket, client: "restart-agent", reconnect: FAST }));
  const sub = closeLater(subscribe({ socket, reconnect: FAST, resumeGraceMs: 3000 }));
  await sub.ready;
  const ui = collect(sub);
  const asks = ["k0", "k1", "k2"].map((id) => p.start(Q_DB, { correlationId: id, timeoutMs: 30_000 }));
  await ui.until(3);
  assert.equal(await ui.yielded[0]!.answer({ "0": "SQLite" }), "answered");
  assert.equal((await asks[0]!.response).answers["0"], "SQLite");

  const reconnected = new Promise((r) => sub.once("connected", r));
  await d.kill();
  // Answered while no daemon runs: held, and sent once the request is back.
  const lateAnswer = ui.yielded[1]!.answer({ "0": "PostgreSQL" });
  await delay(100);
  d = await startDaemon({ socket, dir: d.dir });
  await within(reconnected, 5000, "UI reconnect");

  assert.equal(await within(lateAnswer, 5000, "held answer"), "answered");
  const r1 = await within(asks[1]!.response, 5000, "k1");
  assert.equal(r1.reason, "answered");
  assert.deepEqual(r1.answers, { "0": "PostgreSQL" });

  // k2 is back at the UI as the same request object, not yielded a second time.
  const k2 = ui.yielded[2]!;
  assert.equal(k2.state, "pending");
  assert.ok(k2.timeLeftMs > 20_000, "resent with the time it had left");
  assert.equal(await k2.answer({ "0": "SQLite" }), "answered");
  const r2 = await within(asks[2]!.response, 5000, "k2");
  assert.deepEqual(r2.answers, { "0": "SQLite" });
  await delay(100);
  assert.deepEqual(
    ui.yielded.map((r) => r.correlationId),
    ["k0", "k1", "k2"],
    "no request yielded twice",
  );

  // The new daemon saw each resent question once and answered each once.
  const stats = await p.stats();
  const text = JSON.stringify(stats);
  assert.match(text, /"accepted":2\b/, text);
  assert.match(text, /"answered":2\b/, text);
  assert.equal(p.pendingCount, 0);
  p.close();
  sub.close();
  await ui.loop;
  assert.equal(await d.stop(), 0);
  d.cleanup();
});

test("graceful restart (SIGTERM): the shutdown answer is held and the question re-asked", async () => {
  let d = await startDaemon();
  const socket = d.socket;
  const p = closeLater(new Producer({ socket, reconnect: FAST }));
  const sub = closeLater(subscribe({ socket, reconnect: FAST, resumeGraceMs: 3000 }));
  await sub.ready;
  const ui = collect(sub);
  const asked = p.ask(Q_YESNO, { correlationId: "term-1", timeoutMs: 30_000 });
  await ui.until(1);
  const req = ui.yielded[0]!;
  assert.equal(await d.stop(), 0);
  // The daemon withdrew it with "shutdown"; the UI keeps it for the next daemon.
  assert.equal(req.state, "pending");
  d = await startDaemon({ socket, dir: d.dir });
  await within(new Promise((r) => sub.once("connected", r)), 5000, "UI reconnect");
  await delay(200);
  assert.equal(await within(req.answer({ "0": "Yes" }), 5000, "answer after restart"), "answered");
  const r = await within(asked, 5000, "ask across restart");
  assert.equal(r.reason, "answered");
  assert.deepEqual(r.answers, { "0": "Yes" });
  assert.equal(ui.yielded.length, 1);
  p.close();
  sub.close();
  await ui.loop;
  await d.stop();
  d.cleanup();
});

test("no daemon comes back in time: asks end at their deadline, UIs see the requests withdrawn", async () => {
  const d = await startDaemon();
  const socket = d.socket;
  const p = closeLater(new Producer({ socket, reconnect: FAST }));
  const quitter = closeLater(new Producer({ socket, reconnect: FAST }));
  const sub = closeLater(subscribe({ socket, reconnect: FAST, resumeGraceMs: 200 }));
  await sub.ready;
  const ui = collect(sub);
  const short = p.ask(Q_YESNO, { correlationId: "gone-short", timeoutMs: 700 });
  const abandoned = quitter.ask(Q_YESNO, { correlationId: "gone-abandoned", timeoutMs: 60_000 });
  await ui.until(2);
  const started = Date.now();
  await d.kill();
  await assert.rejects(within(short, 5000, "ask"), (e: unknown) => {
    assert.ok(e instanceof DaemonUnreachable, String(e));
    assert.equal(e.socketPath, socket);
    assert.equal(e.correlationId, "gone-short");
    return true;
  });
  assert.ok(Date.now() - started < 2000, "ended at its deadline, not later");
  // Its producer gives up while the daemon is down: the question never comes back.
  quitter.close();
  await assert.rejects(abandoned, { code: "connection-closed" });
  const d2 = await startDaemon({ socket, dir: d.dir });
  // Two producers, two connections: either may reach the daemon first.
  const byId = (id: string) => ui.yielded.find((r) => r.correlationId === id)!;
  const [shortReq, abandonedReq] = [byId("gone-short"), byId("gone-abandoned")];
  const withdrawn = (req: UiRequest) =>
    within(
      new Promise<void>((r) => (req.signal.aborted ? r() : req.signal.addEventListener("abort", () => r()))),
      5000,
      "withdrawal after grace",
    );
  await Promise.all([withdrawn(shortReq), withdrawn(abandonedReq)]);
  assert.equal(shortReq.withdrawnReason, "timeout");
  assert.equal(abandonedReq.withdrawnReason, "connection-lost");
  p.close();
  sub.close();
  await ui.loop;
  await d2.stop();
  d2.cleanup();
});

test("daemon stopped for good: the held shutdown answer is given at the deadline", async () => {
  const d = await startDaemon();
  const p = closeLater(new Producer({ socket: d.socket, reconnect: FAST }));
  const sub = closeLater(subscribe({ socket: d.socket, reconnect: false }));
  await sub.ready;
  const asked = p.ask(Q_YESNO, { timeoutMs: 600 });
  for await (const _ of sub) break;
  assert.equal(await d.stop(), 0);
  const r = await within(asked, 5000, "ask");
  assert.equal(r.reason, "shutdown");
  assert.equal(r.cancelled, true);
  p.close();
  d.cleanup();
});
