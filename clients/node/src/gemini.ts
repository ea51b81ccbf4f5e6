/**
 * The Gemini CLI bridge: connects a `MessageBus` of `@google/gemini-cli-core` to askbusd, so
 * the questions an agent built on Gemini CLI core asks are answered by a UI in another process.
 *
 * Two kinds of traffic carry ask_user questions on that bus, and both are bridged:
 * - `ask-user-request` messages (`{type, questions, correlationId}`, also what
 *   `messageBus.request({type:'ask-user-request', questions}, 'ask-user-response')` publishes):
 *   answered with `{type:'ask-user-response', correlationId, answers, cancelled?}`.
 * - The scheduler's confirmations, which is how the `ask_user` tool of core 0.61.0 actually
 *   asks: a `tool-calls-update` listing a call `awaiting_approval` whose confirmation details
 *   have `type: 'ask_user'`, answered with the `tool-confirmation-response` the CLI's own dialog
 *   sends (`outcome: 'proceed_once'` with `payload: {answers}`, or `outcome: 'cancel'`).
 *
 *
 * And the agent's own permission prompts: a `tool-confirmation-request` on the bus (what
 * core's tools publish for a call the policy engine says to ask about: `toolCall`,
 * `serverName`, `details`, …) is asked through askbusd as an approval, and answered on the bus
 * with the reference's `tool-confirmation-response` (`confirmed`, `outcome`, `payload`). Only a
 * person's approval is `confirmed: true`: a refusal, a timeout or a lost daemon answers
 * `confirmed: false, outcome: "cancel"`. Subscribing makes the bus hand such requests to the
 * bridge instead of answering `requiresUserConfirmation` (no listener).
 *
 * Every question and approval carries the request `context` the bridge can tell
 * (`bridgeContext`): the agent (`gemini-cli-core/<version>`), the session id and project root
 * from the agent's `Config` when given, else the working directory, and the project named
 * after it.
 *
 * The bus is typed structurally: gemini-cli-core is never a dependency of this package.
 */

import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { basename } from "node:path";

import type { AskResponse, Confirmation, ProducerOptions } from "./asking.js";
import { Producer } from "./producer.js";
import {
  APPROVAL_MODES,
  CONTEXT_FIELDS,
  contextFromEnv,
  mergeContext,
  type ApprovalMode,
  type NoUiPolicy,
  type RequestContext,
  type ToolOutcome,
} from "./protocol.js";

/** What the bridge needs of a MessageBus (gemini-cli-core's class has all of it). */
export interface MessageBusLike {
  publish(message: any): unknown;
  subscribe(type: string, listener: (message: any) => void): void;
  unsubscribe(type: string, listener: (message: any) => void): void;
}

/** What the bridge reads of Gemini CLI core's `Config` (its class has all of it). */
export interface GeminiConfigLike {
  getSessionId?(): string;
  getProjectRoot?(): string;
  getTargetDir?(): string;
  /** The live approval mode (`default`, `autoEdit`, `yolo`, `plan`): read at each question. */
  getApprovalMode?(): string;
  /** Whether a person is at the agent's prompt (false for `gemini -p`). */
  isInteractive?(): boolean;
}

export interface BridgeOptions extends ProducerOptions {
  /** Ask through this producer instead of one the bridge opens (and closes on detach). */
  producer?: Producer;
  /** The agent's `Config` (`config` in Gemini CLI core): its session id and project root go
   * into every question's context. */
  config?: GeminiConfigLike;
  /** Passed with every question set; the daemon's default otherwise. */
  timeoutMs?: number;
  noUi?: NoUiPolicy;
  /** Bridge the scheduler's ask_user confirmations too (default true). */
  toolConfirmations?: boolean;
  /** Told about each question set the daemon refused or could not take; the bus is answered
   * with a cancellation so the agent never waits forever. */
  onError?: (error: unknown, correlationId: string) => void;
  /** Told about each daemon answer before it is relayed (with the tool result it carries). */
  onResponse?: (response: AskResponse, correlationId: string) => void;
  /** Bridge `tool-confirmation-request` messages (the agent's permission prompts; default true). */
  approvals?: boolean;
  /** What the UIs may offer for those beyond "Allow once" and "Deny" (e.g. `["proceed_always"]`
   * when the agent acts on it). */
  approvalOutcomes?: ToolOutcome[];
  /** Told about each approval's end before it is relayed: the person's reason for a denial
   * (`message`), or why nobody approved (the bus's response has no field for it). */
  onConfirmation?: (confirmation: Confirmation, correlationId: string) => void;
}

