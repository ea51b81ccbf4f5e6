// `askbus acp` between a real editor and real agents: the official ACP TypeScript SDK as the
// editor, the real Gemini CLI 0.61.0 in `--acp` mode (offline, --fake-responses) and an SDK
// agent that sends elicitations, a real askbusd and a raw-frame askbus UI.

import assert from 'node:assert/strict';
import { access } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';

import {
  childrenOf,
  editorSession,
  ELICIT_AGENT,
  fakeResponsesApi,
  finish,
  geminiAcp,
  launch,
  messages,
} from './acp-helpers.mjs';
import {
  claudeSandbox,
  CLI,
  deadline,
  fakeMessagesApi,
  functionResponses,
  geminiSandbox,
  modelRequests,
  modelTurn,
  packageDir,
  rm,
  run,
  startDaemon,
  subscribeUi,
  telemetryRecords,
  tempDir,
} from './helpers.mjs';

const COMMAND = 'touch created.txt';

let root;
let bus;
let procs;
let closers;
beforeEach(async () => {
  root = await tempDir('askbus-acp-');
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

const exists = (p) =>
  access(p).then(
    () => true,
    () => false,
  );

/** A Gemini sandbox whose model runs COMMAND through its shell tool, then says it finished. */
function shellBox() {
  return geminiSandbox(root, {
    turns: [
      modelTurn([{ functionCall: { name: 'run_shell_command', args: { command: COMMAND, description: 'Create a file' } } }]),
      modelTurn([{ text: 'Finished.' }]),
    ],
  });
}

function proxied(agent, args = []) {
  const p = launch(agent, ['--socket', bus.socket, ...args]);
  procs.push(p);
  return p;
}

async function ui() {
  const u = await subscribeUi(bus.socket);
  closers.push(() => u.close());
  return u;
}

const approvalOf = (u) => u.take((f) => f.type === 'tool-confirmation-request', 'the approval from askbus acp');

/** What the model was told about its shell call. */
async function toolOutcome(box) {
  const requests = await modelRequests(box.telemetry);
  assert.equal(requests.length, 2, 'one request with the call, one with its result');
  return functionResponses(requests[1])[0].response;
}

test('allowed from an askbus UI: the agent runs the command and continues; the editor is told to cancel its dialog', async () => {
  const box = await shellBox();
  const u = await ui();
  const proc = proxied(geminiAcp(box));
  const session = editorSession(proc, { cwd: box.work });
  const req = await approvalOf(u);
  assert.deepEqual(req.details, {
    type: 'exec',
    title: 'Confirm Shell Command',
    command: COMMAND,
    rootCommand: 'touch',
    rootCommands: ['touch'],
  });
  assert.equal(req.toolCall.name, 'execute');
  assert.match(req.toolCall.id, /^run_shell_command/);
  assert.deepEqual(req.outcomes, ['proceed_once', 'proceed_always', 'cancel'], "Gemini's three options");
  assert.equal(req.context.agent, 'gemini-cli/0.61.0');
  assert.equal(req.context.project, 'work');
  assert.equal(req.context.cwd, box.work);
  assert.equal(req.context.title, COMMAND);
  u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome: 'proceed_once' });
  const seen = await deadline(session, 'the prompt turn', 90_000);
  assert.equal(seen.error, undefined, String(seen.error));
  assert.equal(seen.stopReason, 'end_turn');
  assert.equal(req.context.session, seen.sessionId);
  assert.ok(await exists(path.join(box.work, 'created.txt')), 'the approved command ran');
  assert.equal(seen.permissions.length, 1, 'the editor was asked too (--gate both)');
  assert.equal(seen.cancelled.length, 1, 'and its dialog was cancelled ($/cancel_request) once askbus answered');
  assert.ok(seen.updates.some((up) => up.sessionUpdate === 'tool_call_update' && up.status === 'completed'));
  const done = await finish(proc);
  assert.equal(done.code, 0, proc.stderr());
  assert.ok(!(await toolOutcome(box)).error);
});

