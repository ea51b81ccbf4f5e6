/**
 * The producer against the real daemon: every outcome an ask can have, errors with their wire
 * codes, AbortSignal, and many concurrent asks on one connection.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  ask,
  ConnectionClosed,
  DaemonUnreachable,
  DuplicateCorrelationId,
  FrameTooLarge,
  InvalidRequest,
  Producer,
  subscribe,
  TooManyPending,
  type UiRequest,
} from "../src/index.js";
import { closeLater, Q_DB, Q_YESNO, Raw, startDaemon, tempDir, within, type Daemon } from "./helpers.js";

/** A UI that answers each request with `decide(req)` (an answers object, or "dismiss"). */
async function autoUi(socket: string, decide: (req: UiRequest) => Record<string, string> | "dismiss" | null) {
  const sub = closeLater(subscribe({ socket, client: "test-ui" }));
  await sub.ready;
  const done = (async () => {
    for await (const req of sub) {
      const d = decide(req);
      if (d === "dismiss") void req.dismiss().catch(() => {});
      else if (d !== null) void req.answer(d).catch(() => {});
    }
  })();
  return { sub, done };
}

describe("producer", () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon({ args: ["--max-pending-per-connection", "4"] });
  });
  after(async () => {
    assert.equal(await d.stop(), 0);
    d.cleanup();
  });

  test("answered: answers, reason and the tool result", async () => {
    const ui = await autoUi(d.socket, () => ({ "0": "SQLite" }));
    const r = await within(ask(Q_DB, { socket: d.socket, client: "test/1" }), 5000, "ask");
    assert.equal(r.reason, "answered");
    assert.equal(r.cancelled, false);
    assert.deepEqual(r.answers, { "0": "SQLite" });
    assert.equal(r.result.llmContent, JSON.stringify({ answers: { "0": "SQLite" } }));
    assert.equal(r.result.returnDisplay, "**User answered:**\n  Database → SQLite");
    assert.deepEqual(r.result.data, {
      ask_user: { question_types: ["choice"], dismissed: false, empty_submission: false, answer_count: 1 },
    });
    ui.sub.close();
    await ui.done;
  });

  test("dismissed", async () => {
    const ui = await autoUi(d.socket, () => "dismiss");
    const r = await within(ask(Q_YESNO, { socket: d.socket }), 5000, "ask");
    assert.equal(r.reason, "dismissed");
    assert.equal(r.cancelled, true);
    assert.deepEqual(r.answers, {});
    assert.equal(r.result.llmContent, "User dismissed ask_user dialog without answering.");
    ui.sub.close();
    await ui.done;
  });

  test("timeout when nobody answers", async () => {
    const ui = await autoUi(d.socket, () => null);
    const started = Date.now();
    const r = await within(ask(Q_YESNO, { socket: d.socket, timeoutMs: 150 }), 5000, "ask");
    assert.equal(r.reason, "timeout");
    assert.equal(r.cancelled, true);
    assert.ok(Date.now() - started >= 140, "not before its timeout");
    ui.sub.close();
    await ui.done;
  });

  test("no-ui with noUi: reject and no UI subscribed", async () => {
    // The earlier tests' UIs have closed; wait until the daemon has seen them go.
    const probe = new Producer({ socket: d.socket });
    while ((await probe.stats()).uis !== 0) await new Promise((r) => setTimeout(r, 10));
    probe.close();
    const r = await within(ask(Q_YESNO, { socket: d.socket, noUi: "reject" }), 5000, "ask");
    assert.equal(r.reason, "no-ui");
    assert.equal(r.cancelled, true);
  });

  test("cancel withdraws: the ask ends with the daemon's withdrawn result", async () => {
    const p = closeLater(new Producer({ socket: d.socket }));
    let seenResolve!: (r: UiRequest) => void;
    const seen = new Promise<UiRequest>((resolve) => (seenResolve = resolve));
    const ui = await autoUi(d.socket, (req) => (seenResolve(req), null));
    const pending = p.start(Q_YESNO);
    const req = await within(seen, 5000, "request reaching the UI");
    assert.equal(req.correlationId, pending.correlationId);
    assert.equal(p.cancel(pending.correlationId), true);
    const r = await within(pending.response, 5000, "cancelled ask");
    assert.equal(r.reason, "withdrawn");
    assert.equal(r.cancelled, true);
    await within(
      new Promise<void>((resolve) => (req.signal.aborted ? resolve() : req.signal.addEventListener("abort", () => resolve()))),
      5000,
      "withdrawal at the UI",
    );
    assert.equal(req.withdrawnReason, "withdrawn");
    assert.equal(p.cancel("never-asked"), false);
    p.close();
    ui.sub.close();
    await ui.done;
  });

  test("AbortSignal: abort sends ask-user-cancel and rejects with the signal's reason", async () => {
    const raw = await Raw.open(d.socket);
    raw.send({ type: "subscribe" });
    await raw.nextOf("subscribed");
    const ac = new AbortController();
    const p = closeLater(new Producer({ socket: d.socket }));
    const pending = p.start(Q_YESNO, { signal: ac.signal });
    const req = await raw.nextOf("ask-user-request");
    assert.equal(req.correlationId, pending.correlationId);
    ac.abort(new Error("user pressed Ctrl-C"));
    await assert.rejects(pending.response, /user pressed Ctrl-C/);
    const w = await raw.nextOf("ask-user-withdrawn");
    assert.deepEqual(w, { type: "ask-user-withdrawn", correlationId: pending.correlationId, reason: "withdrawn" });
    // Already aborted: rejected at once, nothing sent.
    await assert.rejects(p.ask(Q_YESNO, { signal: AbortSignal.abort(new Error("too late")) }), /too late/);
    assert.equal(p.pendingCount, 0);
    p.close();
    raw.close();
  });

  test("invalid questions: InvalidRequest with the reference tool's message", async () => {
    const bad = [{ question: "Q?", header: "H", type: "choice", options: [{ label: "only", description: "" }] }];
    await assert.rejects(ask(bad, { socket: d.socket }), (e: unknown) => {
      assert.ok(e instanceof InvalidRequest);
      assert.equal(e.code, "invalid-request");
      assert.equal(e.message, "Question 1: type='choice' requires 'options' array with 2-4 items.");
      return true;
    });
    await assert.rejects(ask([], { socket: d.socket }), { code: "invalid-request", message: "params/questions must NOT have fewer than 1 items" });
    for (const timeoutMs of [0, -5, 1.5, Number.NaN]) {
      await assert.rejects(ask(Q_YESNO, { socket: d.socket, timeoutMs }), InvalidRequest, String(timeoutMs));
    }
  });

  test("concurrent asks on one Producer are matched by correlationId", async () => {
    const n = 60;
    const many = await startDaemon({ args: ["--max-pending-per-connection", "1000"] });
    // Answers out of order, each with its own correlationId, so a mix-up cannot pass.
    const held: UiRequest[] = [];
    const ui = await autoUi(many.socket, (req) => {
      held.push(req);
      if (held.length === n) {
        for (const r of held.reverse()) void r.answer({ "0": `answer for ${r.correlationId}` }).catch(() => {});
      }
      return null;
    });
    const p = closeLater(new Producer({ socket: many.socket }));
    const asks = Array.from({ length: n }, (_, i) => p.start(Q_YESNO, { correlationId: `c-${i}` }));
    const rs = await within(Promise.all(asks.map((a) => a.response)), 10_000, "60 asks");
    rs.forEach((r, i) => {
      assert.equal(r.correlationId, `c-${i}`);
      assert.deepEqual(r.answers, { "0": `answer for c-${i}` });
    });
    p.close();
    ui.sub.close();
    await ui.done;
    await many.stop();
    many.cleanup();
  });

  test("per-connection limit: TooManyPending; a pending id: DuplicateCorrelationId", async () => {
    const p = closeLater(new Producer({ socket: d.socket }));
    const first = Array.from({ length: 4 }, () => p.start(Q_YESNO));
    await assert.rejects(p.ask(Q_YESNO), TooManyPending);
    // The same id from another producer is the daemon's to refuse.
    const other = closeLater(new Producer({ socket: d.socket }));
    await assert.rejects(other.ask(Q_YESNO, { correlationId: first[0]!.correlationId }), (e: unknown) => {
      assert.ok(e instanceof DuplicateCorrelationId);
      assert.equal(e.code, "duplicate-correlation-id");
      return true;
    });
    await assert.rejects(p.ask(Q_YESNO, { correlationId: first[1]!.correlationId }), { code: "duplicate-correlation-id" });
    p.close();
    for (const a of first) await assert.rejects(a.response, ConnectionClosed);
    other.close();
  });

  test("a request larger than the daemon accepts fails locally (no reconnect loop)", async () => {
    const huge = [{ question: "x".repeat(2_000_000), header: "H", type: "text" }];
    await assert.rejects(ask(huge, { socket: d.socket }), (e: unknown) => e instanceof FrameTooLarge && /at most 1048576/.test(e.message));
  });

  test("stats from a producer connection", async () => {
    const p = closeLater(new Producer({ socket: d.socket }));
    const s = await p.stats();
    assert.equal(s.type, "stats");
    p.close();
  });
});

