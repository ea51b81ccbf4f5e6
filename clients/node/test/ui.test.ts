/**
 * The UI role against the real daemon: replay, live requests, withdrawals with their reasons,
 * acknowledgements, losing a race to another UI, invalid answers, and the answer helpers.
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  buildAnswers,
  choiceAnswer,
  InvalidResponse,
  multiSelectAnswer,
  NotPending,
  Producer,
  subscribe,
  textAnswer,
  Withdrawn,
  yesNoAnswer,
  type Question,
  type Subscription,
  type UiRequest,
} from "../src/index.js";
import { closeLater, Q_DB, Q_YESNO, startDaemon, within, type Daemon } from "./helpers.js";

/** Pulls requests off a subscription one at a time. */
function reader(sub: Subscription) {
  const it = sub[Symbol.asyncIterator]();
  return async (ms = 5000): Promise<UiRequest> => {
    const r = await within(it.next(), ms, "next request");
    assert.equal(r.done, false, "subscription ended");
    return r.value as UiRequest;
  };
}

function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener("abort", () => resolve(signal.reason), { once: true });
  });
}

describe("ui", () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    assert.equal(await d.stop(), 0);
    d.cleanup();
  });

  test("replay: requests pending before subscribing arrive first, oldest first, then live ones", async () => {
    const p = closeLater(new Producer({ socket: d.socket, client: "replay-agent/1" }));
    const a = p.start(Q_DB, { correlationId: "replay-a" });
    const b = p.start(Q_YESNO, { correlationId: "replay-b", timeoutMs: 60_000 });
    await p.connect();
    await new Promise((r) => setTimeout(r, 50));
    const sub = closeLater(subscribe({ socket: d.socket, client: "replay-ui" }));
    const connected = new Promise((resolve) => sub.once("connected", resolve));
    const next = reader(sub);
    const first = await next();
    assert.deepEqual(await connected, { pending: 2 });
    const second = await next();
    assert.deepEqual([first.correlationId, second.correlationId], ["replay-a", "replay-b"]);
    assert.deepEqual(first.questions, Q_DB);
    assert.equal(first.producer.client, "replay-agent/1");
    assert.equal(first.producer.pid, process.pid);
    assert.ok(second.timeLeftMs > 55_000 && second.timeLeftMs <= 60_000, String(second.timeLeftMs));
    const c = p.start(Q_YESNO, { correlationId: "replay-c" });
    const cReq = await next();
    assert.equal(cReq.correlationId, "replay-c");
    assert.equal(await first.answer({ "0": "PostgreSQL" }), "answered");
    assert.equal(first.state, "answered");
    assert.equal(await second.dismiss(), "dismissed");
    assert.equal((await a.response).answers["0"], "PostgreSQL");
    assert.equal((await b.response).reason, "dismissed");
    assert.deepEqual(sub.pending.map((r) => r.correlationId), ["replay-c"]);
    p.close();
    await assert.rejects(c.response);
    await within(aborted(cReq.signal), 5000, "producer-gone");
    sub.close();
  });

  test("withdrawals: the request knows why, its signal aborts, the event fires", async () => {
    const sub = closeLater(subscribe({ socket: d.socket }));
    await sub.ready;
    const next = reader(sub);
    const events: string[] = [];
    sub.on("withdrawn", (req, reason) => events.push(`${req.correlationId}:${reason}`));

    const p = closeLater(new Producer({ socket: d.socket }));
    const cancelled = p.start(Q_YESNO, { correlationId: "w-cancel" });
    const r1 = await next();
    p.cancel("w-cancel");
    const why = await within(aborted(r1.signal), 5000, "withdrawal");
    assert.ok(why instanceof Withdrawn && why.reason === "withdrawn");
    assert.equal(r1.withdrawnReason, "withdrawn");
    assert.equal((await cancelled.response).reason, "withdrawn");
    await assert.rejects(r1.answer({ "0": "Yes" }), (e: unknown) => e instanceof NotPending && e.code === "not-pending");

    const timed = p.start(Q_YESNO, { correlationId: "w-timeout", timeoutMs: 100 });
    const r2 = await next();
    await within(aborted(r2.signal), 5000, "timeout withdrawal");
    assert.equal(r2.withdrawnReason, "timeout");
    assert.equal((await timed.response).reason, "timeout");

    const gone = p.start(Q_YESNO, { correlationId: "w-gone" });
    const r3 = await next();
    p.close();
    await assert.rejects(gone.response);
    await within(aborted(r3.signal), 5000, "producer-gone withdrawal");
    assert.equal(r3.withdrawnReason, "producer-gone");
    assert.equal(r3.state, "withdrawn");
    assert.deepEqual(events, ["w-cancel:withdrawn", "w-timeout:timeout", "w-gone:producer-gone"]);
    sub.close();
  });

  test("two UIs: the first answer wins (ack), the other is told NotPending and sees the withdrawal", async () => {
    const ui1 = closeLater(subscribe({ socket: d.socket, client: "ui-1" }));
    const ui2 = closeLater(subscribe({ socket: d.socket, client: "ui-2" }));
    await Promise.all([ui1.ready, ui2.ready]);
    const p = closeLater(new Producer({ socket: d.socket }));
    const asked = p.ask(Q_DB, { correlationId: "race" });
    const [a, b] = await Promise.all([reader(ui1)(), reader(ui2)()]);
    // Both answers leave before either UI hears of the other's.
    const winner = a.answer({ "0": "SQLite" });
    // Observed at once: it may fail before the winner's ack arrives.
    const loser = b.answer({ "0": "PostgreSQL" }).then(() => null, (e: unknown) => e);
    assert.equal(await winner, "answered");
    // The loser is refused by the daemon (NotPending) or, when the daemon's withdrawal reaches
    // its UI first under load, by the client itself (Withdrawn, reason answered): lost either way.
    const lost = await loser;
    assert.ok(lost instanceof NotPending || (lost instanceof Withdrawn && lost.reason === "answered"), String(lost));
    assert.equal(b.state, "withdrawn");
    assert.equal(b.withdrawnReason, "answered");
    const r = await asked;
    assert.deepEqual(r.answers, { "0": "SQLite" });
    p.close();
    ui1.close();
    ui2.close();
  });

  test("an answer for a question that does not exist is InvalidResponse; the request stays answerable", async () => {
    const sub = closeLater(subscribe({ socket: d.socket }));
    await sub.ready;
    const p = closeLater(new Producer({ socket: d.socket }));
    const asked = p.ask(Q_YESNO);
    const req = await reader(sub)();
    await assert.rejects(req.answer({ "3": "Yes" }), (e: unknown) => e instanceof InvalidResponse && e.code === "invalid-response");
    assert.equal(req.state, "pending");
    assert.equal(await req.answer({ "0": "No" }), "answered");
    assert.deepEqual((await asked).answers, { "0": "No" });
    p.close();
    sub.close();
  });

  test("requests withdrawn before the iterator reached them are not yielded", async () => {
    const sub = closeLater(subscribe({ socket: d.socket }));
    await sub.ready;
    const p = closeLater(new Producer({ socket: d.socket }));
    const gone = p.start(Q_YESNO);
    await within(new Promise((r) => sub.once("request", r)), 5000, "request event");
    p.cancel(gone.correlationId);
    await gone.response;
    const kept = p.start(Q_YESNO, { correlationId: "kept" });
    const keptReq = await reader(sub)();
    assert.equal(keptReq.correlationId, "kept");
    p.close();
    await assert.rejects(kept.response);
    // Gone from the daemon too before the next test subscribes.
    await within(aborted(keptReq.signal), 5000, "producer-gone");
    sub.close();
  });

  test("closing ends the for-await loop; an AbortSignal closes it too", async () => {
    const ac = new AbortController();
    const sub = closeLater(subscribe({ socket: d.socket, signal: ac.signal }));
    await sub.ready;
    const loop = (async () => {
      let n = 0;
      for await (const _ of sub) n++;
      return n;
    })();
    ac.abort();
    assert.equal(await within(loop, 5000, "loop end"), 0);
  });
});