test('rejected from an askbus UI: the command does not run and the agent reports the rejection', async () => {
  const box = await shellBox();
  const u = await ui();
  const proc = proxied(geminiAcp(box));
  const session = editorSession(proc, { cwd: box.work });
  const req = await approvalOf(u);
  u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: false, outcome: 'cancel' });
  const seen = await deadline(session, 'the prompt turn', 90_000);
  assert.equal(seen.stopReason, 'end_turn', String(seen.error));
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))), 'the rejected command did not run');
  await finish(proc);
  assert.match((await toolOutcome(box)).error, /canceled by the user/);
});

test('answered in the editor first: the askbus request is withdrawn, recorded as decided in the editor (decidedBy human via acp)', async () => {
  // This test's own daemon, with the store and telemetry on, to read how the request ended.
  await bus.stop();
  const store = path.join(root, 'state', 'askbus.db');
  const telemetry = path.join(root, 'telemetry.jsonl');
  bus = await startDaemon(root, ['--store', store, '--telemetry', telemetry]);
  const box = await shellBox();
  const u = await ui();
  const proc = proxied(geminiAcp(box));
  let release;
  const asked = new Promise((r) => (release = r));
  const session = editorSession(proc, {
    cwd: box.work,
    onPermission: async () => {
      await asked;
      return { outcome: { outcome: 'selected', optionId: 'proceed_once' } };
    },
  });
  const req = await approvalOf(u);
  release();
  const gone = await u.take(
    (f) => f.type === 'tool-confirmation-withdrawn' && f.correlationId === req.correlationId,
    'the withdrawal of the askbus request',
  );
  assert.equal(gone.reason, 'withdrawn');
  const seen = await deadline(session, 'the prompt turn', 90_000);
  assert.equal(seen.stopReason, 'end_turn', String(seen.error));
  assert.equal(seen.cancelled.length, 0, "the editor's answer was the one taken");
  assert.ok(await exists(path.join(box.work, 'created.txt')));
  await finish(proc);
  const history = await run(CLI, ['history', req.correlationId, '--json', '--store', store], {});
  assert.equal(history.code, 0, history.stderr);
  const record = JSON.parse(history.stdout);
  assert.equal(record.reason, 'withdrawn');
  assert.equal(record.decidedBy.kind, 'human', 'a person decided, in the editor');
  assert.equal(record.decidedBy.via, 'acp');
  assert.equal(record.decidedBy.uid, process.getuid());
  assert.match(record.decidedBy.client, /^askbus-acp\//);
  const line = await deadline(
    (async () => {
      for (;;) {
        const found = (await telemetryRecords(telemetry).catch(() => [])).find((r) => r.correlationId === req.correlationId);
        if (found) return found;
        await new Promise((r) => setTimeout(r, 50));
      }
    })(),
    'the telemetry line',
  );
  assert.deepEqual(line.decidedBy, { kind: 'human', via: 'acp' });
});

/**
 * askbusd restarts (SIGKILL or SIGTERM, the store on) while Gemini's permission request is
 * pending in askbus: the proxy re-attaches it to the new daemon, which shows it again. Then
 * `answer` is the UI's decision, or null for nobody (it ends at --timeout-ms: denied).
 */
async function restartMidRequest(signal, answer) {
  await bus.stop();
  const store = path.join(root, 'state', 'askbus.db');
  const daemonArgs = ['--store', store];
  bus = await startDaemon(root, daemonArgs);
  const box = await shellBox();
  let u = await ui();
  const proc = proxied(geminiAcp(box), answer ? [] : ['--timeout-ms', '10000']);
  const session = editorSession(proc, { cwd: box.work });
  const req = await approvalOf(u);
  await bus.stop(signal);
  bus = await startDaemon(root, daemonArgs);
  u = await ui();
  // The same request, shown once by the new daemon (restored from the store, re-attached by the proxy).
  const again = await approvalOf(u);
  assert.equal(again.correlationId, req.correlationId);
  if (answer) u.send({ type: 'tool-confirmation-response', correlationId: again.correlationId, ...answer });
  const seen = await deadline(session, 'the prompt turn', 90_000);
  assert.equal(seen.stopReason, 'end_turn', String(seen.error));
  assert.equal(seen.permissions.length, 1, 'the editor was asked once');
  assert.equal(seen.cancelled.length, 1, "and its dialog cancelled once, askbus's answer being the one");
  await finish(proc);
  const answers = messages(seen.sent()).filter((m) => m.id !== undefined && m.method === undefined);
  assert.equal(answers.length, 1, 'the editor sent one answer to the permission request (its cancellation)');
  return { box, proc, unasked: () => u.frames.filter((f) => f.type === 'tool-confirmation-request').length };
}

test('askbusd killed (SIGKILL) mid-request, store on: the proxy re-attaches, the UI answers once, the agent runs the command', async () => {
  const { box, unasked } = await restartMidRequest('SIGKILL', { confirmed: true, outcome: 'proceed_once' });
  assert.ok(await exists(path.join(box.work, 'created.txt')), 'approved after the restart');
  assert.ok(!(await toolOutcome(box)).error);
  assert.equal(unasked(), 0, 'no second copy of the request');
});

test('askbusd restarted (SIGTERM) mid-request and nobody answers: the request ends at --timeout-ms, denied, never approved', async () => {
  const { box } = await restartMidRequest('SIGTERM', null);
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))), 'not approved by default');
  assert.match((await toolOutcome(box)).error, /canceled by the user/);
});

