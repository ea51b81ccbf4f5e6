// The reference's PolicyEngine.check on the cases of policy/benches/check.rs (same rules,
// same calls); prints the median in µs. The criterion bench runs it (NODE_PATH=tests/node_modules);
// alone: `NODE_PATH=tests/node_modules node policy/tests/node/bench_check.mjs`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const core = path.dirname(require.resolve('@google/gemini-cli-core/package.json'));
const { loadPoliciesFromToml } = await import(path.join(core, 'dist/src/policy/toml-loader.js'));
const { PolicyEngine } = await import(path.join(core, 'dist/src/policy/policy-engine.js'));
let s = '';
for (let i = 0; i < 1000; i++) {
  const p = i % 900;
  if (i % 4 === 0) s += `[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "tool${i} run"\ndecision = "allow"\npriority = ${p}\n`;
  else if (i % 4 === 1) s += `[[rule]]\ntoolName = "mcp_srv${i}_op"\ndecision = "deny"\npriority = ${p}\n`;
  else if (i % 4 === 2) s += `[[rule]]\ntoolName = "write_file"\nargsPattern = "\\"file_path\\":\\"gen${i}/"\ndecision = "allow"\npriority = ${p}\n`;
  else s += `[[rule]]\ntoolName = "custom_${i}"\ndecision = "ask_user"\npriority = ${p}\n`;
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'askbus-bench-'));
fs.writeFileSync(path.join(dir, 'user.toml'), s);
const ws = path.join(os.tmpdir(), 'askbus-bench-ws');
fs.mkdirSync(ws, { recursive: true });
process.chdir(ws);
const defaults = path.join(core, 'dist/src/policy/policies');
const loaded = await loadPoliciesFromToml([dir, defaults], (p) => (p === dir ? 4 : 1));
const engine = new PolicyEngine({ rules: loaded.rules, checkers: loaded.checkers });
const cases = [
  ['tool call (read_file)', { name: 'read_file', args: { file_path: 'src/lib.rs' } }],
  ['5-part shell command', { name: 'run_shell_command', args: { command: 'git status && ls -la src | grep rs; cargo build --release && echo done' } }],
];
const log = console.log;
console.debug = () => {}; console.log = () => {};
for (const [label, call] of cases) {
  const out = await engine.check(call);
  // Warmed up first, as criterion warms the Rust side: V8 has compiled the hot path.
  for (let i = 0; i < 3000; i++) await engine.check(call);
  const times = [];
  for (let i = 0; i < 2000; i++) {
    const t = process.hrtime.bigint();
    await engine.check(call);
    times.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  times.sort((a, b) => a - b);
  log(`${label}: ${out.decision} -> median ${times[times.length >> 1].toFixed(2)} µs`);
}
