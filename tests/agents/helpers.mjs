// Harness for askbus with the real agent CLIs: a real askbusd on a temp socket, a raw-frame UI
// (4-byte big-endian length + JSON), Gemini CLI run headless and offline on canned model turns
// (its own --fake-responses), and Claude Code run against a local server that speaks the
// Anthropic Messages API's streaming format. No model service is used: the model is replaced,
// never the agent.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '../..');
export const CLI = process.env.ASKBUS_CLI || path.join(REPO, 'target/debug/askbus');
export const DAEMON = process.env.ASKBUS_DAEMON || path.join(REPO, 'target/debug/askbusd');

/** The folder of an installed package, found as Node finds it: these tests are a package of
 * the npm workspace in tests/, so npm puts a dependency either here or, shared with the other
 * test packages, in tests/node_modules. */
export function packageDir(name) {
  return path.dirname(createRequire(import.meta.url).resolve(`${name}/package.json`));
}

export const GEMINI = path.join(packageDir('@google/gemini-cli'), 'bundle/gemini.js');
// The wrapper finds the platform's native binary whether or not npm ran the package's
// postinstall (which copies it over bin/claude.exe).
const CLAUDE = path.join(packageDir('@anthropic-ai/claude-code'), 'cli-wrapper.cjs');

const WAIT_MS = 30_000;
/** How long one agent run may take before it is killed and the test fails. */
const AGENT_MS = 90_000;

/** Rejects after `ms` with `what` in the message, so a hung step fails instead of stalling. */
export function deadline(promise, what, ms = WAIT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export async function tempDir(prefix) {
  return mkdtemp(path.join(os.tmpdir(), prefix));
}

/** A fresh askbusd on a socket in `dir`; resolves once it logs that it is ready. */
export async function startDaemon(dir, args = []) {
  const socket = path.join(dir, 'askbus.sock');
  const child = spawn(DAEMON, ['--socket', socket, ...((args).some((a) => a === '--telemetry' || a.startsWith('--telemetry=')) ? [] : ['--no-telemetry']), ...((args).some((a) => a === '--store' || a.startsWith('--store=') || a === '--no-store') ? [] : ['--no-store']), ...((args).some((a) => a.startsWith('--policies')) ? [] : ['--policies', 'off']), ...args], {
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
    log: () => log,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
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
        this.frames.push(JSON.parse(this.buf.subarray(4, 4 + len).toString('utf8')));
        this.buf = this.buf.subarray(4 + len);
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
  async take(match, what = 'a frame', ms = WAIT_MS) {
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
      ms,
    );
  }

  close() {
    this.sock.destroy();
  }
}

/** A subscribed UI. */
export async function subscribeUi(socketPath) {
  const ui = await RawConnection.connect(socketPath);
  ui.send({ type: 'hello', protocol: 1, client: 'agents-test-ui/1' });
  ui.send({ type: 'subscribe' });
  await ui.take((f) => f.type === 'subscribed', 'subscribed');
  return ui;
}

const running = new Set();

/**
 * Runs a command to its end: {code, signal, stdout, stderr}. One that has not ended after
 * AGENT_MS is killed (signal SIGKILL, and `timedOut` set), so a hung agent fails its test.
 */
export function run(command, args, { cwd, env, input = '' }) {
  const child = spawn(command, args, { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  child.stdin.on('error', () => {});
  child.stdin.end(input);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, AGENT_MS);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, signal, timedOut, stdout, stderr: timedOut ? `timed out after ${AGENT_MS} ms\n${stderr}` : stderr });
    });
  });
}

/** Kills the agents a failed test left running (its afterEach calls this). */
export function killAgents() {
  for (const child of running) child.kill('SIGKILL');
}

/** The shell command an agent's settings run for `askbus ARGS`. */
export function askbusCommand(args) {
  return [CLI, ...args].map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
}

// ---------------------------------------------------------------------------------------------
// Gemini CLI

/** One canned model turn (a generateContentStream call) for --fake-responses. */
export function modelTurn(parts) {
  return {
    method: 'generateContentStream',
    response: [
      {
        candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
      },
    ],
  };
}

/**
 * A Gemini CLI sandbox: a temp HOME with `settings` (plus usage statistics off and telemetry
 * to a local file), a workspace dir, and the canned model turns.
 */
export async function geminiSandbox(root, { settings = {}, turns }) {
  const home = path.join(root, 'home');
  const work = path.join(root, 'work');
  const telemetry = path.join(root, 'telemetry.log');
  const fake = path.join(root, 'fake-responses.jsonl');
  await mkdir(path.join(home, '.gemini'), { recursive: true });
  await mkdir(work, { recursive: true });
  const all = {
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: true, target: 'local', outfile: telemetry, logPrompts: true },
    security: { auth: { selectedType: 'gemini-api-key' } },
    ...settings,
  };
  await writeFile(path.join(home, '.gemini', 'settings.json'), JSON.stringify(all, null, 2));
  await writeFile(fake, turns.map((t) => JSON.stringify(t)).join('\n') + '\n');
  return { home, work, telemetry, fake };
}

