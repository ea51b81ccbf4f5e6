/**
 * One framed connection to the daemon: connect (with errors that name the socket), send
 * frames, receive parsed frames through a callback, and learn once that it closed and why.
 * The reconnecting producer and UI are built on this; it never reconnects by itself.
 */

import { createConnection, type Socket } from "node:net";

import { AskbusError, ConnectionClosed, DaemonUnreachable, ProtocolError } from "./errors.js";
import { checkSocket } from "./trust.js";
import { encodeFrame, FrameDecoder, parseServerFrame, type ClientFrame, type ServerFrame } from "./protocol.js";

/** How long a connect refused with EAGAIN (a full accept queue) or ECONNREFUSED (a daemon
 * restarting) is retried. */
export const CONNECT_RETRY_MS = 1000;

export interface ConnectionHandlers {
  frame(frame: ServerFrame): void;
  /** Called once, after which the connection is dead. `error` is undefined for a clean EOF. */
  close(error: AskbusError | undefined): void;
}

function describe(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case "ENOENT":
      return "no socket there (is askbusd running?)";
    case "ECONNREFUSED":
      return "connection refused (no askbusd is listening; a stale socket?)";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "ENOTSOCK":
      return "not a socket";
    default:
      return err.message;
  }
}

export class Connection {
  private closed = false;

  private constructor(
    private readonly socket: Socket,
    readonly path: string,
  ) {}

  /** Connects to `path`; rejects with DaemonUnreachable naming the path when nobody answers. */
  static async open(path: string, handlers: ConnectionHandlers): Promise<Connection> {
    checkSocket(path);
    const deadline = Date.now() + CONNECT_RETRY_MS;
    let pause = 10;
    for (;;) {
      try {
        return await Connection.openOnce(path, handlers);
      } catch (e) {
        // A full accept queue (another user flooding the daemon) or a daemon restarting:
        // retry briefly, as the Rust and Python clients do.
        const code = ((e as AskbusError).cause as NodeJS.ErrnoException | undefined)?.code;
        if ((code === "EAGAIN" || code === "ECONNREFUSED") && Date.now() + pause < deadline) {
          await new Promise((r) => setTimeout(r, pause));
          pause = Math.min(pause * 2, 200);
          continue;
        }
        throw e;
      }
    }
  }

  private static openOnce(path: string, handlers: ConnectionHandlers): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = createConnection({ path });
      const onConnectError = (err: NodeJS.ErrnoException) => {
        socket.destroy();
        reject(new DaemonUnreachable(path, describe(err), undefined, { cause: err }));
      };
      socket.once("error", onConnectError);
      socket.once("connect", () => {
        socket.off("error", onConnectError);
        const conn = new Connection(socket, path);
        conn.attach(handlers);
        resolve(conn);
      });
    });
  }

  private attach(handlers: ConnectionHandlers): void {
    const decoder = new FrameDecoder();
    let failure: AskbusError | undefined;
    const fail = (err: AskbusError) => {
      failure ??= err;
      this.socket.destroy();
    };
    // Frames handled after a failure would race the close handler's recovery.
    this.socket.on("data", (chunk: Buffer) => {
      if (this.closed || failure !== undefined) return;
      let payloads: Buffer[];
      try {
        payloads = decoder.push(chunk);
      } catch (e) {
        return fail(e as AskbusError);
      }
      for (const p of payloads) {
        let frame: ServerFrame;
        try {
          frame = parseServerFrame(p);
        } catch (e) {
          return fail(e as AskbusError);
        }
        handlers.frame(frame);
        // A handler may close the connection; what follows in the chunk is no longer ours.
        if (this.closed) return;
      }
    });
    this.socket.on("error", (err: NodeJS.ErrnoException) => {
      fail(new ConnectionClosed(`connection to askbusd at ${this.path} failed: ${err.message}`));
    });
    this.socket.on("close", () => {
      if (this.closed) return;
      this.closed = true;
      if (failure === undefined && decoder.pendingBytes > 0) {
        failure = new ProtocolError("askbusd closed the connection in the middle of a frame");
      }
      handlers.close(failure);
    });
    this.socket.on("end", () => {
      // The daemon finished writing (it closes after its last frame): close our side too.
      this.socket.end();
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Writes a frame; a frame sent on a closed connection is dropped (the close handler
   * already told the owner, who resends what matters). */
  send(frame: ClientFrame): void {
    if (this.closed || this.socket.destroyed) return;
    this.socket.write(encodeFrame(frame));
  }

  /** Sends a payload as is (tests and tools that need exact JSON text, e.g. key order). */
  sendRaw(json: string): void {
    if (this.closed || this.socket.destroyed) return;
    const payload = Buffer.from(json, "utf8");
    const head = Buffer.allocUnsafe(4);
    head.writeUInt32BE(payload.length, 0);
    this.socket.write(Buffer.concat([head, payload]));
  }

  /** Keeps the process alive while the owner waits on this connection, or lets it exit. */
  setKeepAlive(keep: boolean): void {
    if (keep) this.socket.ref();
    else this.socket.unref();
  }

  /** Closes the connection after what was sent is flushed (a last ask-user-cancel must
   * arrive); the close handler is not called for a close the owner asked for. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.end();
    // A daemon that never closes its side must not hold the socket open.
    setTimeout(() => this.socket.destroy(), 1000).unref();
  }
}
