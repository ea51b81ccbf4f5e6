/**
 * Every failure this package reports: `AskbusError` with the daemon's wire `code`, one
 * subclass per wire code (so `instanceof NotPending` reads like the protocol), and the
 * client-side failures (unreachable daemon, lost connection, unreadable frames).
 */

/** The codes the daemon sends in `error` frames (protocol v1). */
export type WireErrorCode =
  | "invalid-json"
  | "invalid-frame"
  | "unknown-type"
  | "frame-too-large"
  | "invalid-request"
  | "duplicate-correlation-id"
  | "too-many-pending"
  | "not-pending"
  | "not-subscribed"
  | "invalid-response"
  | "unsupported-protocol"
  | "forbidden"
  | "too-many-connections"
  | "frame-timeout"
  | "origin-unreachable"
  | "store-unavailable";

/** Codes for failures the client itself detects. */
export type ClientErrorCode = "daemon-unreachable" | "connection-closed" | "protocol-error";

export type ErrorCode = WireErrorCode | ClientErrorCode;

export class AskbusError extends Error {
  /** The wire code (`invalid-request`, `not-pending`, …) or a client-side code. */
  readonly code: string;
  /** The request or answer the error is about, when the daemon named one. */
  readonly correlationId: string | undefined;

  constructor(code: string, message: string, correlationId?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.correlationId = correlationId;
  }
}

/** The frame was not JSON. */
export class InvalidJson extends AskbusError {}
/** The frame was JSON but not a frame (no string `type`, wrong field type). */
export class InvalidFrame extends AskbusError {}
export class UnknownType extends AskbusError {}
/** The frame is longer than the daemon accepts (it closes the connection after this). */
export class FrameTooLarge extends AskbusError {}
/** The questions failed the ask_user tool's validation; `message` is the reference's, verbatim. */
export class InvalidRequest extends AskbusError {}
export class DuplicateCorrelationId extends AskbusError {}
export class TooManyPending extends AskbusError {}
/** The request is no longer pending: answered (perhaps by another UI), timed out or withdrawn. */
export class NotPending extends AskbusError {}
export class NotSubscribed extends AskbusError {}
export class InvalidResponse extends AskbusError {}
export class UnsupportedProtocol extends AskbusError {}
export class Forbidden extends AskbusError {}
export class TooManyConnections extends AskbusError {}
/** A frame was started but not finished in time (the daemon closes the connection after this). */
export class FrameTimeout extends AskbusError {}
/** Federation: an answer to another node's question could not reach that node; it is still pending. */
export class OriginUnreachable extends AskbusError {}
/** The daemon's store cannot write for now; producers ask again within their own timeout. */
export class StoreUnavailable extends AskbusError {}

/** No daemon answered at `socketPath` (not running, wrong path, or no permission). */
export class DaemonUnreachable extends AskbusError {
  readonly socketPath: string;
  constructor(socketPath: string, detail: string, correlationId?: string, options?: ErrorOptions) {
    super("daemon-unreachable", `cannot reach askbusd at ${socketPath}: ${detail}`, correlationId, options);
    this.socketPath = socketPath;
  }
}

/** The socket is another user's (see trust.ts): the client refuses to talk to that daemon.
 * Set ASKBUS_DAEMON_UID to the daemon's uid to trust a shared bus run by another account. */
export class UntrustedDaemon extends DaemonUnreachable {
  readonly daemonUid: number;
  constructor(socketPath: string, why: string, daemonUid: number) {
    super(
      socketPath,
      `refusing it: ${why}, not you (uid ${process.geteuid?.() ?? "?"}) or root, so another user ` +
        `may have taken the socket path; if this is a shared bus you trust, set ASKBUS_DAEMON_UID=${daemonUid}`,
    );
    (this as { code: string }).code = "untrusted-daemon";
    this.daemonUid = daemonUid;
  }
}

/** The connection ended (closed by this client, or lost with no way to recover what was in flight). */
export class ConnectionClosed extends AskbusError {
  constructor(message = "the connection to askbusd is closed", correlationId?: string) {
    super("connection-closed", message, correlationId);
  }
}

/** The daemon sent something this client cannot read. */
export class ProtocolError extends AskbusError {
  constructor(message: string) {
    super("protocol-error", message);
  }
}

const BY_CODE: Record<WireErrorCode, new (code: string, message: string, id?: string) => AskbusError> = {
  "invalid-json": InvalidJson,
  "invalid-frame": InvalidFrame,
  "unknown-type": UnknownType,
  "frame-too-large": FrameTooLarge,
  "invalid-request": InvalidRequest,
  "duplicate-correlation-id": DuplicateCorrelationId,
  "too-many-pending": TooManyPending,
  "not-pending": NotPending,
  "not-subscribed": NotSubscribed,
  "invalid-response": InvalidResponse,
  "unsupported-protocol": UnsupportedProtocol,
  forbidden: Forbidden,
  "too-many-connections": TooManyConnections,
  "frame-timeout": FrameTimeout,
  "origin-unreachable": OriginUnreachable,
  "store-unavailable": StoreUnavailable,
};

/** The error for a daemon `error` frame; an unknown (newer) code still yields an AskbusError. */
export function errorFromFrame(frame: { code: string; message: string; correlationId?: string }): AskbusError {
  const cls = Object.hasOwn(BY_CODE, frame.code) ? BY_CODE[frame.code as WireErrorCode] : AskbusError;
  return new cls(frame.code, frame.message, frame.correlationId);
}