test("DaemonUnreachable names the socket path tried", async () => {
  const dir = tempDir();
  const socket = `${dir}/nobody-here.sock`;
  await assert.rejects(ask(Q_YESNO, { socket }), (e: unknown) => {
    assert.ok(e instanceof DaemonUnreachable);
    assert.equal(e.code, "daemon-unreachable");
    assert.equal(e.socketPath, socket);
    assert.ok(e.message.includes(socket), e.message);
    return true;
  });
});

test("waitForDaemon: an ask made before the daemon starts is answered once it does", async () => {
  const dir = tempDir();
  const socket = `${dir}/later.sock`;
  const p = closeLater(new Producer({ socket, waitForDaemon: true, reconnect: { initialDelayMs: 20, maxDelayMs: 100 } }));
  const pending = p.ask(Q_YESNO, { timeoutMs: 10_000 });
  await new Promise((r) => setTimeout(r, 200));
  const d = await startDaemon({ socket, dir });
  const sub = closeLater(subscribe({ socket }));
  for await (const req of sub) {
    await req.answer({ "0": "Yes" });
    break;
  }
  const r = await within(pending, 5000, "late ask");
  assert.deepEqual(r.answers, { "0": "Yes" });
  p.close();
  await d.stop();
  d.cleanup();
});
