/**
 * Approvals through the real daemon: `Producer.confirm` (allow, allow always, deny with a
 * reason, dismissal, timeout, cancel, refusal, daemon gone: only a person's approval is
 * `confirmed`) and a UI's `UiApproval.allow/deny/dismiss`, checked against the golden frames.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { InvalidRequest, InvalidResponse, Producer, subscribe, UiApproval, type Subscription, type ToolCall, type UiRequest } from "../src/index.js";
import { closeLater, REPO_ROOT, startDaemon, within, type Daemon } from "./helpers.js";

const example = (name: string) => JSON.parse(readFileSync(join(REPO_ROOT, "proto/examples", name), "utf8")) as Record<string, any>;
const GOLDEN = example("client/tool-confirmation-request.json");

function goldenOpts() {
  return { details: GOLDEN.details, outcomes: GOLDEN.outcomes, timeoutMs: GOLDEN.timeoutMs, correlationId: GOLDEN.correlationId };
}

function execCall(command: string): { toolCall: ToolCall; details: any } {
  const root = command.split(" ")[0]!;
  return {
    toolCall: { name: "run_shell_command", args: { command } },
    details: { type: "exec", title: "Confirm Shell Command", command, rootCommand: root, rootCommands: [root] },
  };
}

/** Pulls the next approval off a subscription. */
function approvals(sub: Subscription) {
  const it = sub[Symbol.asyncIterator]();
  return async (): Promise<UiApproval> => {
    for (;;) {
      const r = await within(it.next(), 10_000, "next approval");
      assert.equal(r.done, false, "subscription ended");
      if (r.value instanceof UiApproval) return r.value;
    }
  };
}

describe("approvals", () => {
  let d: Daemon;
  let sub: Subscription;
  let next: () => Promise<UiApproval>;
  let p: Producer;
  before(async () => {
    d = await startDaemon();
    sub = closeLater(subscribe({ socket: d.socket, client: "test-ui/1" }));
    await sub.ready;
    next = approvals(sub);
    p = closeLater(new Producer({ socket: d.socket, client: "my-agent/1.2.0" }));
  });
  after(async () => {
    sub.close();
    p.close();
    await d.stop();
    d.cleanup();
  });

  test("allow once: the UI sees the golden request, the producer is confirmed", async () => {
    const asked = p.confirm(GOLDEN.toolCall, goldenOpts());
    const a = await next();
    const shown = example("server/tool-confirmation-request.json");
    assert.equal(a.correlationId, GOLDEN.correlationId);
    assert.deepEqual(a.toolCall, shown.toolCall);
    assert.deepEqual(a.details, shown.details);
    assert.deepEqual(a.outcomes, shown.outcomes);
    assert.equal(a.tool, "run_shell_command");
    assert.deepEqual(a.questions, []);
    assert.equal(a.producer.client, "my-agent/1.2.0");
    await assert.rejects(a.answer({ "0": "Yes" }), TypeError);
    assert.equal(await a.allow(), "answered");
    assert.equal(a.state, "answered");
    const c = await asked;
    const want = example("server/tool-confirmation-response.answered.json");
    assert.deepEqual(c, { correlationId: want.correlationId, confirmed: true, outcome: want.outcome, reason: want.reason });
  });

  test("allow always, and deny with a reason", async () => {
    let asked = p.confirm(GOLDEN.toolCall, goldenOpts());
    let a = await next();
    assert.equal(await a.allow("proceed_always"), "answered");
    let c = await asked;
    assert.equal(c.confirmed, true);
    assert.equal(c.outcome, "proceed_always");

    asked = p.confirm(GOLDEN.toolCall, goldenOpts());
    a = await next();
    const denied = example("server/tool-confirmation-response.denied.json");
    assert.equal(await a.deny(denied.message), "answered");
    c = await asked;
    assert.deepEqual(c, { correlationId: denied.correlationId, confirmed: false, outcome: "cancel", reason: "answered", message: denied.message });
  });

  test("an outcome not offered is refused and the approval stays pending; dismissed is not confirmed", async () => {
    const call = execCall("cargo build");
    const asked = p.confirm(call.toolCall, { details: call.details });
    const a = await next();
    assert.deepEqual(a.outcomes, ["proceed_once", "cancel"]);
    await assert.rejects(a.allow("proceed_always"), InvalidResponse);
    await assert.rejects(a.allow("cancel"), TypeError);
    assert.equal(await a.dismiss(), "dismissed");
    const c = await asked;
    const want = example("server/tool-confirmation-response.dismissed.json");
    assert.deepEqual([c.confirmed, c.outcome, c.reason, c.message], [false, "cancel", "dismissed", want.message]);
  });

  test("a timeout, a cancel and a refused request are never approvals", async () => {
    const call = execCall("ls");
    let c = await p.confirm(call.toolCall, { details: call.details, timeoutMs: 1000 });
    assert.deepEqual([c.confirmed, c.outcome, c.reason, c.message], [false, "cancel", "timeout", "Nobody approved the tool call within 1 second, so it was not approved."]);

    const asked = p.confirm(call.toolCall, { details: call.details, correlationId: "to-cancel" });
    while ((await next()).correlationId !== "to-cancel");
    assert.equal(p.cancel("to-cancel"), true);
    c = await asked;
    assert.deepEqual([c.confirmed, c.reason], [false, "withdrawn"]);

    c = await p.confirm(call.toolCall, { details: { type: "shell", title: "T" } });
    assert.deepEqual([c.confirmed, c.outcome, c.reason], [false, "cancel", "refused"]);
    assert.ok(c.error instanceof InvalidRequest);
    assert.match(c.message!, /details\.type must be one of/);
  });
});

