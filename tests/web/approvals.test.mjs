// Approvals in askbus web, in Chromium on a desktop and a phone screen: each detail kind
// drawn (exec with its root commands and directory, edit as a coloured diff, mcp with server,
// tool and arguments, info with safe links), the decisions a producer reads
// (`tool-confirmation-response` from the real askbusd: allow once, allow always, deny with
// the typed reason, dismiss), only the outcomes the request offers, first answer wins across
// tabs, and bus text shown as text. Real askbusd, real `askbus web`, a raw-frame producer.

import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import {
  Daemon, Producer, VIEWPORTS, Web, WsClient, launchBrowser, newId, openPage, removeDir, tempDir,
} from './harness.mjs';

const shell = (command, rootCommands) => ({
  toolCall: { name: 'run_shell_command', args: { command } },
  details: {
    type: 'exec', title: 'Confirm Shell Command', command, rootCommand: rootCommands.join(', '), rootCommands,
  },
});

const DIFF = [
  'Index: main.rs', '===================================================================',
  '--- main.rs\tCurrent', '+++ main.rs\tProposed', '@@ -1,3 +1,3 @@', ' fn main() {',
  '-    println!("hello");', '+    println!("hello, world");', ' }', '',
].join('\n');

/** The dialog of request `id`, once it is on the page (not the last one, still closing). */
function dialogOf(page, id) {
  return page.locator(`#dialog form[data-id="${id}"]`).waitFor();
}

