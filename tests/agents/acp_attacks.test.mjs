// `askbus acp` against peers that lie: an editor that answers with options the agent never
// offered, contradicts itself or answers what it was never sent; an askbus UI that picks an
// outcome that was not offered; an editor that never answers; an agent that reuses ids or
// sends ids no answer can be matched to. Each runs through the real proxy, with a real askbusd
// and a raw-frame UI, a raw agent (acp-raw-agent.mjs: it writes lines exactly as scripted) and
// a raw editor (this file writes the proxy's stdin and reads its stdout line by line). Nothing
// here may ever become an approval.

import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, test } from 'node:test';

import { launch } from './acp-helpers.mjs';
import { deadline, rm, startDaemon, subscribeUi, tempDir } from './helpers.mjs';

const RAW_AGENT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'acp-raw-agent.mjs');

/** Gemini CLI's three options. */
const OPTIONS = [
  { optionId: 'proceed_always', name: 'Always allow', kind: 'allow_always' },
  { optionId: 'proceed_once', name: 'Allow', kind: 'allow_once' },
  { optionId: 'cancel', name: 'Reject', kind: 'reject_once' },
];

/** A permission request line, the id written as given (any JSON text). */
function permission(idJson, { title = 'touch created.txt', options = OPTIONS } = {}) {
  const params = {
    sessionId: 'raw-session',
    toolCall: { toolCallId: `call-${title.length}`, title, kind: 'execute', status: 'pending' },
    options,
  };
  return `{"jsonrpc":"2.0","id":${idJson},"method":"session/request_permission","params":${JSON.stringify(params)}}`;
}

const selected = (optionId) => ({ outcome: { outcome: 'selected', optionId } });
const DENIED = selected('cancel');

/** The lines of a stream, as they come; `prefix` keeps only those lines (without it). */
class Lines {
  constructor(stream, prefix = '') {
    this.lines = [];
    this.waiters = [];
    this.parts = [];
    this.ended = false;
    stream.setEncoding('utf8');
    stream.on('data', (d) => {
      let start = 0;
      let i;
      while ((i = d.indexOf('\n', start)) >= 0) {
        this.parts.push(d.slice(start, i));
        const line = this.parts.join('');
        this.parts = [];
        start = i + 1;
        if (line.startsWith(prefix)) this.lines.push(line.slice(prefix.length));
      }
      if (start < d.length) this.parts.push(d.slice(start));
      this.wake();
    });
    stream.on('end', () => {
      this.ended = true;
      this.wake();
    });
  }

  wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Removes and returns the first line (received or to come) that `match` accepts. */
  takeRaw(match, what) {
    const find = () => {
      const i = this.lines.findIndex(match);
      return i < 0 ? undefined : this.lines.splice(i, 1)[0];
    };
    return deadline(
      (async () => {
        for (;;) {
          const found = find();
          if (found !== undefined) return found;
          if (this.ended) throw new Error(`stream ended while waiting for ${what}`);
          await new Promise((resolve) => this.waiters.push(resolve));
        }
      })(),
      what,
    );
  }

  /** Removes and returns the first line (received or to come) whose JSON `match` accepts. */
  async take(match, what) {
    const json = (l) => {
      try {
        return match(JSON.parse(l));
      } catch {
        return false;
      }
    };
    return JSON.parse(await this.takeRaw(json, what));
  }

  /** Every line still held whose JSON `match` accepts. */
  all(match) {
    return this.lines
      .map((l) => {
        try {
          return JSON.parse(l);
        } catch {
          return undefined;
        }
      })
      .filter((m) => m !== undefined && match(m));
  }
}

let root;
let bus;
let procs;
let closers;
beforeEach(async () => {
  root = await tempDir('askbus-acp-attacks-');
  bus = await startDaemon(root);
  procs = [];
  closers = [];
});
afterEach(async () => {
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  for (const close of closers.reverse()) await close();
  await bus.stop();
  await rm(root, { recursive: true, force: true });
});

async function ui() {
  const u = await subscribeUi(bus.socket);
  closers.push(() => u.close());
  return u;
}

/**
 * The raw agent through the proxy, with the raw editor through initialize, session/new and
 * a prompt (on which the agent writes `script`). `editor`: what the editor receives;
 * `agentGot`: what reached the agent; `send`: a line from the editor.
 */
