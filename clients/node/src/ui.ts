/**
 * The UI role: subscribe, receive every pending and new question as a `UiRequest`, answer or
 * dismiss it, and learn when it is withdrawn. The subscription reconnects after a lost
 * connection and takes the daemon's replay without yielding a request it already yielded;
 * an answer whose acknowledgement was lost is sent again once its request is back.
 */

import { EventEmitter } from "node:events";

import { Backoff, sleep, type ReconnectOptions } from "./backoff.js";
import { Connection } from "./connection.js";
import { AskbusError, ConnectionClosed, errorFromFrame, NotPending, ProtocolError } from "./errors.js";
import { defaultSocketPath } from "./paths.js";
import {
  frames,
  type AnswerFrame,
  type Answers,
  type ConfirmationDetails,
  type DecisionFrame,
  type ToolCall,
  type ToolOutcome,
  type UiApprovalFrame,
  type ProducerInfo,
  type Question,
  type ServerFrame,
  type RequestContext,
  type SubscribeFilter,
  type UiRequestFrame,
  type WithdrawReason,
} from "./protocol.js";

export interface SubscribeOptions {
  /** Socket path; default as the daemon resolves it (`defaultSocketPath()`). */
  socket?: string;
  /** This UI's name, recorded by the daemon with the answers it gives. */
  client?: string;
  /** Reconnect after the connection drops (default true). */
  reconnect?: boolean | ReconnectOptions;
  /** Keep trying the first connection instead of failing with DaemonUnreachable. Default false. */
  waitForDaemon?: boolean;
  /** Aborting closes the subscription (the `for await` loop ends). */
  signal?: AbortSignal;
  /** Show this UI only the requests whose context matches (project, agent name or
   * name/version, session): only those are replayed, sent and answerable. */
  filter?: SubscribeFilter;
  /** After a reconnect, how long a request missing from the replay may take to come back
   * (its producer resending it to a restarted daemon) before it counts as withdrawn. Default 5000. */
  resumeGraceMs?: number;
}

/** Why a request left: the daemon's reasons, or `connection-lost` when the connection dropped
 * and the request did not come back (answered elsewhere, or its producer gave up meanwhile). */
export type UiWithdrawReason = WithdrawReason | "connection-lost";

export type UiRequestState = "pending" | "answered" | "dismissed" | "withdrawn";

/** Thrown by `answer`/`dismiss` on a request that is no longer pending here. */
export class Withdrawn extends NotPending {
  readonly reason: UiWithdrawReason;
  constructor(correlationId: string, reason: UiWithdrawReason) {
    super("not-pending", `request ${JSON.stringify(correlationId)} was withdrawn (${reason})`, correlationId);
    this.reason = reason;
  }
}

interface InFlight {
  frame: AnswerFrame | DecisionFrame;
  resolve(outcome: "answered" | "dismissed"): void;
  reject(e: unknown): void;
  sent: boolean;
}

/** One question set a UI is asked to show. */
export class UiRequest {
  readonly correlationId: string;
  /** The normalized questions (as the ask_user tool would show them). */
  readonly questions: Question[];
  /** Who asked. */
  readonly producer: ProducerInfo;
  /** Who is asking, about what (undefined when the producer did not say). */
  readonly context: RequestContext | undefined;
  private _deadline: number;
  private _state: UiRequestState = "pending";
  private _reason: UiWithdrawReason | undefined;
  private readonly withdrawal = new AbortController();
  /** @internal */ inFlight: InFlight | null = null;

  /** @internal */
  constructor(
    frame: UiRequestFrame | UiApprovalFrame,
    protected readonly sub: Subscription,
  ) {
    this.correlationId = frame.correlationId;
    // An approval (UiApproval) has no questions.
    this.questions = "questions" in frame ? frame.questions : [];
    this.producer = frame.producer;
    this.context = frame.context as RequestContext | undefined;
    this._deadline = Date.now() + frame.timeoutMs;
  }

  /** Epoch ms at which the request times out. */
  get deadline(): number {
    return this._deadline;
  }

