// A raw ACP agent for the attack tests: it answers `initialize` and `session/new` itself, and
// on `session/prompt` writes the lines in $ACP_SCRIPT (a JSON array of strings) exactly as
// given (ids, duplicate keys and all), which the SDK's agent side would never write; an entry
// `{"head", "fill", "bytes", "tail"}` is one giant line (`head`, `bytes` of `fill`, `tail`).
// Every line it receives goes to its stderr as `AGENT GOT <line>` (one over 1 MiB as `AGENT
// GOT LONG <bytes> <its last 40 bytes>`), so a test reads what reached the agent (the proxy
// passes the agent's stderr through). It ends at its stdin's end.

import readline from 'node:readline';

const script = JSON.parse(process.env.ACP_SCRIPT || '[]');
const write = (line) => process.stdout.write(`${line}\n`);

function writeEntry(e) {
  if (typeof e === 'string') return write(e);
  process.stdout.write(e.head);
  const piece = e.fill.repeat(1 << 20);
  for (let left = e.bytes; left > 0; left -= piece.length) process.stdout.write(left >= piece.length ? piece : piece.slice(0, left));
  if (e.tail !== undefined) process.stdout.write(e.tail);
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const len = Buffer.byteLength(line);
  process.stderr.write(len > 1 << 20 ? `AGENT GOT LONG ${len} ${line.slice(-40)}\n` : `AGENT GOT ${line}\n`);
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  if (m.method === 'initialize') {
    write(
      JSON.stringify({
        jsonrpc: '2.0',
        id: m.id,
        result: { protocolVersion: 1, agentCapabilities: {}, agentInfo: { name: 'raw-agent', version: '1.0.0' } },
      }),
    );
  } else if (m.method === 'session/new') {
    write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { sessionId: 'raw-session' } }));
  } else if (m.method === 'session/prompt') {
    for (const e of script) writeEntry(e);
  }
}).on('close', () => process.exit(0));
