/**
 * The Gemini CLI bridge against the real MessageBus of @google/gemini-cli-core 0.61.0 and the
 * real daemon: `ask-user-request` published or sent with `request()`, detaching, a local answer
 * taking the question back, refusals, and the path the ask_user tool really takes in 0.61.0
 * (the scheduler's confirmation: AskUserTool → resolveConfirmation → tool-calls-update).
 */

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { MessageBus } from "@google/gemini-cli-core/dist/src/confirmation-bus/message-bus.js";
import { SchedulerStateManager } from "@google/gemini-cli-core/dist/src/scheduler/state-manager.js";
import { resolveConfirmation } from "@google/gemini-cli-core/dist/src/scheduler/confirmation.js";
import { AskUserTool } from "@google/gemini-cli-core/dist/src/tools/ask-user.js";

import { PolicyEngine } from "@google/gemini-cli-core/dist/src/policy/policy-engine.js";

import {
  bridgeMessageBus,
  InvalidRequest,
  Producer,
  subscribe,
  UiApproval,
  type AskResponse,
  type Confirmation,
  type Subscription,
  type UiRequest,
} from "../../clients/node/src/index.js";
import { closeLater, delay, Q_DB, Q_YESNO, startDaemon, within, type Daemon } from "../../clients/node/test/helpers.js";

function newBus(): any {
  // The policy engine is consulted only for tool-confirmation-request messages.
  return new MessageBus({} as any);
}

function nextMessage(bus: any, type: string, ms = 5000): Promise<any> {
  return within(
    new Promise((resolve) => {
      const on = (m: unknown) => {
        bus.unsubscribe(type, on);
        resolve(m);
      };
      bus.subscribe(type, on);
    }),
    ms,
    `a ${type} message`,
  );
}

function nextRequest(sub: Subscription, ms = 5000): Promise<UiRequest> {
  return within(new Promise<UiRequest>((r) => sub.once("request", r)), ms, "a request at the UI");
}

function withdrawal(req: UiRequest): Promise<void> {
  return within(
    new Promise<void>((r) => (req.signal.aborted ? r() : req.signal.addEventListener("abort", () => r()))),
    5000,
    "withdrawal",
  );
}