async function session(script, proxyArgs = [], { prompt = true } = {}) {
  const agent = {
    command: process.execPath,
    args: [RAW_AGENT],
    cwd: root,
    env: { PATH: process.env.PATH, ACP_SCRIPT: JSON.stringify(script) },
  };
  const proc = launch(agent, ['--socket', bus.socket, ...proxyArgs]);
  procs.push(proc);
  const editor = new Lines(proc.child.stdout);
  const agentGot = new Lines(proc.child.stderr, 'AGENT GOT ');
  const said = new Lines(proc.child.stderr, 'askbus acp: ');
  proc.child.stdin.on('error', () => {});
  const send = (line) => proc.child.stdin.write(`${typeof line === 'string' ? line : JSON.stringify(line)}\n`);
  send({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } });
  await editor.take((m) => m.id === 0, 'the answer to initialize');
  send({ jsonrpc: '2.0', id: 1, method: 'session/new', params: { cwd: root, mcpServers: [] } });
  await editor.take((m) => m.id === 1, 'the answer to session/new');
  const promptNow = () =>
    send({ jsonrpc: '2.0', id: 2, method: 'session/prompt', params: { sessionId: 'raw-session', prompt: [{ type: 'text', text: 'Go.' }] } });
  if (prompt) promptNow();
  /** Everything the editor sent so far has reached the agent (a marker sent after it did). */
  let marks = 0;
  const settled = async () => {
    const method = `test/marker-${++marks}`;
    send({ jsonrpc: '2.0', method });
    await agentGot.take((m) => m.method === method, 'the marker at the agent');
  };
  /** The answers the agent got to request `id` (the parsed id). */
  const answersTo = (id) => agentGot.all((m) => m.method === undefined && m.id === id);
  return { proc, editor, agentGot, said, send, settled, answersTo, prompt: promptNow };
}

const requestOf = (u, what = 'the approval from askbus acp') => u.take((f) => f.type === 'tool-confirmation-request', what);

test('the editor answers with an option the agent did not offer, or a forged or contradictory outcome: the agent is told no, every time', async () => {
  const forged = {
    10: selected('allow_everything'),
    11: { outcome: { outcome: 'cancelled', optionId: 'proceed_once' } },
    // JSON.parse (the agent's reader) keeps the last of two keys: this would read as "always".
    12: '{"outcome":{"outcome":"selected","optionId":"cancel","optionId":"proceed_always"}}',
    13: { outcome: { outcome: 'selected' } },
    14: { outcome: { outcome: 'approved', optionId: 'proceed_once' } },
    15: { outcome: 'selected' },
    16: '{"outcome":{"outcome":"cancelled"}},"result":{"outcome":{"outcome":"selected","optionId":"proceed_always"}}',
  };
  const ids = Object.keys(forged).map(Number);
  const u = await ui();
  const s = await session(ids.map((id) => permission(String(id), { title: `touch f${id}` })));
  const asked = [];
  for (const _ of ids) asked.push(await requestOf(u));
  for (const id of ids) {
    await s.editor.take((m) => m.method === 'session/request_permission' && m.id === id, `request ${id} at the editor`);
    const result = typeof forged[id] === 'string' ? forged[id] : JSON.stringify(forged[id]);
    s.send(`{"jsonrpc":"2.0","id":${id},"result":${result}}`);
  }
  await s.settled();
  for (const id of ids) {
    assert.deepEqual(
      s.answersTo(id).map((m) => m.result),
      [DENIED],
      `request ${id}: one answer, the agent's reject option (${s.proc.stderr()})`,
    );
  }
  for (const req of asked) {
    const gone = await u.take(
      (f) => f.type === 'tool-confirmation-withdrawn' && f.correlationId === req.correlationId,
      'the askbus request withdrawn',
    );
    assert.equal(gone.reason, 'withdrawn');
  }
  assert.match(s.proc.stderr(), /did not offer/);
  assert.match(s.proc.stderr(), /cancelled, yet selecting/);
});

test('an editor answer with both a result and an error is refused too', async () => {
  const u = await ui();
  const s = await session([permission('20')]);
  await requestOf(u);
  await s.editor.take((m) => m.id === 20 && m.method, 'the request at the editor');
  s.send(`{"jsonrpc":"2.0","id":20,"result":${JSON.stringify(selected('proceed_once'))},"error":{"code":-1,"message":"x"}}`);
  await s.settled();
  assert.deepEqual(
    s.answersTo(20).map((m) => m.result),
    [DENIED],
  );
});

test('--gate askbus: an editor answering a request it was never sent (a guessed id) is not passed on', async () => {
  const u = await ui();
  const s = await session([permission('30')], ['--gate', 'askbus']);
  const req = await requestOf(u);
  s.send({ jsonrpc: '2.0', id: 30, result: selected('proceed_always') });
  await s.settled();
  assert.deepEqual(s.answersTo(30), [], 'the guess did not reach the agent');
  u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: false, outcome: 'cancel' });
  const answer = await s.agentGot.take((m) => m.id === 30 && !m.method, "askbus's answer");
  assert.deepEqual(answer.result, DENIED);
  assert.equal(s.editor.all((m) => m.method === 'session/request_permission').length, 0);
});

