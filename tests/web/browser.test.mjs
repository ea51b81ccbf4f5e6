// askbus web in a real browser (Debian's Chromium, driven by playwright-core) against the real
// askbusd and the real `askbus web`: each question type answered through the page, with the
// exact ask-user-response the daemon forwards read by a raw-frame producer; two tabs; a
// timeout and a departed producer; the daemon restarted under the page; and the access
// checks (no token, a foreign Origin or Host: refused, and no question text sent).
//
// ASKBUS_WEB_SCREENSHOTS=DIR also saves the dialog's screenshots (desktop and phone) there.

import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import {
  CutProxy, Daemon, Producer, Web, WsClient, get, launchBrowser, newId, openPage, removeDir, signIn, tempDir,
  websocket,
} from './harness.mjs';

const db = {
  question: 'Which database should the new service use?',
  header: 'Database',
  type: 'choice',
  options: [
    { label: 'PostgreSQL', description: 'A server; best for many writers' },
    { label: 'SQLite', description: 'A single file; nothing to run' },
  ],
};
const features = {
  question: 'Which features ship in v1?',
  header: 'Features',
  type: 'choice',
  multiSelect: true,
  options: [
    { label: 'Search', description: 'Full-text' },
    { label: 'Export', description: 'CSV and JSON' },
    { label: 'Webhooks', description: 'On every change' },
  ],
};
const migrate = { question: 'Add a migration for the `users` table?', header: 'Migrate', type: 'yesno' };
const name = {
  question: 'What should the service be called?',
  header: 'Name',
  type: 'text',
  placeholder: 'e.g. billing-api',
};

function answered(answers) {
  return JSON.stringify({ answers });
}

/** The dialog's one-line notice, once it says `re`. */
function notice(page, re) {
  return page.locator('#notice', { hasText: re }).waitFor();
}

async function submit(page) {
  await page.getByRole('button', { name: /^Submit/ }).click();
}

