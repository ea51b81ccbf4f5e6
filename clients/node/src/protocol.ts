/**
 * Protocol v1 as this client speaks it: the frame types (what the daemon sends, what a client
 * sends), the encoders of client frames, and the framing (4-byte big-endian length, then UTF-8
 * JSON) with a decoder that never buffers more than one bounded frame.
 */

import { ProtocolError } from "./errors.js";

export const PROTOCOL_VERSION = 1;

/** The longest frame this client accepts from the daemon. A response repeats the answers in
 * its result, so daemon frames may exceed the daemon's own inbound limit. */
export const MAX_INBOUND_FRAME_BYTES = 16 * 1024 * 1024;

/** The daemon's default inbound limit, used until its `welcome` says otherwise. */
export const DEFAULT_MAX_FRAME_BYTES = 1_048_576;

// ---------------------------------------------------------------------------------------------
// Questions, as the ask_user tool takes them.

export type QuestionType = "choice" | "text" | "yesno";

export interface QuestionOption {
  label: string;
  description: string;
}

export interface Question {
  question: string;
  header: string;
  type: QuestionType;
  /** Required for `choice` (2 to 4); ignored otherwise. */
  options?: QuestionOption[];
  /** Only for `choice`. */
  multiSelect?: boolean;
  placeholder?: string;
  unconstrainedHeight?: boolean;
}

/** Answers keyed by question index (`"0"` … `"3"`), as ask_user returns them. */
export type Answers = Record<string, string>;

export type NoUiPolicy = "wait" | "reject";
export type Outcome = "answered" | "dismissed" | "timeout" | "no-ui" | "withdrawn" | "shutdown";
export type WithdrawReason = "answered" | "timeout" | "withdrawn" | "producer-gone" | "shutdown";

export interface ProducerInfo {
  client?: string;
  pid: number | null;
  uid: number;
}

