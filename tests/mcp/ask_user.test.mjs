// `askbus mcp` driven by the official MCP TypeScript SDK, against a real askbusd and a raw-frame
// UI: the tool is the reference's to the byte, and every way a call ends reaches the client as
// the reference (or the daemon) words it.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';

import {
  REFERENCE,
  TOOL_FILE,
  connectMcp,
  deadline,
  rawAsk,
  referenceError,
  referenceQuestions,
  referenceResult,
  sleep,
  startDaemon,
  subscribeUi,
  tempSocketPath,
} from './helpers.mjs';

const DB = {
  questions: [
    {
      question: 'Which database should the service use?',
      header: 'Database',
      type: 'choice',
      options: [
        { label: 'PostgreSQL', description: 'Relational, runs as a server' },
        { label: 'SQLite', description: '  Embedded, one file  ' },
      ],
    },
    { question: 'Name the schema?', header: 'Schema', type: 'text', placeholder: 'app' },
    { question: 'Enable backups?', header: 'Backups', type: 'yesno' },
  ],
};

const NAME = { questions: [{ question: 'What is the project called?', header: 'Name', type: 'text' }] };

// Each test gets its own daemon and closes what it opened, so no UI or call leaks across tests.
let bus;
let opened;
beforeEach(async () => {
  bus = await startDaemon();
  opened = [];
});
afterEach(async () => {
  for (const close of opened.reverse()) await close();
  await bus.stop();
});
const mcp = async (opts) => {
  const m = await connectMcp(opts?.socket ?? bus.socket, opts);
  opened.push(() => m.close());
  return m;
};
const ui = async () => {
  const u = await subscribeUi(bus.socket);
  opened.push(async () => u.close());
  return u;
};
const request = (u) => u.take((f) => f.type === 'ask-user-request', 'an ask-user-request');
// The default name: not the reference's `ask_user`, which Gemini CLI drops in headless mode.
const TOOL = 'ask_person';
const callAskUser = (m, args, options) =>
  m.client.callTool({ name: TOOL, arguments: args }, undefined, options);

test('the definition file is the reference ASK_USER_DEFINITION, byte for byte', async () => {
  assert.equal(await readFile(TOOL_FILE, 'utf8'), `${JSON.stringify(REFERENCE, null, 2)}\n`);
});

test('tools/list returns the reference description and schema, byte for byte, as ask_person', async () => {
  const m = await mcp();
  const listed = await m.client.listTools();
  assert.deepEqual(
    listed.tools.map((t) => t.name),
    [TOOL],
  );
  // As sent on the wire, before the SDK's parsing: key order and every byte of text count.
  const wire = m.raw.find((msg) => Array.isArray(msg.result?.tools));
  assert.ok(wire, 'the tools/list response was captured');
  assert.equal(
    JSON.stringify(wire.result.tools),
    JSON.stringify([
      {
        name: TOOL,
        description: REFERENCE.description,
        inputSchema: REFERENCE.parametersJsonSchema,
      },
    ]),
  );
});

test('--tool-name serves the tool under another name, and only under it', async () => {
  const u = await ui();
  const m = await mcp({ args: ['--tool-name', 'ask_user'] });
  const listed = await m.client.listTools();
  assert.deepEqual(
    listed.tools.map((t) => t.name),
    ['ask_user'],
  );
  await assert.rejects(
    m.client.callTool({ name: TOOL, arguments: NAME }),
    (e) => /unknown tool "ask_person"; this server has only "ask_user"/.test(e.message),
  );
  const call = m.client.callTool({ name: 'ask_user', arguments: NAME });
  const req = await request(u);
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'askbus' } });
  assert.equal((await deadline(call, 'the answer')).content[0].text, '{"answers":{"0":"askbus"}}');
});

test('--tool-name refuses a name no model API takes', async () => {
  const { spawnSync } = await import('node:child_process');
  const { CLI } = await import('./helpers.mjs');
  for (const bad of ['', 'ask user', '9lives', 'x'.repeat(65)]) {
    const r = spawnSync(CLI, ['mcp', '--socket', bus.socket, '--tool-name', bad], { encoding: 'utf8', input: '' });
    // 64: a wrong command line (EX_USAGE), as for every askbus command.
    assert.equal(r.status, 64, `${JSON.stringify(bad)}: ${r.stderr}`);
    assert.match(r.stderr, /a tool name is 1 to 64 characters/);
  }
});