describe("bridgeMessageBus", () => {
  let d: Daemon;
  let sub: Subscription;
  before(async () => {
    d = await startDaemon();
    sub = closeLater(subscribe({ socket: d.socket, client: "bridge-test-ui" }));
    await sub.ready;
  });
  after(async () => {
    sub.close();
    assert.equal(await d.stop(), 0);
    d.cleanup();
  });

  test("a published ask-user-request is answered on the bus by a UI in another process", async () => {
    const bus = newBus();
    const bridge = bridgeMessageBus(bus, { socket: d.socket });
    const seen = nextRequest(sub);
    const response = nextMessage(bus, "ask-user-response");
    await bus.publish({ type: "ask-user-request", questions: Q_DB, correlationId: "bus-1" });
    const req = await seen;
    assert.deepEqual(req.questions, Q_DB);
    assert.notEqual(req.correlationId, "bus-1", "the daemon gets an id of its own");
    assert.equal(req.producer.client, "askbus-gemini-bridge");
    await req.answer({ "0": "PostgreSQL" });
    assert.deepEqual(await response, { type: "ask-user-response", correlationId: "bus-1", answers: { "0": "PostgreSQL" } });

    // Dismissed: the seed's cancelled form.
    const seen2 = nextRequest(sub);
    const response2 = nextMessage(bus, "ask-user-response");
    await bus.publish({ type: "ask-user-request", questions: Q_YESNO, correlationId: "bus-2" });
    await (await seen2).dismiss();
    assert.deepEqual(await response2, { type: "ask-user-response", correlationId: "bus-2", answers: {}, cancelled: true });
    assert.equal(bridge.pending, 0);
    bridge.detach();
  });

  test("messageBus.request() picks its own correlationId and gets the answer", async () => {
    const bus = newBus();
    const bridge = bridgeMessageBus(bus, { socket: d.socket });
    const seen = nextRequest(sub);
    const asked = bus.request({ type: "ask-user-request", questions: Q_YESNO }, "ask-user-response", 5000);
    const req = await seen;
    await req.answer({ "0": "Yes" });
    const r = await asked;
    assert.equal(r.type, "ask-user-response");
    assert.match(r.correlationId, /^[0-9a-f-]{36}$/);
    assert.deepEqual(r.answers, { "0": "Yes" });
    assert.equal(r.cancelled, undefined);
    bridge.detach();
  });

  test("detach: pending questions are withdrawn and later ones are not bridged", async () => {
    const bus = newBus();
    const bridge = bridgeMessageBus(bus, { socket: d.socket });
    const seen = nextRequest(sub);
    await bus.publish({ type: "ask-user-request", questions: Q_YESNO, correlationId: "det-1" });
    const req = await seen;
    assert.equal(bridge.pending, 1);
    bridge.detach();
    await withdrawal(req);
    assert.equal(req.withdrawnReason, "withdrawn");
    let reached = false;
    const spy = () => (reached = true);
    sub.on("request", spy);
    await bus.publish({ type: "ask-user-request", questions: Q_YESNO, correlationId: "det-2" });
    await delay(200);
    sub.off("request", spy);
    assert.equal(reached, false);
    bridge.detach(); // idempotent
  });

  test("answered first on the bus itself: the question is taken back from the UIs", async () => {
    const bus = newBus();
    const producer = closeLater(new Producer({ socket: d.socket, client: "shared" }));
    const bridge = bridgeMessageBus(bus, { producer });
    const seen = nextRequest(sub);
    await bus.publish({ type: "ask-user-request", questions: Q_YESNO, correlationId: "local-1" });
    const req = await seen;
    const responses: unknown[] = [];
    bus.subscribe("ask-user-response", (m: unknown) => responses.push(m));
    await bus.publish({ type: "ask-user-response", correlationId: "local-1", answers: { "0": "No" } });
    await withdrawal(req);
    assert.equal(req.withdrawnReason, "withdrawn");
    await delay(100);
    assert.deepEqual(responses, [{ type: "ask-user-response", correlationId: "local-1", answers: { "0": "No" } }], "the bridge added nothing");
    bridge.detach();
    // A producer it was given stays open for its owner.
    assert.equal((await producer.stats()).type, "stats");
    producer.close();
  });

  test("questions the daemon refuses: onError gets InvalidRequest, the bus a cancellation", async () => {
    const bus = newBus();
    const errors: unknown[] = [];
    const bridge = bridgeMessageBus(bus, { socket: d.socket, onError: (e) => errors.push(e) });
    const response = nextMessage(bus, "ask-user-response");
    await bus.publish({ type: "ask-user-request", questions: [], correlationId: "bad-1" });
    assert.deepEqual(await response, { type: "ask-user-response", correlationId: "bad-1", answers: {}, cancelled: true });
    assert.equal(errors.length, 1);
    assert.ok(errors[0] instanceof InvalidRequest);
    assert.equal((errors[0] as InvalidRequest).message, "params/questions must NOT have fewer than 1 items");
    bridge.detach();
  });

  describe("the ask_user tool's own path: scheduler confirmation", () => {
    /** Drives one real ask_user call as the Scheduler does, up to and including execute(). */
    async function runToolCall(bus: any, params: unknown, callId: string) {
      const tool: any = new AskUserTool(bus);
      const invocation = tool.build(params);
      const state = new SchedulerStateManager(bus, "root");
      state.enqueue([
        {
          status: "validating",
          request: { callId, name: "ask_user", args: params, isClientInitiated: false, prompt_id: "p1" },
          tool,
          invocation,
          startTime: Date.now(),
        } as any,
      ]);
      state.dequeue();
      const deps: any = {
        config: { getHookSystem: () => undefined },
        messageBus: bus,
        state,
        modifier: {},
        getPreferredEditor: () => undefined,
        schedulerId: "root",
      };
      const confirmed = resolveConfirmation(state.getToolCall(callId) as any, new AbortController().signal, deps);
      return { state, invocation, confirmed };
    }

    test("answered by the UI: onConfirm gets the answers; execute() equals the daemon's result", async () => {
      const bus = newBus();
      const daemonResults: AskResponse[] = [];
      const bridge = bridgeMessageBus(bus, { socket: d.socket, onResponse: (r) => daemonResults.push(r) });
      const params = {
        questions: [
          { question: "Which\\ndatabase?", header: "DB", type: "choice", options: [{ label: "SQLite", description: " local " }, { label: "PostgreSQL", description: "" }] },
          { question: "Notes?", header: "Notes", type: "text" },
        ],
      };
      const seen = nextRequest(sub);
      const { invocation, confirmed } = await runToolCall(bus, params, "call-1");
      const req = await seen;
      // The daemon normalized the model's arguments exactly as the tool did.
      assert.deepEqual(req.questions, invocation.params.questions);
      await req.answer({ "0": "SQLite", "1": "line one\nline two" });
      const { outcome } = await within(confirmed, 5000, "confirmation");
      assert.equal(outcome, "proceed_once");
      const executed = await invocation.execute({ abortSignal: new AbortController().signal });
      assert.equal(daemonResults.length, 1);
      assert.deepStrictEqual(daemonResults[0]!.result, JSON.parse(JSON.stringify(executed)));
      bridge.detach();
    });

    test("dismissed by the UI: the confirmation is cancelled as the CLI's dialog cancels it", async () => {
      const bus = newBus();
      const bridge = bridgeMessageBus(bus, { socket: d.socket });
      const seen = nextRequest(sub);
      const { invocation, confirmed } = await runToolCall(bus, { questions: Q_YESNO }, "call-2");
      await (await seen).dismiss();
      const { outcome } = await within(confirmed, 5000, "confirmation");
      assert.equal(outcome, "cancel");
      const executed = await invocation.execute({ abortSignal: new AbortController().signal });
      assert.equal(executed.llmContent, "User dismissed ask_user dialog without answering.");
      bridge.detach();
    });

    test("answered in the terminal first: the call stops awaiting and the UIs' copy is withdrawn", async () => {
      const bus = newBus();
      const bridge = bridgeMessageBus(bus, { socket: d.socket });
      const seen = nextRequest(sub);
      const { state, confirmed } = await runToolCall(bus, { questions: Q_YESNO }, "call-3");
      const req = await seen;
      const call: any = state.getToolCall("call-3");
      await bus.publish({ type: "tool-confirmation-response", correlationId: call.correlationId, confirmed: true, outcome: "proceed_once", payload: { answers: { "0": "Yes" } } });
      assert.equal((await confirmed).outcome, "proceed_once");
      // What the Scheduler does next: the call leaves awaiting_approval.
      state.updateStatus("call-3", "scheduled" as any);
      await withdrawal(req);
      assert.equal(req.withdrawnReason, "withdrawn");
      assert.equal(bridge.pending, 0);
      bridge.detach();
    });
  });
});

