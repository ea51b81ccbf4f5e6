// askbus web in Chromium (desktop and phone): who asks about what. Each request's context
// (agent, project, title; session and directory on demand) on the page, the waiting list
// grouped by project, the filter in the address and in the page (applied by the daemon to
// the page's subscription, so a filtered page is never sent another project's request, live
// or replayed), and `#q=ID` opening one request. Real askbusd, real `askbus web`, raw-frame
// producers.

import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  Daemon, Producer, VIEWPORTS, Web, WsClient, get, launchBrowser, newId, openPage, removeDir, tempDir,
} from './harness.mjs';

const migrate = { question: 'Add a migration for the `users` table?', header: 'Migrate', type: 'yesno' };
const release = { question: 'Tag v2.4.0 now?', header: 'Release', type: 'yesno' };
const ctx = (project, agent = 'gemini-cli/0.61.0', extra = {}) => ({ project, agent, ...extra });

for (const [screen, options] of VIEWPORTS) {
  describe(`request context in askbus web (${screen})`, () => {
    let dir;
    let daemon;
    let web;
    let browser;
    let context;
    let producer;
    const pages = [];

    before(async () => {
      dir = tempDir();
      daemon = await new Daemon(dir).start();
      web = await new Web(daemon.socket).start();
      browser = await launchBrowser();
      context = await browser.newContext(options);
      producer = await Producer.connect(daemon.socket);
    });

    /** A page of this test, closed after it. */
    async function open(rest = '') {
      const p = await openPage(context, web, rest);
      pages.push(p);
      return p;
    }

    // Each test leaves nothing pending: a fresh producer takes the old one's requests away.
    afterEach(async () => {
      for (const p of pages.splice(0)) await p.close();
      producer.close();
      producer = await Producer.connect(daemon.socket);
    });

    after(async () => {
      producer?.close();
      await browser?.close();
      await web?.stop();
      await daemon?.stop();
      if (dir) removeDir(dir);
    });

    test('each question shows agent, project and title; session and directory on demand', async () => {
      const page = await open();
      const id = newId();
      producer.ask(id, [migrate], {
        context: ctx('askbus', 'gemini-cli/0.61.0', {
          title: 'Cut the 2.4.0 release', session: 'sess-8f14e45f', cwd: '/home/dev/src/askbus',
        }),
      });
      const from = page.locator('.from');
      await from.locator('.agent', { hasText: 'gemini-cli/0.61.0' }).waitFor();
      assert.equal(await from.locator('.chip.project').innerText(), 'askbus');
      assert.equal(await page.locator('.dialog > .task').innerText(), 'Cut the 2.4.0 release');
      // The rest is one click away, not in the way.
      const more = page.locator('details.context');
      assert.equal(await more.locator('summary').innerText(), 'Session, directory, client');
      assert.equal(await page.getByText('/home/dev/src/askbus').isVisible(), false);
      await more.locator('summary').click();
      await page.getByText('/home/dev/src/askbus').waitFor();
      await page.getByText('sess-8f14e45f').waitFor();
      await page.getByText('test-agent/1').waitFor();
      await page.getByRole('radio', { name: 'Yes', exact: true }).click();
      await page.getByRole('button', { name: /^Submit/ }).click();
      assert.deepEqual((await producer.response(id)).answers, { 0: 'Yes' });
    });

    test('context text is text: markup in it is shown, never run', async () => {
      const page = await open();
      const evil = '<img src=x onerror="window.pwned=1">';
      producer.ask(newId(), [migrate], { context: { project: evil, agent: `${evil}/1`, title: evil } });
      await page.locator('.from .chip.project', { hasText: evil }).waitFor();
      assert.equal(await page.locator('#dialog img').count(), 0);
      assert.equal(await page.evaluate(() => window.pwned), undefined);
    });

    test('the waiting list is grouped by project, those without one last', async () => {
      const page = await open();
      const a1 = newId();
      producer.ask(a1, [migrate], { context: ctx('alpha', 'gemini-cli/0.61.0', { title: 'Alpha one' }) });
      producer.ask(newId(), [release], { context: ctx('beta') });
      producer.ask(newId(), [migrate]);
      producer.ask(newId(), [release], { context: ctx('alpha', 'claude-code/1.0') });
      await producer.sync();
      await page.locator('#queue-list .item').nth(3).waitFor();
      const groups = page.locator('#queue-list > li.group');
      assert.deepEqual((await groups.locator('.group-name').allInnerTexts()).map((t) => t.replace(/\s+/g, ' ')),
        ['alpha 2', 'beta 1', 'No project 1']);
      assert.equal(await groups.nth(0).locator('.item').count(), 2);
      assert.match(await groups.nth(0).locator('.item').first().innerText(), /Alpha one/);
      assert.equal(await page.locator('#queue-count').innerText(), '4');
    });

    test('the filter in the address: another project is never shown, replayed or live', async () => {
      const beta1 = newId();
      const alpha1 = newId();
      producer.ask(beta1, [migrate], { context: ctx('beta') });
      producer.ask(alpha1, [release], { context: ctx('alpha') });
      await producer.sync();
      const page = await open('?project=alpha&agent=gemini-cli');
      assert.equal(new URL(page.url()).search, '?project=alpha&agent=gemini-cli');
      await page.locator('.from .chip.project', { hasText: 'alpha' }).waitFor();
      assert.match(await page.locator('#filter-summary').innerText(), /project alpha, agent gemini-cli/);
      // Live: beta first, then alpha, on one connection: the daemon sends them in this order,
      // so once alpha's second question is on the page beta's would have been.
      const beta2 = newId();
      const alpha2 = newId();
      producer.ask(beta2, [migrate], { context: ctx('beta') });
      producer.ask(newId(), [migrate], { context: ctx('alpha', 'claude-code/1.0') });
      producer.ask(alpha2, [migrate], { context: ctx('alpha', 'gemini-cli/0.62.0') });
      await page.locator('#queue-list .item').nth(1).waitFor();
      assert.equal(await page.locator('#queue-list .item').count(), 2);
      assert.equal(await page.locator('#queue-list [data-project="beta"]').count(), 0);
      assert.equal(await page.title(), '(2) askbus');
      // What the page's subscription is sent, seen by a raw client with the same filter.
      const raw = await WsClient.connect(web, {}, '?project=alpha');
      try {
        const hello = await raw.next((m) => m.type === 'daemon' && m.state === 'connected');
        assert.deepEqual(hello.filter, { project: 'alpha' });
        assert.equal(hello.pending, 3, 'alpha\'s three requests, none of beta\'s');
        const last = newId();
        producer.ask(newId(), [migrate], { context: ctx('beta') });
        producer.ask(last, [migrate], { context: ctx('alpha') });
        await raw.next((m) => m.type === 'ask-user-request' && m.correlationId === last);
        const seen = raw.messages.filter((m) => m.type === 'ask-user-request').map((m) => m.context.project);
        assert.deepEqual(seen, ['alpha', 'alpha', 'alpha']);
        // An answer to a request outside the filter is refused by the daemon, and it stays.
        raw.send({ type: 'ask-user-response', correlationId: beta1, answers: { 0: 'Yes' } });
        const refused = await raw.next((m) => m.type === 'error');
        assert.equal(refused.code, 'forbidden');
        assert.equal(refused.correlationId, beta1);
      } finally {
        raw.close();
      }
    });

    test('the filter in the page: applied at once, put in the address, cleared again', async () => {
      const page = await open();
      const alpha = newId();
      const beta = newId();
      producer.ask(alpha, [migrate], { context: ctx('alpha', 'gemini-cli/0.61.0', { title: 'Alpha work' }) });
      producer.ask(beta, [release], { context: ctx('beta', 'codex/0.9') });
      await page.locator('#queue-list .item').nth(1).waitFor();
      await page.locator('#filter-box summary').click();
      // The fields offer what the page has seen.
      const offered = await page.locator('#filter-project-list option').evaluateAll((os) => os.map((o) => o.value));
      assert.deepEqual(offered, ['alpha', 'beta']);
      await page.getByRole('combobox', { name: 'Project', exact: true }).fill(' beta ');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page.waitForFunction(() => location.search === '?project=beta');
      await page.locator('#conn[data-state="up"]').waitFor();
      await page.locator('#queue').waitFor({ state: 'hidden' });
      await page.locator('.from .chip.project', { hasText: 'beta' }).waitFor();
      assert.equal(await page.getByText('Alpha work').count(), 0);
      // A new alpha request does not reach it; a beta one does.
      const beta2 = newId();
      producer.ask(newId(), [migrate], { context: ctx('alpha') });
      producer.ask(beta2, [migrate], { context: ctx('beta') });
      await page.locator('#queue-list .item').nth(1).waitFor();
      assert.equal(await page.locator('#queue-list .item').count(), 2);
      // A filter that is not one line is refused in the page, before anything is sent.
      await page.getByRole('combobox', { name: 'Agent', exact: true }).fill('a\u0001b');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page.getByRole('alert').filter({ hasText: 'the agent must be one line without control characters' }).waitFor();
      assert.equal(new URL(page.url()).search, '?project=beta');
      await page.getByRole('button', { name: 'Show all' }).click();
      await page.waitForFunction(() => location.search === '');
      await page.locator('#queue-list .item').nth(3).waitFor();
      assert.equal(await page.locator('#queue-count').innerText(), '4');
    });

    test('before it knows, the page says it is connecting, not "No questions waiting"', async () => {
      const r = await get(web, web.dir, { Cookie: web.cookie });
      assert.equal(r.status, 200);
      assert.match(r.body, /<h2 id="empty-title">Connecting…<\/h2>/);
      assert.doesNotMatch(r.body, /No questions waiting/);
    });

    test('a filter with nothing waiting says so, not "No questions waiting"', async () => {
      producer.ask(newId(), [migrate], { context: ctx('beta') });
      await producer.sync();
      const page = await open('?project=gamma');
      await page.locator('#empty', { hasText: 'Nothing waiting in this filter' }).waitFor();
      assert.match(await page.locator('#empty-text').innerText(), /project gamma/);
    });

    test('a filter in the address that is not valid is ignored, saying why', async () => {
      producer.ask(newId(), [migrate], { context: ctx('beta') });
      await producer.sync();
      const page = await open(`?project=${'p'.repeat(129)}&agent=codex`);
      await page.locator('#notice', { hasText: 'Filter in the address ignored: the project must be at most 128 characters' }).waitFor();
      assert.equal(new URL(page.url()).search, '?agent=codex');
      // And the bridge refuses such a filter itself (a page that skipped the checks).
      const raw = await WsClient.connect(web, {}, '?project=a%01b');
      try {
        const e = await raw.next((m) => m.type === 'error');
        assert.equal(e.code, 'invalid-filter');
        assert.equal(e.message, 'filter project must be one line without control characters');
        assert.equal(raw.messages.some((m) => m.type === 'ask-user-request'), false);
      } finally {
        raw.close();
      }
    });

    test('#q=ID opens that request, even when others are older', async () => {
      const first = newId();
      const second = newId();
      producer.ask(first, [migrate], { context: ctx('alpha') });
      producer.ask(second, [release], { context: ctx('beta') });
      await producer.sync();
      const page = await open(`#q=${encodeURIComponent(second)}`);
      await page.locator('.qtext', { hasText: 'Tag v2.4.0 now?' }).waitFor();
      assert.equal(await page.locator(`#queue-list .item[aria-current="true"]`).getAttribute('data-id'), second);
      // Focus is in the dialog: a number key answers it.
      await page.keyboard.press('1');
      assert.deepEqual((await producer.response(second)).answers, { 0: 'Yes' });
      // A link to another pending request, followed in the open page.
      const third = newId();
      producer.ask(third, [{ ...migrate, header: 'Third' }]);
      // Wait for that very request in the list: the second item may still be the answered one.
      await page.locator(`#queue-list .item[data-id="${third}"]`).waitFor();
      await page.evaluate((id) => { location.hash = `q=${encodeURIComponent(id)}`; }, third);
      await page.locator(`#dialog form[data-id="${third}"]`).waitFor();
      assert.equal(await page.locator('#queue-list .item[aria-current="true"]').getAttribute('data-id'), third);
    });

    test('#q=ID of a request that already ended says so clearly', async () => {
      const id = newId();
      producer.ask(id, [migrate]);
      await producer.sync();
      producer.send({ type: 'ask-user-cancel', correlationId: id });
      assert.equal((await producer.response(id)).reason, 'withdrawn');
      const other = newId();
      producer.ask(other, [release]);
      await producer.sync();
      const page = await open(`#q=${encodeURIComponent(id)}`);
      await page.locator('#notice', {
        hasText: `The request you opened (${id}) is no longer waiting: it was answered, timed out or withdrawn.`,
      }).waitFor();
      // The page still shows what is waiting.
      await page.locator('.qtext', { hasText: 'Tag v2.4.0 now?' }).waitFor();
      // With nothing pending at all, and with a filter that might hide it, it says that too.
      const empty = await open(`?project=alpha#q=${encodeURIComponent(id)}`);
      await empty.locator('#notice', { hasText: "(or it is not in this page's filter: project alpha)" }).waitFor();
    });
  });
}
