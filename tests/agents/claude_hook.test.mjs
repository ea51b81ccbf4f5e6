// The real Claude Code (npm @anthropic-ai/claude-code), headless (-p), against a local server
// that speaks the Messages API's streaming format, with `askbus hook claude` as its PreToolUse
// hook: the model calls Bash to create a file, and a person decides through askbus.

import assert from 'node:assert/strict';
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';

import {
  askbusCommand,
  CLI,
  claudeSandbox,
  fakeMessagesApi,
  killAgents,
  rm,
  run,
  runClaude,
  startDaemon,
  subscribeUi,
  tempDir,
  toolResults,
} from './helpers.mjs';

const COMMAND = 'touch created.txt';

const QUESTION = {
  question: 'Which date library should we use?',
  header: 'Library',
  multiSelect: false,
  options: [
    { label: 'date-fns', description: 'Small, functional' },
    { label: 'moment', description: 'Big, mutable' },
  ],
};

let root;
let bus;
let api;
let closers;
beforeEach(async () => {
  root = await tempDir('askbus-agents-');
  bus = await startDaemon(root);
  api = await fakeMessagesApi({
    toolUse: { name: 'Bash', input: { command: COMMAND, description: 'Create a file' } },
  });
  closers = [];
});
afterEach(async () => {
  killAgents();
  for (const close of closers.reverse()) await close();
  await api.close();
  await bus.stop();
  await rm(root, { recursive: true, force: true });
});

const exists = (p) =>
  access(p).then(
    () => true,
    () => false,
  );

async function sandbox({ socket = bus.socket, event = 'PreToolUse', matcher = 'Bash', hookArgs = [] } = {}) {
  return claudeSandbox(root, {
    hooks: {
      [event]: [
        {
          matcher,
          hooks: [
            {
              type: 'command',
              command: askbusCommand(['--socket', socket, 'hook', 'claude', ...hookArgs]),
              timeout: 60,
            },
          ],
        },
      ],
    },
  });
}

/** The Bash call's tool_result, as the model got it in the request after the call. */
function toolResult() {
  const after = api.requests.filter((r) => toolResults(r).length > 0);
  assert.equal(after.length, 1, 'one request carries the tool result');
  const [result] = toolResults(after[0]);
  return result;
}

const approval = (ui) => ui.take((f) => f.type === 'tool-confirmation-request', 'the approval from the hook');

test('Allow from a UI: the Bash command runs', async () => {
  const ui = await subscribeUi(bus.socket);
  closers.push(() => ui.close());
  const box = await sandbox();
  const agent = runClaude(box, api, { prompt: 'Create the file.' });
  const req = await approval(ui);
  assert.deepEqual(req.toolCall, { name: 'Bash', args: { command: COMMAND, description: 'Create a file' } });
  assert.equal(req.details.type, 'exec');
  assert.equal(req.details.command, COMMAND);
  assert.equal(req.context.agent, 'claude-code');
  assert.equal(req.context.cwd, box.work);
  // Its permission_mode, and headless: `claude -p` tells its hooks CLAUDE_CODE_ENTRYPOINT=sdk-cli.
  assert.equal(req.context.approvalMode, 'default');
  assert.equal(req.context.interactive, false);
  ui.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome: 'proceed_once' });
  const done = await agent;
  assert.equal(done.code, 0, done.stderr);
  assert.ok(await exists(path.join(box.work, 'created.txt')), 'the approved command ran');
  assert.equal(toolResult().is_error, false);
});

test('Deny with a reason: nothing runs, and the model is told the reason', async () => {
  const ui = await subscribeUi(bus.socket);
  closers.push(() => ui.close());
  const box = await sandbox();
  const agent = runClaude(box, api, { prompt: 'Create the file.' });
  const req = await approval(ui);
  ui.send({
    type: 'tool-confirmation-response',
    correlationId: req.correlationId,
    confirmed: false,
    outcome: 'cancel',
    message: 'Not in this directory.',
  });
  const done = await agent;
  assert.equal(done.code, 0, done.stderr);
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))), 'the denied command did not run');
  const result = toolResult();
  assert.equal(result.is_error, true);
  assert.match(JSON.stringify(result.content), /The user denied this tool call: Not in this directory\./);
});