const CLAUDE_CODE_ACP = path.join(packageDir('@zed-industries/claude-code-acp'), 'dist/index.js');

test('a second agent: claude-code-acp (the Claude Agent SDK) on a local fake Messages API, its Bash permission answered in askbus', async () => {
  const api = await fakeMessagesApi({
    toolUse: { name: 'Bash', input: { command: COMMAND, description: 'Create a file' } },
    finalText: 'Finished.',
  });
  closers.push(() => api.close());
  const box = await claudeSandbox(root, {});
  const u = await ui();
  const agent = {
    command: process.execPath,
    args: [CLAUDE_CODE_ACP],
    cwd: box.work,
    env: {
      PATH: process.env.PATH,
      HOME: box.home,
      TMPDIR: os.tmpdir(),
      ANTHROPIC_BASE_URL: api.url,
      ANTHROPIC_API_KEY: 'sk-ant-offline-test',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      NO_COLOR: '1',
      TERM: 'dumb',
    },
  };
  const proc = proxied(agent);
  const session = editorSession(proc, { cwd: box.work });
  const req = await approvalOf(u);
  assert.ok(req.outcomes.includes('proceed_once'), JSON.stringify(req.outcomes));
  assert.equal(req.details.type, 'exec', JSON.stringify(req.details));
  assert.equal(req.details.command, COMMAND, "from rawInput.command: claude-code-acp sends no kind with the request");
  assert.equal(req.context.project, 'work');
  u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome: 'proceed_once' });
  const seen = await deadline(session, 'the prompt turn', 90_000);
  assert.equal(seen.error, undefined, String(seen.error) + proc.stderr());
  assert.equal(seen.stopReason, 'end_turn');
  assert.equal(seen.permissions.length, 1, 'the editor was asked too (--gate both)');
  assert.equal(seen.cancelled.length, 1, 'and its dialog cancelled once askbus answered');
  assert.ok(await exists(path.join(box.work, 'created.txt')), 'the approved command ran');
  await finish(proc);
});

// The platform's binary itself (the package's bin/codex-acp.js runs it with spawnSync, so a
// signal to that wrapper would leave the binary running).
const CODEX_ACP = path.join(packageDir(`@zed-industries/codex-acp-${process.platform}-${process.arch}`), 'bin/codex-acp');