  /** Milliseconds left to answer. */
  get timeLeftMs(): number {
    return Math.max(0, this._deadline - Date.now());
  }

  get state(): UiRequestState {
    return this._state;
  }

  /** Why it was withdrawn, once it was. */
  get withdrawnReason(): UiWithdrawReason | undefined {
    return this._reason;
  }

  get withdrawn(): boolean {
    return this._state === "withdrawn";
  }

  /** Aborted when the request is withdrawn (its `reason` is a `Withdrawn` error): close the dialog. */
  get signal(): AbortSignal {
    return this.withdrawal.signal;
  }

  /** Sends the answers (`{"0": "SQLite"}`); resolves once the daemon acknowledged that this
   * answer won, rejects with NotPending when another UI was first or it was withdrawn. */
  answer(answers: Answers): Promise<"answered"> {
    return this.sub._respond(this, frames.answer(this.correlationId, { ...answers })) as Promise<"answered">;
  }

  /** The user closed the dialog without answering. */
  dismiss(): Promise<"dismissed"> {
    return this.sub._respond(this, frames.dismiss(this.correlationId)) as Promise<"dismissed">;
  }

  /** @internal */
  _refresh(frame: UiRequestFrame | UiApprovalFrame): void {
    this._deadline = Date.now() + frame.timeoutMs;
  }

  /** @internal */
  _finish(state: "answered" | "dismissed"): void {
    this._state = state;
  }

  /** @internal */
  _withdraw(reason: UiWithdrawReason): void {
    if (this._state !== "pending") return;
    this._state = "withdrawn";
    this._reason = reason;
    this.withdrawal.abort(new Withdrawn(this.correlationId, reason));
  }
}

/** An approval a UI is asked to decide: an agent's tool call (Gemini CLI core's
 * `tool-confirmation-request`), with a question's lifecycle (state, signal, deadline). Decide
 * it with `allow()`, `deny(reason)` or `dismiss()`; offer only its `outcomes`. */
export class UiApproval extends UiRequest {
  /** `{name, args}` of the call. */
  readonly toolCall: ToolCall;
  /** What the person is shown: `exec`, `edit`, `mcp`, `info`, … as the producer sent it. */
  readonly details: ConfirmationDetails | undefined;
  /** The choices the UI may offer (always proceed_once and cancel). */
  readonly outcomes: ToolOutcome[];
  readonly serverName: string | undefined;
  readonly toolAnnotations: Record<string, unknown> | undefined;
  readonly subagent: string | undefined;

  /** @internal */
  constructor(frame: UiApprovalFrame, sub: Subscription) {
    super(frame, sub);
    this.toolCall = frame.toolCall;
    this.details = frame.details;
    this.outcomes = frame.outcomes;
    this.serverName = frame.serverName;
    this.toolAnnotations = frame.toolAnnotations;
    this.subagent = frame.subagent;
  }

  /** `toolCall.name`. */
  get tool(): string {
    return this.toolCall.name;
  }

  /** An approval is not a question: use allow, deny or dismiss. */
  override answer(_answers: Answers): Promise<"answered"> {
    return Promise.reject(new TypeError("an approval is decided with allow(), deny() or dismiss(), not answer()"));
  }

  /** Approves with `outcome` (one of `outcomes`; `"proceed_always"` for "Allow always" where
   * offered). Resolves `"answered"` once acknowledged; rejects with InvalidResponse (and the
   * approval stays pending) for an outcome not offered, NotPending when another UI was first. */
  allow(outcome: ToolOutcome = "proceed_once", opts: { message?: string; payload?: Record<string, unknown> } = {}): Promise<"answered"> {
    if (outcome === "cancel") return Promise.reject(new TypeError("cancel denies the call: use deny()"));
    return this.sub._respond(this, frames.decide(this.correlationId, outcome, opts.message, opts.payload)) as Promise<"answered">;
  }

  /** Denies; `reason` is what the agent is told. */
  deny(reason?: string): Promise<"answered"> {
    return this.sub._respond(this, frames.decide(this.correlationId, "cancel", reason || undefined)) as Promise<"answered">;
  }