test('askbusd down: denied with a message naming the socket', async () => {
  const box = await sandbox({ socket: path.join(root, 'nobody-here.sock') });
  const done = await runClaude(box, api, { prompt: 'Create the file.' });
  assert.equal(done.code, 0, done.stderr);
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))));
  const result = toolResult();
  assert.equal(result.is_error, true);
  assert.match(JSON.stringify(result.content), /askbus cannot reach askbusd at .*nobody-here\.sock/);
});

test('AskUserQuestion is asked as an ask_user question; the answer reaches the model', async () => {
  await api.close();
  api = await fakeMessagesApi({ toolUse: { name: 'AskUserQuestion', input: { questions: [QUESTION] } } });
  const ui = await subscribeUi(bus.socket);
  closers.push(() => ui.close());
  const box = await sandbox({ matcher: 'AskUserQuestion' });
  // Claude Code offers AskUserQuestion to SDK sessions (stream-json with a permission prompt
  // tool), not to plain `claude -p`.
  const message = { type: 'user', message: { role: 'user', content: 'Pick a date library.' } };
  const agent = runClaude(box, api, {
    input: `${JSON.stringify(message)}\n`,
    args: ['--input-format', 'stream-json', '--output-format', 'stream-json', '--verbose', '--permission-prompt-tool', 'stdio'],
  });
  const req = await ui.take((f) => f.type === 'ask-user-request', 'the question from Claude Code');
  assert.deepEqual(req.questions.map((q) => [q.question, q.header, q.type]), [[QUESTION.question, 'Library', 'choice']]);
  assert.deepEqual(
    req.questions[0].options.map((o) => o.label),
    ['date-fns', 'moment'],
  );
  ui.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'date-fns' } });
  const done = await agent;
  assert.equal(done.code, 0, done.stderr);
  const result = toolResult();
  assert.notEqual(result.is_error, true, JSON.stringify(result));
  // Claude Code's own wording of an answered AskUserQuestion.
  assert.match(result.content, /Your questions have been answered: "Which date library should we use\?"="date-fns"/);
});

test('no UI open: handed back to Claude Code at once (headless -p then refuses it), never waits', async () => {
  const box = await sandbox();
  const started = Date.now();
  const done = await runClaude(box, api, { prompt: 'Create the file.' });
  assert.equal(done.code, 0, done.stderr);
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))));
  assert.equal(toolResult().is_error, true);
  // Before, the hook waited up to 590 s with nothing on screen (the hook timeout here is 60 s).
  assert.ok(Date.now() - started < 45000, 'the hook did not wait for a UI');
});

test('askbus hook claude --install writes a settings entry the real CLI runs', async () => {
  const ui = await subscribeUi(bus.socket);
  closers.push(() => ui.close());
  const box = await claudeSandbox(root, { model: 'claude-sonnet-4-5' });
  const settings = path.join(box.home, '.claude', 'settings.json');
  const install = await run(CLI, ['--socket', bus.socket, 'hook', 'claude', '--install'], {
    cwd: box.work,
    env: { PATH: process.env.PATH, HOME: box.home },
  });
  assert.equal(install.code, 0, install.stderr);
  const written = JSON.parse(await readFile(settings, 'utf8'));
  assert.equal(written.model, 'claude-sonnet-4-5', 'the other settings are kept');
  const [entry] = written.hooks.PreToolUse;
  assert.equal(entry.hooks[0].statusMessage, 'waiting in askbus: open `askbus ui` or your phone');
  const agent = runClaude(box, api, { prompt: 'Create the file.' });
  const req = await approval(ui);
  ui.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome: 'proceed_once' });
  const done = await agent;
  assert.equal(done.code, 0, done.stderr);
  assert.ok(await exists(path.join(box.work, 'created.txt')), 'the approved command ran');
  const uninstall = await run(CLI, ['hook', 'claude', '--uninstall'], {
    cwd: box.work,
    env: { PATH: process.env.PATH, HOME: box.home },
  });
  assert.equal(uninstall.code, 0, uninstall.stderr);
  assert.deepEqual(JSON.parse(await readFile(settings, 'utf8')), { model: 'claude-sonnet-4-5' });
});
