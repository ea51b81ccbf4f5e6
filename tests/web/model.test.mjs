// The page's pure parts, checked without a browser: the filter (cli/src/web/assets/
// filter.js: the daemon's rules, the address that carries it) and approvals (approvals.js:
// the buttons offered, the frames sent, root commands, diff lines, which URLs may be links).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import * as F from '../../cli/src/web/assets/filter.js';
import * as P from '../../cli/src/web/assets/approvals.js';

test('filter: project exact, agent by name/version or name alone, every key given must match', () => {
  const c = { project: 'askbus', agent: 'gemini-cli/0.61.0' };
  assert.equal(F.matches({}, undefined), true);
  assert.equal(F.matches({ project: 'askbus' }, c), true);
  assert.equal(F.matches({ project: 'askbu' }, c), false);
  assert.equal(F.matches({ agent: 'gemini-cli' }, c), true);
  assert.equal(F.matches({ agent: 'gemini-cli/0.61.0' }, c), true);
  assert.equal(F.matches({ agent: 'gemini-cli/0.62.0' }, c), false);
  assert.equal(F.matches({ agent: 'gemini' }, c), false);
  assert.equal(F.matches({ project: 'askbus', agent: 'codex' }, c), false);
  assert.equal(F.matches({ project: 'askbus' }, {}), false, 'no context: no match');
});

test('filter: values checked as the daemon checks them', () => {
  assert.equal(F.problem('project', 'askbus'), null);
  assert.equal(F.problem('project', ''), 'the project must not be empty');
  assert.equal(F.problem('project', 'é'.repeat(128)), null, 'characters, not bytes');
  assert.equal(F.problem('project', 'é'.repeat(129)), 'the project must be at most 128 characters');
  assert.equal(F.problem('agent', 'a'.repeat(256)), null);
  assert.equal(F.problem('agent', 'a\u0085b'), 'the agent must be one line without control characters');
  assert.equal(F.problem('agent', 'a\u007f'), 'the agent must be one line without control characters');
});

test('filter: from and to the address, other parameters kept', () => {
  assert.deepEqual(F.fromSearch('?project=a%20b&agent=codex&x=1'), { filter: { project: 'a b', agent: 'codex' }, problems: [] });
  assert.deepEqual(F.fromSearch('?project=&agent=%01'), {
    filter: {}, problems: ['the agent must be one line without control characters'],
  });
  assert.equal(F.toSearch('?x=1&project=old', { project: 'new one' }), '?x=1&project=new+one');
  assert.equal(F.toSearch('?project=old&agent=a', {}), '');
  assert.equal(F.toSearch('?token=secret&project=old', { project: 'p' }), '?project=p', 'never the token');
  assert.equal(F.describe({ project: 'p', agent: 'a' }), 'project p, agent a');
  assert.equal(F.describe({}), 'all projects and agents');
});

test('approvals: only offered outcomes, approving ones first, Deny last, never the editor', () => {
  assert.deepEqual(P.buttons(['proceed_once', 'cancel']), ['proceed_once', 'cancel']);
  assert.deepEqual(P.buttons(undefined), ['proceed_once', 'cancel']);
  assert.deepEqual(P.buttons(['cancel', 'proceed_always', 'modify_with_editor', 'proceed_once']),
    ['proceed_once', 'proceed_always', 'cancel']);
  assert.deepEqual(P.buttons(['proceed_always_tool', 'proceed_always_server']),
    ['proceed_once', 'proceed_always_server', 'proceed_always_tool', 'cancel']);
  assert.equal(P.label('proceed_always'), 'Allow always');
  assert.equal(P.label('cancel'), 'Deny');
  // askbus web's own "always" (askbusAlways) where the agent offers none; junk is ignored.
  const always = [{ outcome: 'proceed_always', sends: 'proceed_once', rule: 'allow x in project p (f)', everyProject: 'allow x in every project (f)' },
    { outcome: '<img>' }, null];
  assert.deepEqual(P.buttons(['proceed_once', 'cancel'], always), ['proceed_once', 'proceed_always', 'cancel']);
  assert.equal(P.alwaysRule(always, 'proceed_always', false), 'allow x in project p (f)');
  assert.equal(P.alwaysRule(always, 'proceed_always', true), 'allow x in every project (f)');
  assert.equal(P.alwaysRule(always, 'proceed_once', true), undefined);
  assert.equal(P.alwaysRule([{ outcome: 'proceed_always_tool', rule: null }], 'proceed_always_tool', true), null);
});

