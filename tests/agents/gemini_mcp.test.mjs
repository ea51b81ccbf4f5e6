// The real Gemini CLI 0.61.0, headless (-p) and offline (--fake-responses), with `askbus mcp`
// as an MCP server: the model calls the askbus tool, a UI answers, and the model's next request
// carries the answer as the tool's functionResponse (read from Gemini CLI's own telemetry).

import assert from 'node:assert/strict';
import { afterEach, beforeEach, test } from 'node:test';

import {
  functionResponses,
  geminiSandbox,
  modelRequests,
  modelTurn,
  killAgents,
  rm,
  runGemini,
  startDaemon,
  subscribeUi,
  tempDir,
} from './helpers.mjs';

const QUESTIONS = [
  {
    question: 'Which database should the service use?',
    header: 'Database',
    type: 'choice',
    options: [
      { label: 'PostgreSQL', description: 'Relational, runs as a server' },
      { label: 'SQLite', description: 'Embedded, one file' },
    ],
  },
];

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

/** The settings that make `askbus mcp` a trusted server of Gemini CLI. */
const mcpSettings = (extraArgs = []) => ({
  mcpServers: {
    askbus: {
      command: process.env.ASKBUS_CLI || new URL('../../target/debug/askbus', import.meta.url).pathname,
      args: ['mcp', '--socket', bus.socket, ...extraArgs],
      timeout: 60000,
      trust: true,
    },
  },
});

test('headless Gemini CLI calls the askbus tool; the answer from a UI reaches the model', async () => {
  const ui = await subscribeUi(bus.socket);
  closers.push(() => ui.close());
  const box = await geminiSandbox(root, {
    settings: mcpSettings(),
    turns: [
      modelTurn([{ functionCall: { name: 'mcp_askbus_ask_person', args: { questions: QUESTIONS } } }]),
      modelTurn([{ text: 'SQLite it is.' }]),
    ],
  });
  // Default approval mode: `trust: true` alone lets the tool run without Gemini's own prompt.
  const agent = runGemini(box, { prompt: 'Set up the service database.' });
  const req = await ui.take((f) => f.type === 'ask-user-request', 'the question from Gemini CLI');
  assert.equal(req.questions[0].question, QUESTIONS[0].question);
  assert.match(req.producer.client, /gemini/i);
  ui.send({ type: 'ask-user-response', correlationId: req.correlationId, answers: { 0: 'SQLite' } });
  const done = await agent;
  assert.equal(done.code, 0, done.stderr);
  assert.match(done.stdout, /SQLite it is\./);
  const requests = await modelRequests(box.telemetry);
  assert.equal(requests.length, 2);
  const [response] = functionResponses(requests[1]);
  assert.equal(response.name, 'mcp_askbus_ask_person');
  // Gemini CLI hands the model the MCP text content: the reference's llmContent.
  assert.match(JSON.stringify(response.response), /\{\\"answers\\":\{\\"0\\":\\"SQLite\\"\}\}/);
});

test('why the tool is not called ask_user: headless Gemini CLI drops it and tells the model it does not exist', async () => {
  const box = await geminiSandbox(root, {
    settings: mcpSettings(['--tool-name', 'ask_user']),
    turns: [
      modelTurn([{ functionCall: { name: 'mcp_askbus_ask_user', args: { questions: QUESTIONS } } }]),
      modelTurn([{ text: 'I could not ask.' }]),
    ],
  });
  const done = await runGemini(box, { prompt: 'Set up the service database.' });
  assert.equal(done.code, 0, done.stderr);
  const requests = await modelRequests(box.telemetry);
  const [response] = functionResponses(requests.at(-1));
  assert.equal(response.name, 'mcp_askbus_ask_user');
  assert.match(response.response.error, /Tool "mcp_askbus_ask_user" not found/);
});
