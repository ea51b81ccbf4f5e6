// The harness of the browser tests: the real askbusd on a temp socket, the real `askbus web`
// on a free loopback port, a raw-frame producer (Node's `net`, 4-byte big-endian length +
// JSON) that reads exactly what the daemon forwards, a bare WebSocket client for the access
// tests, and Debian's Chromium driven by playwright-core.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';

import { chromium } from 'playwright-core';

const ROOT = path.resolve(import.meta.dirname, '../..');
export const DAEMON = process.env.ASKBUS_DAEMON || path.join(ROOT, 'target/debug/askbusd');
export const CLI = process.env.ASKBUS_CLI || path.join(ROOT, 'target/debug/askbus');
let syncs = 0;

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
/** How long a test waits for something it expects. */
export const WAIT_MS = 10000;

export function tempDir() {
  return mkdtempSync(path.join(tmpdir(), 'askbus-web-test-'));
}

export function removeDir(dir) {
  rmSync(dir, { recursive: true, force: true });
}

/** Resolves when `stream` has printed text matching `re` (the match), or rejects. */
function waitFor(stream, re, what, proc) {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => done(new Error(`${what}: nothing matching ${re} within ${WAIT_MS} ms:\n${seen}`)), WAIT_MS);
    const onData = (chunk) => {
      seen += chunk;
      const m = seen.match(re);
      if (m) done(null, m);
    };
    const onExit = (code) => done(new Error(`${what} exited (${code}) before printing ${re}:\n${seen}`));
    function done(err, m) {
      clearTimeout(timer);
      stream.off('data', onData);
      proc.off('exit', onExit);
      if (err) reject(err);
      else resolve(m);
    }
    stream.setEncoding('utf8');
    stream.on('data', onData);
    proc.on('exit', onExit);
  });
}

/** A running askbusd; `restart()` starts it again on the same socket. */
export class Daemon {
  /** `options.configHome`: the daemon decides by the policy rules of that config home's user
   * tier (and an empty admin tier), where askbus web's "always" rules go; else no policies. */
  constructor(dir, options = {}) {
    this.dir = dir;
    this.socket = path.join(dir, 'askbus.sock');
    this.log = '';
    this.configHome = options.configHome;
    /** `options.store`: keep a store (askbus.db in `dir`), for the history. */
    this.store = options.store === true;
  }

  async start() {
    const policies = this.configHome
      ? ['--policy-admin-dir', path.join(this.dir, 'no-admin-rules')]
      : ['--policies', 'off'];
    const env = this.configHome
      ? { ...process.env, XDG_CONFIG_HOME: this.configHome, ASKBUS_POLICIES: 'on' }
      : process.env;
    const store = this.store ? ['--store', path.join(this.dir, 'askbus.db')] : ['--no-store'];
    this.proc = spawn(DAEMON, ['--socket', this.socket, '--no-telemetry', ...store, ...policies], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env,
    });
    this.proc.stderr.on('data', (c) => { this.log += c; });
    await waitFor(this.proc.stderr, /askbusd ready on/, 'askbusd', this.proc);
    return this;
  }

  /** SIGTERM (the daemon answers `shutdown` and tells the UIs), and waits for the exit. */
  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    const exited = once(this.proc, 'exit');
    this.proc.kill('SIGTERM');
    await exited;
  }

  async restart() {
    await this.stop();
    return this.start();
  }
}

/** A sign-in link as `askbus web` prints it. */
const LINK = /http:\/\/127\.0\.0\.1:(\d+)\/login\?code=[0-9a-f]+/;

/**
 * Follows a sign-in link's two steps as a browser does: {cookie: 'name=value', dir: '/<sid>/'}.
 */