describe("bridgeMessageBus: the agent's permission prompts (tool-confirmation-request)", () => {
  let d: Daemon;
  let sub: Subscription;
  before(async () => {
    d = await startDaemon();
    sub = closeLater(subscribe({ socket: d.socket, client: "bridge-test-ui" }));
    await sub.ready;
  });
  after(async () => {
    sub.close();
    assert.equal(await d.stop(), 0);
    d.cleanup();
  });

  /** A real bus whose real policy engine asks the user about every tool call (or `decision`). */
  function policyBus(decision = "ask_user"): any {
    return new MessageBus(new PolicyEngine({ defaultDecision: decision as any }) as any);
  }

  const exec = {
    type: "exec",
    title: "Confirm Shell Command",
    command: "rm -rf build",
    rootCommand: "rm",
    rootCommands: ["rm"],
  };

  function nextApproval(): Promise<UiApproval> {
    return within(new Promise<UiApproval>((r) => sub.once("request", (req) => r(req as UiApproval))), 5000, "an approval at the UI");
  }

  test("allowed by a UI in another process: the bus gets confirmed proceed_once", async () => {
    const bus = policyBus();
    const bridge = bridgeMessageBus(bus, { socket: d.socket, approvalOutcomes: ["proceed_always"] });
    const seen = nextApproval();
    const response = nextMessage(bus, "tool-confirmation-response");
    await bus.publish({
      type: "tool-confirmation-request",
      correlationId: "tc-1",
      toolCall: { name: "run_shell_command", args: { command: "rm -rf build" } },
      serverName: "local",
      details: exec,
    });
    const a = await seen;
    assert.ok(a instanceof UiApproval);
    assert.notEqual(a.correlationId, "tc-1", "the daemon gets an id of its own");
    assert.deepEqual(a.toolCall, { name: "run_shell_command", args: { command: "rm -rf build" } });
    assert.deepEqual(a.details, exec);
    assert.equal(a.serverName, "local");
    assert.deepEqual(a.outcomes, ["proceed_once", "proceed_always", "cancel"]);
    await a.allow("proceed_always");
    assert.deepEqual(await response, { type: "tool-confirmation-response", correlationId: "tc-1", confirmed: true, outcome: "proceed_always" });
    assert.equal(bridge.pending, 0);
    bridge.detach();
  });

  test("denied with a reason: the bus gets confirmed false, onConfirmation the reason", async () => {
    const bus = policyBus();
    const seenBy: Confirmation[] = [];
    const bridge = bridgeMessageBus(bus, { socket: d.socket, onConfirmation: (c) => seenBy.push(c) });
    const seen = nextApproval();
    const response = nextMessage(bus, "tool-confirmation-response");
    await bus.publish({ type: "tool-confirmation-request", correlationId: "tc-2", toolCall: { name: "run_shell_command", args: {} }, details: exec });
    await (await seen).deny("Not the build directory.");
    assert.deepEqual(await response, { type: "tool-confirmation-response", correlationId: "tc-2", confirmed: false, outcome: "cancel" });
    assert.equal(seenBy[0]!.message, "Not the build directory.");
    bridge.detach();
  });

  test("refused by the daemon, or nobody in time: never an approval", async () => {
    const bus = policyBus();
    const errors: unknown[] = [];
    const bridge = bridgeMessageBus(bus, { socket: d.socket, timeoutMs: 300, onError: (e) => errors.push(e) });
    let response = nextMessage(bus, "tool-confirmation-response");
    await bus.publish({ type: "tool-confirmation-request", correlationId: "tc-3", toolCall: { name: "x", args: {} }, details: { type: "shell", title: "T" } });
    assert.deepEqual(await response, { type: "tool-confirmation-response", correlationId: "tc-3", confirmed: false, outcome: "cancel" });
    assert.ok(errors[0] instanceof InvalidRequest);
    response = nextMessage(bus, "tool-confirmation-response");
    await bus.publish({ type: "tool-confirmation-request", correlationId: "tc-4", toolCall: { name: "x", args: {} } });
    assert.deepEqual(await response, { type: "tool-confirmation-response", correlationId: "tc-4", confirmed: false, outcome: "cancel" });
    bridge.detach();
  });

  test("the ask_user tool goes to its own dialog; a policy that allows never reaches the UIs", async () => {
    const bus = policyBus();
    const bridge = bridgeMessageBus(bus, { socket: d.socket });
    let response = nextMessage(bus, "tool-confirmation-response");
    await bus.publish({ type: "tool-confirmation-request", correlationId: "tc-5", toolCall: { name: "ask_user", args: { questions: Q_YESNO } } });
    assert.deepEqual(await response, { type: "tool-confirmation-response", correlationId: "tc-5", confirmed: false, requiresUserConfirmation: true });
    assert.equal(bridge.pending, 0);
    bridge.detach();

    const allowing = policyBus("allow");
    const bridge2 = bridgeMessageBus(allowing, { socket: d.socket });
    response = nextMessage(allowing, "tool-confirmation-response");
    await allowing.publish({ type: "tool-confirmation-request", correlationId: "tc-6", toolCall: { name: "read_file", args: {} } });
    assert.deepEqual(await response, { type: "tool-confirmation-response", correlationId: "tc-6", confirmed: true });
    assert.equal(bridge2.pending, 0);
    bridge2.detach();
  });

  test("decided on the bus first (a local dialog): the UIs' copy is withdrawn", async () => {
    const bus = policyBus();
    const bridge = bridgeMessageBus(bus, { socket: d.socket });
    const seen = nextApproval();
    await bus.publish({ type: "tool-confirmation-request", correlationId: "tc-7", toolCall: { name: "run_shell_command", args: {} }, details: exec });
    const a = await seen;
    await bus.publish({ type: "tool-confirmation-response", correlationId: "tc-7", confirmed: true, outcome: "proceed_once" });
    await withdrawal(a);
    assert.equal(a.withdrawnReason, "withdrawn");
    assert.equal(bridge.pending, 0);
    bridge.detach();
  });
});
