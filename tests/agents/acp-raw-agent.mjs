// A raw ACP agent for the attack tests: it answers `initialize` and `session/new` itself, and
// on `session/prompt` writes the lines in $ACP_SCRIPT (a JSON array of strings) exactly as
// given (ids, duplicate keys and all), which the SDK's agent side would never write. Every line
// it receives goes to its stderr as `AGENT GOT <line>`, so a test reads what reached the agent
// (the proxy passes the agent's stderr through). It ends at its stdin's end.

import readline from 'node:readline';

const script = JSON.parse(process.env.ACP_SCRIPT || '[]');
const write = (line) => process.stdout.write(`${line}\n`);

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  process.stderr.write(`AGENT GOT ${line}\n`);
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
    for (const l of script) write(l);
  }
}).on('close', () => process.exit(0));