test('approvals: the frames a decision sends', () => {
  assert.deepEqual(P.decisionFrame('a', 'proceed_once', 'ignored for an approval'),
    { type: 'tool-confirmation-response', correlationId: 'a', confirmed: true, outcome: 'proceed_once' });
  assert.deepEqual(P.decisionFrame('a', 'cancel', '  not the build dir \n'),
    { type: 'tool-confirmation-response', correlationId: 'a', confirmed: false, outcome: 'cancel', message: 'not the build dir' });
  assert.deepEqual(P.decisionFrame('a', 'cancel', '   '),
    { type: 'tool-confirmation-response', correlationId: 'a', confirmed: false, outcome: 'cancel' });
  assert.equal([...P.decisionFrame('a', 'cancel', '😀'.repeat(5000)).message].length, P.MAX_MESSAGE);
  // Widening an "always" rule rides with its decision only.
  assert.equal(P.decisionFrame('a', 'proceed_always', '', true).anyProject, true);
  assert.equal(P.decisionFrame('a', 'proceed_once', '', true).anyProject, undefined);
  assert.equal(P.decisionFrame('a', 'cancel', '', true).anyProject, undefined);
  assert.deepEqual(P.dismissFrame('a'), { type: 'tool-confirmation-response', correlationId: 'a', dismissed: true });
});

test('approvals: root commands marked where they run, not in arguments or quotes', () => {
  const roots = (cmd, names) => P.commandSpans(cmd, names).filter((s) => s.root).map((s) => s.text);
  assert.deepEqual(roots('rm -rf build && cargo build', ['rm', 'cargo']), ['rm', 'cargo']);
  assert.deepEqual(roots('echo rm; echo "x; rm -rf /"', ['rm', 'echo']), ['echo', 'echo']);
  assert.deepEqual(roots('FOO=1 /usr/bin/git push | tee log', ['git', 'tee']), ['/usr/bin/git', 'tee']);
  assert.deepEqual(roots('x=$(curl -s u) || (cd a && make)', ['curl', 'cd', 'make']), ['curl', 'cd', 'make']);
  // Nothing is lost or reordered.
  const cmd = "git commit -m 'a && b' && echo \"done\" > out.txt < in 'unterminated";
  assert.equal(P.commandSpans(cmd, ['git', 'echo']).map((s) => s.text).join(''), cmd);
});

test('approvals: diff lines classified', () => {
  const lines = P.diffLines('Index: a.rs\n===\n--- a.rs\n+++ a.rs\n@@ -1,2 +1,2 @@\n ctx\n-old\n+new\n\\ No newline at end of file\n');
  assert.deepEqual(lines.map((l) => l.kind), ['meta', 'meta', 'meta', 'meta', 'hunk', 'ctx', 'del', 'add', 'meta']);
  assert.deepEqual(P.diffLines(''), []);
});

test('approvals: only http(s) URLs become links', () => {
  assert.equal(P.safeUrl('https://example.com/a?b=1'), 'https://example.com/a?b=1');
  assert.equal(P.safeUrl('http://example.com'), 'http://example.com/');
  for (const bad of ['javascript:alert(1)', ' JavaScript:alert(1)', 'data:text/html,<b>x', 'file:///etc/passwd', 'vbscript:x', 'not a url', 42]) {
    assert.equal(P.safeUrl(bad), null, String(bad));
  }
});

test('approvals: the one line naming an approval', () => {
  assert.equal(P.summary({ toolCall: { name: 'run_shell_command' }, details: { type: 'exec', title: 'Confirm Shell Command' } }), 'Confirm Shell Command');
  assert.equal(P.summary({ toolCall: { name: 'write_file' } }), 'Allow write_file?');
  assert.equal(P.summary({}), 'Allow a tool?');
});