/** Runs `gemini -p PROMPT` headless in the sandbox, offline. */
export function runGemini(box, { prompt, args = [] }) {
  const env = {
    PATH: process.env.PATH,
    HOME: box.home,
    TMPDIR: os.tmpdir(),
    GEMINI_API_KEY: 'offline-test-key',
    // The workspace is a fresh temp dir: trust it, as `--skip-trust` would.
    GEMINI_CLI_TRUST_WORKSPACE: 'true',
    NO_COLOR: '1',
    TERM: 'dumb',
  };
  return run(
    process.execPath,
    [GEMINI, '-m', 'gemini-2.5-flash', '--fake-responses', box.fake, ...args, '-p', prompt],
    { cwd: box.work, env },
  );
}

/** The records of Gemini CLI's local telemetry file (pretty-printed JSON objects in a row). */
export async function telemetryRecords(file) {
  const text = await readFile(file, 'utf8');
  const records = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') {
      if (depth++ === 0) start = i;
    } else if (c === '}' && --depth === 0) records.push(JSON.parse(text.slice(start, i + 1)));
  }
  return records;
}

/** The contents Gemini CLI sent to the model in each request, in order. */
export async function modelRequests(file) {
  return (await telemetryRecords(file))
    .map((r) => r.attributes ?? {})
    .filter((a) => a['event.name'] === 'gemini_cli.api_request')
    .map((a) => JSON.parse(a.request_text));
}

/** The functionResponse parts of a request's last turn. */
export function functionResponses(contents) {
  return contents.at(-1).parts.filter((p) => p.functionResponse).map((p) => p.functionResponse);
}

// ---------------------------------------------------------------------------------------------
// Claude Code

/**
 * A local Anthropic Messages API: while the conversation has no tool result yet, the model
 * calls `toolUse` (when the request offers that tool); after it, it says `finalText`. Every
 * request body is kept for the test to read.
 */
export async function fakeMessagesApi({ toolUse, finalText = 'Done.' }) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url.startsWith('/v1/messages')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: req.url } }));
        return;
      }
      if (req.url.startsWith('/v1/messages/count_tokens')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ input_tokens: 10 }));
        return;
      }
      const r = JSON.parse(body);
      requests.push(r);
      const last = r.messages.at(-1);
      const answered = Array.isArray(last.content) && last.content.some((b) => b.type === 'tool_result');
      const offered = (r.tools ?? []).some((t) => t.name === toolUse.name);
      const block =
        offered && !answered
          ? { type: 'tool_use', id: `toolu_${requests.length}`, ...toolUse }
          : { type: 'text', text: finalText };
      const stop = block.type === 'tool_use' ? 'tool_use' : 'end_turn';
      const message = { id: `msg_${requests.length}`, type: 'message', role: 'assistant', model: r.model };
      const usage = { input_tokens: 10, output_tokens: 5 };
      if (!r.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ...message, content: [block], stop_reason: stop, stop_sequence: null, usage }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
      event('message_start', { message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage } });
      if (block.type === 'text') {
        event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
        event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: block.text } });
      } else {
        const { input, ...head } = block;
        event('content_block_start', { index: 0, content_block: { ...head, input: {} } });
        event('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(input) } });
      }
      event('content_block_stop', { index: 0 });
      event('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 5 } });
      event('message_stop', {});
      res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** A Claude Code sandbox: a temp HOME with `settings` in ~/.claude, and a workspace dir. */
export async function claudeSandbox(root, settings) {
  const home = path.join(root, 'home');
  const work = path.join(root, 'work');
  await mkdir(path.join(home, '.claude'), { recursive: true });
  await mkdir(work, { recursive: true });
  await writeFile(path.join(home, '.claude', 'settings.json'), JSON.stringify(settings, null, 2));
  return { home, work };
}

/**
 * Runs `claude -p PROMPT` in the sandbox against the fake Messages API (with `input`, the
 * prompt is read from stdin, e.g. as stream-json).
 */
export function runClaude(box, api, { prompt, args = [], input }) {
  const env = {
    PATH: process.env.PATH,
    HOME: box.home,
    TMPDIR: os.tmpdir(),
    ANTHROPIC_BASE_URL: api.url,
    ANTHROPIC_API_KEY: 'sk-ant-offline-test',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    NO_COLOR: '1',
    TERM: 'dumb',
  };
  const promptArgs = input === undefined ? ['-p', prompt] : ['-p'];
  return run(process.execPath, [CLAUDE, ...args, ...promptArgs], { cwd: box.work, env, input });
}

/** The tool_result blocks of a Messages request's last turn. */
export function toolResults(request) {
  const last = request.messages.at(-1);
  return Array.isArray(last.content) ? last.content.filter((b) => b.type === 'tool_result') : [];
}

export { rm };
