/**
 * The producer role: ask questions and await the one terminal answer of each. A `Producer` is
 * one connection carrying any number of concurrent asks (matched on correlationId); when the
 * connection drops it reconnects with backoff and resends every unanswered request under the
 * same correlationId with the time it has left, so a daemon restart loses no question.
 */

import { randomUUID } from "node:crypto";

import { Backoff, sleep, type ReconnectOptions } from "./backoff.js";
import { Connection } from "./connection.js";
import {
  AskbusError,
  ConnectionClosed,
  DaemonUnreachable,
  DuplicateCorrelationId,
  errorFromFrame,
  FrameTooLarge,
  InvalidRequest,
  ProtocolError,
} from "./errors.js";
import { defaultSocketPath } from "./paths.js";
import {
  DEFAULT_MAX_FRAME_BYTES,
  encodeFrame,
  frames,
  contextFromEnv,
  mergeContext,
  type ApprovalOptions,
  type ApprovalResponseFrame,
  type NoUiPolicy,
  type ToolCall,
  type RequestContext,
  type ProducerResponseFrame,
  type Question,
  type ServerFrame,
  type StatsFrame,
  type WelcomeFrame,
} from "./protocol.js";

import type {
  AskOptions,
  AskResponse,
  Confirmation,
  ConfirmOptions,
  PendingAsk,
  ProducerOptions,
} from "./asking.js";

interface Pending {
  id: string;
  questions: unknown;
  /** Set for an approval: its tool call and fields (then `questions` is unused). */
  approval?: { toolCall: ToolCall; options: ApprovalOptions };
  timeoutMs: number | undefined;
  noUi: NoUiPolicy | undefined;
  context: RequestContext;
  startedAt: number;
  /** Absolute ms; known once a welcome told us the daemon's default and cap. */
  deadline: number | undefined;
  /** The connection the request was last sent on (null while unsent). */
  sentOn: Connection | null;
  /** Sent on a connection that was then lost: the next send is a resend, with the time left,
   * and a duplicate-correlation-id for it means the daemon still holds the earlier send. */
  lostOnce: boolean;
  cancelRequested: boolean;
  /** A `shutdown` answer from a daemon that went away: given out if no daemon comes back in time. */
  shutdownResponse: AskResponse | ApprovalResponseFrame | undefined;
  timer: NodeJS.Timeout | undefined;
  resolve(r: AskResponse | ApprovalResponseFrame): void;
  reject(e: unknown): void;
  detachSignal(): void;
}

const DUPLICATE_RETRY_MS = 100;
const MAX_TIMER_MS = 2 ** 31 - 1;
/** The daemon's documented default timeout, assumed for deadlines until a welcome tells. */
const ASSUMED_DEFAULT_TIMEOUT_MS = 600_000;

export class Producer {
  readonly socketPath: string;
  private readonly client: string | undefined;
  private readonly reconnect: ReconnectOptions | null;
  private readonly waitForDaemon: boolean;
  /** What every question says of who is asking (environment, then the constructor's option). */
  readonly context: RequestContext;
  private conn: Connection | null = null;
  private welcome: WelcomeFrame | null = null;
  /** The last daemon's welcome, kept across reconnects for deadlines of asks made meanwhile. */
  private lastWelcome: WelcomeFrame | null = null;
  private connecting: Promise<void> | null = null;
  /** Resolved by the first welcome on a new connection (or rejected by its failure). */
  private handshake: { resolve(w: WelcomeFrame): void; reject(e: AskbusError): void } | null = null;
  private readonly pending = new Map<string, Pending>();
  private readonly statsWaiters: Array<{ resolve(s: StatsFrame): void; reject(e: unknown): void }> = [];
  private everConnected = false;
  private closed = false;
  private readonly stop = new AbortController();

  constructor(opts: ProducerOptions = {}) {
    this.socketPath = opts.socket ?? defaultSocketPath();
    this.client = opts.client;
    const rc = opts.reconnect ?? true;
    this.reconnect = rc === false ? null : rc === true ? {} : rc;
    this.waitForDaemon = opts.waitForDaemon ?? false;
    this.context = mergeContext(contextFromEnv(), opts.context);
  }