export interface BridgeHandle {
  /** Stops bridging: unsubscribes from the bus and withdraws the questions still pending. */
  detach(): void;
  /** Question sets sent to the daemon and not yet answered. */
  readonly pending: number;
  readonly producer: Producer;
}

/** The version of the @google/gemini-cli-core this process loads, when it can be found. */
function coreVersion(): string | undefined {
  try {
    const require = createRequire(import.meta.url);
    const v = require("@google/gemini-cli-core/package.json")?.version;
    return typeof v === "string" ? v : undefined;
  } catch {
    return undefined; // not installed beside us, or its exports hide package.json
  }
}

/** Whether the daemon would take `value` for context field `name` (non-empty, one line, within
 * the field's length in characters): what the bridge guesses is left out rather than have a
 * question refused for it. */
function acceptable(name: string, value: unknown): value is string {
  const limit = CONTEXT_FIELDS.find(([n]) => n === name)?.[2] ?? 256;
  // eslint-disable-next-line no-control-regex
  return typeof value === "string" && value.length > 0 && [...value].length <= limit && !/[\u0000-\u001f\u007f-\u009f]/.test(value);
}

function call<T>(f: (() => T) | undefined, self: object): T | undefined {
  try {
    return f?.call(self);
  } catch {
    return undefined;
  }
}

/**
 * The context the bridge sends with every question: `over` (your `context` option), then the
 * `ASKBUS_*` variables, then what the bridge knows: `agent` is `gemini-cli-core/<version>`,
 * `session` the `Config`'s session id, `cwd` its project root (else this process's working
 * directory) and `project` that directory's name; `approvalMode` and `interactive` are the
 * `Config`'s `getApprovalMode()` and `isInteractive()` at the time of asking. A guessed value
 * the daemon would refuse is left out; one you set is sent as is (the daemon names the field it
 * refuses).
 */
export function bridgeContext(
  opts: { config?: GeminiConfigLike; context?: RequestContext } = {},
  env: Record<string, string | undefined> = process.env,
): RequestContext {
  const config = opts.config;
  const version = coreVersion();
  const cwd = (config && (call(config.getProjectRoot, config) ?? call(config.getTargetDir, config))) || process.cwd();
  const known: Record<string, unknown> = {
    agent: version ? `gemini-cli-core/${version}` : "gemini-cli-core",
    session: config && call(config.getSessionId, config),
    cwd,
    project: basename(cwd),
  };
  const guessed: RequestContext = {};
  for (const [name] of CONTEXT_FIELDS) {
    const v = known[name];
    if (acceptable(name, v)) guessed[name] = v;
  }
  // The agent's own approval mode and interactivity, which the daemon's policy rules match.
  const mode = config && call(config.getApprovalMode, config);
  if ((APPROVAL_MODES as readonly unknown[]).includes(mode)) guessed.approvalMode = mode as ApprovalMode;
  const interactive = config && call(config.isInteractive, config);
  if (typeof interactive === "boolean") guessed.interactive = interactive;
  return mergeContext(guessed, mergeContext(contextFromEnv(env), opts.context));
}

const ASK_USER_REQUEST = "ask-user-request";
const ASK_USER_RESPONSE = "ask-user-response";
const TOOL_CALLS_UPDATE = "tool-calls-update";
const TOOL_CONFIRMATION_RESPONSE = "tool-confirmation-response";
const TOOL_CONFIRMATION_REQUEST = "tool-confirmation-request";
const ASK_USER_TOOL = "ask_user";

interface Bridged {
  daemonId: string;
  kind: "message" | "tool" | "approval";
  schedulerId?: string;
}

