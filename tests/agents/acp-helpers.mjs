// Harness for `askbus acp`: an editor built on the official ACP TypeScript SDK
// (@agentclientprotocol/sdk 2.4.0's `client()` / `connectWith` / `onRequest`) that runs an ACP
// agent (through the proxy or directly), records every byte it sends and receives, and runs
// one prompt turn. Agents: the real Gemini CLI 0.61.0 in `--acp` mode, offline on canned model
// turns, and a small elicitation agent built on the SDK's agent side (acp-elicit-agent.mjs).

import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import * as acp from '@agentclientprotocol/sdk';

import { CLI, deadline, GEMINI } from './helpers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ELICIT_AGENT = path.join(HERE, 'acp-elicit-agent.mjs');

/** The command line of Gemini CLI in ACP mode on the sandbox's canned turns. */
export function geminiAcp(box) {
  return {
    command: process.execPath,
    args: [GEMINI, '--acp', '-m', 'gemini-2.5-flash', '--fake-responses', box.fake],
    cwd: box.work,
    env: {
      PATH: process.env.PATH,
      HOME: box.home,
      TMPDIR: os.tmpdir(),
      GEMINI_API_KEY: 'offline-test-key',
      GEMINI_CLI_TRUST_WORKSPACE: 'true',
      // Else it relaunches itself as a child that outlives a kill of the parent.
      GEMINI_CLI_NO_RELAUNCH: 'true',
      NO_COLOR: '1',
      TERM: 'dumb',
    },
  };
}

/** `agent` run through `askbus acp PROXYARGS -- AGENT`, or directly when `proxy` is null. */
export function launch(agent, proxy) {
  const [command, args] = proxy
    ? [CLI, ['acp', ...proxy, '--', agent.command, ...agent.args]]
    : [agent.command, agent.args];
  const child = spawn(command, args, { cwd: agent.cwd, env: agent.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, exited, stderr: () => stderr };
}

/**
 * An editor session over `proc`: initialize, session/new in `cwd`, one prompt. `onPermission`
 * and `onElicitation` are the editor's dialogs (`({params, signal}) => result`). Resolves with
 * what the editor saw: the bytes it received and sent, the permission requests, the updates,
 * the `$/cancel_request`s, and the prompt's stop reason (or `error`).
 */
export async function editorSession(proc, { cwd, prompt = 'Create the file.', onPermission, onElicitation, capabilities = {} }) {
  const received = [];
  const sent = [];
  const seen = { permissions: [], elicitations: [], updates: [], cancelled: [] };
  // The SDK cancels its reader when the connection ends, while the agent may still be writing
  // (its last updates after a finished turn). A chunk after that is recorded, never enqueued:
  // enqueue on a closed stream throws outside any test, and node:test pins the throw on
  // whichever test runs next.
  let open = true;
  const input = new ReadableStream({
    start(c) {
      proc.child.stdout.on('data', (d) => {
        received.push(Buffer.from(d));
        if (open) c.enqueue(new Uint8Array(d));
      });
      proc.child.stdout.on('end', () => {
        if (!open) return;
        open = false;
        c.close();
      });
    },
    cancel() {
      open = false;
    },
  });
  const output = new WritableStream({
    write(chunk) {
      sent.push(Buffer.from(chunk));
      return new Promise((resolve, reject) => proc.child.stdin.write(chunk, (e) => (e ? reject(e) : resolve())));
    },
  });
  proc.child.stdin.on('error', () => {});
  const dialog = (list, handler, fallback) => async (ctx) => {
    list.push(ctx.params);
    ctx.signal.addEventListener('abort', () => seen.cancelled.push(ctx.requestId));
    return handler ? handler(ctx) : fallback(ctx);
  };
  const untilCancelled = (result) => (ctx) =>
    new Promise((resolve) => {
      if (ctx.signal.aborted) resolve(result);
      ctx.signal.addEventListener('abort', () => resolve(result));
    });
  const app = acp
    .client({ name: 'askbus-acp-test-editor' })
    .onRequest(
      acp.methods.client.session.requestPermission,
      dialog(seen.permissions, onPermission, untilCancelled({ outcome: { outcome: 'cancelled' } })),
    )
    .onRequest(
      acp.methods.client.elicitation.create,
      dialog(seen.elicitations, onElicitation, untilCancelled({ action: 'cancel' })),
    )
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      seen.updates.push(params.update);
    });
  const stream = acp.ndJsonStream(output, input);
  try {
    await app.connectWith(stream, async (ctx) => {
      seen.init = await ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: capabilities,
      });
      const s = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
      seen.sessionId = s.sessionId;
      const r = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: s.sessionId,
        prompt: [{ type: 'text', text: prompt }],
      });
      seen.stopReason = r.stopReason;
    });
  } catch (e) {
    seen.error = e;
  }
  seen.received = () => Buffer.concat(received);
  seen.sent = () => Buffer.concat(sent);
  return seen;
}

/** Ends the session: closes the agent's stdin and waits for the exit. */
export async function finish(proc) {
  proc.child.stdin.end();
  return deadline(proc.exited, 'the agent (or proxy) to exit');
}

/** The JSON-RPC messages in a byte stream, one per line. */
export function messages(bytes) {
  return bytes
    .toString('utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/** The pids of `pid`'s children. */
export async function childrenOf(pid) {
  const { readFile, readdir } = await import('node:fs/promises');
  const out = [];
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const text = await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8').catch(() => '');
    out.push(...text.split(/\s+/).filter(Boolean).map(Number));
  }
  return out;
}

/**
 * A local stand-in for the OpenAI Responses API (POST /v1/responses, server-sent events), for
 * codex-acp: the first turn calls `shell_command` with `command` (asking to run outside the
 * sandbox, which needs the person's approval), every later turn says `finalText`. Resolves
 * with its `url` (the provider's base_url), the `requests` bodies it got, and `close()`.
 */
export async function fakeResponsesApi({ command, finalText = 'Finished.' }) {
  const http = await import('node:http');
  const requests = [];
  const sse = (events) => events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('');
  const usage = { input_tokens: 1, output_tokens: 1, total_tokens: 2 };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url.endsWith('/responses')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{}');
        return;
      }
      requests.push(JSON.parse(body));
      const id = `resp_${requests.length}`;
      const item =
        requests.length === 1
          ? {
              type: 'function_call',
              name: 'shell_command',
              call_id: 'call_1',
              arguments: JSON.stringify({ command, sandbox_permissions: 'require_escalated', justification: 'Create the file' }),
            }
          : { type: 'message', role: 'assistant', id: `msg_${requests.length}`, content: [{ type: 'output_text', text: finalText }] };
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(
        sse([
          { type: 'response.created', response: { id } },
          { type: 'response.output_item.done', item },
          { type: 'response.completed', response: { id, usage } },
        ]),
      );
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        server.closeAllConnections();
      }),
  };
}