/** The tool result handed to the model: what the reference AskUserInvocation.execute() returns. */
export interface ToolResult {
  llmContent: string;
  returnDisplay: string;
  data: { ask_user: Record<string, unknown> } & Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------
// Frames the daemon sends.

export interface WelcomeFrame {
  type: "welcome";
  protocol: number;
  server: string;
  maxFrameBytes: number;
  defaultTimeoutMs: number;
  maxTimeoutMs: number;
}
export interface PongFrame {
  type: "pong";
  id?: unknown;
}
/**
 * Who is asking, about what: a request's optional `context`, shown to UIs with it and matched
 * by their filters. `agent` is the agent itself as `name/version` (not this library),
 * `session` its own session id, `project` a short project name, `cwd` its working directory,
 * `title` one line saying what it is doing. The daemon refuses an empty value, one with
 * control characters, or one longer than `CONTEXT_LIMITS` with `InvalidRequest` naming the field.
 */
export interface RequestContext {
  agent?: string;
  session?: string;
  project?: string;
  cwd?: string;
  title?: string;
  /** The agent's approval mode, as Gemini CLI spells it (absent: `default`): the daemon's
   * policy rules with `modes` match it. Any other value is refused with `InvalidRequest`. */
  approvalMode?: ApprovalMode;
  /** Whether a person is at the agent's own prompt (absent: true); `false` for a headless
   * run. The daemon's policy rules with `interactive` match it. */
  interactive?: boolean;
}

/** The agent's approval modes (`context.approvalMode`). */
export const APPROVAL_MODES = ["default", "autoEdit", "yolo", "plan"] as const;
export type ApprovalMode = (typeof APPROVAL_MODES)[number];

/** Each context field, the environment variable it defaults to, and its longest value (characters). */
export const CONTEXT_FIELDS = [
  ["agent", "ASKBUS_AGENT", 256],
  ["session", "ASKBUS_SESSION", 256],
  ["project", "ASKBUS_PROJECT", 128],
  ["cwd", "ASKBUS_CWD", 4096],
  ["title", "ASKBUS_TITLE", 256],
] as const;

/** Which requests a UI is shown: every key given must match the request's context. */
export interface SubscribeFilter {
  project?: string;
  /** `name/version`, or just the name. */
  agent?: string;
  session?: string;
  /** Federation: only requests asked on this askbusd node. */
  node?: string;
}

/** The context the `ASKBUS_*` environment variables give (empty ones count as unset). */
export function contextFromEnv(env: Record<string, string | undefined> = process.env): RequestContext {
  const c: RequestContext = {};
  for (const [name, variable] of CONTEXT_FIELDS) {
    const v = env[variable];
    if (v) c[name] = v;
  }
  return c;
}

/** `base` with every field `over` sets replaced; only the known, set fields are kept. */
export function mergeContext(base: RequestContext, over: RequestContext = {}): RequestContext {
  const c: RequestContext = {};
  for (const [name] of CONTEXT_FIELDS) {
    const v = over[name] ?? base[name];
    if (v !== undefined && v !== null) c[name] = v;
  }
  const mode = over.approvalMode ?? base.approvalMode;
  if (mode !== undefined && mode !== null) c.approvalMode = mode;
  const interactive = over.interactive ?? base.interactive;
  if (interactive !== undefined && interactive !== null) c.interactive = interactive;
  return c;
}

export interface SubscribedFrame {
  type: "subscribed";
  pending: number;
}
/** To UIs: a question to answer (normalized questions, time left). */
export interface UiRequestFrame {
  type: "ask-user-request";
  correlationId: string;
  questions: Question[];
  timeoutMs: number;
  producer: ProducerInfo;
  /** Who is asking, about what; absent when the producer did not say. */
  context?: RequestContext;
}
export interface WithdrawnFrame {
  type: "ask-user-withdrawn";
  correlationId: string;
  reason: WithdrawReason;
}
export interface AckFrame {
  type: "ask-user-ack";
  correlationId: string;
  outcome: "answered" | "dismissed";
}
/** To producers: the one terminal answer. */
export interface ProducerResponseFrame {
  type: "ask-user-response";
  correlationId: string;
  answers: Answers;
  cancelled: boolean;
  reason: Outcome;
  result: ToolResult;
}
export interface ErrorFrame {
  type: "error";
  code: string;
  message: string;
  correlationId?: string;
}
/** To observers (`watch`): that the connection now observes. */
export interface WatchingFrame {
  type: "watching";
}
/**
 * Who or what ended a request, as its history record and an observer's end event both say.
 * `uid` is the kernel's; `via`, `client` and `user` what the deciding UI claimed (`via` `acp`
 * on a `withdrawn` event: the editor answered it); `rule` the policy rule (`kind` `rule`).
 */
export interface DecidedBy {
  kind: "human" | "rule" | "timeout" | "no-ui" | "producer" | "shutdown" | "rejected";
  via?: string;
  uid?: number;
  client?: string;
  node?: string;
  user?: string;
  rule?: unknown;
}
/** To observers: a request became pending or ended. Never the question text or the answers. */
export interface BusEventFrame {
  type: "bus-event";
  /** `notify`: a notifier's delivery report (`producer` is then the notifier). */
  event: "request" | Outcome | "producer-gone" | "rejected" | "notify";
  ts: string;
  correlationId: string;
  producer: ProducerInfo;
  /** The request's `context.agent` and `context.project`, when it carried them. */
  agent?: string;
  project?: string;
  ui?: { client?: string; pid: number | null };
  latencyMs?: number;
  timeoutMs?: number;
  questionTypes: QuestionType[];
  headers: string[];
  code?: string;
  notify?: { sink: string; result: NotifyResult; count: number; error?: string };
  /** Ends but `rejected`: who or what decided it (absent from a daemon before it). */
  decidedBy?: DecidedBy;
}
export interface StatsFrame {
  type: "stats";
  [counter: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Approvals: Gemini CLI core's tool confirmations (proto/PROTOCOL.md, "Approval frames").

/** `ToolConfirmationOutcome` of @google/gemini-cli-core, in its order. */
export const TOOL_OUTCOMES = [
  "proceed_once",
  "proceed_always",
  "proceed_always_and_save",
  "proceed_always_server",
  "proceed_always_tool",
  "modify_with_editor",
  "cancel",
] as const;
export type ToolOutcome = (typeof TOOL_OUTCOMES)[number];

/** The reference's `FunctionCall`. */
export interface ToolCall {
  name: string;
  args?: Record<string, unknown>;
  id?: string;
  [key: string]: unknown;
}

/** The reference's `SerializableConfirmationDetails` (kept as sent; unknown keys allowed). */
export type ConfirmationDetails = { type: string; title: string; systemMessage?: string; [key: string]: unknown };

/** To UIs: an approval to decide. */
export interface UiApprovalFrame {
  type: "tool-confirmation-request";
  correlationId: string;
  toolCall: ToolCall;
  serverName?: string;
  toolAnnotations?: Record<string, unknown>;
  subagent?: string;
  details?: ConfirmationDetails;
  /** What the UI may offer; always holds proceed_once and cancel. */
  outcomes: ToolOutcome[];
  timeoutMs: number;
  producer: ProducerInfo;
  context?: Record<string, unknown>;
}
export interface ApprovalWithdrawnFrame {
  type: "tool-confirmation-withdrawn";
  correlationId: string;
  reason: WithdrawReason;
}
export interface ApprovalAckFrame {
  type: "tool-confirmation-ack";
  correlationId: string;
  reason: "answered" | "dismissed";
  confirmed: boolean;
  outcome: ToolOutcome;
}
/** To producers: the one terminal answer to an approval. `confirmed` is true only when a UI
 * approved; every other end is `confirmed: false`, `outcome: "cancel"`, with `message` saying why. */
export interface ApprovalResponseFrame {
  type: "tool-confirmation-response";
  correlationId: string;
  confirmed: boolean;
  outcome: ToolOutcome;
  reason: Outcome;
  message?: string;
  payload?: Record<string, unknown>;
}

export type ServerFrame =
  | WelcomeFrame
  | PongFrame
  | SubscribedFrame
  | UiRequestFrame
  | WithdrawnFrame
  | AckFrame
  | ProducerResponseFrame
  | ErrorFrame
  | WatchingFrame
  | BusEventFrame
  | StatsFrame
  | UiApprovalFrame
  | ApprovalWithdrawnFrame
  | ApprovalAckFrame
  | ApprovalResponseFrame;

// ---------------------------------------------------------------------------------------------
// Frames a client sends.

export interface HelloFrame {
  type: "hello";
  protocol: number;
  client?: string;
}
export interface PingFrame {
  type: "ping";
  id?: unknown;
}
export interface StatsRequestFrame {
  type: "stats";
}
export interface SubscribeFrame {
  type: "subscribe";
  client?: string;
  /** How this UI reaches people (`tui`, `web`, ...); the daemon records it in decidedBy. */
  via?: string;
  filter?: SubscribeFilter;
}
export interface WatchFrame {
  type: "watch";
  client?: string;
}
/** How a notifier's delivery went: shown or accepted, given up, or answered from it. */
export type NotifyResult = "sent" | "failed" | "answered";
/** A notifier's delivery report (`askbus notify`): counted by askbusd and shown to observers. */
export interface NotifyReportFrame {
  type: "notify-report";
  sink: string;
  result: NotifyResult;
  correlationIds: string[];
  error?: string;
}
export interface AskFrame {
  type: "ask-user-request";
  correlationId: string;
  questions: unknown;
  timeoutMs?: number;
  noUi?: NoUiPolicy;
  context?: RequestContext;
}
export interface CancelFrame {
  type: "ask-user-cancel";
  correlationId: string;
}
export interface AnswerFrame {
  type: "ask-user-response";
  correlationId: string;
  answers: Answers;
  cancelled?: boolean;
}

export interface ApprovalRequestFrame {
  type: "tool-confirmation-request";
  correlationId: string;
  toolCall: ToolCall;
  serverName?: string;
  toolAnnotations?: Record<string, unknown>;
  subagent?: string;
  details?: ConfirmationDetails;
  outcomes?: ToolOutcome[];
  timeoutMs?: number;
  noUi?: NoUiPolicy;
  context?: RequestContext;
}
export interface ApprovalCancelFrame {
  type: "tool-confirmation-cancel";
  correlationId: string;
}
export interface DecisionFrame {
  type: "tool-confirmation-response";
  correlationId: string;
  confirmed?: boolean;
  outcome?: ToolOutcome;
  message?: string;
  payload?: Record<string, unknown>;
  dismissed?: boolean;
}

/** The optional fields of an approval request. */
export interface ApprovalOptions {
  serverName?: string;
  toolAnnotations?: Record<string, unknown>;
  subagent?: string;
  details?: ConfirmationDetails;
  outcomes?: ToolOutcome[];
  timeoutMs?: number;
  noUi?: NoUiPolicy;
  context?: RequestContext;
}

export type ClientFrame =
  | HelloFrame
  | PingFrame
  | StatsRequestFrame
  | SubscribeFrame
  | WatchFrame
  | NotifyReportFrame
  | AskFrame
  | CancelFrame
  | AnswerFrame
  | ApprovalRequestFrame
  | ApprovalCancelFrame
  | DecisionFrame;

/** Client frames, built with exactly the fields the protocol defines (optional ones omitted). */
export const frames = {
  hello(client?: string): HelloFrame {
    return client === undefined ? { type: "hello", protocol: PROTOCOL_VERSION } : { type: "hello", protocol: PROTOCOL_VERSION, client };
  },
  ping(id?: unknown): PingFrame {
    return id === undefined ? { type: "ping" } : { type: "ping", id };
  },
  stats(): StatsRequestFrame {
    return { type: "stats" };
  },
  subscribe(client?: string, filter?: SubscribeFilter, via?: string): SubscribeFrame {
    const f: SubscribeFrame = { type: "subscribe" };
    if (client !== undefined) f.client = client;
    if (via !== undefined) f.via = via;
    if (filter !== undefined && Object.values(filter).some((v) => v !== undefined)) f.filter = filter;
    return f;
  },
  watch(client?: string): WatchFrame {
    return client === undefined ? { type: "watch" } : { type: "watch", client };
  },
  notifyReport(sink: string, result: NotifyResult, correlationIds: string[] = [], error?: string): NotifyReportFrame {
    const f: NotifyReportFrame = { type: "notify-report", sink, result, correlationIds };
    if (error !== undefined) f.error = error;
    return f;
  },
  ask(correlationId: string, questions: unknown, timeoutMs?: number, noUi?: NoUiPolicy, context?: RequestContext): AskFrame {
    const f: AskFrame = { type: "ask-user-request", correlationId, questions };
    if (timeoutMs !== undefined) f.timeoutMs = timeoutMs;
    if (noUi !== undefined) f.noUi = noUi;
    if (context !== undefined && Object.keys(context).length > 0) f.context = context;
    return f;
  },
  cancel(correlationId: string): CancelFrame {
    return { type: "ask-user-cancel", correlationId };
  },
  answer(correlationId: string, answers: Answers): AnswerFrame {
    return { type: "ask-user-response", correlationId, answers };
  },
  dismiss(correlationId: string): AnswerFrame {
    return { type: "ask-user-response", correlationId, answers: {}, cancelled: true };
  },
  confirm(correlationId: string, toolCall: ToolCall, options: ApprovalOptions = {}): ApprovalRequestFrame {
    const f: ApprovalRequestFrame = { type: "tool-confirmation-request", correlationId, toolCall };
    for (const key of ["serverName", "toolAnnotations", "subagent", "details", "outcomes", "timeoutMs", "noUi", "context"] as const) {
      if (options[key] !== undefined) (f as any)[key] = options[key];
    }
    return f;
  },
  cancelApproval(correlationId: string): ApprovalCancelFrame {
    return { type: "tool-confirmation-cancel", correlationId };
  },
  /** A decision: `cancel` denies, any other outcome approves. */
  decide(correlationId: string, outcome: ToolOutcome, message?: string, payload?: Record<string, unknown>): DecisionFrame {
    const f: DecisionFrame = { type: "tool-confirmation-response", correlationId, confirmed: outcome !== "cancel", outcome };
    if (message !== undefined) f.message = message;
    if (payload !== undefined) f.payload = payload;
    return f;
  },
  dismissApproval(correlationId: string): DecisionFrame {
    return { type: "tool-confirmation-response", correlationId, dismissed: true };
  },
};

// ---------------------------------------------------------------------------------------------
// Framing.

/** One frame on the wire: length prefix and JSON payload. */
export function encodeFrame(frame: ClientFrame | Record<string, unknown>): Buffer {
  const payload = Buffer.from(JSON.stringify(frame), "utf8");
  const out = Buffer.allocUnsafe(4 + payload.length);
  out.writeUInt32BE(payload.length, 0);
  payload.copy(out, 4);
  return out;
}

/** Parses one payload into a server frame; anything but a JSON object with a string `type` is
 * a protocol error. Unknown types pass through (newer daemons may add frames). */
export function parseServerFrame(payload: Buffer | string): ServerFrame {
  let value: unknown;
  try {
    value = JSON.parse(typeof payload === "string" ? payload : payload.toString("utf8"));
  } catch (e) {
    throw new ProtocolError(`askbusd sent a frame that is not JSON: ${(e as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ProtocolError("askbusd sent a frame that is not a JSON object");
  }
  if (typeof (value as { type?: unknown }).type !== "string") {
    throw new ProtocolError('askbusd sent a frame without a string "type"');
  }
  return value as ServerFrame;
}

/** Splits a byte stream into frame payloads. */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;

  constructor(private readonly maxFrameBytes = MAX_INBOUND_FRAME_BYTES) {}

  /** Feeds bytes; returns every payload completed by them, in order. */
  push(chunk: Buffer): Buffer[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const out: Buffer[] = [];
    for (;;) {
      if (this.buffered < 4) break;
      const head = this.peek(4);
      const len = head.readUInt32BE(0);
      if (len > this.maxFrameBytes) {
        throw new ProtocolError(`askbusd announced a ${len}-byte frame; this client accepts at most ${this.maxFrameBytes}`);
      }
      if (this.buffered < 4 + len) break;
      const whole = this.take(4 + len);
      out.push(whole.subarray(4));
    }
    return out;
  }

  /** Bytes of an unfinished frame (a non-zero value at end of stream means a truncated frame). */
  get pendingBytes(): number {
    return this.buffered;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length >= n) return this.chunks[0]!.subarray(0, n);
    const joined = Buffer.concat(this.chunks);
    this.chunks = [joined];
    return joined.subarray(0, n);
  }

  private take(n: number): Buffer {
    const joined = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    const taken = joined.subarray(0, n);
    const rest = joined.subarray(n);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered = rest.length;
    return taken;
  }
}