  /** Connects now (asks connect on demand); rejects with DaemonUnreachable naming the socket. */
  async connect(): Promise<WelcomeFrame> {
    await this.ensureConnected(false);
    return this.welcome!;
  }

  /** Asks and resolves with the terminal response; rejects with an AskbusError (e.g.
   * InvalidRequest carrying the reference tool's message) when the daemon refuses the request. */
  ask(questions: Question[] | unknown, opts: AskOptions = {}): Promise<AskResponse> {
    return this.start(questions, opts).response;
  }

  /** Asks a person to approve an agent's tool call (Gemini CLI core's
   * `tool-confirmation-request`: `toolCall` is `{name, args}`, `opts.details` its
   * `SerializableConfirmationDetails`) and resolves with the decision. Never rejects: see
   * `Confirmation` (only a person's approval is `confirmed`). `cancel(correlationId)` or
   * `opts.signal` withdraws it. */
  async confirm(toolCall: ToolCall, opts: ConfirmOptions = {}): Promise<Confirmation> {
    const id = opts.correlationId ?? randomUUID();
    const context = mergeContext(this.context, opts.context);
    const options: ApprovalOptions = {
      details: opts.details,
      outcomes: opts.outcomes,
      serverName: opts.serverName,
      toolAnnotations: opts.toolAnnotations,
      subagent: opts.subagent,
      noUi: opts.noUi,
      context: Object.keys(context).length > 0 ? { ...context } : undefined,
    };
    const pending = this.begin(undefined, { ...opts, correlationId: id }, { toolCall, options });
    try {
      const r = (await pending.response) as unknown as ApprovalResponseFrame;
      // confirmed only for answered, whatever a daemon says: fail closed.
      const confirmed = r.confirmed === true && r.reason === "answered" && r.outcome !== "cancel";
      const c: Confirmation = { correlationId: id, confirmed, outcome: confirmed ? r.outcome : "cancel", reason: r.reason };
      if (r.message !== undefined) c.message = r.message;
      if (confirmed && r.payload !== undefined) c.payload = r.payload;
      return c;
    } catch (e) {
      const refused = e instanceof AskbusError && !(e instanceof DaemonUnreachable) && !(e instanceof ConnectionClosed) && !(e instanceof ProtocolError);
      const why = e instanceof Error ? e.message : String(e);
      return {
        correlationId: id,
        confirmed: false,
        outcome: "cancel",
        reason: refused ? "refused" : "daemon-lost",
        message: `${why}; the tool call was not approved.`,
        error: e,
      };
    }
  }

  /** Like `ask`, but hands back the correlationId at once (to `cancel` it later). */
  start(questions: Question[] | unknown, opts: AskOptions = {}): PendingAsk {
    return this.begin(questions, opts, undefined);
  }