test('the context names the client, and its first root as cwd and project; ASKBUS_* variables win', async () => {
  const u = await ui();
  const m = await mcp({
    clientInfo: { name: 'claude-code', version: '1.0.3' },
    roots: [
      { uri: 'https://example.com/not-a-directory' },
      { uri: 'file:///home/dev/src/my%20site', name: 'My site' },
    ],
  });
  const call = callAskUser(m, DB);
  const req = await request(u);
  assert.deepEqual(req.context, {
    agent: 'claude-code/1.0.3',
    project: 'My site',
    cwd: '/home/dev/src/my site',
  });
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'SQLite' } });
  await deadline(call, 'the call');
  const m2 = await mcp({ env: { ASKBUS_PROJECT: 'from-env', ASKBUS_TITLE: 'Pick a database' } });
  const call2 = callAskUser(m2, DB);
  const req2 = await request(u);
  assert.equal(req2.context.project, 'from-env');
  assert.equal(req2.context.title, 'Pick a database');
  assert.equal(req2.context.agent, 'mcp-test-client/1.2.3');
  u.send({ type: 'ask-user-response', correlationId: req2.correlationId, answers: { 0: 'SQLite' } });
  await deadline(call2, 'the second call');
});

test('an answer comes back as the reference llmContent; the UI is told which MCP client asks', async () => {
  const u = await ui();
  const m = await mcp();
  const call = callAskUser(m, DB);
  const req = await request(u);
  assert.equal(req.producer.client, 'mcp-test-client/1.2.3');
  // The request's context: the MCP client as the agent, and (no roots offered) the directory
  // the client started the server in.
  assert.equal(req.context.agent, 'mcp-test-client/1.2.3');
  assert.equal(req.context.cwd, process.cwd());
  assert.equal(req.context.project, path.basename(process.cwd()));
  assert.deepEqual(req.questions, referenceQuestions(DB));
  const answers = { 0: 'SQLite', 2: 'Yes' };
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers });
  const ack = await u.take((f) => f.type === 'ask-user-ack', 'the ack');
  assert.equal(ack.outcome, 'answered');
  const result = await deadline(call, 'the tool result');
  const expected = await referenceResult(DB, answers);
  assert.deepEqual(result.content, [{ type: 'text', text: expected.llmContent }]);
  assert.equal(result.content[0].text, '{"answers":{"0":"SQLite","2":"Yes"}}');
  assert.ok(!result.isError);
  assert.equal(result.structuredContent, undefined);
});

test('a dismissed dialog is a normal result with the reference llmContent', async () => {
  const u = await ui();
  const m = await mcp();
  const call = callAskUser(m, NAME);
  const req = await request(u);
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: {}, cancelled: true });
  const result = await deadline(call, 'the tool result');
  const expected = await referenceResult(NAME, null);
  assert.deepEqual(result.content, [{ type: 'text', text: expected.llmContent }]);
  assert.ok(!result.isError);
});

test('invalid arguments: isError with the reference validation message, and no UI sees them', async () => {
  const u = await ui();
  const m = await mcp();
  const q = (over) => ({ question: 'Pick?', header: 'Pick', type: 'choice', ...over });
  const two = [
    { label: 'A', description: 'a' },
    { label: 'B', description: 'b' },
  ];
  const cases = [
    undefined,
    {},
    { questions: null },
    { questions: 'what?' },
    { questions: [] },
    { questions: [q({ options: two }), q({ options: two }), q({ options: two }), q({ options: two }), q({ options: two })] },
    { questions: [q({})] },
    { questions: [q({ options: [...two, ...two, { label: 'E', description: 'e' }] })] },
    { questions: [q({ options: [{ label: '  ', description: 'x' }, two[1]] })] },
    { questions: [q({ type: 'slider', options: two })] },
    { questions: [{ question: 'No header?', type: 'text' }] },
    { questions: [q({ options: two, multiSelect: 'yes' })] },
  ];
  for (const args of cases) {
    const message = referenceError(args ?? {});
    assert.ok(message, `the reference rejects ${JSON.stringify(args)}`);
    const result = await deadline(callAskUser(m, args), `the result for ${JSON.stringify(args)}`);
    assert.equal(result.isError, true, JSON.stringify(args));
    assert.deepEqual(result.content, [{ type: 'text', text: message }], JSON.stringify(args));
  }
  // The first request any UI sees is this valid one: none of the invalid ones was broadcast.
  const call = callAskUser(m, NAME);
  const req = await request(u);
  assert.deepEqual(req.questions, referenceQuestions(NAME));
  assert.deepEqual(u.pending('ask-user-request'), []);
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'askbus' } });
  assert.equal((await deadline(call, 'the valid call')).content[0].text, '{"answers":{"0":"askbus"}}');
});

test('arguments other than questions are not forwarded to the daemon', async () => {
  const u = await ui();
  const m = await mcp();
  const call = callAskUser(m, { ...NAME, timeoutMs: 1, noUi: 'reject', correlationId: 'mine' });
  const req = await request(u);
  assert.notEqual(req.correlationId, 'mine');
  assert.ok(req.timeoutMs > 60_000, `the daemon's default timeout, not 1 ms (${req.timeoutMs})`);
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'x' } });
  assert.equal((await deadline(call, 'the result')).content[0].text, '{"answers":{"0":"x"}}');
});