export async function signIn(web, link) {
  const url = new URL(link);
  const first = await get(web, url.pathname + url.search);
  if (first.status !== 303) throw new Error(`sign-in: ${first.status} ${first.body}`);
  const next = first.headers.location.replace(/^\./, '');
  const second = await get(web, next);
  if (second.status !== 303) throw new Error(`sign-in: ${second.status} ${second.body}`);
  const cookie = second.headers['set-cookie'][0].split(';')[0];
  return { cookie, dir: next.slice(0, next.indexOf('login')) };
}

/** A running `askbus web` on a free loopback port. */
export class Web {
  /** `configHome`: its XDG_CONFIG_HOME, where "allow always" writes its rule (by default a
   * directory of its own: never the config of the user running the tests). */
  constructor(socket, extraArgs = [], configHome = undefined) {
    this.socket = socket;
    this.extraArgs = extraArgs;
    this.stderr = '';
    this.stdout = '';
    this.ownConfig = !configHome;
    this.configHome = configHome || mkdtempSync(path.join(tmpdir(), 'askbus-web-config-'));
  }

  async start() {
    this.proc = spawn(CLI, ['--socket', this.socket, 'web', '--listen', '127.0.0.1:0', ...this.extraArgs], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, XDG_CONFIG_HOME: this.configHome },
    });
    this.proc.stderr.setEncoding('utf8');
    this.proc.stderr.on('data', (c) => { this.stderr += c; });
    this.proc.stdout.setEncoding('utf8');
    this.proc.stdout.on('data', (c) => { this.stdout += c; });
    const m = await waitFor(this.proc.stdout, LINK, 'askbus web', this.proc);
    // The printed link: a one-time sign-in code. Raw clients (`get`, `websocket`, WsClient)
    // sign in with it here; a browser page takes a fresh one (`newLink`).
    this.link = m[0];
    this.port = Number(m[1]);
    this.origin = `http://127.0.0.1:${this.port}`;
    const session = await signIn(this, this.link);
    this.cookie = session.cookie;
    this.dir = session.dir;
    this.base = `${this.origin}${this.dir}`;
    return this;
  }

  /** A fresh one-time sign-in link: what a person gets by pressing Enter where it runs. */
  async newLink() {
    const printed = waitFor(this.proc.stdout, LINK, 'askbus web (a new link)', this.proc);
    this.proc.stdin.write('\n');
    return (await printed)[0];
  }

  async stop() {
    if (this.ownConfig) rmSync(this.configHome, { recursive: true, force: true });
    if (!this.proc || this.proc.exitCode !== null) return;
    const exited = once(this.proc, 'exit');
    this.proc.kill('SIGTERM');
    await exited;
  }
}

/** A producer speaking raw frames to the daemon. */
export class Producer {
  static async connect(socket, client = 'test-agent/1') {
    const p = new Producer();
    p.sock = net.connect(socket);
    await once(p.sock, 'connect');
    p.buf = Buffer.alloc(0);
    p.frames = [];
    p.waiters = [];
    p.sock.on('data', (chunk) => {
      p.buf = Buffer.concat([p.buf, chunk]);
      while (p.buf.length >= 4) {
        const len = p.buf.readUInt32BE(0);
        if (p.buf.length < 4 + len) break;
        const frame = JSON.parse(p.buf.subarray(4, 4 + len).toString('utf8'));
        p.buf = p.buf.subarray(4 + len);
        const w = p.waiters.shift();
        if (w) w(frame);
        else p.frames.push(frame);
      }
    });
    p.send({ type: 'hello', protocol: 1, client });
    const welcome = await p.next();
    if (welcome.type !== 'welcome') throw new Error(`expected welcome, got ${JSON.stringify(welcome)}`);
    return p;
  }

  send(frame) {
    const payload = Buffer.from(JSON.stringify(frame), 'utf8');
    const head = Buffer.alloc(4);
    head.writeUInt32BE(payload.length, 0);
    this.sock.write(Buffer.concat([head, payload]));
  }