  /** Closes it without deciding (never an approval). */
  override dismiss(): Promise<"dismissed"> {
    return this.sub._respond(this, frames.dismissApproval(this.correlationId)) as Promise<"dismissed">;
  }
}

export interface SubscriptionEvents {
  /** Subscribed (again); `pending` requests follow as the replay. */
  connected: [info: { pending: number }];
  disconnected: [error: AskbusError];
  request: [req: UiRequest];
  withdrawn: [req: UiRequest, reason: UiWithdrawReason];
}

/** A UI's subscription: `for await (const req of sub)`. */
export class Subscription extends EventEmitter<SubscriptionEvents> implements AsyncIterable<UiRequest> {
  readonly socketPath: string;
  /** Resolves once the first subscription is confirmed; rejects if it cannot be made. */
  readonly ready: Promise<void>;
  private readonly client: string | undefined;
  private readonly filter: SubscribeFilter | undefined;
  private readonly reconnect: ReconnectOptions | null;
  private readonly graceMs: number;
  private conn: Connection | null = null;
  /** Requests yielded (or queued to be) and not yet finished here. */
  private readonly known = new Map<string, UiRequest>();
  /** Known requests a lost connection (or a daemon shutdown) took away, waiting to come back. */
  private readonly limbo = new Map<string, NodeJS.Timeout | null>();
  private readonly queue: UiRequest[] = [];
  private waiter: { resolve(r: IteratorResult<UiRequest>): void; reject(e: unknown): void } | null = null;
  private failure: unknown = undefined;
  private closed = false;
  private replayLeft = 0;
  private readonly stop = new AbortController();
  private readyResolve!: () => void;
  private readyReject!: (e: unknown) => void;

  constructor(opts: SubscribeOptions = {}) {
    super();
    this.socketPath = opts.socket ?? defaultSocketPath();
    this.client = opts.client;
    this.filter = opts.filter;
    const rc = opts.reconnect ?? true;
    this.reconnect = rc === false ? null : rc === true ? {} : rc;
    this.graceMs = opts.resumeGraceMs ?? 5000;
    this.ready = new Promise((resolve, reject) => {
      this.readyResolve = resolve;
      this.readyReject = reject;
    });
    // Surfaced through the iterator; `ready` is for those who want to await it.
    this.ready.catch(() => {});
    if (opts.signal) {
      if (opts.signal.aborted) {
        this.close();
        return;
      }
      opts.signal.addEventListener("abort", () => this.close(), { once: true });
    }
    void this.run(opts.waitForDaemon ?? false);
  }

  [Symbol.asyncIterator](): AsyncIterator<UiRequest> {
    return {
      next: () => this.next(),
      return: async () => {
        this.close();
        return { done: true, value: undefined };
      },
    };
  }

  /** Requests pending here (yielded or about to be), oldest first. */
  get pending(): UiRequest[] {
    return [...this.known.values()].filter((r) => r.state === "pending");
  }

  /** Ends the subscription: the iterator finishes, answers still awaiting an ack reject. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stop.abort();
    this.conn?.close();
    this.conn = null;
    for (const t of this.limbo.values()) if (t) clearTimeout(t);
    this.limbo.clear();
    for (const r of this.known.values()) {
      const f = r.inFlight;
      r.inFlight = null;
      f?.reject(new ConnectionClosed("the subscription was closed before the answer was acknowledged", r.correlationId));
    }
    this.known.clear();
    this.readyReject(new ConnectionClosed("the subscription was closed"));
    this.wake();
  }

  private next(): Promise<IteratorResult<UiRequest>> {
    for (;;) {
      const req = this.queue.shift();
      if (!req) break;
      // Withdrawn while waiting in the queue: nobody needs to see it.
      if (req.state === "pending") return Promise.resolve({ done: false, value: req });
    }
    if (this.failure !== undefined) {
      const e = this.failure;
      this.failure = undefined;
      this.closed = true;
      return Promise.reject(e);
    }
    if (this.closed) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  private wake(): void {
    const w = this.waiter;
    if (!w) return;
    this.waiter = null;
    this.next().then(w.resolve, w.reject);
  }

  /** Ends the subscription with an error, which the iterator throws. */
  private fail(e: unknown): void {
    if (this.closed) return;
    this.readyReject(e);
    const w = this.waiter;
    this.waiter = null;
    this.close();
    if (w) w.reject(e);
    else this.failure = e;
  }