test("the MCP client's cancellation withdraws the question from the UIs", async () => {
  const u = await ui();
  const m = await mcp();
  const abort = new AbortController();
  const call = callAskUser(m, NAME, { signal: abort.signal });
  const req = await request(u);
  abort.abort('the agent moved on');
  await assert.rejects(call);
  const gone = await u.take((f) => f.type === 'ask-user-withdrawn', 'ask-user-withdrawn');
  assert.deepEqual(gone, { type: 'ask-user-withdrawn', correlationId: req.correlationId, reason: 'withdrawn' });
  // The daemon no longer holds it: a late answer is refused.
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'late' } });
  const late = await u.take((f) => f.type === 'error', 'the late answer refused');
  assert.equal(late.code, 'not-pending');
  // And the server goes on serving.
  const again = callAskUser(m, NAME);
  const req2 = await request(u);
  u.send({ type: 'ask-user-response', correlationId: req2.correlationId, answers: { 0: 'on' } });
  assert.equal((await deadline(again, 'the next call')).content[0].text, '{"answers":{"0":"on"}}');
});

test('a client request timeout (the SDK cancels) withdraws the question too', async () => {
  const u = await ui();
  const m = await mcp();
  const call = callAskUser(m, NAME, { timeout: 300 });
  const req = await request(u);
  await assert.rejects(call, /timed out/i);
  const gone = await u.take((f) => f.type === 'ask-user-withdrawn', 'ask-user-withdrawn');
  assert.equal(gone.correlationId, req.correlationId);
  assert.equal(gone.reason, 'withdrawn');
});

test('--timeout-ms: an unanswered question ends with the daemon timeout llmContent', async () => {
  const u = await ui();
  const m = await mcp({ args: ['--timeout-ms', '300'] });
  const call = callAskUser(m, NAME);
  const req = await request(u);
  assert.ok(req.timeoutMs <= 300);
  const result = await deadline(call, 'the timeout result');
  const daemon = await rawAsk(bus.socket, { correlationId: 'raw-timeout', timeoutMs: 300, ...NAME });
  assert.equal(daemon.reason, 'timeout');
  assert.deepEqual(result.content, [{ type: 'text', text: daemon.result.llmContent }]);
  assert.match(result.content[0].text, /0\.3 seconds/);
  assert.ok(!result.isError);
  const gone = await u.take((f) => f.type === 'ask-user-withdrawn', 'withdrawn on timeout');
  assert.equal(gone.reason, 'timeout');
});

test('--no-ui reject: with no UI connected the call ends at once with the no-ui llmContent', async () => {
  const m = await mcp({ args: ['--no-ui', 'reject'] });
  const result = await deadline(callAskUser(m, NAME), 'the no-ui result', 3000);
  const daemon = await rawAsk(bus.socket, { correlationId: 'raw-no-ui', noUi: 'reject', ...NAME });
  assert.equal(daemon.reason, 'no-ui');
  assert.deepEqual(result.content, [{ type: 'text', text: daemon.result.llmContent }]);
  assert.ok(!result.isError);
});

test('--no-ui wait: the question waits for a UI that connects later', async () => {
  const m = await mcp({ args: ['--no-ui', 'wait'] });
  const call = callAskUser(m, NAME);
  await sleep(200);
  const u = await ui();
  const req = await request(u);
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'later' } });
  assert.equal((await deadline(call, 'the result')).content[0].text, '{"answers":{"0":"later"}}');
});

test('two concurrent calls from one client are answered independently', async () => {
  const u = await ui();
  const m = await mcp();
  const first = callAskUser(m, DB);
  const second = callAskUser(m, NAME);
  const reqs = [await request(u), await request(u)];
  assert.notEqual(reqs[0].correlationId, reqs[1].correlationId);
  const byHeader = (h) => reqs.find((r) => r.questions[0].header === h);
  // Answered in the opposite order to the asking.
  u.send({ type: 'ask-user-response', correlationId: byHeader('Name').correlationId, answers: { 0: 'second' } });
  assert.deepEqual((await deadline(second, 'the second call')).content, [
    { type: 'text', text: (await referenceResult(NAME, { 0: 'second' })).llmContent },
  ]);
  u.send({ type: 'ask-user-response', correlationId: byHeader('Database').correlationId, answers: { 0: 'PostgreSQL', 1: 'app' } });
  assert.deepEqual((await deadline(first, 'the first call')).content, [
    { type: 'text', text: (await referenceResult(DB, { 0: 'PostgreSQL', 1: 'app' })).llmContent },
  ]);
});