  /** The next frame from the daemon. */
  next(ms = WAIT_MS) {
    if (this.frames.length) return Promise.resolve(this.frames.shift());
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`no frame from askbusd within ${ms} ms`));
      }, ms);
      const waiter = (f) => {
        clearTimeout(timer);
        resolve(f);
      };
      this.waiters.push(waiter);
    });
  }

  /** Sends a request (`sync` tells when the daemon has taken it). */
  ask(correlationId, questions, extra = {}) {
    this.send({ type: 'ask-user-request', correlationId, questions, ...extra });
  }

  /** Sends an approval (`tool-confirmation-request`). */
  approve(correlationId, toolCall, details, extra = {}) {
    this.send({ type: 'tool-confirmation-request', correlationId, toolCall, ...(details ? { details } : {}), ...extra });
  }

  /** The terminal tool-confirmation-response for `id`. */
  async decision(id, ms = WAIT_MS) {
    const f = await this.next(ms);
    if (f.type !== 'tool-confirmation-response' || f.correlationId !== id) {
      throw new Error(`expected the tool-confirmation-response for ${id}, got ${JSON.stringify(f)}`);
    }
    return f;
  }

  /** Resolves once the daemon has handled everything sent before on this connection: it
   * handles one connection's frames in order, so the pong comes after them. */
  async sync(ms = WAIT_MS) {
    syncs += 1;
    const id = `sync-${syncs}`;
    this.send({ type: 'ping', id });
    const f = await this.next(ms);
    if (f.type !== 'pong' || f.id !== id) {
      throw new Error(`expected the pong ${id}, got ${JSON.stringify(f)}`);
    }
  }

  /** The terminal ask-user-response for `id`. */
  async response(id, ms = WAIT_MS) {
    const f = await this.next(ms);
    if (f.type !== 'ask-user-response' || f.correlationId !== id) {
      throw new Error(`expected the ask-user-response for ${id}, got ${JSON.stringify(f)}`);
    }
    return f;
  }

  close() {
    this.sock.destroy();
  }
}

/** A TCP proxy in front of `askbus web` whose connections the test can cut, as a flaky
 * network (a phone going to sleep) would. */
