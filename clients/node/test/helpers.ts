/**
 * Test support: starts the real askbusd binary on a fresh temp socket per test, and a raw
 * frame connection for speaking the protocol directly.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after } from "node:test";
import { fileURLToPath } from "node:url";

import { Connection } from "../src/connection.js";
import type { ServerFrame } from "../src/protocol.js";

/** Closed when the test file ends, whatever failed: a failing test must not leave a
 * reconnecting subscription or a daemon behind to hold the run open. */
const leftovers = new Set<{ close(): void }>();
const daemons = new Set<ChildProcess>();
after(() => {
  for (const x of leftovers) x.close();
  for (const p of daemons) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
});

/** Registers `x` to be closed at the end of the file; returns it. */
export function closeLater<T extends { close(): void }>(x: T): T {
  leftovers.add(x);
  return x;
}

/** The repository root: the first directory above this file holding proto/PROTOCOL.md (it runs
 * from clients/node/build/test/, and from tests/node-reference/build/ for the reference tests). */
export const REPO_ROOT = ((): string => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "proto", "PROTOCOL.md"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no repository above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
  return dir + "/";
})();

export function daemonBinary(): string {
  const bin = process.env.ASKBUS_DAEMON || join(REPO_ROOT, "target/debug/askbusd");
  if (!existsSync(bin)) {
    throw new Error(`askbusd not found at ${bin}: run \`cargo build --bin askbusd\` or set ASKBUS_DAEMON`);
  }
  return bin;
}

export interface Daemon {
  socket: string;
  dir: string;
  proc: ChildProcess;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait. */
  kill(): Promise<void>;
  /** Removes the temp dir (after stop/kill). */
  cleanup(): void;
  stderr(): string;
}

export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "askbus-node-"));
}

/** Starts askbusd and waits for its "ready" line. `socket` reuses a path (a restart). */
export async function startDaemon(opts: { socket?: string; dir?: string; args?: string[]; env?: NodeJS.ProcessEnv } = {}): Promise<Daemon> {
  const dir = opts.dir ?? tempDir();
  const socket = opts.socket ?? join(dir, "askbus.sock");
  const extra = opts.args ?? [];
  // Protocol v1 exactly unless a test asks for the store: no state shared through the user's
  // default store between tests, and no policy rule deciding a test's approvals.
  const storeChosen = extra.some((a) => a === "--store" || a.startsWith("--store=") || a === "--no-store");
  const args = ["--socket", socket, "--no-telemetry", "--log-level", "warn,askbusd=info", ...(storeChosen ? [] : ["--no-store"]), ...extra];
  const env = { ASKBUS_POLICIES: "off", ...(opts.env ?? process.env) };
  const proc = spawn(daemonBinary(), args, { stdio: ["ignore", "ignore", "pipe"], env });
  daemons.add(proc);
  let err = "";
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`askbusd did not get ready:\n${err}`)), 10_000);
    proc.stderr!.on("data", (chunk: Buffer) => {
      err += chunk.toString();
      if (err.includes("askbusd ready on")) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`askbusd exited with ${code} before getting ready:\n${err}`));
    });
  });
  return {
    socket,
    dir,
    proc,
    stderr: () => err,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      return exited;
    },
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await exited;
    },
    cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A raw connection: every frame the daemon sends is queued for `next()`. */
export class Raw {
  private queue: ServerFrame[] = [];
  private waiters: Array<(f: ServerFrame | null) => void> = [];
  private ended = false;
  private constructor(public conn: Connection) {}

  static async open(socket: string): Promise<Raw> {
    let raw: Raw | undefined;
    const early: ServerFrame[] = [];
    const conn = await Connection.open(socket, {
      frame: (f) => (raw ? raw.push(f) : early.push(f)),
      close: () => raw?.end(),
    });
    raw = new Raw(conn);
    for (const f of early) raw.push(f);
    return raw;
  }

  private push(f: ServerFrame): void {
    const w = this.waiters.shift();
    if (w) w(f);
    else this.queue.push(f);
  }

  private end(): void {
    this.ended = true;
    for (const w of this.waiters.splice(0)) w(null);
  }

  send(frame: Record<string, unknown>): void {
    this.conn.sendRaw(JSON.stringify(frame));
  }

  sendRaw(json: string): void {
    this.conn.sendRaw(json);
  }

  /** The next frame (null once closed); fails after `ms`. */
  next(ms = 5000): Promise<ServerFrame | null> {
    const f = this.queue.shift();
    if (f) return Promise.resolve(f);
    if (this.ended) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        reject(new Error(`no frame within ${ms} ms`));
      }, ms);
      const done = (f: ServerFrame | null) => {
        clearTimeout(timer);
        resolve(f);
      };
      this.waiters.push(done);
    });
  }

  /** The next frame of `type`, skipping others. */
  async nextOf<T extends ServerFrame["type"]>(type: T, ms = 5000): Promise<Extract<ServerFrame, { type: T }>> {
    for (;;) {
      const f = await this.next(ms);
      if (f === null) throw new Error(`connection closed while waiting for ${type}`);
      if (f.type === type) return f as Extract<ServerFrame, { type: T }>;
    }
  }

  close(): void {
    this.conn.close();
  }
}

/** Fails if `p` does not settle within `ms`. */
export function within<T>(p: Promise<T>, ms: number, what = "operation"): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

export const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const Q_DB = [
  {
    question: "Which database?",
    header: "Database",
    type: "choice" as const,
    options: [
      { label: "SQLite", description: "file-based" },
      { label: "PostgreSQL", description: "server" },
    ],
  },
];

export const Q_YESNO = [{ question: "Deploy now?", header: "Deploy", type: "yesno" as const }];