test('a second agent: codex-acp (Codex) on a local fake Responses API, its shell command answered in askbus', async () => {
  const api = await fakeResponsesApi({ command: COMMAND });
  closers.push(() => api.close());
  const { mkdir } = await import('node:fs/promises');
  const work = path.join(root, 'work');
  const home = path.join(root, 'home');
  await mkdir(work, { recursive: true });
  await mkdir(home, { recursive: true });
  const u = await ui();
  const provider = `model_providers.fake={name="fake",base_url="${api.url}",wire_api="responses",env_key="FAKE_API_KEY"}`;
  const agent = {
    command: CODEX_ACP,
    args: ['-c', 'model_provider="fake"', '-c', provider, '-c', 'model="gpt-5"'],
    cwd: work,
    env: { PATH: process.env.PATH, HOME: home, CODEX_HOME: home, FAKE_API_KEY: 'offline-test-key', NO_COLOR: '1', TERM: 'dumb' },
  };
  const proc = proxied(agent);
  const session = editorSession(proc, { cwd: work });
  const req = await approvalOf(u);
  assert.ok(req.outcomes.includes('proceed_once'), JSON.stringify(req.outcomes));
  assert.equal(req.details.type, 'exec', JSON.stringify(req.details));
  assert.equal(req.details.command, COMMAND);
  assert.equal(req.context.agent, 'codex-acp/0.16.0');
  assert.equal(req.context.project, 'work');
  u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome: 'proceed_once' });
  const seen = await deadline(session, 'the prompt turn', 90_000);
  assert.equal(seen.error, undefined, String(seen.error) + proc.stderr());
  assert.equal(seen.stopReason, 'end_turn');
  assert.equal(seen.permissions.length, 1, 'the editor was asked too (--gate both)');
  assert.equal(seen.cancelled.length, 1, 'and its dialog cancelled once askbus answered');
  assert.ok(await exists(path.join(work, 'created.txt')), 'the approved command ran');
  assert.equal(api.requests.length, 2, 'one turn with the call, one with its result');
  const output = api.requests[1].input.find((i) => i.type === 'function_call_output' && i.call_id === 'call_1');
  assert.ok(output, 'the second turn carries the command\'s result');
  await finish(proc);
});

test('--gate askbus: the editor never sees the permission request', async () => {
  const box = await shellBox();
  const u = await ui();
  const proc = proxied(geminiAcp(box), ['--gate', 'askbus']);
  const session = editorSession(proc, { cwd: box.work });
  const req = await approvalOf(u);
  u.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome: 'proceed_always' });
  const seen = await deadline(session, 'the prompt turn', 90_000);
  assert.equal(seen.stopReason, 'end_turn', String(seen.error));
  assert.equal(seen.permissions.length, 0, 'no permission request reached the editor');
  assert.ok(!seen.received().includes('session/request_permission'), 'not a byte of it');
  assert.ok(await exists(path.join(box.work, 'created.txt')));
  await finish(proc);
});

test('no daemon, --fallback editor: the editor decides as if askbus were not there', async () => {
  const box = await shellBox();
  const agent = geminiAcp(box);
  const proc = launch(agent, ['--socket', path.join(root, 'nobody.sock'), '--fallback', 'editor']);
  procs.push(proc);
  const seen = await deadline(
    editorSession(proc, {
      cwd: box.work,
      onPermission: () => ({ outcome: { outcome: 'selected', optionId: 'proceed_once' } }),
    }),
    'the prompt turn',
    90_000,
  );
  assert.equal(seen.stopReason, 'end_turn', String(seen.error));
  assert.equal(seen.permissions.length, 1);
  assert.ok(await exists(path.join(box.work, 'created.txt')));
  await finish(proc);
});

test('no daemon, --fallback deny: denied, and the editor is not asked', async () => {
  const box = await shellBox();
  const proc = launch(geminiAcp(box), ['--socket', path.join(root, 'nobody.sock'), '--fallback', 'deny']);
  procs.push(proc);
  const seen = await deadline(
    editorSession(proc, {
      cwd: box.work,
      onPermission: () => ({ outcome: { outcome: 'selected', optionId: 'proceed_once' } }),
    }),
    'the prompt turn',
    90_000,
  );
  assert.equal(seen.stopReason, 'end_turn', String(seen.error));
  assert.equal(seen.permissions.length, 0);
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))));
  await finish(proc);
  assert.match((await toolOutcome(box)).error, /canceled by the user/);
});

