// The chat page at / in real headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core): the page
// lists the model, a typed message gets a streamed answer equal to what the API gives for the same request, an
// image is uploaded and answered (vision model), Stop ends an answer mid-way and frees the server's slot, and a
// screenshot is written (docs/chat_page.png when a path is given) and checked to be a real, non-blank image.
//
//   node chat_page_test.js PIPIT_BINARY VL_MODEL_DIR NODE_PREFIX IMAGE.png [SCREENSHOT.png]
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');

const { startServer, stopServer } = require('./server_util.js');

const [pipit, model, prefix, image, shotPath] = process.argv.slice(2);
if (!image) {
  console.error('usage: node chat_page_test.js PIPIT_BINARY VL_MODEL_DIR NODE_PREFIX IMAGE.png [SCREENSHOT.png]');
  process.exit(2);
}
const { chromium } = require(path.join(path.resolve(prefix), 'node_modules', 'playwright-core'));
const CHROMIUM = process.env.PIPIT_CHROMIUM || '/usr/bin/chromium';

// PNG size and whether its pixels vary (a blank page would be one colour): decodes the IDAT stream.
function pngStats(buf) {
  assert.equal(buf.subarray(0, 8).toString('hex'), '89504e470d0a1a0a');
  let off = 8, w = 0, h = 0, idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off), type = buf.toString('ascii', off + 4, off + 8);
    if (type === 'IHDR') { w = buf.readUInt32BE(off + 8); h = buf.readUInt32BE(off + 12); }
    if (type === 'IDAT') idat.push(buf.subarray(off + 8, off + 8 + len));
    off += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const distinct = new Set();
  for (let i = 0; i < raw.length && distinct.size < 64; i += 97) distinct.add(raw[i]);
  return { w, h, distinct: distinct.size };
}

async function health(url) {
  return (await fetch(url + '/health')).json();
}

async function main() {
  const srv = await startServer(pipit, model, ['--parallel', '2', '--ctx', '4096']);
  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  let checks = 0;
  try {
    const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const resp = await page.goto(srv.url + '/');
    assert.equal(resp.status(), 200);
    assert.match(resp.headers()['content-security-policy'], /default-src 'self'/);
    await page.waitForFunction(() => /tokens/.test(document.getElementById('model').textContent));
    assert.match(await page.textContent('#model'), /qwen2_vl_chat · 4096 tokens · images/);
    assert.equal(await page.isVisible('#image'), true);  // a vision model: the upload is offered
    checks++;

    // a message, streamed: the page's answer equals the API's for the same request
    await page.fill('#system', 'You are terse.');
    await page.fill('#temperature', '0');
    await page.fill('#max_tokens', '24');
    await page.fill('#input', 'What is the capital of France?');
    await page.press('#input', 'Enter');
    await page.waitForSelector('.assistant[data-state="done"]', { timeout: 60000 });
    const shown = await page.textContent('.assistant[data-state="done"] span');
    const api = await (await fetch(srv.url + '/v1/chat/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'system', content: 'You are terse.' },
                                        { role: 'user', content: 'What is the capital of France?' }],
                             temperature: 0, top_p: 0.95, max_tokens: 24 }),
    })).json();
    assert.equal(shown, api.choices[0].message.content);
    assert.match(await page.textContent('#status'), /tokens · [0-9.]+ tokens\/s/);
    checks++;

    // an image: attached, shown in the user's message, answered
    await page.setInputFiles('#image', image);
    await page.waitForFunction(() => /attached/.test(document.getElementById('preview').textContent));
    await page.fill('#input', 'What is in this picture?');
    await page.click('#send');
    await page.waitForFunction(() => document.querySelectorAll('.assistant[data-state="done"]').length === 2,
                               null, { timeout: 120000 });
    assert.equal(await page.locator('.user img').count(), 1);
    assert.equal(await page.locator('.error').count(), 0);
    checks++;

    // Stop mid-answer: a long sampled answer is cut, the page says so and the server frees the slot
    await page.fill('#temperature', '1');
    await page.fill('#max_tokens', '3500');
    await page.fill('#input', 'Tell me a very long story.');
    await page.click('#send');
    await page.waitForFunction(() => {
      const a = document.querySelectorAll('.assistant');
      return a.length === 3 && a[2].textContent.length > 20;
    }, null, { timeout: 60000 });
    // The click from inside the page: at ~1,400 tok/s (the sampler no longer sorts the vocabulary) the page's main
    // thread is busy re-laying out the growing answer, and Playwright's click (which waits for two stable animation
    // frames) could come after the last token, when there is nothing left to stop.
    await page.evaluate(() => document.getElementById('stop').click());
    await page.waitForSelector('.assistant[data-state="stopped"]', { timeout: 10000 });
    assert.match(await page.textContent('#status'), /stopped after \d+ tokens/);
    const deadline = Date.now() + 15000;
    let h = await health(srv.url);
    while (h.slots_busy !== 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      h = await health(srv.url);
    }
    assert.equal(h.slots_busy, 0, 'the stopped answer still holds a slot');
    assert.ok(h.tokens_generated < 24 + 3500 + 3500, 'the answer ran to its end');
    assert.equal(await page.isEnabled('#send'), true);
    checks++;

    const shot = await page.screenshot({ fullPage: false });
    const st = pngStats(shot);
    assert.equal(st.w, 1100);
    assert.equal(st.h, 720);
    assert.ok(st.distinct > 8, 'the screenshot is blank');
    if (shotPath) fs.writeFileSync(shotPath, shot);
    assert.deepEqual(errors, []);
    checks++;
  } finally {
    await browser.close();
    const { code, signal } = await stopServer(srv);
    assert.equal(code, 0, `pipit serve exited with ${code} (${signal}):\n${srv.log()}`);
  }
  console.log(`[chat-page] ok: ${checks} checks`);
}

main().catch((e) => {
  console.error('[chat-page] FAIL', e);
  process.exit(1);
});
