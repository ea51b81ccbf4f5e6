// The real Gemini CLI 0.61.0, headless (-p --approval-mode yolo) and offline (--fake-responses),
// with `askbus hook gemini` as its BeforeTool hook: the model runs a shell command that creates
// a file, and a person decides through askbus. Only an explicit Allow runs it.

import assert from 'node:assert/strict';
import { access, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';

import {
  askbusCommand,
  CLI,
  functionResponses,
  geminiSandbox,
  modelRequests,
  modelTurn,
  killAgents,
  rm,
  run,
  runGemini,
  startDaemon,
  subscribeUi,
  tempDir,
} from './helpers.mjs';

const COMMAND = 'touch created.txt';

let root;
let bus;
let closers;
beforeEach(async () => {
  root = await tempDir('askbus-agents-');
  bus = await startDaemon(root);
  closers = [];
});
afterEach(async () => {
  killAgents();
  for (const close of closers.reverse()) await close();
  await bus.stop();
  await rm(root, { recursive: true, force: true });
});

const exists = (p) =>
  access(p).then(
    () => true,
    () => false,
  );

/** A sandbox whose model runs COMMAND once, with askbus as the BeforeTool hook. */
async function sandbox({ socket = bus.socket, hookArgs = [], timeoutMs = 60000 } = {}) {
  return geminiSandbox(root, {
    settings: {
      hooks: {
        BeforeTool: [
          {
            matcher: 'run_shell_command',
            hooks: [
              {
                type: 'command',
                command: askbusCommand(['--socket', socket, 'hook', 'gemini', ...hookArgs]),
                timeout: timeoutMs,
              },
            ],
          },
        ],
      },
    },
    turns: [
      modelTurn([{ functionCall: { name: 'run_shell_command', args: { command: COMMAND, description: 'Create a file' } } }]),
      modelTurn([{ text: 'Finished.' }]),
    ],
  });
}

const runYolo = (box) => runGemini(box, { prompt: 'Create the file.', args: ['--approval-mode', 'yolo'] });

/** What the model was told about its shell call, in the request after it. */
async function toolOutcome(box) {
  const requests = await modelRequests(box.telemetry);
  assert.equal(requests.length, 2, 'one request with the call, one with its result');
  const [response] = functionResponses(requests[1]);
  assert.equal(response.name, 'run_shell_command');
  return response.response;
}

async function approval(ui) {
  return ui.take((f) => f.type === 'tool-confirmation-request', 'the approval from the hook');
}

test('Allow from a UI: the command runs', async () => {
  const ui = await subscribeUi(bus.socket);
  closers.push(() => ui.close());
  const box = await sandbox();
  const agent = runYolo(box);
  const req = await approval(ui);
  assert.deepEqual(req.toolCall, {
    name: 'run_shell_command',
    args: { command: COMMAND, description: 'Create a file' },
  });
  assert.deepEqual(req.details, {
    type: 'exec',
    title: 'Confirm Shell Command',
    command: COMMAND,
    rootCommand: 'touch',
    rootCommands: ['touch'],
  });
  assert.deepEqual(req.outcomes, ['proceed_once', 'cancel']);
  assert.equal(req.context.agent, 'gemini-cli');
  assert.equal(req.context.cwd, box.work);
  assert.equal(req.context.title, `Run \`${COMMAND}\``);
  assert.ok(req.context.session, 'the Gemini session id');
  // Headless (-p), as Gemini CLI's own isHeadlessMode says; its approval mode is not in its
  // hook input, and yolo here must not let askbus allow everything: it is left unsaid.
  assert.equal(req.context.interactive, false);
  assert.equal(req.context.approvalMode, undefined);
  ui.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome: 'proceed_once' });
  const done = await agent;
  assert.equal(done.code, 0, done.stderr);
  assert.ok(await exists(path.join(box.work, 'created.txt')), 'the approved command ran');
  assert.ok(!(await toolOutcome(box)).error);
});

test('Deny with a reason: nothing runs, and the model is told the reason', async () => {
  const ui = await subscribeUi(bus.socket);
  closers.push(() => ui.close());
  const box = await sandbox();
  const agent = runYolo(box);
  const req = await approval(ui);
  ui.send({
    type: 'tool-confirmation-response',
    correlationId: req.correlationId,
    confirmed: false,
    outcome: 'cancel',
    message: 'Use the existing file instead.',
  });
  const done = await agent;
  assert.equal(done.code, 0, done.stderr);
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))), 'the denied command did not run');
  assert.equal(
    (await toolOutcome(box)).error,
    'Tool execution blocked: The user denied this tool call: Use the existing file instead.',
  );
});

test('nobody answers before the timeout: denied, never run', async () => {
  const ui = await subscribeUi(bus.socket);
  closers.push(() => ui.close());
  const box = await sandbox({ hookArgs: ['--timeout-ms', '1000'] });
  const agent = runYolo(box);
  await approval(ui);
  const done = await agent;
  assert.equal(done.code, 0, done.stderr);
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))));
  assert.equal(
    (await toolOutcome(box)).error,
    'Tool execution blocked: Nobody approved the tool call within 1 second, so it was not approved.',
  );
});

test('askbusd down: denied, and the message says so', async () => {
  const box = await sandbox({ socket: path.join(root, 'nobody-here.sock') });
  const done = await runYolo(box);
  assert.equal(done.code, 0, done.stderr);
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))));
  const { error } = await toolOutcome(box);
  assert.match(
    error,
    // No UI would see it, and headless Gemini CLI has no prompt to hand it back to: denied.
    /^Tool execution blocked: askbus cannot reach askbusd at .*nobody-here\.sock: .*, so the tool call was not approved\. \(The agent runs without a terminal prompt to hand it back to\.\)$/,
  );
});

test('no UI open: denied at once (headless, no prompt to hand it back to), never waits', async () => {
  const box = await sandbox({ timeoutMs: 60000 });
  const started = Date.now();
  const done = await runYolo(box);
  assert.equal(done.code, 0, done.stderr);
  assert.ok(!(await exists(path.join(box.work, 'created.txt'))));
  assert.match((await toolOutcome(box)).error, /^Tool execution blocked: No user interface is connected/);
  // Before, the hook waited for its whole timeout (55 s) with nothing on screen.
  assert.ok(Date.now() - started < 45000, 'the hook did not wait for a UI');
});

test('askbus hook gemini --install writes a settings entry the real CLI runs', async () => {
  const ui = await subscribeUi(bus.socket);
  closers.push(() => ui.close());
  const box = await sandbox();
  const settings = path.join(box.home, '.gemini', 'settings.json');
  const before = JSON.parse(await readFile(settings, 'utf8'));
  delete before.hooks;
  await writeFile(settings, JSON.stringify(before, null, 2));
  const install = await run(CLI, ['--socket', bus.socket, 'hook', 'gemini', '--install', '--settings', settings], {
    cwd: box.work,
    env: { PATH: process.env.PATH, HOME: box.home },
  });
  assert.equal(install.code, 0, install.stderr);
  assert.match(install.stdout, /installed in/);
  const agent = runYolo(box);
  const req = await approval(ui);
  ui.send({ type: 'tool-confirmation-response', correlationId: req.correlationId, confirmed: true, outcome: 'proceed_once' });
  const done = await agent;
  assert.equal(done.code, 0, done.stderr);
  assert.ok(await exists(path.join(box.work, 'created.txt')));
});
