// Differential check of `askbus policy test` against the reference itself, on generated cases
// that are not among the 610 shipped ones. Manual (it needs the npm package):
//   npm install @google/gemini-cli-core@0.61.0   (in this directory or a parent)
//   node crosscheck.mjs /path/to/askbus [N] [SEED]
// Prints each disagreement and a count; exit 1 if any.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const core = path.dirname(require.resolve('@google/gemini-cli-core/package.json'));
const { loadPoliciesFromToml } = await import(path.join(core, 'dist/src/policy/toml-loader.js'));
const { PolicyEngine } = await import(path.join(core, 'dist/src/policy/policy-engine.js'));

const askbus = process.argv[2];
const N = Number(process.argv[3] ?? 300);
let seed = Number(process.argv[4] ?? 7);
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = (a) => a[Math.floor(rnd() * a.length)];

const words = ['ls', 'ls -la', 'git status', 'git push', 'git -c x=y log', 'cat README.md', 'cat /etc/passwd',
  'rm -rf build', 'rm -f x', 'echo hi', 'npm test', 'cargo build', 'find . -name x', 'find . -delete',
  'grep -r foo src', 'sed -n 1,5p x', 'sudo rm -rf /', 'ln -s a b', 'cd ..', 'cd src', 'head -n 3 x',
  'echo "a b" \'c\'', 'echo $(whoami)', 'echo `id`', 'cat <(ls)', 'bash -c "ls; rm x"', 'sh -c \'git status\'',
  'FOO=1 git log', 'wc -l *.rs', 'python3 x.py', 'echo ${X@P}', 'env git diff', 'cat ~/x', 'base64 -o out x'];
const seps = [' && ', ' || ', '; ', ' | ', ' & ', '\n', ' > out; ', ' 2>&1 | '];
const tails = ['', '', '', ' > out.txt', ' >> log', ' < in', ' <<< "x"', ' 2>/dev/null'];
function command() {
  let c = pick(words);
  const parts = Math.floor(rnd() * 3);
  for (let i = 0; i < parts; i++) c += pick(seps) + pick(words);
  return c + pick(tails);
}
const ruleFiles = [
  '', 
  '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "git"\ndecision = "allow"\npriority = 100\n',
  '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = ["ls", "cat"]\ndecision = "allow"\npriority = 100\nallowRedirection = true\n',
  '[[rule]]\ntoolName = "run_shell_command"\ncommandRegex = "rm .*"\ndecision = "deny"\npriority = 200\ndenyMessage = "no rm"\n',
  '[[rule]]\ntoolName = "run_shell_command"\ndecision = "allow"\npriority = 50\n',
  '[[rule]]\ntoolName = "*"\ndecision = "ask_user"\npriority = 10\nmodes = ["autoEdit"]\n',
  '[[rule]]\ntoolName = "run_shell_command"\nargsPattern = "\\"command\\":\\"(?:echo|cat) "\ndecision = "allow"\npriority = 100\n',
];
const modes = ['default', 'default', 'autoEdit', 'yolo', 'plan'];
const tiers = ['default', 'extension', 'workspace', 'user', 'admin'];
const tierNum = { default: 1, extension: 2, workspace: 3, user: 4, admin: 5 };

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'askbus-xcheck-'));
const ws = path.join(root, 'workspace');
const home = path.join(root, 'home');
fs.mkdirSync(ws); fs.mkdirSync(home);
process.chdir(ws);
process.env.HOME = home;
let bad = 0;
for (let i = 0; i < N; i++) {
  const dir = path.join(root, `c${i}`);
  fs.mkdirSync(dir);
  const text = pick(ruleFiles) + pick(ruleFiles);
  fs.writeFileSync(path.join(dir, 'p.toml'), text);
  const tier = pick(tiers);
  const mode = pick(modes);
  const interactive = rnd() < 0.85;
  const untrusted = rnd() < 0.15;
  const args = { command: command() };
  if (rnd() < 0.15) args.dir_path = pick(['src', '..', '/tmp', 'a/../b']);
  const defaults = path.join(core, 'dist/src/policy/policies');
  const loaded = await loadPoliciesFromToml([dir, defaults], (p) => (p === dir ? tierNum[tier] : 1));
  const engine = new PolicyEngine({ rules: loaded.rules, checkers: loaded.checkers, nonInteractive: !interactive,
    approvalMode: mode, isTrustedFolder: () => !untrusted });
  const ref = await engine.check({ name: 'run_shell_command', args }, undefined, undefined, undefined);
  const argv = ['policy', 'test', '--policy-dir', `${tier}=${dir}`, '--mode', mode, '--json'];
  if (!interactive) argv.push('--non-interactive');
  if (untrusted) argv.push('--untrusted');
  argv.push('run_shell_command', JSON.stringify(args));
  const got = JSON.parse(execFileSync(askbus, argv, { env: { ...process.env, HOME: home } }).toString());
  const key = (r) => (r ? `${r.toolName}|${r.decision}|${r.priority}|${r.source}` : 'null');
  if (got.decision !== ref.decision || key(got.rule) !== key(ref.rule)) {
    bad++;
    console.log(JSON.stringify({ i, tier, mode, interactive, untrusted, args, text, ref: { d: ref.decision, r: key(ref.rule) }, got: { d: got.decision, r: key(got.rule) } }));
  }
}
console.log(`${N - bad} of ${N} generated cases agree with the reference`);
process.exit(bad ? 1 : 0);