  private begin(questions: unknown, opts: AskOptions, approval: Pending["approval"]): PendingAsk {
    const id = opts.correlationId ?? randomUUID();
    let p!: Pending;
    const response = new Promise<AskResponse>((resolve, reject) => {
      p = {
        id,
        questions,
        approval,
        timeoutMs: opts.timeoutMs,
        noUi: opts.noUi,
        context: mergeContext(this.context, opts.context),
        startedAt: Date.now(),
        deadline: undefined,
        sentOn: null,
        lostOnce: false,
        cancelRequested: false,
        shutdownResponse: undefined,
        timer: undefined,
        resolve,
        reject,
        detachSignal: () => {},
      } as Pending;
    });
    if (this.closed) {
      p.reject(new ConnectionClosed("this Producer is closed", id));
      return { correlationId: id, response };
    }
    if (this.pending.has(id)) {
      p.reject(new DuplicateCorrelationId("duplicate-correlation-id", `correlationId ${JSON.stringify(id)} is already pending on this producer`, id));
      return { correlationId: id, response };
    }
    if (opts.timeoutMs !== undefined && !(Number.isSafeInteger(opts.timeoutMs) && opts.timeoutMs >= 1)) {
      // Refused here: the local deadline would otherwise expire before the daemon could say so.
      p.reject(new InvalidRequest("invalid-request", `timeoutMs must be a positive integer number of milliseconds, not ${opts.timeoutMs}`, id));
      return { correlationId: id, response };
    }
    const signal = opts.signal;
    if (signal?.aborted) {
      p.reject(signal.reason);
      return { correlationId: id, response };
    }
    if (signal) {
      const onAbort = () => this.abort(p, signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      p.detachSignal = () => signal.removeEventListener("abort", onAbort);
    }
    // Known from the start, so an ask made while no daemon answers still ends on time.
    const known = this.lastWelcome;
    const defaultMs = known?.defaultTimeoutMs ?? ASSUMED_DEFAULT_TIMEOUT_MS;
    p.deadline = p.startedAt + Math.min(p.timeoutMs ?? defaultMs, known?.maxTimeoutMs ?? Infinity);
    this.pending.set(id, p);
    this.armDeadline(p);
    this.updateKeepAlive();
    if (this.conn && this.welcome) {
      this.send(p);
    } else {
      this.ensureConnected(this.waitForDaemon || this.everConnected).catch((e) => {
        // Only this ask's own failure: others are settled by the connect loop itself.
        if (this.pending.get(id) === p) this.settle(p, e);
      });
    }
    return { correlationId: id, response };
  }

  /** Withdraws a pending question; its ask resolves with reason `withdrawn`. Returns whether
   * this producer had such a question pending. */
  cancel(correlationId: string): boolean {
    const p = this.pending.get(correlationId);
    if (!p) return false;
    p.cancelRequested = true;
    if (p.sentOn && p.sentOn === this.conn) this.conn.send(cancelFrame(p));
    // Unsent (or sent on a lost connection): the next connection sends the request and its
    // cancel together, so the ask still ends with the daemon's own `withdrawn` result.
    return true;
  }

  /** The daemon's live counters. */
  async stats(): Promise<StatsFrame> {
    await this.ensureConnected(false);
    return new Promise((resolve, reject) => {
      this.statsWaiters.push({ resolve, reject });
      this.updateKeepAlive();
      this.conn!.send(frames.stats());
    });
  }

  /** How many asks are waiting for their answer. */
  get pendingCount(): number {
    return this.pending.size;
  }

  /** Closes the connection; pending asks reject with ConnectionClosed (the daemon withdraws
   * their questions from the UIs). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stop.abort();
    this.conn?.close();
    this.conn = null;
    const err = () => new ConnectionClosed("the Producer was closed before an answer came");
    for (const p of [...this.pending.values()]) this.settle(p, err());
    for (const w of this.statsWaiters.splice(0)) w.reject(err());
    this.handshake?.reject(err());
  }

  // -------------------------------------------------------------------------------------------

  private updateKeepAlive(): void {
    // An idle Producer must not keep the process alive; one with questions out must.
    this.conn?.setKeepAlive(this.pending.size > 0 || this.statsWaiters.length > 0);
  }

  /** Connects if needed; with `persist`, retries with backoff until no ask is left waiting. */
  private ensureConnected(persist: boolean): Promise<void> {
    if (this.closed) return Promise.reject(new ConnectionClosed("this Producer is closed"));
    if (this.conn && this.welcome) return Promise.resolve();
    this.connecting ??= this.connectLoop(persist).finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async connectLoop(persist: boolean): Promise<void> {
    const backoff = new Backoff(this.reconnect ?? {});
    for (;;) {
      try {
        await this.openOnce();
        return;
      } catch (e) {
        const err = e instanceof AskbusError ? e : new ConnectionClosed(String(e));
        const fatal = err.code === "unsupported-protocol" || err.code === "forbidden";
        if (!persist || fatal || this.closed || this.reconnect === null) {
          if (persist || fatal) this.failAll(err);
          throw err;
        }
        this.expire(err);
        if (this.pending.size === 0) throw err;
        await sleep(Math.min(backoff.delay(), this.msToNextDeadline()), this.stop.signal);
        if (this.closed) throw new ConnectionClosed("this Producer is closed");
      }
    }
  }

  private async openOnce(): Promise<void> {
    const conn = await Connection.open(this.socketPath, {
      frame: (f) => this.onFrame(conn, f),
      close: (e) => this.onClose(conn, e),
    });
    if (this.closed) {
      conn.close();
      throw new ConnectionClosed("this Producer is closed");
    }
    const welcome = new Promise<WelcomeFrame>((resolve, reject) => {
      this.handshake = { resolve, reject };
    });
    this.conn = conn;
    this.updateKeepAlive();
    conn.send(frames.hello(this.client));
    try {
      this.welcome = await welcome;
      this.lastWelcome = this.welcome;
    } catch (e) {
      conn.close();
      if (this.conn === conn) this.conn = null;
      throw e;
    } finally {
      this.handshake = null;
    }
    this.everConnected = true;
    for (const p of this.pending.values()) this.send(p);
  }

  /** Sends (or resends) one request on the live connection, with the time it has left. */
  private send(p: Pending): void {
    const conn = this.conn!;
    const welcome = this.welcome!;
    const now = Date.now();
    const ms = Math.min(p.timeoutMs ?? welcome.defaultTimeoutMs, welcome.maxTimeoutMs);
    p.deadline = Math.min(p.deadline ?? Infinity, p.startedAt + ms);
    // A resend carries what is left, so the new daemon times it out when the first would have.
    const timeoutMs = p.lostOnce ? Math.max(1, p.deadline - now) : p.timeoutMs;
    const frame = p.approval
      ? frames.confirm(p.id, p.approval.toolCall, { ...p.approval.options, timeoutMs })
      : frames.ask(p.id, p.questions, timeoutMs, p.noUi, p.context);
    const size = encodeFrame(frame).length - 4;
    const max = welcome.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    if (size > max) {
      // Sent, it would make the daemon close the connection (and a resend would loop).
      const msg = `the request is ${size} bytes; askbusd accepts frames of at most ${max}`;
      return this.settle(p, new FrameTooLarge("frame-too-large", msg, p.id));
    }
    conn.send(frame);
    if (p.cancelRequested) conn.send(cancelFrame(p));
    p.sentOn = conn;
    this.armDeadline(p);
  }

  /** While disconnected, the daemon cannot time a request out: this does it locally. */
  private armDeadline(p: Pending): void {
    if (p.timer !== undefined) clearTimeout(p.timer);
    p.timer = undefined;
    if (p.deadline === undefined) return;
    const deadline = p.deadline;
    p.timer = setTimeout(() => {
      p.timer = undefined;
      if (this.pending.get(p.id) !== p) return;
      // Timers cap at about 24.8 days; a later deadline takes several.
      if (Date.now() < deadline) return this.armDeadline(p);
      // Connected, the daemon is authoritative and its timeout answer is on its way.
      if (p.sentOn !== null && p.sentOn === this.conn) return;
      this.expireOne(p, new DaemonUnreachable(this.socketPath, "not reachable again before the request's deadline", p.id));
    }, Math.min(MAX_TIMER_MS, Math.max(0, deadline - Date.now())));
    p.timer.unref();
  }

  private onFrame(conn: Connection, f: ServerFrame): void {
    if (conn !== this.conn) return;
    switch (f.type) {
      case "welcome":
        this.handshake?.resolve(f);
        return;
      case "ask-user-response":
      case "tool-confirmation-response": {
        const p = this.pending.get(f.correlationId);
        if (!p || p.sentOn !== conn) return;
        const r = f.type === "ask-user-response" ? toResponse(f) : f;
        if (r.reason === "shutdown" && this.reconnect !== null && !p.cancelRequested) {
          // The daemon is going away, not the user: keep the question for the next daemon,
          // and give this answer out only if none comes back before the deadline.
          p.shutdownResponse = r;
          p.sentOn = null;
          p.lostOnce = true;
          return;
        }
        this.settle(p, r);
        return;
      }
      case "stats": {
        this.statsWaiters.shift()?.resolve(f);
        this.updateKeepAlive();
        return;
      }
      case "error": {
        const err = errorFromFrame(f);
        if (f.correlationId === undefined) {
          // About the connection itself (refused, protocol, …): fails the handshake if any.
          this.handshake?.reject(err);
          return;
        }
        const p = this.pending.get(f.correlationId);
        if (!p || p.sentOn !== conn) return;
        if (err.code === "not-pending") return; // a cancel that lost to the answer: it is coming
        if ((err.code === "duplicate-correlation-id" && p.lostOnce) || err.code === "store-unavailable") {
          // The daemon still holds our earlier send (it has not yet noticed the old
          // connection is gone), or its store cannot write for now: try again shortly,
          // within the request's own timeout; the question is not lost.
          p.sentOn = null;
          setTimeout(() => {
            if (this.pending.get(p.id) === p && this.conn === conn && p.sentOn === null) this.send(p);
          }, DUPLICATE_RETRY_MS).unref();
          return;
        }
        this.settle(p, err);
        return;
      }
      default:
        return;
    }
  }

  private onClose(conn: Connection, err: AskbusError | undefined): void {
    if (conn !== this.conn) return;
    this.conn = null;
    this.welcome = null;
    const why = err ?? new ConnectionClosed(`askbusd at ${this.socketPath} closed the connection`);
    this.handshake?.reject(why);
    for (const w of this.statsWaiters.splice(0)) w.reject(why);
    for (const p of this.pending.values()) {
      if (p.sentOn !== null) p.lostOnce = true;
      p.sentOn = null;
    }
    if (this.closed || this.pending.size === 0) return;
    if (this.reconnect === null) return this.failAll(why);
    if (err instanceof ProtocolError) return this.failAll(err);
    this.ensureConnected(true).catch(() => {
      // connectLoop settled every ask it gave up on.
    });
  }

  private msToNextDeadline(): number {
    let min = Infinity;
    for (const p of this.pending.values()) {
      if (p.deadline !== undefined) min = Math.min(min, p.deadline - Date.now());
    }
    return Math.max(0, min);
  }

  /** Ends every ask whose deadline passed while no daemon could be reached. */
  private expire(cause: AskbusError): void {
    const now = Date.now();
    for (const p of [...this.pending.values()]) {
      if (p.deadline !== undefined && p.deadline <= now) this.expireOne(p, cause);
    }
  }

  private expireOne(p: Pending, cause: AskbusError): void {
    if (p.shutdownResponse) return this.settle(p, p.shutdownResponse);
    const err =
      cause instanceof DaemonUnreachable
        ? new DaemonUnreachable(this.socketPath, "not reachable again before the request's deadline", p.id, { cause })
        : cause;
    this.settle(p, err);
  }

  private failAll(err: AskbusError): void {
    for (const p of [...this.pending.values()]) {
      if (p.shutdownResponse) this.settle(p, p.shutdownResponse);
      else this.settle(p, err);
    }
  }

  private abort(p: Pending, reason: unknown): void {
    if (this.pending.get(p.id) !== p) return;
    if (p.sentOn && p.sentOn === this.conn) this.conn.send(cancelFrame(p));
    this.settle(p, reason);
  }

  private settle(p: Pending, outcome: AskResponse | ApprovalResponseFrame | unknown): void {
    if (this.pending.get(p.id) !== p) return;
    this.pending.delete(p.id);
    if (p.timer !== undefined) clearTimeout(p.timer);
    p.detachSignal();
    this.updateKeepAlive();
    if (isResponse(outcome)) p.resolve(outcome);
    else p.reject(outcome);
  }
}

function isResponse(x: unknown): x is AskResponse | ApprovalResponseFrame {
  return typeof x === "object" && x !== null && "reason" in x && ("result" in x || "confirmed" in x) && !(x instanceof Error);
}

function cancelFrame(p: Pending) {
  return p.approval ? frames.cancelApproval(p.id) : frames.cancel(p.id);
}

function toResponse(f: ProducerResponseFrame): AskResponse {
  return {
    correlationId: f.correlationId,
    answers: f.answers ?? {},
    cancelled: f.cancelled,
    reason: f.reason,
    result: f.result,
  };
}

/** Asks once on a connection of its own, closed afterwards. See `Producer.ask`. */
export async function ask(questions: Question[] | unknown, opts: AskOptions & ProducerOptions = {}): Promise<AskResponse> {
  const producer = new Producer(opts);
  try {
    return await producer.ask(questions, opts);
  } finally {
    producer.close();
  }
}