  /** Connects, then keeps reconnecting after each loss until closed. */
  private async run(waitFirst: boolean): Promise<void> {
    const backoff = new Backoff(this.reconnect ?? {});
    let first = true;
    while (!this.closed) {
      let lost: Promise<AskbusError>;
      try {
        ({ lost } = await this.openOnce());
      } catch (e) {
        const err = e as AskbusError;
        const fatal = err.code === "unsupported-protocol" || err.code === "forbidden" || err instanceof ProtocolError;
        if (fatal || this.reconnect === null || (first && !waitFirst)) return this.fail(err);
        await sleep(backoff.delay(), this.stop.signal);
        continue;
      }
      first = false;
      backoff.reset();
      const err = await lost;
      if (this.closed) return;
      this.emit("disconnected", err);
      if (err instanceof ProtocolError || this.reconnect === null) return this.fail(err);
      for (const r of this.known.values()) this.toLimbo(r);
      await sleep(backoff.delay(), this.stop.signal);
    }
  }

  /** Opens and subscribes; resolves with a promise of the connection's loss (boxed: a promise
   * resolved with a promise would wait for it). */
  private openOnce(): Promise<{ lost: Promise<AskbusError> }> {
    return new Promise((resolveOpen, rejectOpen) => {
      let conn: Connection | undefined;
      let subscribed = false;
      let resolveLost!: (e: AskbusError) => void;
      const lost = new Promise<AskbusError>((r) => (resolveLost = r));
      Connection.open(this.socketPath, {
        frame: (f) => {
          if (this.conn !== conn) return;
          if (!subscribed) {
            if (f.type === "subscribed") {
              subscribed = true;
              this.onSubscribed(f.pending);
              resolveOpen({ lost });
            } else if (f.type === "error" && f.correlationId === undefined) {
              conn!.close();
              this.conn = null;
              rejectOpen(errorFromFrame(f));
            }
            return;
          }
          this.onFrame(f);
        },
        close: (e) => {
          if (this.conn !== conn) return;
          this.conn = null;
          const err = e ?? new ConnectionClosed(`askbusd at ${this.socketPath} closed the connection`);
          if (subscribed) resolveLost(err);
          else rejectOpen(err);
        },
      }).then((c) => {
        if (this.closed) return c.close();
        conn = c;
        this.conn = c;
        c.send(frames.hello(this.client));
        c.send(frames.subscribe(this.client, this.filter));
      }, rejectOpen);
    });
  }

  private onSubscribed(pending: number): void {
    this.replayLeft = pending;
    this.readyResolve();
    this.emit("connected", { pending });
    if (pending === 0) this.replayDone();
  }

  /** The replay is complete: limbo requests it did not contain get a grace period to return. */
  private replayDone(): void {
    for (const [id, t] of this.limbo) {
      if (t) continue;
      const timer = setTimeout(() => {
        this.limbo.delete(id);
        const r = this.known.get(id);
        if (r) this.withdraw(r, r.timeLeftMs === 0 ? "timeout" : "connection-lost");
      }, this.graceMs);
      timer.unref();
      this.limbo.set(id, timer);
    }
  }

