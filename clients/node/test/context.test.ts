/**
 * Request context through the real daemon: what a Node producer says about itself (its options,
 * `ASKBUS_*` variables, an ask's own override) and what the Gemini bridge fills in reach a
 * filtered UI; a UI filtered to another project never sees the question, live or replayed; every
 * bad value is refused with an `InvalidRequest` naming its field.
 */

import assert from "node:assert/strict";
import { basename } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  bridgeContext,
  bridgeMessageBus,
  CONTEXT_FIELDS,
  InvalidRequest,
  mergeContext,
  Producer,
  subscribe,
  type MessageBusLike,
  type Subscription,
  type UiRequest,
} from "../src/index.js";
import { closeLater, Q_YESNO, startDaemon, within, type Daemon } from "./helpers.js";

/** Each request the subscription is sent, in order, awaited one at a time. */
function reader(sub: Subscription): () => Promise<UiRequest> {
  const queue: UiRequest[] = [];
  const waiting: Array<(r: UiRequest) => void> = [];
  sub.on("request", (r: UiRequest) => {
    const w = waiting.shift();
    if (w) w(r);
    else queue.push(r);
  });
  return () => within(queue.length > 0 ? Promise.resolve(queue.shift()!) : new Promise((r) => waiting.push(r)), 10_000, "a request at the UI");
}

/** A MessageBus as Gemini CLI core's behaves for the bridge: publish reaches subscribers. */
class Bus implements MessageBusLike {
  private listeners = new Map<string, Set<(m: any) => void>>();
  publish(message: any): void {
    for (const l of [...(this.listeners.get(message.type) ?? [])]) l(message);
  }
  subscribe(type: string, listener: (m: any) => void): void {
    if (!this.listeners.has(type)) this.listeners.set(type, new Set());
    this.listeners.get(type)!.add(listener);
  }
  unsubscribe(type: string, listener: (m: any) => void): void {
    this.listeners.get(type)?.delete(listener);
  }
  next(type: string): Promise<any> {
    return within(
      new Promise((resolve) => {
        const on = (m: any) => {
          this.unsubscribe(type, on);
          resolve(m);
        };
        this.subscribe(type, on);
      }),
      10_000,
      `a ${type} message`,
    );
  }
}