export function bridgeMessageBus(bus: MessageBusLike, opts: BridgeOptions = {}): BridgeHandle {
  const producer = opts.producer ?? new Producer({ client: "askbus-gemini-bridge", ...opts });
  const ownsProducer = opts.producer === undefined;
  // A given producer's own context (its options and the variables) wins over the guesses.
  // Made again for each request: the agent's approval mode can change while it runs.
  const contextNow = () => mergeContext(bridgeContext(opts), opts.producer ? opts.producer.context : {});
  // Keyed by the bus's correlationId. The daemon gets ids of its own: the bus's are only
  // unique within this process, the daemon's pending table is shared by every agent.
  const bridged = new Map<string, Bridged>();
  let detached = false;

  const publish = (message: Record<string, unknown>) => {
    try {
      void Promise.resolve(bus.publish(message)).catch(() => {});
    } catch {
      // A bus that throws on publish has no one to tell; the agent's own timeout applies.
    }
  };

  const reply = (busId: string, b: Bridged, r: AskResponse | null) => {
    const answered = r !== null && !r.cancelled;
    if (b.kind === "message") {
      const msg: Record<string, unknown> = { type: ASK_USER_RESPONSE, correlationId: busId, answers: answered ? r.answers : {} };
      if (!answered) msg.cancelled = true;
      publish(msg);
    } else if (answered) {
      publish({ type: TOOL_CONFIRMATION_RESPONSE, correlationId: busId, confirmed: true, outcome: "proceed_once", payload: { answers: r.answers } });
    } else {
      publish({ type: TOOL_CONFIRMATION_RESPONSE, correlationId: busId, confirmed: false, outcome: "cancel" });
    }
  };

  const forward = (busId: string, questions: unknown, b: Bridged) => {
    bridged.set(busId, b);
    producer
      .ask(questions, { correlationId: b.daemonId, timeoutMs: opts.timeoutMs, noUi: opts.noUi, context: contextNow() })
      .then(
        (r) => {
          // Answered meanwhile on the bus (a local dialog), or withdrawn by detach: say nothing.
          if (bridged.get(busId) !== b) return;
          bridged.delete(busId);
          opts.onResponse?.(r, busId);
          reply(busId, b, r);
        },
        (err) => {
          if (bridged.get(busId) !== b) return;
          bridged.delete(busId);
          opts.onError?.(err, busId);
          if (!detached) reply(busId, b, null);
        },
      );
  };

  const forwardApproval = (busId: string, msg: any, b: Bridged) => {
    bridged.set(busId, b);
    producer
      .confirm(msg.toolCall, {
        correlationId: b.daemonId,
        details: msg.details ?? undefined,
        serverName: typeof msg.serverName === "string" ? msg.serverName : undefined,
        toolAnnotations: msg.toolAnnotations ?? undefined,
        subagent: typeof msg.subagent === "string" ? msg.subagent : undefined,
        outcomes: opts.approvalOutcomes,
        timeoutMs: opts.timeoutMs,
        noUi: opts.noUi,
        context: contextNow(),
      })
      .then((c) => {
        // Answered meanwhile on the bus (a local dialog), or withdrawn by detach: say nothing.
        if (bridged.get(busId) !== b) return;
        bridged.delete(busId);
        opts.onConfirmation?.(c, busId);
        if (c.reason === "refused" || c.reason === "daemon-lost") opts.onError?.(c.error, busId);
        if (detached && !c.confirmed) return;
        const reply: Record<string, unknown> = { type: TOOL_CONFIRMATION_RESPONSE, correlationId: busId, confirmed: c.confirmed, outcome: c.outcome };
        if (c.payload !== undefined) reply.payload = c.payload;
        publish(reply);
      });
  };

  const onToolConfirmationRequest = (msg: any) => {
    if (detached || typeof msg?.correlationId !== "string" || bridged.has(msg.correlationId)) return;
    if (msg.toolCall?.name === ASK_USER_TOOL) {
      // The ask_user tool's own confirmation is its questions (bridged from the scheduler's
      // tool-calls-update): let it show them rather than ask "allow ask_user?" first. This is
      // what the bus answers when no one listens.
      publish({ type: TOOL_CONFIRMATION_RESPONSE, correlationId: msg.correlationId, confirmed: false, requiresUserConfirmation: true });
      return;
    }
    forwardApproval(msg.correlationId, msg, { daemonId: randomUUID(), kind: "approval" });
  };

  const withdraw = (busId: string) => {
    const b = bridged.get(busId);
    if (!b) return;
    bridged.delete(busId);
    producer.cancel(b.daemonId);
  };

  const onAskUserRequest = (msg: any) => {
    if (detached || typeof msg?.correlationId !== "string" || bridged.has(msg.correlationId)) return;
    forward(msg.correlationId, msg.questions, { daemonId: randomUUID(), kind: "message" });
  };

  // Someone else on the bus answered an approval first: take it back from the UIs.
  const onToolConfirmationResponse = (msg: any) => {
    if (typeof msg?.correlationId === "string" && bridged.get(msg.correlationId)?.kind === "approval") {
      withdraw(msg.correlationId);
    }
  };

  // Someone else on the bus (an in-process dialog) answered first: take the question back.
  const onAskUserResponse = (msg: any) => {
    if (typeof msg?.correlationId === "string" && bridged.get(msg.correlationId)?.kind === "message") {
      withdraw(msg.correlationId);
    }
  };

  const onToolCallsUpdate = (msg: any) => {
    if (detached || !Array.isArray(msg?.toolCalls)) return;
    const schedulerId = typeof msg.schedulerId === "string" ? msg.schedulerId : undefined;
    const awaiting = new Set<string>();
    for (const call of msg.toolCalls) {
      const details = call?.confirmationDetails;
      if (call?.status !== "awaiting_approval" || details?.type !== "ask_user") continue;
      const busId = call.correlationId;
      if (typeof busId !== "string") continue;
      awaiting.add(busId);
      if (bridged.has(busId)) continue;
      // The model's own arguments, so the daemon validates and normalizes exactly what the
      // tool did; the details hold the already-normalized copy.
      const args = call.request?.args;
      const questions = args && typeof args === "object" && "questions" in args ? args.questions : details.questions;
      forward(busId, questions, { daemonId: randomUUID(), kind: "tool", schedulerId });
    }
    // A call of this scheduler that stopped awaiting (answered in the terminal, cancelled):
    // its question leaves the other UIs too.
    for (const [busId, b] of bridged) {
      if (b.kind === "tool" && b.schedulerId === schedulerId && !awaiting.has(busId)) withdraw(busId);
    }
  };

  bus.subscribe(ASK_USER_REQUEST, onAskUserRequest);
  bus.subscribe(ASK_USER_RESPONSE, onAskUserResponse);
  const tools = opts.toolConfirmations ?? true;
  if (tools) bus.subscribe(TOOL_CALLS_UPDATE, onToolCallsUpdate);
  const approvals = opts.approvals ?? true;
  if (approvals) {
    bus.subscribe(TOOL_CONFIRMATION_REQUEST, onToolConfirmationRequest);
    bus.subscribe(TOOL_CONFIRMATION_RESPONSE, onToolConfirmationResponse);
  }

  return {
    producer,
    get pending() {
      return bridged.size;
    },
    detach() {
      if (detached) return;
      detached = true;
      bus.unsubscribe(ASK_USER_REQUEST, onAskUserRequest);
      bus.unsubscribe(ASK_USER_RESPONSE, onAskUserResponse);
      if (tools) bus.unsubscribe(TOOL_CALLS_UPDATE, onToolCallsUpdate);
      if (approvals) {
        bus.unsubscribe(TOOL_CONFIRMATION_REQUEST, onToolConfirmationRequest);
        bus.unsubscribe(TOOL_CONFIRMATION_RESPONSE, onToolConfirmationResponse);
      }
      for (const busId of [...bridged.keys()]) withdraw(busId);
      if (ownsProducer) producer.close();
    },
  };
}