describe('askbus web in Chromium', () => {
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
    context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
    page = await openPage(context, web);
    producer = await Producer.connect(daemon.socket);
  });

  // A failed test may leave its question pending: a fresh producer withdraws it (the old one
  // goes away), so the next test starts from an empty page.
  afterEach(async () => {
    if (!producer.sock.destroyed && producer.frames.length === 0 && await pageIsEmpty()) return;
    producer.close();
    producer = await Producer.connect(daemon.socket);
    await page.locator('#empty').waitFor();
  });

  async function pageIsEmpty() {
    return page.locator('#empty').isVisible();
  }

  after(async () => {
    producer?.close();
    await browser?.close();
    await web?.stop();
    await daemon?.stop();
    if (dir) removeDir(dir);
  });

  test('a sign-in link logs in and leaves the code out of the address bar', async () => {
    assert.equal(page.url(), web.base);
    const cookies = await context.cookies(web.base);
    const c = cookies.find((k) => k.name.startsWith(`askbus-web-${web.port}-`));
    assert.ok(c, JSON.stringify(cookies));
    // Scoped to this server's random directory: never sent to another server on 127.0.0.1.
    assert.equal(c.path, web.dir.replace(/\/$/, ''));
    assert.equal(c.httpOnly, true);
    assert.equal(c.sameSite, 'Strict');
    assert.equal((await context.cookies(`http://127.0.0.1:${web.port}/`)).length, 0);
    assert.equal(await page.evaluate(() => document.cookie), '', 'page scripts never see the session');
    await page.locator('#empty', { hasText: 'No questions waiting' }).waitFor();
  });

  test('single choice: the option clicked, with who asked and the time left', async () => {
    const id = newId();
    producer.ask(id, [db], { timeoutMs: 300000 });
    await page.locator('.from', { hasText: 'test-agent/1' }).waitFor();
    const from = await page.locator('.from').innerText();
    assert.match(from, new RegExp(`pid ${process.pid}`));
    assert.match(from, /[45]:\d\d left/);
    await page.getByText('A single file; nothing to run').waitFor();
    await page.getByRole('radio', { name: 'SQLite', exact: true }).click();
    await submit(page);
    const r = await producer.response(id);
    assert.deepEqual(r.answers, { 0: 'SQLite' });
    assert.equal(r.cancelled, false);
    assert.equal(r.reason, 'answered');
    assert.equal(r.result.llmContent, answered({ 0: 'SQLite' }));
    assert.equal(r.result.returnDisplay, '**User answered:**\n  Database → SQLite');
    await notice(page, '“Database” — sent: the agent has your answer.');
    await page.locator('#empty').waitFor();
  });

  test('single choice Other, from the keyboard: a number key, typing, Enter', async () => {
    const id = newId();
    producer.ask(id, [{ ...db, placeholder: 'Another engine' }]);
    const other = page.getByRole('textbox', { name: 'Other answer' });
    await other.waitFor();
    assert.equal(await other.getAttribute('placeholder'), 'Another engine');
    await page.keyboard.press('3');
    assert.equal(await other.evaluate((e) => e === document.activeElement), true);
    await page.keyboard.type('  MariaDB  ');
    assert.equal(await page.getByRole('radio', { name: 'Other', exact: true }).isChecked(), true);
    await page.keyboard.press('Enter');
    const r = await producer.response(id);
    assert.deepEqual(r.answers, { 0: 'MariaDB' });
    assert.equal(r.reason, 'answered');
  });

  test('multiSelect: labels in option order whatever the click order, then Other', async () => {
    const id = newId();
    producer.ask(id, [features]);
    await page.getByText('(Select all that apply)').waitFor();
    await page.getByRole('checkbox', { name: 'Webhooks', exact: true }).click();
    await page.getByRole('checkbox', { name: 'Search', exact: true }).click();
    await page.getByRole('textbox', { name: 'Other answer' }).fill(' Audit log ');
    assert.equal(await page.getByRole('checkbox', { name: 'Other', exact: true }).isChecked(), true,
      'typing checks Other');
    await submit(page);
    const r = await producer.response(id);
    assert.deepEqual(r.answers, { 0: 'Search, Webhooks, Audit log' });
    assert.equal(r.result.llmContent, answered({ 0: 'Search, Webhooks, Audit log' }));
  });

  test('All of the above checks every option; the answer lists labels, never the phrase', async () => {
    const id = newId();
    producer.ask(id, [features]);
    const all = page.getByRole('checkbox', { name: 'All of the above', exact: true });
    await all.click();
    for (const label of ['Search', 'Export', 'Webhooks']) {
      assert.equal(await page.getByRole('checkbox', { name: label, exact: true }).isChecked(), true, label);
    }
    // Unchecking one unchecks All of the above; checking it again checks the rest.
    await page.getByRole('checkbox', { name: 'Export', exact: true }).click();
    assert.equal(await all.isChecked(), false);
    await page.keyboard.press('4');
    assert.equal(await all.isChecked(), true);
    await submit(page);
    const r = await producer.response(id);
    assert.deepEqual(r.answers, { 0: 'Search, Export, Webhooks' });
  });

  test('yesno: only Yes and No whatever options the model sent; a number key answers', async () => {
    const id = newId();
    producer.ask(id, [{ ...migrate, options: [{ label: 'Sure', description: 'maybe' }] }]);
    await page.getByRole('radio', { name: 'No', exact: true }).waitFor();
    assert.equal(await page.getByText('Sure').count(), 0, 'the model\'s options are not shown');
    assert.equal(await page.locator('.opt').count(), 3, 'Yes, No, Other');
    // A number answers a single choice at once, as in the terminal UI.
    await page.keyboard.press('2');
    const r = await producer.response(id);
    assert.deepEqual(r.answers, { 0: 'No' });
    assert.equal(r.result.returnDisplay, '**User answered:**\n  Migrate → No');
  });

  test('yesno Other: the feedback text, trimmed', async () => {
    const id = newId();
    producer.ask(id, [migrate]);
    await page.getByRole('textbox', { name: 'Other answer' }).fill('  only on staging ');
    await page.getByRole('textbox', { name: 'Other answer' }).press('Enter');
    const r = await producer.response(id);
    assert.deepEqual(r.answers, { 0: 'only on staging' });
  });

  test('text: the placeholder shown, the trimmed text sent; Shift+Enter is a new line', async () => {
    const id = newId();
    producer.ask(id, [name]);
    const box = page.getByRole('textbox', { name: /Your answer/ });
    await box.waitFor();
    assert.equal(await box.getAttribute('placeholder'), 'e.g. billing-api');
    await box.fill('  billing ');
    await box.press('Shift+Enter');
    await box.pressSequentially('api  ');
    await box.press('Enter');
    const r = await producer.response(id);
    assert.deepEqual(r.answers, { 0: 'billing \napi' });
    assert.equal(r.result.returnDisplay, `**User answered:**\n  Name → billing \n${' '.repeat('  Name → '.length)}api`);
  });

  test('a single question cannot be submitted unanswered', async () => {
    const id = newId();
    producer.ask(id, [db]);
    await page.getByRole('radio', { name: 'SQLite', exact: true }).waitFor();
    await submit(page);
    await page.getByRole('alert').filter({ hasText: 'Pick an option or type an answer first.' }).waitFor();
    await page.getByRole('radio', { name: 'PostgreSQL', exact: true }).check();
    await submit(page);
    const r = await producer.response(id);
    assert.deepEqual(r.answers, { 0: 'PostgreSQL' });
  });

  test('several questions: tabs, a review showing the unanswered one, which is left out', async () => {
    const id = newId();
    producer.ask(id, [db, name, migrate]);
    const tabs = page.getByRole('tab');
    await tabs.first().waitFor();
    assert.deepEqual(await tabs.allInnerTexts(), ['Database', 'Name', 'Migrate', 'Review']);
    await page.getByRole('radio', { name: 'PostgreSQL', exact: true }).click();
    await page.getByRole('button', { name: /^Next/ }).click();
    // Name is left blank.
    await page.getByRole('textbox', { name: /Your answer/ }).waitFor();
    await page.getByRole('button', { name: /^Next/ }).click();
    await page.getByRole('radio', { name: 'Yes', exact: true }).click();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Review your answers' }).waitFor();
    assert.match(await page.locator('.review').innerText(), /You have 1 unanswered question\b/);
    const rows = await page.locator('.review .row').allInnerTexts();
    assert.deepEqual(rows.map((t) => t.replace(/\s+/g, ' ').trim()),
      ['Database PostgreSQL', 'Name (not answered)', 'Migrate Yes']);
    // ← goes back to a question, → returns to the review.
    await page.keyboard.press('ArrowLeft');
    await page.getByRole('tab', { name: 'Migrate', selected: true }).waitFor();
    await page.getByRole('tab', { name: 'Review' }).click();
    await submit(page);
    const r = await producer.response(id);
    assert.deepEqual(r.answers, { 0: 'PostgreSQL', 2: 'Yes' });
    assert.equal(r.result.llmContent, answered({ 0: 'PostgreSQL', 2: 'Yes' }));
    assert.equal(r.result.returnDisplay, '**User answered:**\n  Database → PostgreSQL\n  Migrate → Yes');
  });

  test('Esc dismisses: cancelled, reason dismissed', async () => {
    const id = newId();
    producer.ask(id, [db, migrate]);
    await page.getByRole('radio', { name: 'SQLite', exact: true }).click();
    await page.keyboard.press('Escape');
    const r = await producer.response(id);
    assert.equal(r.cancelled, true);
    assert.equal(r.reason, 'dismissed');
    assert.deepEqual(r.answers, {});
    assert.equal(r.result.llmContent, 'User dismissed ask_user dialog without answering.');
    await notice(page, '“Database”, “Migrate” — dismissed.');
  });

  test('a new question does not take the focus from a half-typed answer', async () => {
    const first = newId();
    const second = newId();
    producer.ask(first, [name]);
    const box = page.getByRole('textbox', { name: /Your answer/ });
    await box.click();
    await page.keyboard.type('half');
    producer.ask(second, [migrate]);
    await page.locator('#queue-list li').nth(1).waitFor();
    assert.equal(await box.evaluate((e) => e === document.activeElement), true);
    await page.keyboard.type(' typed');
    await page.keyboard.press('Enter');
    const r1 = await producer.response(first);
    assert.deepEqual(r1.answers, { 0: 'half typed' });
    // The next one opens in its place; it is dismissed from the keyboard.
    await page.getByRole('radio', { name: 'Yes', exact: true }).waitFor();
    await page.keyboard.press('Escape');
    const r2 = await producer.response(second);
    assert.equal(r2.reason, 'dismissed');
  });

  test('two tabs: one answers, the other\'s dialog closes saying so', async () => {
    const other = await openPage(context, web);
    try {
      const id = newId();
      producer.ask(id, [db]);
      await other.getByRole('radio', { name: 'SQLite', exact: true }).waitFor();
      await page.getByRole('radio', { name: 'SQLite', exact: true }).waitFor();
      await other.getByRole('radio', { name: 'SQLite', exact: true }).click();
      await submit(other);
      await notice(page, '“Database” — answered elsewhere (another tab or UI).');
      await notice(other, '“Database” — sent: the agent has your answer.');
      assert.equal(await page.locator('#dialog form').count(), 0);
      const r = await producer.response(id);
      assert.deepEqual(r.answers, { 0: 'SQLite' });
      await assert.rejects(producer.next(300), /no frame/, 'exactly one response');
    } finally {
      await other.close();
    }
  });

  test('a late answer from another UI is told not-pending; acks go only to the winner', async () => {
    const raw = await WsClient.connect(web);
    try {
      await raw.next((m) => m.type === 'daemon' && m.state === 'connected');
      const id = newId();
      producer.ask(id, [db]);
      await raw.next((m) => m.type === 'ask-user-request' && m.correlationId === id);
      await page.getByRole('radio', { name: 'PostgreSQL', exact: true }).click();
      await submit(page);
      const w = await raw.next((m) => m.type === 'ask-user-withdrawn' && m.correlationId === id);
      assert.equal(w.reason, 'answered');
      raw.send({ type: 'ask-user-response', correlationId: id, answers: { 0: 'SQLite' } });
      const e = await raw.next((m) => m.type === 'error');
      assert.equal(e.code, 'not-pending');
      assert.equal(e.correlationId, id);
      assert.equal(raw.messages.some((m) => m.type === 'ask-user-ack'), false);
      const r = await producer.response(id);
      assert.deepEqual(r.answers, { 0: 'PostgreSQL' });
      // The page may only answer: anything else is refused by the bridge, never forwarded.
      raw.send({ type: 'ask-user-request', correlationId: 'from-page', questions: [db] });
      const refused = await raw.next((m) => m.type === 'error');
      assert.equal(refused.code, 'forbidden');
      raw.send({ type: 'ask-user-response', correlationId: id, answers: { '01': 'x' } });
      assert.equal((await raw.next((m) => m.type === 'error')).code, 'invalid-response');
      await assert.rejects(producer.next(300), /no frame/);
    } finally {
      raw.close();
    }
  });

  test('a timeout withdraws the question from the page, with the reason', async () => {
    const id = newId();
    producer.ask(id, [db], { timeoutMs: 2500 });
    await page.locator('.from .left', { hasText: /^[123]s left$/ }).waitFor();
    await notice(page, '“Database” — timed out: the agent stopped waiting.');
    const r = await producer.response(id);
    assert.equal(r.reason, 'timeout');
    assert.equal(r.cancelled, true);
  });

  test('a producer that goes away takes its question off the page', async () => {
    const gone = await Producer.connect(daemon.socket, 'short-lived/1');
    gone.ask(newId(), [migrate]);
    await page.locator('.from', { hasText: 'short-lived/1' }).waitFor();
    gone.close();
    await notice(page, '“Migrate” — the agent went away.');
  });

  test('a question pending before the tab opens arrives in the replay', async () => {
    const id = newId();
    producer.ask(id, [migrate]);
    await page.getByRole('radio', { name: 'Yes', exact: true }).waitFor();
    const late = await openPage(context, web);
    try {
      await late.getByRole('radio', { name: 'Yes', exact: true }).click();
      await submit(late);
      const r = await producer.response(id);
      assert.deepEqual(r.answers, { 0: 'Yes' });
    } finally {
      await late.close();
    }
  });

  test('the page\'s own connection dropped: it reconnects and keeps what was typed', async () => {
    const proxy = await CutProxy.start(web.port);
    const ctx = await browser.newContext();
    try {
      const flaky = await ctx.newPage();
      flaky.setDefaultTimeout(10000);
      await flaky.goto((await web.newLink()).replace(`:${web.port}/`, `:${proxy.port}/`));
      const kept = newId();
      const dropped = newId();
      producer.ask(kept, [name]);
      producer.ask(dropped, [migrate]);
      const box = flaky.getByRole('textbox', { name: /Your answer/ });
      await box.fill('half typed');
      await flaky.locator('#queue-list li').nth(1).waitFor();
      proxy.cut();
      await flaky.locator('#conn[data-state="lost"]', { hasText: 'Lost the connection to askbus web' }).waitFor();
      assert.equal(await box.isDisabled(), true, 'no answering while disconnected');
      // Withdrawn while the page was away: it must not come back.
      producer.send({ type: 'ask-user-cancel', correlationId: dropped });
      assert.equal((await producer.response(dropped)).reason, 'withdrawn');
      await flaky.locator('#conn[data-state="up"]').waitFor();
      await flaky.locator('#queue').waitFor({ state: 'hidden' });
      assert.equal(await box.inputValue(), 'half typed');
      await box.press('Enter');
      const r = await producer.response(kept);
      assert.deepEqual(r.answers, { 0: 'half typed' });
    } finally {
      await ctx.close();
      proxy.close();
    }
  });

  test('the daemon restarted: the page says so, reconnects and gets the replay', async () => {
    const id = newId();
    producer.ask(id, [db]);
    await page.getByRole('radio', { name: 'SQLite', exact: true }).waitFor();
    await daemon.stop();
    const r = await producer.response(id);
    assert.equal(r.reason, 'shutdown');
    producer.close();
    await notice(page, '“Database” — askbusd shut down.');
    await page.locator('#conn[data-state="down"]', { hasText: 'askbusd is not running' }).waitFor();
    // The empty page says why it has nothing, not that nothing is waiting.
    await page.locator('#empty', { hasText: 'askbusd is not running' }).waitFor();
    assert.equal(await page.locator('#empty', { hasText: 'No questions waiting' }).count(), 0);
    await daemon.start();
    // Asked the moment the new daemon is up: the page gets it in its replay, or live if it
    // was quicker to reconnect.
    producer = await Producer.connect(daemon.socket);
    const id2 = newId();
    producer.ask(id2, [features]);
    await page.locator('#conn[data-state="up"]').waitFor();
    await page.getByRole('checkbox', { name: 'Export', exact: true }).click();
    await submit(page);
    const r2 = await producer.response(id2);
    assert.deepEqual(r2.answers, { 0: 'Export' });
  });

  test('Notify me: a notification for a question that arrives while the tab is hidden', async () => {
    const ctx = await browser.newContext();
    // The tab is made to look hidden, and Notification records what it is asked to show
    // (headless Chromium shows none).
    await ctx.addInitScript(() => {
      Object.defineProperty(document, 'hidden', { get: () => true });
      window.shown = [];
      window.Notification = class {
        static permission = 'default';
        static async requestPermission() {
          window.Notification.permission = 'granted';
          return 'granted';
        }
        constructor(title, options) {
          window.shown.push({ title, body: options.body, tag: options.tag });
        }
        close() {}
      };
    });
    try {
      const p = await openPage(ctx, web);
      await p.getByRole('button', { name: 'Notify me' }).click();
      const btn = p.getByRole('button', { name: 'Notifying', pressed: true });
      await btn.waitFor();
      const id = newId();
      producer.ask(id, [db]);
      await p.waitForFunction(() => window.shown.length === 1);
      assert.deepEqual(await p.evaluate(() => window.shown), [{
        title: 'test-agent/1 asks: Database', body: db.question, tag: id,
      }]);
      assert.equal(await p.title(), '(1) askbus');
      await p.keyboard.press('Escape');
      assert.equal((await producer.response(id)).reason, 'dismissed');
      await p.waitForFunction(() => document.title === 'askbus');
    } finally {
      await ctx.close();
    }
  });

  test('a page of another site cannot use the WebSocket, even with the cookie sent', async () => {
    const marker = `TOP-SECRET-${newId()}`;
    const id = newId();
    producer.ask(id, [{ ...db, question: marker }]);
    await page.getByText(marker).waitFor();
    // Served from 127.0.0.1 on another port: the same *site*, so SameSite would let a cookie
    // go. Even a page that knows the directory (the next test: it cannot learn it) is refused
    // by the Origin check.
    const evilCookies = [];
    const evil = http.createServer((req, res) => {
      evilCookies.push(req.headers.cookie || '');
      res.setHeader('content-type', 'text/html');
      res.end(`<!doctype html><script>
        window.result = { open: false, messages: [], closed: false };
        const ws = new WebSocket('ws://127.0.0.1:${web.port}${web.dir}ws');
        ws.onopen = () => { result.open = true; };
        ws.onmessage = (e) => { result.messages.push(e.data); };
        ws.onclose = () => { result.closed = true; };
        fetch('http://127.0.0.1:${web.port}${web.dir}', { credentials: 'include' })
          .then((r) => r.text()).then((t) => { result.read = t; }, (e) => { result.fetchError = String(e); });
      </script>`);
    });
    evil.listen(0, '127.0.0.1');
    await once(evil, 'listening');
    const evilPage = await context.newPage();
    try {
      await evilPage.goto(`http://127.0.0.1:${evil.address().port}/`);
      // At this server's own directory on the other port, as if the page had learned it.
      await evilPage.goto(`http://127.0.0.1:${evil.address().port}${web.dir}`);
      await evilPage.waitForFunction(() => window.result && window.result.closed
        && ('read' in window.result || 'fetchError' in window.result));
      const result = await evilPage.evaluate(() => window.result);
      assert.equal(result.open, false);
      assert.deepEqual(result.messages, []);
      assert.equal(result.read, undefined);
      assert.match(web.stderr, /refused GET \/[0-9a-f]+\/ws from 127\.0\.0\.1:\d+: requests from other sites are refused/);
    } finally {
      await evilPage.close();
      evil.close();
    }
    await page.keyboard.press('Escape');
    assert.equal((await producer.response(id)).reason, 'dismissed');
  });

  test('a server on another local port cannot learn the directory, so never gets the cookie', async () => {
    // The BROWSER's own session cookie (cookies ignore ports: only its Path keeps it here).
    const mine = (await context.cookies(web.base)).find((k) => k.name.startsWith(`askbus-web-${web.port}-`));
    assert.ok(mine && mine.value.length >= 32, JSON.stringify(mine));
    // Another local user's server: it asks askbus web for the directory without a code (as
    // any local process can), then sends the browser to that directory on its own port,
    // where the browser would hand it the cookie.
    const seen = [];
    let learned = null;
    const ask = (path) => new Promise((resolve) => {
      http.get({ host: '127.0.0.1', port: web.port, path }, (r) => { r.resume(); resolve(r.headers.location || ''); })
        .on('error', () => resolve(''));
    });
    const evil = http.createServer(async (req, res) => {
      seen.push({ url: req.url, cookie: req.headers.cookie || '' });
      if (req.url === '/') {
        for (const path of ['/login', '/login?code=x', `/o/x`, '/']) {
          const m = /^\.\/([0-9a-f]+)\//.exec(await ask(path));
          if (m) { learned = m[1]; break; }
        }
        res.statusCode = 302;
        res.setHeader('location', learned ? `/${learned}/steal` : '/nothing');
        res.end();
        return;
      }
      res.setHeader('content-type', 'text/html');
      res.end('<!doctype html><title>done</title>');
    });
    evil.listen(0, '127.0.0.1');
    await once(evil, 'listening');
    const evilPage = await context.newPage();
    try {
      await evilPage.goto(`http://127.0.0.1:${evil.address().port}/`);
      await evilPage.waitForFunction(() => document.title === 'done');
      assert.equal(learned, null, `askbus web told its directory without a code: ${learned}`);
      assert.ok(seen.length >= 2, JSON.stringify(seen));
      assert.ok(seen.every((s) => !s.cookie.includes(mine.value)), JSON.stringify(seen));
    } finally {
      await evilPage.close();
      evil.close();
    }
  });

  test('without a session, or from a foreign Origin or Host, nothing is served', async () => {
    const marker = `TOP-SECRET-${newId()}`;
    const id = newId();
    producer.ask(id, [{ ...db, question: marker }]);
    await page.getByText(marker).waitFor();
    const host = `127.0.0.1:${web.port}`;
    const d = web.dir;
    for (const p of ['/', '/ws', '/assets/app.js', d, `${d}assets/app.js`, `${d}assets/answers.js`, `${d}ws`,
      `${d}nothing`, `${d}?token=${'0'.repeat(48)}`, `${d}login?code=${'0'.repeat(48)}`]) {
      const r = await get(web, p);
      assert.equal(r.status, 401, p);
      assert.ok(!r.body.includes(marker), p);
    }
    const withCookie = { Cookie: web.cookie };
    assert.equal((await get(web, d, { ...withCookie, Host: 'rebound.example:80' })).status, 403);
    assert.equal((await get(web, d, { ...withCookie, Origin: 'http://evil.example' })).status, 403);
    // The WebSocket: no session, a made-up one, a foreign Origin, a foreign Host.
    const name = web.cookie.split('=')[0];
    const attempts = [
      [{}, 401],
      [{ Cookie: `${name}=${'f'.repeat(48)}` }, 401],
      [{ ...withCookie, Origin: 'http://evil.example' }, 403],
      [{ ...withCookie, Origin: `http://localhost:${web.port}` }, 403],
      [{ ...withCookie, Origin: 'null' }, 403],
      [{ ...withCookie, Host: 'rebound.example', Origin: 'http://rebound.example' }, 403],
    ];
    for (const [headers, status] of attempts) {
      const r = await websocket(web, { Host: host, ...headers });
      assert.equal(r.status, status, JSON.stringify(headers));
      assert.ok(!r.body.includes(marker));
    }
    // The same request with the session and the page's own Origin gets the question: the
    // refusals above are the checks at work, not a broken socket.
    const ok = await websocket(web, { ...withCookie, Origin: web.origin });
    assert.equal(ok.status, 101);
    assert.ok(ok.messages.some((m) => m.includes(marker)));
    await page.keyboard.press('Escape');
    assert.equal((await producer.response(id)).reason, 'dismissed');
  });

  test('sign out: this page, then everywhere; the pages say so and a new link signs in', async () => {
    const ctx = await browser.newContext();
    try {
      const one = await openPage(ctx, web);
      const two = await openPage(ctx, web);
      await one.getByRole('button', { name: 'Sign out', exact: true }).click();
      await one.locator('#conn[data-state="denied"]', { hasText: 'Signed out' }).waitFor();
      // Both pages of this context shared one cookie, so the other is signed out too: its
      // WebSocket closes and it says so rather than reconnecting forever.
      await two.locator('#conn[data-state="denied"]', { hasText: 'Signed out' }).waitFor();
      const three = await openPage(ctx, web);
      const other = await openPage(await browser.newContext(), web);
      await three.getByRole('button', { name: 'Sign out everywhere' }).click();
      await three.locator('#conn[data-state="denied"]').waitFor();
      await other.locator('#conn[data-state="denied"]', { hasText: 'Signed out' }).waitFor();
      assert.equal((await get(web, web.dir, { Cookie: web.cookie })).status, 401);
      // The harness's own sessions went too (its page's and its raw clients'): sign in again
      // for the tests after this one.
      const again = await signIn(web, await web.newLink());
      web.cookie = again.cookie;
      await page.close();
      page = await openPage(context, web);
      await other.context().close();
    } finally {
      await ctx.close();
    }
  });

  test('screenshots: desktop (light) and a 360-px phone (dark)', async () => {
    const saveTo = process.env.ASKBUS_WEB_SCREENSHOTS;
    const shots = saveTo ? path.resolve(saveTo) : path.join(dir, 'shots');
    mkdirSync(shots, { recursive: true });
    const agent = await Producer.connect(daemon.socket, 'gemini-cli/0.61.0');
    const other = await Producer.connect(daemon.socket, 'codex/0.9');
    try {
      const id = newId();
      agent.ask(id, [db, features, migrate, name], { timeoutMs: 600000 });
      // The agent's question must be the older one (the page shows the oldest first); two
      // connections' requests are otherwise taken in whichever order the daemon reads them.
      await agent.sync();
      const waiting = newId();
      other.ask(waiting, [{ ...name, header: 'Branch', question: 'Which branch should I rebase onto?' }],
        { timeoutMs: 240000 });
      await other.sync();
      const desktop = await browser.newContext({ viewport: { width: 1100, height: 720 }, colorScheme: 'light' });
      const phone = await browser.newContext({
        viewport: { width: 360, height: 780 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true,
        colorScheme: 'dark',
      });
      try {
        for (const [ctx, file] of [[desktop, 'askbus-web-desktop.png'], [phone, 'askbus-web-phone.png']]) {
          const p = await openPage(ctx, web);
          await p.getByRole('radio', { name: 'PostgreSQL', exact: true }).click();
          await p.getByRole('tab', { name: 'Features' }).click();
          await p.getByRole('checkbox', { name: 'Search', exact: true }).click();
          await p.getByRole('checkbox', { name: 'Webhooks', exact: true }).click();
          await p.getByRole('textbox', { name: 'Other answer' }).fill('Audit log');
          await p.locator('#queue-list li').nth(1).waitFor();
          await p.mouse.move(0, 0);
          const png = await p.screenshot({ fullPage: true });
          assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
          writeFileSync(path.join(shots, file), png);
          // The theme button overrides the system's choice.
          const theme = p.locator('#theme');
          await theme.click();
          assert.equal(await p.evaluate(() => document.documentElement.dataset.theme), 'light');
          await theme.click();
          assert.equal(await p.evaluate(() => document.documentElement.dataset.theme), 'dark');
          await theme.click();
          assert.equal(await p.evaluate(() => document.documentElement.dataset.theme), undefined);
          await p.close();
        }
      } finally {
        await desktop.close();
        await phone.close();
      }
    } finally {
      agent.close();
      other.close();
    }
  });
});