test('daemon unreachable: a tool error naming the socket, and the server keeps serving', async () => {
  const { socket, cleanup } = await tempSocketPath();
  opened.push(cleanup);
  const m = await mcp({ socket });
  const result = await deadline(callAskUser(m, NAME), 'the unreachable result');
  assert.equal(result.isError, true);
  assert.equal(result.content.length, 1);
  assert.ok(result.content[0].text.includes(socket), result.content[0].text);
  assert.match(result.content[0].text, /cannot connect to askbusd/);
  // Once a daemon listens there, the same server asks through it.
  const late = await startDaemon({ socket });
  opened.push(() => late.stop());
  const u = await subscribeUi(socket);
  opened.push(async () => u.close());
  const call = callAskUser(m, NAME);
  const req = await request(u);
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'up' } });
  assert.equal((await deadline(call, 'the call once up')).content[0].text, '{"answers":{"0":"up"}}');
});

test('the daemon shutting down mid-question ends the call with its shutdown llmContent', async () => {
  const u = await ui();
  const m = await mcp();
  const call = callAskUser(m, NAME);
  await request(u);
  const raw = rawAsk(bus.socket, { correlationId: 'raw-shutdown', ...NAME });
  await request(u);
  bus.child.kill('SIGTERM');
  const [result, daemon] = await deadline(Promise.all([call, raw]), 'both answers');
  assert.equal(daemon.reason, 'shutdown');
  assert.deepEqual(result.content, [{ type: 'text', text: daemon.result.llmContent }]);
  assert.ok(!result.isError);
});

test('the MCP client going away withdraws its pending question', async () => {
  const u = await ui();
  const m = await mcp();
  const call = callAskUser(m, NAME);
  call.catch(() => {});
  const req = await request(u);
  const closing = Date.now();
  await m.close();
  // Promptly, by the server itself on end of stdin: the SDK would kill it only after 2 s.
  assert.ok(Date.now() - closing < 1500, `close took ${Date.now() - closing} ms`);
  const gone = await u.take((f) => f.type === 'ask-user-withdrawn', 'withdrawn after the client left');
  assert.deepEqual(gone, { type: 'ask-user-withdrawn', correlationId: req.correlationId, reason: 'withdrawn' });
});

test('--structured-content adds the outcome as structuredContent; the text stays llmContent', async () => {
  const u = await ui();
  const m = await mcp({ args: ['--structured-content'] });
  const call = callAskUser(m, DB);
  const req = await request(u);
  const answers = { 0: 'PostgreSQL', 1: 'line one\nline two' };
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers });
  const result = await deadline(call, 'the result');
  const expected = await referenceResult(DB, answers);
  assert.deepEqual(result.content, [{ type: 'text', text: expected.llmContent }]);
  assert.deepEqual(result.structuredContent, {
    answers,
    cancelled: false,
    reason: 'answered',
    returnDisplay: expected.returnDisplay,
  });
});

test('progress notifications keep a long wait alive for clients that reset their timeout on progress', async () => {
  const u = await ui();
  const m = await mcp({ args: ['--progress-interval-ms', '100', '--timeout-ms', '90000'] });
  const progress = [];
  const call = callAskUser(m, NAME, {
    timeout: 500,
    resetTimeoutOnProgress: true,
    onprogress: (p) => progress.push(p),
  });
  const req = await request(u);
  // Three times the client's own timeout: only the progress notifications keep it waiting.
  await sleep(1500);
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'slow' } });
  assert.equal((await deadline(call, 'the slow answer')).content[0].text, '{"answers":{"0":"slow"}}');
  assert.ok(progress.length >= 5, `progress notifications: ${progress.length}`);
  assert.equal(progress[0].message, 'Waiting for the user to answer');
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress);
  // The total is the question's timeout in seconds, the unit of `progress` (seconds waited).
  for (const p of progress) assert.equal(p.total, 90);
});

test("progress totals are the daemon's default timeout, clamped to its maximum", async () => {
  await bus.stop();
  bus = await startDaemon({ args: ['--default-timeout-ms', '70000', '--max-timeout-ms', '80000'] });
  for (const [args, total] of [
    [[], 70],
    [['--timeout-ms', '900000'], 80],
  ]) {
    const u = await ui();
    const m = await mcp({ args: ['--progress-interval-ms', '50', ...args] });
    let progressed;
    const progress = new Promise((resolve) => {
      progressed = resolve;
    });
    const call = callAskUser(m, NAME, { onprogress: (p) => progressed(p) });
    const req = await request(u);
    const first = await deadline(progress, 'a progress notification');
    u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'x' } });
    await deadline(call, 'the answer');
    assert.equal(first.total, total);
  }
});