export class CutProxy {
  static async start(port) {
    const p = new CutProxy();
    p.sockets = new Set();
    p.server = net.createServer((client) => {
      const upstream = net.connect(port, '127.0.0.1');
      for (const s of [client, upstream]) {
        p.sockets.add(s);
        s.on('close', () => p.sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    p.server.listen(0, '127.0.0.1');
    await once(p.server, 'listening');
    p.port = p.server.address().port;
    return p;
  }

  /** Drops every connection open now; new ones still go through. */
  cut() {
    for (const s of this.sockets) s.destroy();
  }

  close() {
    this.cut();
    this.server.close();
  }
}

/** A plain HTTP GET to `askbus web` with the given headers: {status, headers, body}. */
export function get(web, pathAndQuery, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: web.port, path: pathAndQuery, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Opens a WebSocket to `askbus web` by hand (Node 20 has no client) with the given headers.
 * Resolves {status, body} when the handshake is refused, or {status: 101, messages} with
 * every text message received within `listenMs`.
 */
export function websocket(web, headers = {}, listenMs = 800) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port: web.port,
      path: `${web.dir}ws`,
      headers: {
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64'),
        ...headers,
      },
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('upgrade', (res, socket, head) => {
      let buf = Buffer.alloc(0);
      const messages = [];
      // The first frames may have come in with the handshake's response (`head`).
      const onData = (c) => {
        buf = Buffer.concat([buf, c]);
        for (;;) {
          const frame = readWsFrame(buf);
          if (!frame) break;
          buf = buf.subarray(frame.size);
          if (frame.opcode === 1) messages.push(frame.payload.toString('utf8'));
        }
      };
      onData(head);
      socket.on('data', onData);
      setTimeout(() => {
        socket.destroy();
        resolve({ status: res.statusCode, messages });
      }, listenMs);
    });
    req.on('error', reject);
    req.end();
  });
}

/** A WebSocket client of `askbus web` that can also send (masked, as clients must). */
export class WsClient {
  /** `query` (e.g. `?project=P`) is the page's filter, as the page passes it on. */
  static connect(web, headers = {}, query = '') {
    return new Promise((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1',
        port: web.port,
        // Under the page's directory, where the session cookie belongs.
        path: `${web.dir}ws${query}`,
        headers: {
          Connection: 'Upgrade',
          Upgrade: 'websocket',
          'Sec-WebSocket-Version': '13',
          'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64'),
          Cookie: web.cookie,
          Origin: web.origin,
          ...headers,
        },
      });
      req.on('response', (res) => reject(new Error(`WebSocket refused: ${res.statusCode}`)));
      req.on('upgrade', (res, socket, head) => {
        const c = new WsClient();
        c.socket = socket;
        c.buf = Buffer.alloc(0);
        c.messages = [];
        c.waiters = [];
        // The first frames may have come in with the handshake's response (`head`).
        const onData = (chunk) => {
          c.buf = Buffer.concat([c.buf, chunk]);
          for (;;) {
            const frame = readWsFrame(c.buf);
            if (!frame) break;
            c.buf = c.buf.subarray(frame.size);
            if (frame.opcode !== 1) continue;
            c.messages.push(JSON.parse(frame.payload.toString('utf8')));
            c.wake();
          }
        };
        onData(head);
        socket.on('data', onData);
        resolve(c);
      });
      req.on('error', reject);
      req.end();
    });
  }

  wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  /** The first message (received or to come) matching `pred`, consumed. */
  async next(pred, ms = WAIT_MS) {
    const deadline = Date.now() + ms;
    for (;;) {
      const i = this.messages.findIndex(pred);
      if (i >= 0) return this.messages.splice(i, 1)[0];
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching WebSocket message within ${ms} ms; got ${JSON.stringify(this.messages)}`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
  }

  send(obj) {
    const payload = Buffer.from(JSON.stringify(obj), 'utf8');
    const mask = crypto.randomBytes(4);
    let head;
    if (payload.length < 126) {
      head = Buffer.from([0x81, 0x80 | payload.length]);
    } else {
      head = Buffer.alloc(4);
      head[0] = 0x81;
      head[1] = 0x80 | 126;
      head.writeUInt16BE(payload.length, 2);
    }
    const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]));
    this.socket.write(Buffer.concat([head, mask, masked]));
  }

  close() {
    this.socket.destroy();
  }
}

/** One unmasked server frame at the start of `buf`, or null if it is not all there. */
function readWsFrame(buf) {
  if (buf.length < 2) return null;
  const opcode = buf[0] & 0x0f;
  let len = buf[1] & 0x7f;
  let off = 2;
  if (len === 126) {
    if (buf.length < 4) return null;
    len = buf.readUInt16BE(2);
    off = 4;
  } else if (len === 127) {
    if (buf.length < 10) return null;
    len = Number(buf.readBigUInt64BE(2));
    off = 10;
  }
  if (buf.length < off + len) return null;
  return { opcode, payload: buf.subarray(off, off + len), size: off + len };
}

/** Debian's Chromium, headless, with the flags this closed network needs. */
export function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
}

/** A page of `askbus web` opened through its printed link (which logs the browser in); with
 * `rest` (e.g. `?project=P#q=ID`), then at that address of the page. */
export async function openPage(context, web, rest = '') {
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  await page.goto(await web.newLink());
  if (rest) await page.goto(`${web.base}${rest}`);
  await page.locator('#conn[data-state="up"]').waitFor();
  return page;
}

/** The two screens every page test runs on. */
export const VIEWPORTS = [
  ['desktop', { viewport: { width: 1100, height: 800 } }],
  ['phone', { viewport: { width: 360, height: 740 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true }],
];

let seq = 0;
/** A correlationId unique within the run. */
export function newId(prefix = 'q') {
  seq += 1;
  return `${prefix}-${process.pid}-${seq}`;
}
