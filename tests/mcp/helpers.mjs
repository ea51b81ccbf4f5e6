// Test harness for `askbus mcp`: a real askbusd on a temp socket, the official MCP TypeScript
// SDK as the client spawning `askbus mcp` over stdio, a raw-frame UI and producer (4-byte
// big-endian length + JSON), and the reference ask_user tool to compute expected results.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
// Deep imports: the package index would load all of Gemini CLI's core.
import { ASK_USER_DEFINITION } from '@google/gemini-cli-core/dist/src/tools/definitions/coreTools.js';
import { AskUserTool } from '@google/gemini-cli-core/dist/src/tools/ask-user.js';
import { ToolConfirmationOutcome } from '@google/gemini-cli-core/dist/src/tools/tools.js';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = process.env.ASKBUS_CLI || path.join(REPO, 'target/debug/askbus');
export const DAEMON = process.env.ASKBUS_DAEMON || path.join(REPO, 'target/debug/askbusd');
export const TOOL_FILE = path.join(REPO, 'cli/src/mcp/ask_user_tool.json');

/** The reference `ASK_USER_DEFINITION.base`: name, description, parametersJsonSchema. */
export const REFERENCE = ASK_USER_DEFINITION.base;

const WAIT_MS = 10_000;

/** Rejects after `ms` with `what` in the message, so a hung step fails instead of stalling. */
export function deadline(promise, what, ms = WAIT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fresh askbusd on a socket in its own temp dir; resolves once it logs that it is ready. */
export async function startDaemon({ socket, args = [] } = {}) {
  const dir = socket ? null : await mkdtemp(path.join(os.tmpdir(), 'askbus-mcp-'));
  socket ??= path.join(dir, 'askbus.sock');
  const child = spawn(DAEMON, ['--socket', socket, '--no-telemetry', ...((args).some((a) => a === '--store' || a.startsWith('--store=') || a === '--no-store') ? [] : ['--no-store']), ...((args).some((a) => a.startsWith('--policies')) ? [] : ['--policies', 'off']), ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const exited = once(child, 'exit');
  await deadline(
    new Promise((resolve, reject) => {
      child.stderr.on('data', (d) => {
        log += d;
        if (log.includes('askbusd ready on')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`askbusd exited (${code}): ${log}`)));
    }),
    'askbusd to be ready',
  );
  return {
    socket,
    child,
    log: () => log,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      if (dir) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A temp dir for a socket no daemon listens on (yet). */
export async function tempSocketPath() {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'askbus-mcp-'));
  return { socket: path.join(dir, 'askbus.sock'), cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * The MCP SDK client connected to a spawned `askbus mcp --socket SOCKET ARGS…`. `raw` collects
 * every JSON-RPC message as parsed from the wire, before the SDK's own schema parsing (which may
 * reorder keys), so tests can compare what the server actually sent.
 */
export async function connectMcp(socket, { args = [], clientInfo, roots, cwd, env } = {}) {
  const transport = new StdioClientTransport({
    command: CLI,
    args: ['mcp', '--socket', socket, ...args],
    stderr: 'pipe',
    ...(cwd ? { cwd } : {}),
    ...(env ? { env: { ...getDefaultEnvironment(), ...env } } : {}),
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => {
    stderr += d;
  });
  const client = new Client(clientInfo ?? { name: 'mcp-test-client', version: '1.2.3' }, {
    capabilities: roots ? { roots: { listChanged: false } } : {},
  });
  if (roots) client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots }));
  await deadline(client.connect(transport), 'the MCP handshake');
  const raw = [];
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    raw.push(message);
    deliver?.(message, extra);
  };
  return {
    client,
    transport,
    raw,
    stderr: () => stderr,
    close: () => client.close(),
  };
}

/** A raw-frame connection to the daemon: frames out, a queue of frames in. */
export class RawConnection {
  constructor(sock) {
    this.sock = sock;
    this.buf = Buffer.alloc(0);
    this.frames = [];
    this.waiters = [];
    this.closed = false;
    sock.on('data', (chunk) => {
      this.buf = Buffer.concat([this.buf, chunk]);
      while (this.buf.length >= 4) {
        const len = this.buf.readUInt32BE(0);
        if (this.buf.length < 4 + len) break;
        const frame = JSON.parse(this.buf.subarray(4, 4 + len).toString('utf8'));
        this.buf = this.buf.subarray(4 + len);
        this.frames.push(frame);
        this.wake();
      }
    });
    sock.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static async connect(socketPath) {
    const sock = net.createConnection(socketPath);
    await deadline(once(sock, 'connect'), `connecting to ${socketPath}`);
    return new RawConnection(sock);
  }

  send(frame) {
    const body = Buffer.from(JSON.stringify(frame), 'utf8');
    const head = Buffer.alloc(4);
    head.writeUInt32BE(body.length, 0);
    this.sock.write(Buffer.concat([head, body]));
  }

  wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Removes and returns the first frame (received or to come) that `match` accepts. */
  async take(match, what = 'a frame') {
    const find = () => {
      const i = this.frames.findIndex(match);
      return i < 0 ? undefined : this.frames.splice(i, 1)[0];
    };
    return deadline(
      (async () => {
        for (;;) {
          const f = find();
          if (f) return f;
          if (this.closed) throw new Error(`connection closed while waiting for ${what}`);
          await new Promise((resolve) => this.waiters.push(resolve));
        }
      })(),
      what,
    );
  }

  /** Frames received and not taken whose type is `type`. */
  pending(type) {
    return this.frames.filter((f) => f.type === type);
  }

  close() {
    this.sock.destroy();
  }
}

/** A subscribed UI. */
export async function subscribeUi(socketPath, client = 'raw-test-ui/1') {
  const ui = await RawConnection.connect(socketPath);
  ui.send({ type: 'subscribe', client });
  await ui.take((f) => f.type === 'subscribed', 'subscribed');
  return ui;
}

/** Asks through a raw producer connection and returns the daemon's terminal frame. */
export async function rawAsk(socketPath, request) {
  const p = await RawConnection.connect(socketPath);
  try {
    p.send({ type: 'ask-user-request', ...request });
    return await p.take(
      (f) => f.correlationId === request.correlationId && ['ask-user-response', 'error'].includes(f.type),
      'the raw producer answer',
    );
  } finally {
    p.close();
  }
}

/** The reference tool's validation message for `params`, or null when it accepts them. */
export function referenceError(params) {
  try {
    new AskUserTool(undefined).build(params);
    return null;
  } catch (e) {
    return e.message;
  }
}

/**
 * The reference tool's result when the user answers `answers` ({"0": "…"}) or, with
 * `answers === null`, dismisses the dialog.
 */
export async function referenceResult(params, answers) {
  const invocation = new AskUserTool(undefined).build(params);
  const signal = new AbortController().signal;
  const details = await invocation.shouldConfirmExecute(signal);
  if (answers === null) {
    await details.onConfirm(ToolConfirmationOutcome.Cancel);
  } else {
    await details.onConfirm(ToolConfirmationOutcome.ProceedOnce, { answers });
  }
  return invocation.execute({ abortSignal: signal });
}

/** The normalized questions the reference asks for `params`. */
export function referenceQuestions(params) {
  return new AskUserTool(undefined).build(params).params.questions;
}