for (const [screen, options] of VIEWPORTS) {
  describe(`approvals in askbus web (${screen})`, () => {
    let dir;
    let daemon;
    let web;
    let browser;
    let context;
    let page;
    let producer;

    before(async () => {
      dir = tempDir();
      daemon = await new Daemon(dir).start();
      web = await new Web(daemon.socket).start();
      browser = await launchBrowser();
      context = await browser.newContext(options);
      page = await openPage(context, web);
      producer = await Producer.connect(daemon.socket, 'gemini-bridge/1');
    });

    // A failed test may leave its approval pending: a fresh producer takes it away.
    afterEach(async () => {
      if (await page.locator('#empty').isVisible() && producer.frames.length === 0) return;
      producer.close();
      producer = await Producer.connect(daemon.socket, 'gemini-bridge/1');
      await page.locator('#empty').waitFor();
    });

    after(async () => {
      producer?.close();
      await browser?.close();
      await web?.stop();
      await daemon?.stop();
      if (dir) removeDir(dir);
    });

    test('exec: the command with its root commands marked, the directory; Allow once', async () => {
      const id = newId();
      const { toolCall, details } = shell('rm -rf build && cargo build --release', ['rm', 'cargo']);
      producer.approve(id, toolCall, details, {
        context: { agent: 'gemini-cli/0.61.0', project: 'askbus', cwd: '/home/dev/src/askbus', title: 'Rebuild' },
      });
      await page.getByRole('heading', { name: 'Confirm Shell Command' }).waitFor();
      assert.equal(await page.locator('pre.cmd').innerText(), 'rm -rf build && cargo build --release');
      assert.deepEqual(await page.locator('pre.cmd mark.root').allInnerTexts(), ['rm', 'cargo']);
      assert.equal(await page.locator('.approval-body .chip').first().innerText(), 'Run a command');
      assert.match(await page.locator('.approval-body .facts').innerText(), /In\s+\/home\/dev\/src\/askbus/);
      await page.locator('.from .chip.project', { hasText: 'askbus' }).waitFor();
      // The agent offers Allow once and Deny only (no outcomes listed); askbus's own "Allow
      // always" (its rule for the command's roots, sending Allow once) beside them.
      assert.equal(await page.getByRole('button', { name: /^Allow always/ }).count(), 1);
      assert.match(await page.locator('.always-rule').innerText(),
        /^Allow always: writes the rule allow run_shell_command commands starting "rm" or "cargo" in project askbus \(.*askbus-rules\.toml, user tier, priority 4\.95\)$/);
      await page.getByRole('button', { name: /^Allow once/ }).click();
      const d = await producer.decision(id);
      assert.equal(d.confirmed, true);
      assert.equal(d.outcome, 'proceed_once');
      assert.equal(d.reason, 'answered');
      assert.equal(d.message, undefined);
      await page.locator('#notice', { hasText: '“Confirm Shell Command” — allowed: the agent has your decision.' }).waitFor();
    });

    test('Allow always where the agent offers it', async () => {
      const id = newId();
      const { toolCall, details } = shell('git push', ['git']);
      producer.approve(id, toolCall, details, { outcomes: ['proceed_once', 'proceed_always', 'cancel'] });
      await dialogOf(page, id);
      const always = page.getByRole('button', { name: /^Allow always/ });
      await always.click();
      const d = await producer.decision(id);
      assert.equal(d.confirmed, true);
      assert.equal(d.outcome, 'proceed_always');
    });

    test('Deny with a reason: the producer reads the reason; Enter in the field denies', async () => {
      const id = newId();
      const { toolCall, details } = shell('rm -rf /', ['rm']);
      producer.approve(id, toolCall, details);
      await dialogOf(page, id);
      const reason = page.getByRole('textbox', { name: /Reason for denying/ });
      await reason.fill('  Not the root directory: clean the build dir instead. ');
      await page.getByRole('button', { name: /^Deny/ }).click();
      const d = await producer.decision(id);
      assert.equal(d.confirmed, false);
      assert.equal(d.outcome, 'cancel');
      assert.equal(d.reason, 'answered');
      assert.equal(d.message, 'Not the root directory: clean the build dir instead.');
      await page.locator('#notice', { hasText: 'denied: the agent has your decision.' }).waitFor();

      const second = newId();
      producer.approve(second, toolCall, details);
      await dialogOf(page, second);
      await reason.fill('no');
      await reason.press('Enter');
      const d2 = await producer.decision(second);
      assert.equal(d2.confirmed, false);
      assert.equal(d2.message, 'no');
    });

    test('Deny without a reason, from a number key; Esc dismisses (never an approval)', async () => {
      const id = newId();
      const { toolCall, details } = shell('make deploy', ['make']);
      producer.approve(id, toolCall, details);
      await dialogOf(page, id);
      // 1 Allow once, 2 Allow always (askbus's own rule: the agent offers none), 3 Deny.
      await page.keyboard.press('3');
      const d = await producer.decision(id);
      assert.equal(d.confirmed, false);
      assert.equal(d.outcome, 'cancel');
      assert.equal(d.message, undefined);

      const second = newId();
      producer.approve(second, toolCall, details);
      await dialogOf(page, second);
      await page.keyboard.press('Escape');
      const d2 = await producer.decision(second);
      assert.equal(d2.confirmed, false);
      assert.equal(d2.reason, 'dismissed');
    });

    test('edit: a coloured, scrollable diff that a phone can read', async () => {
      const id = newId();
      const long = Array.from({ length: 80 }, (_, i) => `+    let line_${i} = "${'x'.repeat(90)}";`).join('\n');
      producer.approve(id, { name: 'replace', args: { file_path: '/src/main.rs' } }, {
        type: 'edit', title: 'Confirm Edit', fileName: 'main.rs', filePath: '/home/dev/src/askbus/src/main.rs',
        fileDiff: `${DIFF}@@ -9,0 +10,80 @@\n${long}\n`, originalContent: 'fn main() {}', newContent: 'fn main() {…}',
        diffStat: {
          model_added_lines: 81, model_removed_lines: 1, model_added_chars: 0, model_removed_chars: 0,
          user_added_lines: 0, user_removed_lines: 0, user_added_chars: 0, user_removed_chars: 0,
        },
      }, { outcomes: ['proceed_once', 'proceed_always', 'modify_with_editor', 'cancel'] });
      await page.getByRole('heading', { name: 'Confirm Edit' }).waitFor();
      assert.equal(await page.locator('.file-name').innerText(), 'main.rs');
      assert.equal(await page.locator('.stat').innerText(), '+81 −1');
      await page.getByText('/home/dev/src/askbus/src/main.rs').waitFor();
      const diff = page.locator('pre.diff');
      assert.equal(await diff.locator('.d-del').count(), 1);
      assert.equal(await diff.locator('.d-add').count(), 81);
      assert.equal(await diff.locator('.d-hunk').count(), 2);
      assert.equal(await diff.locator('.d-del').innerText(), '-    println!("hello");');
      // Added and removed lines are told apart by colour.
      const bg = (sel) => diff.locator(sel).first().evaluate((e) => getComputedStyle(e).backgroundColor);
      assert.notEqual(await bg('.d-add'), await bg('.d-del'));
      assert.notEqual(await bg('.d-add'), await bg('.d-ctx'));
      // The diff scrolls inside its box (the buttons stay reachable) and keeps its lines whole.
      const box = await diff.evaluate((e) => ({
        scrollH: e.scrollHeight, clientH: e.clientHeight, scrollW: e.scrollWidth, clientW: e.clientWidth,
        fontPx: parseFloat(getComputedStyle(e).fontSize), pageW: document.documentElement.scrollWidth,
        viewW: window.innerWidth,
      }));
      assert.ok(box.scrollH > box.clientH, 'scrolls vertically');
      assert.ok(box.scrollW > box.clientW, 'long lines scroll sideways rather than wrap');
      assert.ok(box.fontPx >= 12, `readable: ${box.fontPx}px`);
      assert.ok(box.pageW <= box.viewW, 'the page itself does not scroll sideways');
      // modify_with_editor needs an editor: not offered.
      assert.equal(await page.getByRole('button', { name: /^Modify/ }).count(), 0);
      await page.getByRole('button', { name: /^Allow always/ }).click();
      assert.equal((await producer.decision(id)).outcome, 'proceed_always');
    });

    test('mcp: server, tool and arguments', async () => {
      const id = newId();
      producer.approve(id, { name: 'create_issue', args: { repo: 'askbus', title: 'Crash' } }, {
        type: 'mcp', title: 'Confirm MCP Tool', serverName: 'github', toolName: 'create_issue',
        toolDisplayName: 'Create issue', toolArgs: { repo: 'askbus', title: 'Crash on <script>' },
        toolDescription: 'Opens an issue in a **GitHub** repository',
      }, { serverName: 'github', outcomes: ['proceed_once', 'proceed_always_server', 'proceed_always_tool', 'cancel'] });
      await page.getByRole('heading', { name: 'Confirm MCP Tool' }).waitFor();
      const facts = await page.locator('.approval-body .facts').innerText();
      assert.match(facts, /Server\s+github/);
      assert.match(facts, /Tool\s+Create issue \(create_issue\)/);
      assert.match(facts, /Opens an issue in a GitHub repository/);
      assert.deepEqual(JSON.parse(await page.locator('pre.json').innerText()), { repo: 'askbus', title: 'Crash on <script>' });
      assert.deepEqual(await page.locator('.actions button').allInnerTexts().then((ts) => ts.map((t) => t.replace(/\s+\d$|\s+Esc$/, '').trim())),
        ['Dismiss', 'Deny', 'Allow this tool always', 'Allow every tool of this server', 'Allow once']);
      await page.getByRole('button', { name: /^Allow every tool of this server/ }).click();
      const d = await producer.decision(id);
      assert.equal(d.outcome, 'proceed_always_server');
      assert.equal(d.confirmed, true);
    });

    test('info: the prompt and its URLs, links only to http(s) and never with the opener', async () => {
      const id = newId();
      producer.approve(id, { name: 'web_fetch', args: {} }, {
        type: 'info', title: 'Confirm Web Fetch', prompt: 'Summarize https://example.com/a and `b`',
        urls: ['https://example.com/a', 'javascript:alert(document.cookie)', 'http://example.org/b?c=1&d=<x>'],
      });
      await page.getByRole('heading', { name: 'Confirm Web Fetch' }).waitFor();
      await page.locator('.prompt code', { hasText: 'b' }).waitFor();
      const links = page.locator('.urls a');
      assert.equal(await links.count(), 2);
      for (const a of await links.all()) {
        assert.match(await a.getAttribute('href'), /^https?:\/\//);
        assert.equal(await a.getAttribute('rel'), 'noopener noreferrer');
        assert.equal(await a.getAttribute('target'), '_blank');
      }
      await page.locator('.urls li', { hasText: 'javascript:alert(document.cookie)' }).locator('code').waitFor();
      assert.equal(await page.locator('a[href^="javascript"]').count(), 0);
      await page.keyboard.press('1');
      assert.equal((await producer.decision(id)).outcome, 'proceed_once');
    });

    test('bus text is text: markup in a command, a title or arguments never runs', async () => {
      const id = newId();
      const evil = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';
      producer.approve(id, { name: evil, args: { x: evil } }, {
        type: 'exec', title: evil, command: `echo ${evil}`, rootCommand: 'echo', rootCommands: ['echo'],
        systemMessage: evil,
      }, { context: { title: evil, project: evil } });
      await page.getByRole('heading', { name: evil }).waitFor();
      assert.equal(await page.locator('#dialog img, #dialog script').count(), 0);
      assert.equal(await page.evaluate(() => window.pwned), undefined);
      await page.keyboard.press('Escape');
      assert.equal((await producer.decision(id)).reason, 'dismissed');
    });

    test('no details: the tool and its arguments', async () => {
      const id = newId();
      producer.approve(id, { name: 'delete_branch', args: { name: 'old' } }, null);
      await page.getByRole('heading', { name: 'Allow delete_branch?' }).waitFor();
      assert.deepEqual(JSON.parse(await page.locator('pre.json').innerText()), { name: 'old' });
      await page.getByRole('button', { name: /^Deny/ }).click();
      assert.equal((await producer.decision(id)).confirmed, false);
    });

    test('answered elsewhere: the other tab is told and its dialog goes; a late answer is refused', async () => {
      const other = await openPage(context, web);
      const raw = await WsClient.connect(web);
      try {
        await raw.next((m) => m.type === 'daemon' && m.state === 'connected');
        const id = newId();
        const { toolCall, details } = shell('cargo publish', ['cargo']);
        producer.approve(id, toolCall, details);
        await raw.next((m) => m.type === 'tool-confirmation-request' && m.correlationId === id);
        await dialogOf(page, id);
        await dialogOf(other, id);
        await other.getByRole('button', { name: /^Allow once/ }).click();
        await page.locator('#notice', { hasText: '“Confirm Shell Command” — answered elsewhere (another tab or UI).' }).waitFor();
        assert.equal(await page.locator('#dialog form').count(), 0);
        const w = await raw.next((m) => m.type === 'tool-confirmation-withdrawn' && m.correlationId === id);
        assert.equal(w.reason, 'answered');
        raw.send({ type: 'tool-confirmation-response', correlationId: id, confirmed: false, outcome: 'cancel' });
        const e = await raw.next((m) => m.type === 'error');
        assert.equal(e.code, 'not-pending');
        const d = await producer.decision(id);
        assert.equal(d.confirmed, true);
        await assert.rejects(producer.next(300), /no frame/, 'exactly one decision');
      } finally {
        raw.close();
        await other.close();
      }
    });

    test('a timeout or a withdrawal takes it off the page, saying so', async () => {
      const id = newId();
      const { toolCall, details } = shell('sleep 1', ['sleep']);
      producer.approve(id, toolCall, details, { timeoutMs: 2500 });
      await page.locator('#notice', { hasText: 'timed out: the agent stopped waiting.' }).waitFor();
      const d = await producer.decision(id);
      assert.equal(d.confirmed, false);
      assert.equal(d.reason, 'timeout');

      const w = newId();
      producer.approve(w, toolCall, details);
      await dialogOf(page, w);
      producer.send({ type: 'tool-confirmation-cancel', correlationId: w });
      await page.locator('#notice', { hasText: 'withdrawn by the agent.' }).waitFor();
      assert.equal((await producer.decision(w)).reason, 'withdrawn');
    });

    // ASKBUS_WEB_SCREENSHOTS=DIR saves them there (docs/ holds the ones the READMEs show).
    test('screenshot: an edit waiting with a question and a command, grouped by project', async () => {
      const shots = process.env.ASKBUS_WEB_SCREENSHOTS ? path.resolve(process.env.ASKBUS_WEB_SCREENSHOTS) : path.join(dir, 'shots');
      mkdirSync(shots, { recursive: true });
      const edit = newId();
      producer.approve(edit, { name: 'replace', args: {} }, {
        type: 'edit', title: 'Confirm Edit', fileName: 'main.rs', filePath: '/home/dev/src/askbus/src/main.rs',
        fileDiff: DIFF, originalContent: 'fn main() {}', newContent: 'fn main() {}',
      }, {
        outcomes: ['proceed_once', 'proceed_always', 'cancel'],
        context: { agent: 'gemini-cli/0.61.0', project: 'askbus', title: 'Greet the whole world', session: 's-1', cwd: '/home/dev/src/askbus' },
      });
      const { toolCall, details } = shell('rm -rf build && cargo build --release', ['rm', 'cargo']);
      producer.approve(newId(), toolCall, details, { context: { agent: 'claude-code/1.0.3', project: 'website', title: 'Clean rebuild' } });
      producer.ask(newId(), [{ question: 'Tag v2.4.0 now?', header: 'Release', type: 'yesno' }], { context: { agent: 'codex/0.9', project: 'askbus' } });
      await dialogOf(page, edit);
      await page.locator('#queue-list .item').nth(2).waitFor();
      await page.mouse.move(0, 0);
      const png = await page.screenshot({ fullPage: true });
      writeFileSync(path.join(shots, `askbus-web-approval-${screen}.png`), png);
      assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    });

    test('questions and approvals wait in one list; #q=ID opens an approval', async () => {
      const q = newId();
      const a = newId();
      producer.ask(q, [{ question: 'Ship it?', header: 'Ship', type: 'yesno' }]);
      const { toolCall, details } = shell('npm publish', ['npm']);
      producer.approve(a, toolCall, details, { context: { project: 'web' } });
      await producer.sync();
      const p = await openPage(context, web, `#q=${encodeURIComponent(a)}`);
      try {
        await p.getByRole('heading', { name: 'Confirm Shell Command' }).waitFor();
        assert.equal(await p.locator('#queue-list .item.approval').count(), 1);
        assert.equal(await p.locator('#queue-list .item[aria-current="true"]').getAttribute('data-id'), a);
        await p.getByRole('button', { name: /^Allow once/ }).click();
        assert.equal((await producer.decision(a)).outcome, 'proceed_once');
        await p.getByRole('radio', { name: 'No', exact: true }).click();
        await p.getByRole('button', { name: /^Submit/ }).click();
        assert.deepEqual((await producer.response(q)).answers, { 0: 'No' });
      } finally {
        await p.close();
      }
    });
  });
}

// "Allow always" on the page writes askbus's rule (the one `askbus answer --always` writes),
// shown on the approval card before the tap, in the request's project unless "In every
// project" is ticked; the daemon then allows the next identical call with no UI, and asks
// about a different one. A hook's approval: the agent offers no "always" of its own, so the
// producer is sent Allow once.
describe('Allow always in askbus web writes askbus\'s rule', () => {
  let dir;
  let daemon;
  let web;
  let browser;
  let page;
  let producer;

  before(async () => {
    dir = tempDir();
    const configHome = path.join(dir, 'config');
    daemon = await new Daemon(dir, { configHome }).start();
    web = await new Web(daemon.socket, [], configHome).start();
    browser = await launchBrowser();
    const context = await browser.newContext(VIEWPORTS[0][1]);
    page = await openPage(context, web);
    producer = await Producer.connect(daemon.socket, 'claude-hook/1');
  });

  after(async () => {
    producer?.close();
    await browser?.close();
    await web?.stop();
    await daemon?.stop();
    if (dir) removeDir(dir);
  });

  const hook = (id, command, project) => {
    const root = command.split(' ')[0];
    producer.approve(id, { name: 'Bash', args: { command } }, {
      type: 'exec', title: 'Confirm Shell Command', command, rootCommand: root, rootCommands: [root],
    }, { outcomes: ['proceed_once', 'cancel'], noUi: 'wait', context: { project, agent: 'claude-code' } });
  };

  test('the rule is shown, widened on request, written, and then decides', async () => {
    const file = path.join(dir, 'config/askbus/policies/askbus-rules.toml');
    const id = newId('a');
    hook(id, 'npm run build', 'shop');
    await dialogOf(page, id);
    const rule = page.locator('.always-rule');
    assert.match(await rule.innerText(),
      /^Allow always: writes the rule allow run_shell_command commands starting "npm" in project shop \(.*askbus-rules\.toml, user tier, priority 4\.95\)$/);
    assert.equal(existsSync(file), false, 'nothing is written before the tap');
    // Ticked, the card says the wider rule; unticked again, the project's.
    const wide = page.getByLabel('In every project');
    await wide.check();
    await page.locator('.always-rule', { hasText: 'in every project' }).waitFor();
    await wide.uncheck();
    await page.locator('.always-rule', { hasText: 'in project shop' }).waitFor();
    await page.getByRole('button', { name: /^Allow always/ }).click();
    const d = await producer.decision(id);
    assert.equal(d.outcome, 'proceed_once');
    assert.equal(d.confirmed, true);
    await page.locator('#notice', { hasText: 'rule written: allow run_shell_command commands starting "npm" in project shop' }).waitFor();
    const written = readFileSync(file, 'utf8');
    assert.match(written, /commandPrefix = "npm"/);
    assert.match(written, /askbusProject = "shop"/);

    // The next npm call in shop is allowed by the daemon at once, never shown.
    const next = newId('a');
    hook(next, 'npm test', 'shop');
    const n = await producer.decision(next);
    assert.equal(n.outcome, 'proceed_once');
    assert.equal(n.reason, 'answered');
    // A different one is asked on the page.
    const other = newId('a');
    hook(other, 'rm -rf out', 'shop');
    await dialogOf(page, other);
    assert.equal(await page.locator('#queue-list .item').count() <= 1, true);

    // Widened: the rule covers every project.
    await page.getByRole('button', { name: /^Deny/ }).click();
    await producer.decision(other);
    const wider = newId('a');
    hook(wider, 'make deploy', 'blog');
    await dialogOf(page, wider);
    await page.getByLabel('In every project').check();
    await page.getByRole('button', { name: /^Allow always/ }).click();
    assert.equal((await producer.decision(wider)).outcome, 'proceed_once');
    const elsewhere = newId('a');
    hook(elsewhere, 'make test', 'shop');
    assert.equal((await producer.decision(elsewhere)).outcome, 'proceed_once');
  });
});