test('an askbus UI picking an outcome that was not offered is refused; the agent never gets it', async () => {
  const u = await ui();
  // No allow_always: askbus offers proceed_once and cancel only.
  const options = [
    { optionId: 'yes', name: 'Allow', kind: 'allow_once' },
    { optionId: 'no', name: 'Reject', kind: 'reject_once' },
  ];
  const s = await session([permission('"p-1"', { options })]);
  const req = await requestOf(u);
  assert.deepEqual(req.outcomes, ['proceed_once', 'cancel']);
  for (const outcome of ['proceed_always', 'proceed_always_server', 'proceed_always_and_save', 'modify_with_editor']) {
    u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome });
    const refused = await u.take((f) => f.type === 'error', `the refusal of ${outcome}`);
    assert.equal(refused.code, 'invalid-response', JSON.stringify(refused));
  }
  await s.settled();
  assert.deepEqual(s.answersTo('p-1'), [], 'no answer reached the agent');
  u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: false, outcome: 'cancel' });
  const answer = await s.agentGot.take((m) => m.id === 'p-1' && !m.method, 'the answer');
  assert.deepEqual(answer.result, selected('no'));
  await s.settled();
  assert.equal(s.answersTo('p-1').length, 0, 'one answer in all');
});

test('a silent editor and a silent UI: the request ends at --timeout-ms, the agent is told no, the editor cancelled, its late yes dropped', async () => {
  const u = await ui();
  const s = await session([permission('40')], ['--timeout-ms', '1500']);
  const req = await requestOf(u);
  await s.editor.take((m) => m.id === 40 && m.method, 'the request at the editor');
  const answer = await s.agentGot.take((m) => m.id === 40 && !m.method, 'the answer at the timeout');
  assert.deepEqual(answer.result, DENIED);
  const cancel = await s.editor.take((m) => m.method === '$/cancel_request', "the editor's copy cancelled");
  assert.equal(cancel.params.requestId, 40);
  await u.take((f) => f.type === 'tool-confirmation-withdrawn' && f.correlationId === req.correlationId, 'the UI told it ended');
  s.send({ jsonrpc: '2.0', id: 40, result: selected('proceed_always') });
  await s.settled();
  assert.equal(s.answersTo(40).length, 0, "the editor's late yes never reached the agent");
});

test('the agent reuses an id that is still open: both requests are denied and the second is asked nowhere', async () => {
  const u = await ui();
  const s = await session([permission('7', { title: 'ls' }), permission('7', { title: 'rm -rf ~' })]);
  const first = await s.agentGot.take((m) => m.id === 7 && !m.method, 'the first answer to 7');
  const second = await s.agentGot.take((m) => m.id === 7 && !m.method, 'the second answer to 7');
  assert.deepEqual([first.result, second.result], [DENIED, DENIED]);
  // The editor may answer the copy it saw; that answer is dropped.
  s.send({ jsonrpc: '2.0', id: 7, result: selected('proceed_once') });
  await s.settled();
  assert.equal(s.answersTo(7).length, 0);
  assert.equal(
    s.editor.all((m) => m.method === 'session/request_permission' && m.params.toolCall.title === 'rm -rf ~').length,
    0,
    'the second never reached the editor',
  );
  assert.ok(!u.frames.some((f) => f.type === 'tool-confirmation-request' && JSON.stringify(f).includes('rm -rf')));
  assert.match(s.proc.stderr(), /reused the id 7/);
});

test('the agent reuses the id of a request askbus answered while the editor still holds its copy: the new one is denied, the late editor answer dropped', async () => {
  const u = await ui();
  const s = await session([permission('8', { title: 'ls' })]);
  const req = await requestOf(u);
  u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome: 'proceed_once' });
  const allowed = await s.agentGot.take((m) => m.id === 8 && !m.method, 'the answer to the first 8');
  assert.deepEqual(allowed.result, selected('proceed_once'));
  await s.editor.take((m) => m.method === '$/cancel_request', "the editor's copy cancelled");
  // A second prompt makes the agent send its script again: a new request with the same id.
  s.send({ jsonrpc: '2.0', id: 3, method: 'session/prompt', params: { sessionId: 'raw-session', prompt: [{ type: 'text', text: 'Again.' }] } });
  const denied = await s.agentGot.take((m) => m.id === 8 && !m.method, 'the answer to the second 8');
  assert.deepEqual(denied.result, DENIED);
  // The editor's late yes to its first copy must not land on the second.
  s.send({ jsonrpc: '2.0', id: 8, result: selected('proceed_always') });
  await s.settled();
  assert.equal(s.answersTo(8).length, 0);
});

