/**
 * What a producer's callers pass and get back: the options of a `Producer`, of an ask and of a
 * confirmation, and how each ends. The producer's connection and pending state are in
 * producer.ts.
 */

import type { ReconnectOptions } from "./backoff.js";
import type {
  Answers,
  ConfirmationDetails,
  NoUiPolicy,
  Outcome,
  RequestContext,
  ToolOutcome,
  ToolResult,
} from "./protocol.js";

export interface ProducerOptions {
  /** Socket path; default as the daemon resolves it (`defaultSocketPath()`). */
  socket?: string;
  /** A name shown to the UIs, e.g. `"my-agent/1.2"`. */
  client?: string;
  /** Reconnect and resend after the connection drops (default true). */
  reconnect?: boolean | ReconnectOptions;
  /** Keep trying the very first connection until the ask's deadline instead of failing at
   * once with DaemonUnreachable (for agents that may start before the daemon). Default false. */
  waitForDaemon?: boolean;
  /** Who is asking, about what: sent with every question, shown to UIs and matched by their
   * filters. On top of the `ASKBUS_AGENT`, `ASKBUS_SESSION`, `ASKBUS_PROJECT`, `ASKBUS_CWD` and
   * `ASKBUS_TITLE` environment variables; an ask's own `context` overrides it field by field. */
  context?: RequestContext;
}

export interface AskOptions {
  /** Chosen by the client when omitted. */
  correlationId?: string;
  /** How long a UI has to answer; the daemon's default (and cap) applies otherwise. */
  timeoutMs?: number;
  /** What the daemon does when no UI is subscribed (its own default otherwise). */
  noUi?: NoUiPolicy;
  /** Aborting withdraws the question (ask-user-cancel) and rejects the ask with the signal's reason. */
  signal?: AbortSignal;
  /** This question's context, over the producer's, field by field. */
  context?: RequestContext;
}

/** How an ask ended. `result` is exactly what the ask_user tool returns to the model. */
export interface AskResponse {
  correlationId: string;
  /** The answers, keyed by question index; empty unless `reason` is `answered`. */
  answers: Answers;
  /** True for every outcome but `answered`. */
  cancelled: boolean;
  reason: Outcome;
  result: ToolResult;
}

/** What `confirm` takes beyond the tool call: the request's optional fields, and an ask's. */
export interface ConfirmOptions extends Omit<AskOptions, "context"> {
  details?: ConfirmationDetails;
  /** What the agent can act on; proceed_once and cancel are always offered. */
  outcomes?: ToolOutcome[];
  serverName?: string;
  toolAnnotations?: Record<string, unknown>;
  subagent?: string;
  context?: RequestContext;
}

/** How a confirmation ended: the daemon's reasons, `refused` (the daemon refused the request;
 * `error` says why) and `daemon-lost` (no daemon held it to its end). */
export type ConfirmationReason = Outcome | "refused" | "daemon-lost";

/** What `confirm` resolves with, whatever happened (it never rejects). It fails closed:
 * `confirmed` is true only when a person approved (`reason` `answered`); every other end is
 * `confirmed: false`, `outcome: "cancel"`, with a `message` for the agent saying why. */
export interface Confirmation {
  correlationId: string;
  confirmed: boolean;
  outcome: ToolOutcome;
  reason: ConfirmationReason;
  message?: string;
  payload?: Record<string, unknown>;
  /** The error behind `refused` or `daemon-lost` (or an aborted signal's reason). */
  error?: unknown;
}

/** An ask in flight: its id (for `cancel`) and its eventual response. */
export interface PendingAsk {
  readonly correlationId: string;
  readonly response: Promise<AskResponse>;
}