describe("request context", () => {
  let d: Daemon;
  before(async () => {
    d = await startDaemon();
  });
  after(async () => {
    assert.equal(await d.stop(), 0);
    d.cleanup();
  });

  test("reaches the UI filtered to its project, never the other project's, live or replayed", async () => {
    const saved = { ...process.env };
    Object.assign(process.env, { ASKBUS_SESSION: "s-node", ASKBUS_CWD: "/src/web", ASKBUS_PROJECT: "from-env" });
    let web: Producer;
    try {
      web = closeLater(new Producer({ socket: d.socket, client: "node-lib/1", context: { agent: "node-agent/3.0", project: "web", title: "Deploying" } }));
    } finally {
      process.env = saved;
    }
    const api = closeLater(new Producer({ socket: d.socket, context: { project: "api" } }));
    // Pending before either UI subscribes: these are replayed.
    const asks = [web.start(Q_YESNO, { correlationId: "web-1" }), api.start(Q_YESNO, { correlationId: "api-1" })];
    while ((await api.stats()).pending !== 2) await new Promise((r) => setTimeout(r, 10));

    const webUi = closeLater(subscribe({ socket: d.socket, client: "web-ui", filter: { project: "web" } }));
    const apiUi = closeLater(subscribe({ socket: d.socket, client: "api-ui", filter: { project: "api" } }));
    const nextWeb = reader(webUi);
    const nextApi = reader(apiUi);
    const first = await nextWeb();
    assert.equal(first.correlationId, "web-1");
    assert.deepEqual(first.context, { agent: "node-agent/3.0", session: "s-node", project: "web", cwd: "/src/web", title: "Deploying" });
    assert.equal(first.producer.client, "node-lib/1");
    assert.equal((await nextApi()).correlationId, "api-1");

    // Live: the api question first, and only once its UI has it the web one; the web UI's next
    // request being the web one shows it was never sent the api one.
    asks.push(api.start(Q_YESNO, { correlationId: "api-2" }));
    const api2 = await nextApi();
    assert.equal(api2.correlationId, "api-2");
    assert.deepEqual(api2.context, { project: "api" });
    asks.push(web.start(Q_YESNO, { correlationId: "web-2", context: { title: "Rolling back" } }));
    const second = await nextWeb();
    assert.equal(second.correlationId, "web-2");
    assert.equal(second.context?.title, "Rolling back");
    assert.equal(second.context?.agent, "node-agent/3.0");
    assert.deepEqual(webUi.pending.map((r) => r.correlationId), ["web-1", "web-2"]);
    assert.deepEqual(apiUi.pending.map((r) => r.correlationId), ["api-1", "api-2"]);

    for (const r of [first, second]) assert.equal(await r.answer({ "0": "Yes" }), "answered");
    for (const r of apiUi.pending) assert.equal(await r.answer({ "0": "No" }), "answered");
    const responses = await Promise.all(asks.map((a) => a.response));
    assert.deepEqual(responses.map((r) => r.answers["0"]), ["Yes", "No", "No", "Yes"]);
    webUi.close();
    apiUi.close();
  });

  test("every bad value is refused with InvalidRequest naming its field", async () => {
    const p = closeLater(new Producer({ socket: d.socket, client: "bad-context", reconnect: false }));
    let n = 0;
    for (const [name, , limit] of CONTEXT_FIELDS) {
      for (const value of ["", "x".repeat(limit + 1), "two\nlines", 7 as unknown as string]) {
        const id = `bad-${n++}`;
        await assert.rejects(p.ask(Q_YESNO, { correlationId: id, context: { [name]: value } }), (e: unknown) => {
          assert.ok(e instanceof InvalidRequest, String(e));
          assert.ok(e.message.startsWith(`context.${name} `), e.message);
          assert.equal(e.correlationId, id);
          return true;
        });
      }
    }
    assert.equal(n, 20);
    p.close();
  });

  test("the Gemini bridge fills in the agent, the session, the project root and its name", async () => {
    const sub = closeLater(subscribe({ socket: d.socket, client: "bridge-ui", filter: { project: "gemini-proj" } }));
    await sub.ready;
    const next = reader(sub);
    const bus = new Bus();
    let mode = "default";
    const config = {
      getSessionId: () => "gemini-session-7",
      getProjectRoot: () => "/work/gemini-proj",
      getApprovalMode: () => mode,
      isInteractive: () => true,
    };
    const bridge = bridgeMessageBus(bus, { socket: d.socket, config, onError: (e) => assert.fail(String(e)) });
    try {
      // The approval mode is read when asking: switched while the agent runs, it follows.
      mode = "autoEdit";
      const answered = bus.next("ask-user-response");
      bus.publish({ type: "ask-user-request", correlationId: "bus-1", questions: Q_YESNO });
      const req = await next();
      assert.equal(req.context?.approvalMode, "autoEdit");
      assert.equal(req.context?.interactive, true);
      assert.equal(req.context?.session, "gemini-session-7");
      assert.equal(req.context?.cwd, "/work/gemini-proj");
      assert.equal(req.context?.project, "gemini-proj");
      assert.match(req.context?.agent ?? "", /^gemini-cli-core(\/\S+)?$/);
      assert.equal(await req.answer({ "0": "Yes" }), "answered");
      assert.deepEqual((await answered).answers, { "0": "Yes" });
    } finally {
      bridge.detach();
      sub.close();
    }
  });

  test("bridgeContext: what you set wins over the variables, and those over what it guesses", () => {
    const config = { getSessionId: () => "s-config", getProjectRoot: () => "/r/proj" };
    assert.deepEqual(bridgeContext({ config }, {}).session, "s-config");
    const c = bridgeContext({ config, context: { title: "Reviewing" } }, { ASKBUS_PROJECT: "env-proj", ASKBUS_SESSION: "" });
    assert.equal(c.project, "env-proj");
    assert.equal(c.session, "s-config");
    assert.equal(c.cwd, "/r/proj");
    assert.equal(c.title, "Reviewing");
    // Without a config: this process's directory; a guess the daemon would refuse is left out.
    assert.equal(bridgeContext({}, {}).cwd, process.cwd());
    assert.equal(bridgeContext({}, {}).project, basename(process.cwd()) || undefined);
    const bad = bridgeContext({ config: { getSessionId: () => "two\nlines", getProjectRoot: () => "/r/" + "p".repeat(200) } }, {});
    assert.equal(bad.session, undefined);
    assert.equal(bad.project, undefined);
    assert.equal(bad.cwd, "/r/" + "p".repeat(200));
    // The approval mode and interactivity from the config; a mode the protocol does not know
    // is left out (the daemon would refuse it), one you set wins.
    const modal = { getApprovalMode: () => "plan", isInteractive: () => false };
    assert.deepEqual(
      [bridgeContext({ config: modal }, {}).approvalMode, bridgeContext({ config: modal }, {}).interactive],
      ["plan", false],
    );
    assert.equal(bridgeContext({ config: { getApprovalMode: () => "auto_edit" } }, {}).approvalMode, undefined);
    assert.equal(bridgeContext({ config: modal, context: { approvalMode: "yolo" } }, {}).approvalMode, "yolo");
    assert.deepEqual(mergeContext({ interactive: false, approvalMode: "plan" }, { interactive: true }), {
      approvalMode: "plan",
      interactive: true,
    });
    // A config that throws is a config that says nothing.
    const throwing = { getSessionId: (): string => { throw new Error("not initialized"); } };
    assert.equal(bridgeContext({ config: throwing }, {}).session, undefined);
  });
});