test('the agent killed mid-request: the askbus request is withdrawn and the proxy dies as the agent did', async () => {
  const box = await shellBox();
  const u = await ui();
  const proc = proxied(geminiAcp(box));
  const session = editorSession(proc, { cwd: box.work });
  const req = await approvalOf(u);
  const [agentPid] = await childrenOf(proc.child.pid);
  assert.ok(agentPid, 'the agent runs as the proxy child');
  process.kill(agentPid, 'SIGKILL');
  await u.take(
    (f) => f.type === 'tool-confirmation-withdrawn' && f.correlationId === req.correlationId,
    'the withdrawal of the askbus request',
  );
  const exit = await deadline(proc.exited, 'the proxy to exit');
  assert.equal(exit.signal, 'SIGKILL', 'the agent was killed by SIGKILL, so is the proxy');
  const seen = await deadline(session, 'the editor session to end');
  assert.ok(seen.error, 'the prompt ended with the connection');
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))));
});

test('SIGTERM to the proxy reaches the agent; its status comes back', async () => {
  const box = await shellBox();
  const u = await ui();
  const proc = proxied(geminiAcp(box));
  editorSession(proc, { cwd: box.work });
  await approvalOf(u);
  proc.child.kill('SIGTERM');
  const exit = await deadline(proc.exited, 'the proxy to exit');
  assert.ok(exit.signal === 'SIGTERM' || exit.code !== null, JSON.stringify(exit));
  const [agentLeft] = await childrenOf(proc.child.pid).catch(() => []);
  assert.equal(agentLeft, undefined);
});

/** Lines with their volatile parts (session ids, tool call ids' timestamps) made equal. */
function normalized(bytes, sessionId) {
  return bytes
    .toString('utf8')
    .replaceAll(sessionId, 'SESSION')
    .replace(/run_shell_command_\d+_\d+/g, 'run_shell_command_T')
    .split('\n');
}