describe("approvals when the daemon goes away", () => {
  test("a killed daemon is never an approval", async () => {
    const d = await startDaemon();
    try {
      const sub = closeLater(subscribe({ socket: d.socket, reconnect: false }));
      await sub.ready;
      const next = approvals(sub);
      const p = closeLater(new Producer({ socket: d.socket }));
      const call = execCall("rm -rf build");
      const asked = p.confirm(call.toolCall, { details: call.details, timeoutMs: 1500 });
      await next();
      await d.kill();
      const c = await asked;
      assert.deepEqual([c.confirmed, c.outcome, c.reason], [false, "cancel", "daemon-lost"]);
      assert.match(c.message!, /not approved/);
      sub.close();
      p.close();
    } finally {
      d.cleanup();
    }
  });

  test("no daemon at all is not confirmed", async () => {
    const d = await startDaemon();
    await d.kill();
    const p = closeLater(new Producer({ socket: d.socket }));
    const call = execCall("ls");
    const c = await p.confirm(call.toolCall, { details: call.details });
    assert.deepEqual([c.confirmed, c.reason], [false, "daemon-lost"]);
    p.close();
    d.cleanup();
  });

  test("an approval in the replay completes it", async () => {
    const d = await startDaemon();
    try {
      const p = closeLater(new Producer({ socket: d.socket }));
      const call = execCall("make");
      const asked = p.confirm(call.toolCall, { details: call.details });
      // Wait until the daemon holds it: a UI subscribed afterwards gets it in the replay.
      for (;;) {
        const s = await p.stats();
        if ((s as any).pending === 1) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      const sub = closeLater(subscribe({ socket: d.socket }));
      const it = sub[Symbol.asyncIterator]();
      const r = await within(it.next(), 10_000, "replay");
      const a = r.value as UiRequest;
      assert.ok(a instanceof UiApproval);
      assert.equal(await a.allow(), "answered");
      assert.equal((await asked).confirmed, true);
      sub.close();
      p.close();
    } finally {
      await d.stop();
      d.cleanup();
    }
  });
});