  private onFrame(f: ServerFrame): void {
    switch (f.type) {
      // The replay holds questions and approvals alike.
      case "ask-user-request":
      case "tool-confirmation-request": {
        if (this.replayLeft > 0 && --this.replayLeft === 0) {
          this.onRequest(f);
          return this.replayDone();
        }
        return this.onRequest(f);
      }
      case "tool-confirmation-withdrawn":
      case "ask-user-withdrawn": {
        const r = this.known.get(f.correlationId);
        if (!r) return;
        // A daemon shutting down withdraws everything, but producers resend to the next
        // daemon: hold the request for it rather than close the user's dialog.
        if (f.reason === "shutdown" && this.reconnect !== null) return this.toLimbo(r);
        return this.withdraw(r, f.reason);
      }
      case "ask-user-ack":
      case "tool-confirmation-ack": {
        const r = this.known.get(f.correlationId);
        if (!r) return;
        const outcome = f.type === "ask-user-ack" ? f.outcome : f.reason;
        const inflight = r.inFlight;
        r.inFlight = null;
        this.known.delete(r.correlationId);
        r._finish(outcome);
        inflight?.resolve(outcome);
        return;
      }
      case "error": {
        if (f.correlationId === undefined) return;
        const r = this.known.get(f.correlationId);
        const inflight = r?.inFlight;
        if (!r || !inflight) return;
        r.inFlight = null;
        const err = errorFromFrame(f);
        if (err.code === "not-pending") this.withdraw(r, "answered", err);
        else inflight.reject(err);
        return;
      }
      default:
        return;
    }
  }

  private onRequest(f: UiRequestFrame | UiApprovalFrame): void {
    const known = this.known.get(f.correlationId);
    if (known) {
      // Already yielded: a replay after reconnecting, or its producer's resend.
      known._refresh(f);
      const t = this.limbo.get(f.correlationId);
      if (t) clearTimeout(t);
      this.limbo.delete(f.correlationId);
      const inflight = known.inFlight;
      if (inflight && !inflight.sent) this.sendAnswer(known, inflight);
      return;
    }
    const req = f.type === "tool-confirmation-request" ? new UiApproval(f, this) : new UiRequest(f, this);
    this.known.set(req.correlationId, req);
    this.queue.push(req);
    this.emit("request", req);
    this.wake();
  }

  private toLimbo(r: UiRequest): void {
    if (r.state !== "pending") return;
    if (r.inFlight) r.inFlight.sent = false;
    if (!this.limbo.has(r.correlationId)) this.limbo.set(r.correlationId, null);
  }

  private withdraw(r: UiRequest, reason: UiWithdrawReason, cause?: AskbusError): void {
    this.known.delete(r.correlationId);
    const t = this.limbo.get(r.correlationId);
    if (t) clearTimeout(t);
    this.limbo.delete(r.correlationId);
    const inflight = r.inFlight;
    r.inFlight = null;
    r._withdraw(reason);
    inflight?.reject(cause ?? new Withdrawn(r.correlationId, reason));
    this.emit("withdrawn", r, reason);
  }

  private sendAnswer(r: UiRequest, inflight: InFlight): void {
    if (!this.conn || this.limbo.has(r.correlationId)) return;
    inflight.sent = true;
    this.conn.send(inflight.frame);
  }

  /** @internal Used by UiRequest.answer/dismiss. */
  _respond(r: UiRequest, frame: AnswerFrame | DecisionFrame): Promise<"answered" | "dismissed"> {
    if (r.state === "withdrawn") return Promise.reject(new Withdrawn(r.correlationId, r.withdrawnReason!));
    if (r.state !== "pending" || this.known.get(r.correlationId) !== r) {
      return Promise.reject(new NotPending("not-pending", `request ${JSON.stringify(r.correlationId)} is not pending here (${r.state})`, r.correlationId));
    }
    if (r.inFlight) {
      return Promise.reject(new AskbusError("answer-in-flight", `an answer to ${JSON.stringify(r.correlationId)} is already awaiting its acknowledgement`, r.correlationId));
    }
    return new Promise((resolve, reject) => {
      const inflight: InFlight = { frame, resolve, reject, sent: false };
      r.inFlight = inflight;
      // While disconnected it waits for the request to come back, then goes out.
      this.sendAnswer(r, inflight);
    });
  }
}

/** Subscribes as a UI: `for await (const req of subscribe()) { await req.answer({"0": "Yes"}) }`. */
export function subscribe(opts: SubscribeOptions = {}): Subscription {
  return new Subscription(opts);
}
