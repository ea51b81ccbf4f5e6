// The History view of askbus web, in Chromium against the real askbusd (with its store) and
// the real `askbus web`: `askbus history`'s filters, newest first, a record's timeline on
// click, question text that holds HTML shown as text, and the route closed to a browser that
// is not signed in.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  Daemon, Producer, VIEWPORTS, Web, get, launchBrowser, newId, openPage, removeDir, tempDir,
} from './harness.mjs';

const HOSTILE = '<img src=x onerror="window.pwned=1"><b>bold</b> & <script>window.pwned=2</script>';

describe('History in askbus web', () => {
  let dir;
  let daemon;
  let web;
  let browser;
  let page;
  let producer;
  const question = newId('hq');
  const approval = newId('ha');

  before(async () => {
    dir = tempDir();
    daemon = await new Daemon(dir, { store: true }).start();
    web = await new Web(daemon.socket).start();
    browser = await launchBrowser();
    const context = await browser.newContext(VIEWPORTS[0][1]);
    page = await openPage(context, web);
    producer = await Producer.connect(daemon.socket, 'deploy-agent/2');
    // A question whose text is HTML, answered on the page; an approval denied there.
    producer.ask(question, [{ question: HOSTILE, header: 'Evil', type: 'text' }], { context: { project: 'shop', agent: 'gemini' } });
    await page.locator(`#dialog form[data-id="${question}"]`).waitFor();
    await page.locator('#dialog textarea, #dialog input[type="text"]').first().fill('fine');
    await page.getByRole('button', { name: /^Submit/ }).click();
    await producer.response(question);
    producer.approve(approval, { name: 'run_shell_command', args: { command: 'rm -rf /' } }, {
      type: 'exec', title: 'Confirm Shell Command', command: 'rm -rf /', rootCommand: 'rm', rootCommands: ['rm'],
    }, { context: { project: 'blog', agent: 'claude-code' } });
    await page.locator(`#dialog form[data-id="${approval}"]`).waitFor();
    await page.getByRole('button', { name: /^Deny/ }).click();
    await producer.decision(approval);
  });

  after(async () => {
    producer?.close();
    await browser?.close();
    await web?.stop();
    await daemon?.stop();
    if (dir) removeDir(dir);
  });

  test('the records, newest first; filters; a record\'s timeline; HTML shown as text', async () => {
    await page.getByRole('button', { name: 'History' }).click();
    await page.locator('#history-status', { hasText: '2 records' }).waitFor();
    assert.deepEqual(await page.locator('.history-row').evaluateAll((b) => b.map((x) => x.dataset.id)), [approval, question]);
    // The question's text is text: no element of it exists, no script of it ran.
    const row = page.locator(`.history-row[data-id="${question}"]`);
    assert.equal(await row.locator('.h-what').innerText(), HOSTILE);
    assert.equal(await page.locator('#history-view img, #history-view b, #history-view script').count(), 0);
    await row.click();
    const detail = page.locator('#history-detail');
    await detail.waitFor();
    assert.equal(await detail.locator('.h-question').innerText(), `Evil: ${HOSTILE}`);
    assert.equal(await page.locator('#history-view img, #history-view b, #history-view script').count(), 0);
    const steps = await detail.locator('.timeline li').allInnerTexts();
    assert.match(steps[0], /Asked by deploy-agent\/2 \(uid \d+, pid \d+\)/);
    assert.match(steps[1], /Ended: answered by human\/web/);
    assert.match(steps[2], /Answers: 1: fine/);
    assert.match(steps[3], /Delivered to the agent/);
    assert.equal(await page.evaluate(() => window.pwned), undefined);

    // askbus history's filters.
    const show = async (fill, want) => {
      await page.locator('#history-form').evaluate((f) => f.reset());
      await fill();
      await page.getByRole('button', { name: 'Show' }).click();
      await page.locator('#history-status', { hasText: want.length ? `${want.length} record` : 'No records match' }).waitFor();
      assert.deepEqual(await page.locator('.history-row').evaluateAll((b) => b.map((x) => x.dataset.id)), want);
    };
    await show(() => page.getByLabel('Project').last().fill('shop'), [question]);
    await show(() => page.getByLabel('Kind').selectOption('approval'), [approval]);
    await show(() => page.getByLabel('Agent').last().fill('claude-code'), [approval]);
    await show(() => page.getByLabel('Decided by').selectOption('rule'), []);
    await show(() => page.getByLabel('Since').fill('1h'), [approval, question]);
    await show(() => page.getByLabel('Until').fill('1h'), []);
    await show(() => page.getByLabel('Limit').fill('1'), [approval]);
    await page.getByRole('button', { name: 'More' }).click();
    await page.locator('#history-status', { hasText: '2 records' }).waitFor();
    // A time it cannot read is said, not guessed.
    await page.locator('#history-form').evaluate((f) => f.reset());
    await page.getByLabel('Since').fill('last tuesday-ish');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.locator('#history-status', { hasText: 'Not loaded: since:' }).waitFor();
    // Back to the pending view.
    await page.getByRole('button', { name: 'Back to pending' }).click();
    await page.locator('#main').waitFor();
  });

  test('the history route: JSON for a signed-in browser only', async () => {
    const out = await get(web, `${web.dir}history?project=shop`);
    assert.equal(out.status, 401);
    assert.doesNotMatch(out.body, /deploy-agent|pwned/);
    const ok = await get(web, `${web.dir}history?project=shop`, { cookie: web.cookie });
    assert.equal(ok.status, 200);
    assert.match(ok.headers['content-type'], /^application\/json/);
    assert.match(ok.headers['content-security-policy'], /default-src 'none'/);
    const body = JSON.parse(ok.body);
    assert.deepEqual(body.records.map((r) => r.correlationId), [question]);
    assert.equal(body.records[0].questions[0].question, HOSTILE);
  });
});