test('transparent: byte for byte what the agent wrote and the editor sent, and the same session as without the proxy', async () => {
  // The agent's own stdio, teed to files, against what the editor received and sent.
  const box = await shellBox();
  const u = await ui();
  const agent = geminiAcp(box);
  const inLog = path.join(root, 'agent-in.log');
  const outLog = path.join(root, 'agent-out.log');
  const q = (s) => `'${s.replaceAll("'", `'\\''`)}'`;
  const teed = {
    ...agent,
    command: '/bin/sh',
    args: ['-c', `tee ${q(inLog)} | ${[agent.command, ...agent.args].map(q).join(' ')} | tee ${q(outLog)}`],
  };
  const proc = proxied(teed);
  const answer = { outcome: { outcome: 'selected', optionId: 'proceed_once' } };
  const session = editorSession(proc, {
    cwd: box.work,
    onPermission: async () => {
      await approvalOf(u);
      return answer;
    },
  });
  const seen = await deadline(session, 'the prompt turn', 90_000);
  assert.equal(seen.stopReason, 'end_turn', String(seen.error));
  await finish(proc);
  const { readFile } = await import('node:fs/promises');
  assert.ok(seen.received().equals(await readFile(outLog)), 'the editor received exactly the bytes the agent wrote');
  assert.ok(seen.sent().equals(await readFile(inLog)), 'the agent received exactly the bytes the editor sent');

  // The same session without the proxy: the same lines, in the same order.
  await rm(path.join(box.work, 'created.txt'));
  const box2 = await shellBox();
  const direct = launch(geminiAcp(box2), null);
  procs.push(direct);
  const alone = await deadline(editorSession(direct, { cwd: box2.work, onPermission: () => answer }), 'the direct turn', 90_000);
  assert.equal(alone.stopReason, 'end_turn', String(alone.error));
  await finish(direct);
  // Gemini CLI sends its available_commands_update from a timer after session/new, so where
  // it falls among the turn's lines varies from run to run (with or without the proxy): the
  // same such lines in both runs, and every other line in the same order.
  const timed = (l) => l.includes('"sessionUpdate":"available_commands_update"');
  const received = normalized(seen.received(), seen.sessionId);
  const receivedAlone = normalized(alone.received(), alone.sessionId).map((l) => l.replaceAll(box2.work, box.work));
  assert.deepEqual(received.filter(timed), receivedAlone.filter(timed));
  assert.deepEqual(
    received.filter((l) => !timed(l)),
    receivedAlone.filter((l) => !timed(l)),
  );
  assert.deepEqual(
    normalized(seen.sent(), seen.sessionId),
    normalized(alone.sent(), alone.sessionId).map((l) => l.replaceAll(box2.work, box.work)),
  );
});

const elicitAgent = (elicitation) => ({
  command: process.execPath,
  args: [ELICIT_AGENT],
  cwd: root,
  env: { PATH: process.env.PATH, ACP_ELICITATION: JSON.stringify(elicitation) },
});

const elicitedBy = (seen) => {
  const text = seen.updates.find((up) => up.sessionUpdate === 'agent_message_chunk')?.content?.text ?? '';
  return JSON.parse(text.replace(/^ELICITED /, ''));
};

test('an elicitation round trip: the form is asked in askbus, the answers come back typed', async () => {
  const u = await ui();
  const proc = proxied(
    elicitAgent({
      mode: 'form',
      message: 'How should I refactor?',
      requestedSchema: {
        type: 'object',
        properties: {
          strategy: { type: 'string', title: 'Strategy', enum: ['conservative', 'balanced', 'aggressive'] },
          tests: { type: 'boolean', title: 'Run tests' },
          passes: { type: 'integer', title: 'Passes' },
        },
        required: ['strategy'],
      },
    }),
  );
  const session = editorSession(proc, { cwd: root, prompt: 'Refactor.', capabilities: { elicitation: { form: {} } } });
  const req = await u.take((f) => f.type === 'ask-user-request', 'the question set from askbus acp');
  assert.deepEqual(
    req.questions.map((q) => [q.type, q.header]),
    [
      ['choice', 'Strategy'],
      ['yesno', 'Run tests'],
      ['text', 'Passes'],
    ],
  );
  assert.equal(req.context.agent, 'elicit-agent/1.0.0');
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'balanced', 1: 'Yes', 2: '3' } });
  const seen = await deadline(session, 'the prompt turn');
  assert.equal(seen.stopReason, 'end_turn', String(seen.error));
  assert.deepEqual(elicitedBy(seen), { action: 'accept', content: { strategy: 'balanced', tests: true, passes: 3 } });
  assert.equal(seen.elicitations.length, 1, 'the editor was asked too');
  assert.equal(seen.cancelled.length, 1, 'and its copy cancelled');
  await finish(proc);
});

test('an elicitation dismissed in askbus is declined; a URL elicitation is done or cancel', async () => {
  const u = await ui();
  const proc = proxied(
    elicitAgent({ mode: 'form', message: 'Name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } }),
  );
  const session = editorSession(proc, { cwd: root, prompt: 'Go.', capabilities: { elicitation: { form: {} } } });
  const req = await u.take((f) => f.type === 'ask-user-request', 'the form');
  u.send({ type: 'ask-user-response', correlationId: req.correlationId, cancelled: true });
  const seen = await deadline(session, 'the prompt turn');
  assert.deepEqual(elicitedBy(seen), { action: 'decline' });
  await finish(proc);

  const url = 'https://example.com/connect?elicitationId=e1';
  const proc2 = proxied(elicitAgent({ mode: 'url', elicitationId: 'e1', url, message: 'Authorize.' }), ['--gate', 'askbus']);
  const session2 = editorSession(proc2, { cwd: root, prompt: 'Go.', capabilities: { elicitation: { url: {} } } });
  const req2 = await u.take((f) => f.type === 'ask-user-request', 'the URL question');
  assert.ok(req2.questions[0].question.includes(url));
  assert.deepEqual(req2.questions[0].options.map((o) => o.label), ['Done', 'Cancel']);
  u.send({ type: 'ask-user-response', correlationId: req2.correlationId, answers: { 0: 'Done' } });
  const seen2 = await deadline(session2, 'the prompt turn');
  assert.deepEqual(elicitedBy(seen2), { action: 'accept' });
  assert.equal(seen2.elicitations.length, 0);
  await finish(proc2);
});