test("subscribe to a socket nobody serves: the loop throws DaemonUnreachable", async () => {
  const sub = closeLater(subscribe({ socket: "/nonexistent/askbus.sock" }));
  await assert.rejects(
    (async () => {
      for await (const _ of sub) break;
    })(),
    { code: "daemon-unreachable", socketPath: "/nonexistent/askbus.sock" },
  );
});

test("answer helpers encode as the reference dialog does", () => {
  const multi: Question = {
    question: "Which?",
    header: "Pick",
    type: "choice",
    multiSelect: true,
    options: [
      { label: "A", description: "" },
      { label: "B", description: "" },
      { label: "C", description: "" },
    ],
  };
  assert.equal(choiceAnswer(multi, 1), "B");
  assert.equal(choiceAnswer(multi, "C"), "C");
  assert.throws(() => choiceAnswer(multi, "D"), RangeError);
  assert.throws(() => choiceAnswer(multi, 3), RangeError);
  assert.equal(multiSelectAnswer(multi, ["C", 0]), "A, C");
  assert.equal(multiSelectAnswer(multi, [2, 1], "  my own  "), "B, C, my own");
  assert.equal(multiSelectAnswer(multi, [], "only other"), "only other");
  assert.equal(multiSelectAnswer(multi, [], "   "), "");
  assert.equal(yesNoAnswer(true), "Yes");
  assert.equal(yesNoAnswer(false), "No");
  assert.equal(textAnswer("  hello\n"), "hello");
  assert.deepEqual(buildAnswers(["A, C", undefined, "", "Yes"]), { "0": "A, C", "3": "Yes" });
});