test('malicious ids: no id, null, an object, a float: asked nowhere, never passed to the editor with --gate askbus, an error where there is an id', async () => {
  const u = await ui();
  const noId = permission('0').replace('"id":0,', '');
  const s = await session(
    [noId, permission('null'), permission('{"x":1}'), permission('1.5'), permission('"a\\u0062c"')],
    ['--gate', 'askbus'],
  );
  // The last one is a fine id ("abc", escaped): it is asked, and matched however it is written.
  const req = await requestOf(u, 'the request with a usable id');
  u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: false, outcome: 'cancel' });
  const answer = await s.agentGot.take((m) => m.id === 'abc' && !m.method, 'the answer to "abc"');
  assert.deepEqual(answer.result, DENIED);
  const objectError = await s.agentGot.take((m) => typeof m.id === 'object' && m.id?.x === 1, 'the error for the object id');
  assert.equal(objectError.error.code, -32600);
  const floatError = await s.agentGot.take((m) => m.id === 1.5, 'the error for the float id');
  assert.equal(floatError.error.code, -32600);
  await s.settled();
  assert.equal(s.editor.all((m) => m.method === 'session/request_permission').length, 0, 'none reached the editor');
  assert.equal(u.frames.filter((f) => f.type === 'tool-confirmation-request').length, 0, 'only one was asked');
});

test('--gate askbus: a permission request with a key written twice (a reader would see another message) never reaches the editor', async () => {
  await ui();
  // Readers that keep the last "method" see a permission request; the proxy cannot read it as one.
  const twice = permission('50').replace('"method":"session/request_permission"', '"method":"session/update","method":"session/request_permission"');
  const s = await session([twice], ['--gate', 'askbus']);
  await s.said.takeRaw((l) => l.startsWith('dropped a line'), 'the proxy dropping it');
  assert.equal(s.editor.all((m) => m.id === 50).length, 0);
});

/** A field of /proc/PID/status, in KiB. */
async function statusKib(pid, field) {
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(text.match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'))[1]);
}

const MIB = 1 << 20;

test("a line over --max-line-bytes from the agent reaches the editor whole, in pieces, and the proxy's memory stays bounded", async () => {
  const bytes = 48 * MIB;
  const head = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"raw-session","update":{"text":"';
  const tail = '"}}}\n';
  const s = await session(
    [{ head, fill: 'x', bytes, tail }, JSON.stringify({ jsonrpc: '2.0', method: 'test/after' })],
    ['--max-line-bytes', String(MIB)],
    { prompt: false },
  );
  const before = await statusKib(s.proc.child.pid, 'VmRSS');
  s.prompt();
  const long = await s.editor.takeRaw((l) => l.length > bytes, 'the long line at the editor');
  assert.equal(long.length, head.length + bytes + tail.length - 1, 'every byte of it');
  assert.ok(long.startsWith(head) && long.endsWith('"}}}'));
  await s.editor.take((m) => m.method === 'test/after', 'the line after it');
  const peak = await statusKib(s.proc.child.pid, 'VmHWM');
  assert.ok(peak - before < 16 * 1024, `the proxy grew by ${peak - before} KiB for a line of ${bytes / MIB} MiB`);
  await s.said.takeRaw((l) => l.includes('passed to the editor unread'), 'the proxy saying so');
});

test("a line over --max-line-bytes from the editor reaches the agent whole, and the proxy's memory stays bounded", async () => {
  const s = await session([], ['--max-line-bytes', String(MIB)]);
  const before = await statusKib(s.proc.child.pid, 'VmRSS');
  const text = 'y'.repeat(48 * MIB);
  const line = `{"jsonrpc":"2.0","method":"session/big","params":{"text":"${text}"}}`;
  s.send(line);
  const got = await s.agentGot.takeRaw((l) => l.startsWith('LONG '), 'the long line at the agent');
  assert.equal(got, `LONG ${line.length} ${line.slice(-40)}`);
  await s.settled();
  const peak = await statusKib(s.proc.child.pid, 'VmHWM');
  assert.ok(peak - before < 16 * 1024, `the proxy grew by ${peak - before} KiB`);
});

test('--gate askbus: a permission request over --max-line-bytes ends the session; the editor sees none of it', async () => {
  const head =
    '{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"raw-session","options":' +
    JSON.stringify(OPTIONS) +
    ',"toolCall":{"toolCallId":"c9","kind":"execute","title":"';
  const s = await session([{ head, fill: 'z', bytes: 3 * MIB, tail: '"}}}\n' }], ['--gate', 'askbus', '--max-line-bytes', String(MIB)]);
  const exit = await deadline(s.proc.exited, 'the proxy to end the session');
  assert.equal(exit.code, 1, s.proc.stderr());
  assert.match(s.proc.stderr(), /ending the session/);
  assert.equal(s.editor.all((m) => m.id === 9).length, 0);
  assert.ok(!s.editor.lines.some((l) => l.includes('request_permission')) && !s.editor.parts.join('').includes('request_permission'));
});
