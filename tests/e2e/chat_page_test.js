// The chat page at / in real headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core), on a phone
// (390x844, touch) and a desktop (1280x800). For each: the page lists the model; the input box and Send are on
// screen and of usable height, and the page itself never scrolls (only the log); a typed message gets a streamed
// answer equal to what the API gives for the same request; a long answer streams (earlier messages are not
// rebuilt per token) and Stop cuts it and frees the server's slot; Regenerate replaces the last answer; Edit sends
// a changed message again from there; a reload keeps the conversation and the settings; conversations are made,
// switched, renamed and deleted; Markdown and code blocks become elements (a stored answer, and a streamed one
// with delta.reasoning_content folded into a closed <details>); markup in an answer (<img onerror>, <script>)
// never runs, neither through the sanitiser nor, bypassing it, past the page's CSP; copy works; dark mode follows
// the system and the toggle, and the toggle survives a reload. An image is attached and answered (vision model).
// Screenshots (phone and desktop, light and dark) go to SHOT_DIR and are checked to be real, non-blank images.
//
//   node chat_page_test.js PIPIT_BINARY VL_MODEL_DIR NODE_PREFIX IMAGE.png [SHOT_DIR]
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');

const { startServer, stopServer } = require('./server_util.js');

const [pipit, model, prefix, image, shotDir] = process.argv.slice(2);
if (!image) {
  console.error('usage: node chat_page_test.js PIPIT_BINARY VL_MODEL_DIR NODE_PREFIX IMAGE.png [SHOT_DIR]');
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

// The stored conversation on screen (what a reload will show).
function storedConversation(page) {
  return page.evaluate(() => {
    const id = JSON.parse(localStorage.getItem('pipit.current'));
    return JSON.parse(localStorage.getItem('pipit.chat.' + id));
  });
}

// Waits until no answer streams and there are `n` finished answers on screen.
async function waitAnswers(page, n, timeout = 120000) {
  await page.waitForFunction((want) => {
    const a = document.querySelectorAll('.msg.assistant');
    return a.length === want && !document.querySelector('.msg[data-state="streaming"]') &&
      !document.getElementById('send').disabled;
  }, n, { timeout });
}

// Luminance of the page background (0 black .. 255 white).
function background(page) {
  return page.evaluate(() => {
    const m = getComputedStyle(document.body).backgroundColor.match(/\d+/g).map(Number);
    return 0.2126 * m[0] + 0.7152 * m[1] + 0.0722 * m[2];
  });
}

async function shot(page, name, w, h) {
  const png = await page.screenshot({ fullPage: false });
  const st = pngStats(png);
  assert.equal(st.w, w);
  assert.equal(st.h, h);
  assert.ok(st.distinct > 8, `the screenshot ${name} is blank`);
  if (shotDir) fs.writeFileSync(path.join(shotDir, name), png);
}

// Opens the settings dialog the way a user does (on a phone, through the drawer), sets `fields`, saves.
async function setSettings(page, phone, fields) {
  if (phone) {
    await page.click('#menu');
    await page.waitForFunction(() => document.getElementById('sidebar').getBoundingClientRect().left >= 0);
  }
  await page.click('#opensettings');
  for (const [k, v] of Object.entries(fields)) await page.fill('#' + k, String(v));
  await page.click('#savesettings');
  await page.waitForFunction(() => !document.getElementById('settings').open);
}

async function send(page, phone, text) {
  await page.fill('#input', text);
  if (phone) await page.click('#send');  // on a touch screen Enter is a new line
  else await page.press('#input', 'Enter');
}

// The input box and Send: inside the viewport, tall enough to use, and the page itself not scrolled or grown.
async function checkComposer(page, w, h, what) {
  for (const id of ['#input', '#send']) {
    const b = await page.locator(id).boundingBox();
    assert.ok(b, `${id} is not shown (${what})`);
    assert.ok(b.x >= 0 && b.y >= 0 && b.x + b.width <= w + 0.5 && b.y + b.height <= h + 0.5,
              `${id} is off screen at ${w}x${h} (${what}): ${JSON.stringify(b)}`);
    assert.ok(b.height >= 40, `${id} is ${b.height} px high (${what})`);
  }
  const input = await page.locator('#input').boundingBox();
  assert.ok(input.width >= 0.5 * w - 60, `the message box is ${input.width} px wide at ${w} px (${what})`);
  const doc = await page.evaluate(() => ({ sh: document.scrollingElement.scrollHeight, y: window.scrollY }));
  assert.ok(doc.sh <= h && doc.y === 0, `the page grew to ${doc.sh} px (${what})`);
}

async function viewport(browser, srv, phone) {
  const [w, h] = phone ? [390, 844] : [1280, 800];
  const tag = phone ? 'phone' : 'desktop';
  // the phone says it prefers dark, the desktop light: the page follows either until the toggle says otherwise
  const ctx = await browser.newContext({ viewport: { width: w, height: h }, isMobile: phone, hasTouch: phone,
                                         colorScheme: phone ? 'dark' : 'light' });
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: srv.url });
  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  let checks = 0;
  const ok = (what) => {
    checks++;
    console.log(`[chat-page] ${tag}: ${what}`);
  };
  try {
    await pageChecks(page, srv, phone, w, h, tag, ok);
  } catch (e) {  // what the page showed, for whoever reads the failure
    await page.screenshot({ path: path.join(shotDir || '.', `${tag}_failure.png`) }).catch(() => {});
    const state = await page.evaluate(() => ({
      status: document.getElementById('status').textContent,
      states: Array.from(document.querySelectorAll('.msg')).map((m) => `${m.className}:${m.dataset.state}`),
    })).catch(() => null);
    console.error(`[chat-page] ${tag} failed; the page: ${JSON.stringify(state)}; errors: ${JSON.stringify(errors)}`);
    throw e;
  }
  assert.deepEqual(errors, []);
  await ctx.close();
  return checks;
}

async function pageChecks(page, srv, phone, w, h, tag, ok) {
  const resp = await page.goto(srv.url + '/');
  assert.equal(resp.status(), 200);
  const csp = resp.headers()['content-security-policy'];
  assert.match(csp, /default-src 'self'/);
  assert.match(csp, /script-src 'self'(;|$)/);  // no inline scripts: the page's own code is /assets/chat.js
  await page.waitForFunction(() => /tokens/.test(document.getElementById('model').textContent));
  assert.match(await page.textContent('#model'), /qwen2_vl_chat · 4096 tokens · images/);
  assert.equal(await page.isVisible('#attach'), true);  // a vision model: the image button is offered
  assert.equal(await page.evaluate(() => window.pipitChat.haveMarkdown), true,
               'marked / DOMPurify missing from the build (see the configure warning)');
  await checkComposer(page, w, h, 'empty');
  if (phone) {  // storage written by something else (an older page, a hand edit) is read, not trusted
    await page.evaluate(() => {
      localStorage.setItem('pipit.chats', '[null, 5, {"id": "zz"}]');
      localStorage.setItem('pipit.current', '"zz"');
      localStorage.setItem('pipit.chat.zz', '{"messages": [null, 7, {"role": "user", "content": 3, "image": "x"}]}');
      localStorage.setItem('pipit.settings', '{"temperature": "1\'", "max_tokens": {}}');
    });
    await page.reload();
    await page.waitForSelector('.msg.user');
    assert.equal(await page.textContent('.msg.user .text'), '3');
    assert.equal(await page.locator('.msg.user img').count(), 0);
    assert.equal(await page.textContent('#convs li .title'), 'Untitled');
    await page.evaluate(() => localStorage.clear());
    await page.reload();
    await page.waitForFunction(() => /tokens/.test(document.getElementById('model').textContent));
    assert.equal(await page.locator('.msg').count(), 0);
  }
  if (phone) {  // the sidebar is a drawer: off screen until the menu button, gone again on the scrim
    assert.equal(await page.isVisible('#newchat'), false);
    await page.click('#menu');
    await page.waitForFunction(() => document.getElementById('sidebar').getBoundingClientRect().left >= 0);
    assert.equal(await page.isVisible('#newchat'), true);
    await page.mouse.click(w - 10, h / 2);
    await page.waitForFunction(() => getComputedStyle(document.getElementById('sidebar')).visibility === 'hidden');
    await page.fill('#input', 'one');
    await page.press('#input', 'Enter');
    assert.equal(await page.inputValue('#input'), 'one\n');
    assert.equal(await page.locator('.msg').count(), 0);
  } else {
    assert.equal(await page.isVisible('#newchat'), true);
  }
  ok('model listed, composer on screen, sidebar ' + (phone ? 'a drawer' : 'shown'));

  // a message, streamed: the page's answer equals the API's for the same request
  await setSettings(page, phone, { system: 'You are terse.', temperature: 0, top_p: 0.95, top_k: 40, max_tokens: 24 });
  await send(page, phone, 'What is the capital of France?');
  await waitAnswers(page, 1, 60000);
  const api = await (await fetch(srv.url + '/v1/chat/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'system', content: 'You are terse.' },
                                      { role: 'user', content: 'What is the capital of France?' }],
                           temperature: 0, top_p: 0.95, top_k: 40, max_tokens: 24 }),
  })).json();
  let stored = await storedConversation(page);
  assert.equal(stored.messages.length, 2);
  assert.equal(stored.messages[1].content, api.choices[0].message.content);
  assert.equal(stored.title, 'What is the capital of France?');
  assert.match(await page.textContent('#status'), /tokens · [0-9.]+ tokens\/s/);
  assert.equal(await page.locator('.msg.assistant[data-state="done"]').count(), 1);
  await checkComposer(page, w, h, 'one answer');
  ok('sent, answer == the API\'s');

  // a long answer streams (the earlier message's element stays while it grows: one message repainted, not the
  // log), then Stop cuts it and the server frees the slot. A sampled answer of a random-weight model can end on
  // its own (end-of-text drawn after a few hundred tokens: seen once in ~25 runs); then another one is asked for.
  await setSettings(page, phone, { temperature: 1, max_tokens: 3500 });
  let stopped = false;
  for (let attempt = 1; attempt <= 3 && !stopped; attempt++) {
    const n = await page.locator('.msg.assistant').count() + 1;
    await send(page, phone, 'Tell me a very long story.');
    await page.waitForFunction((n) => {
      const a = document.querySelectorAll('.msg.assistant');
      return a.length === n && (a[n - 1].dataset.state !== 'streaming' || a[n - 1].textContent.length > 20);
    }, n, { timeout: 60000 });
    const len1 = await page.evaluate((n) => {
      window.__firstMsg = document.querySelector('.msg.user');
      return document.querySelectorAll('.msg.assistant')[n - 1].textContent.length;
    }, n);
    // on until the answer overflows the log (the page must not grow with it)
    await page.waitForFunction(([n, l]) => {
      const a = document.querySelectorAll('.msg.assistant')[n - 1], log = document.getElementById('log');
      return (a.textContent.length > l + 20 && log.scrollHeight > log.clientHeight + 50) ||
        a.dataset.state !== 'streaming';
    }, [n, len1], { timeout: 30000 });
    await checkComposer(page, w, h, 'streaming');
    if (shotDir && attempt === 1) fs.writeFileSync(path.join(shotDir, `${tag}_streaming.png`), await page.screenshot());
    // Looked at and stopped in one step inside the page: Playwright's own click waits for stable animation
    // frames, and a fast stream could end first, leaving nothing to stop.
    const streaming = await page.evaluate((n) => {
      const log = document.getElementById('log'), stop = document.getElementById('stop');
      const r = {
        state: document.querySelectorAll('.msg.assistant')[n - 1].dataset.state,
        kept: window.__firstMsg.isConnected,
        follows: log.scrollHeight - log.scrollTop - log.clientHeight < 5,  // the log scrolls with the answer
        stopShown: !stop.hidden,
      };
      if (r.state === 'streaming') stop.click();
      return r;
    }, n);
    if (streaming.state !== 'streaming') {
      console.log(`[chat-page] ${tag}: the long answer ended by itself (${streaming.state}) before Stop; again`);
      continue;
    }
    assert.deepEqual(streaming, { state: 'streaming', kept: true, follows: true, stopShown: true },
                     'the log was rebuilt while the answer streamed, or did not follow it, or Stop was not shown');
    stopped = true;
  }
  assert.ok(stopped, 'three long answers in a row ended before Stop');
  await page.waitForSelector('.msg.assistant[data-state="stopped"]', { timeout: 10000 });
  assert.match(await page.textContent('#status'), /stopped after \d+ tokens/);
  const deadline = Date.now() + 15000;
  let hl = await health(srv.url);
  while (hl.slots_busy !== 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    hl = await health(srv.url);
  }
  assert.equal(hl.slots_busy, 0, 'the stopped answer still holds a slot');
  assert.equal(await page.isEnabled('#send'), true);
  await checkComposer(page, w, h, 'after a long answer');
  ok('streamed, stopped, slot freed');

  // Regenerate: the stopped answer is replaced by a new one
  await setSettings(page, phone, { temperature: 0, max_tokens: 24 });
  stored = await storedConversation(page);
  const count = stored.messages.length, before = stored.messages[count - 1];
  assert.equal(before.state, 'stopped');
  await page.click('.msg.assistant:last-child .regen');
  await waitAnswers(page, count / 2);
  stored = await storedConversation(page);
  assert.equal(stored.messages.length, count);
  assert.equal(stored.messages[count - 1].state, 'done');
  assert.notEqual(stored.messages[count - 1].content, before.content);
  ok('regenerated');

  // Edit the first message: the conversation goes on from there, the later turns are gone
  await page.click('.msg.user[data-index="0"] .edit');
  await page.fill('.msg.editing textarea', 'What is the capital of Italy?');
  await page.click('.msg.editing .editsend');
  await waitAnswers(page, 1);
  stored = await storedConversation(page);
  assert.deepEqual(stored.messages.map((m) => m.role), ['user', 'assistant']);
  assert.equal(stored.messages[0].content, 'What is the capital of Italy?');
  ok('edited and re-sent');

  // a reload keeps the conversation and the settings
  const shown = await page.textContent('#log');
  await page.reload();
  await page.waitForSelector('.msg.assistant');
  assert.equal(await page.textContent('#log'), shown);
  assert.equal((await storedConversation(page)).messages.length, 2);
  if (phone) await page.click('#menu');
  await page.click('#opensettings');
  assert.equal(await page.inputValue('#system'), 'You are terse.');
  assert.equal(await page.inputValue('#max_tokens'), '24');
  await shot(page, `${tag}_settings.png`, w, h);
  await page.click('#cancelsettings');
  ok('reload keeps the conversation and the settings');

  // conversations: a new one, switch back, rename, delete
  if (phone) await page.click('#newchat2');
  else await page.click('#newchat');
  assert.equal(await page.locator('.msg').count(), 0);
  await send(page, phone, 'Hello');
  await waitAnswers(page, 1);
  if (phone) await page.click('#menu');
  assert.equal(await page.locator('#convs li').count(), 2);
  assert.equal(await page.textContent('#convs li:nth-child(1) .title'), 'Hello');  // newest first
  await page.click('#convs li:nth-child(2) .title');
  await page.waitForFunction(() => /Italy/.test(document.getElementById('log').textContent));
  if (phone) await page.click('#menu');
  await page.click('#convs li:nth-child(2) .rename');
  await page.fill('#convs li input', 'Capitals');
  await page.press('#convs li input', 'Enter');
  assert.equal(await page.textContent('#convname'), 'Capitals');
  page.once('dialog', (d) => d.accept());
  await page.click('#convs li:nth-child(2) .delete');  // "Hello"
  await page.waitForFunction(() => document.querySelectorAll('#convs li').length === 1);
  assert.equal(await page.textContent('#convs li .title'), 'Capitals');
  if (phone) await page.keyboard.press('Escape');
  await page.reload();
  await page.waitForSelector('.msg.assistant');
  assert.equal(await page.textContent('#convname'), 'Capitals');
  assert.equal(await page.evaluate(() => JSON.parse(localStorage.getItem('pipit.chats')).length), 1);
  ok('conversations: new, switch, rename, delete');

  // Markdown, from stored answers: elements, not text; markup in an answer never runs; copy
  await page.evaluate(() => {
    const c = {
      id: 'md', title: 'Markdown', named: true, messages: [
        { role: 'user', content: 'Show me some Markdown.', state: 'done' },
        { role: 'assistant', state: 'done', reasoning: 'The user wants an example.',
          content: '# Title\n\nSome **bold** and `inline` code.\n\n```python\nprint("hi")\n```\n\n- one\n- two\n\n' +
                   '| a | b |\n|---|---|\n| 1 | 2 |\n\n> A quote with [a link](https://example.com/).' },
        { role: 'user', content: 'Show me <b>markup</b>', state: 'done' },
        { role: 'assistant', state: 'done',
          content: 'Markup: <img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>' +
                   '<a href="javascript:window.__pwned=3" id="send">link</a> <b onclick="window.__pwned=8">b</b>' },
      ],
    };
    localStorage.setItem('pipit.chat.md', JSON.stringify(c));
    const idx = JSON.parse(localStorage.getItem('pipit.chats'));
    localStorage.setItem('pipit.chats', JSON.stringify([{ id: 'md', title: 'Markdown', updated: Date.now() }, ...idx]));
    localStorage.setItem('pipit.current', JSON.stringify('md'));
  });
  await page.reload();
  await page.waitForSelector('.msg.assistant .md h1');
  const md = await page.evaluate(() => {
    const [a, bad] = document.querySelectorAll('.msg.assistant .md');
    const link = a.querySelector('blockquote a');
    return {
      h1: a.querySelector('h1') && a.querySelector('h1').textContent,
      strong: a.querySelector('p strong') && a.querySelector('p strong').textContent,
      inline: a.querySelector('p code') && a.querySelector('p code').textContent,
      code: a.querySelector('pre code.language-python') && a.querySelector('pre code').textContent,
      items: a.querySelectorAll('ul li').length,
      cells: a.querySelectorAll('table td').length,
      link: link && [link.getAttribute('href'), link.target, link.rel],
      think: !!document.querySelector('.msg.assistant details.think:not([open])'),
      badText: bad.textContent.trim(),
      scripts: document.querySelectorAll('#log script').length,
      handlers: document.querySelectorAll('#log [onerror], #log [onclick]').length,
      jsLinks: Array.from(bad.querySelectorAll('a')).filter((x) => /script/i.test(x.getAttribute('href') || '')).length,
      ids: document.querySelectorAll('#log [id]').length,
      userMarkup: document.querySelector('.msg.user b') !== null,
      userText: document.querySelectorAll('.msg.user .text')[1].textContent,
    };
  });
  assert.deepEqual(md, { h1: 'Title', strong: 'bold', inline: 'inline', code: 'print("hi")\n', items: 2, cells: 2,
                         link: ['https://example.com/', '_blank', 'noopener noreferrer nofollow'], think: true,
                         badText: 'Markup: link b', scripts: 0, handlers: 0, jsLinks: 0, ids: 0, userMarkup: false,
                         userText: 'Show me <b>markup</b>' });
  await page.click('.msg.assistant:nth-child(4) a');  // the link without its javascript: URL
  await page.click('.msg.assistant:nth-child(4) b');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await page.evaluate(() => window.__pwned), undefined, 'markup from an answer ran');
  await page.evaluate(() => { document.getElementById('log').scrollTop = 0; });
  await shot(page, `${tag}_markdown.png`, w, h);
  await page.click('.msg.assistant pre .copycode');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'print("hi")\n');
  await page.click('.msg.assistant .actions .copy');
  assert.match(await page.evaluate(() => navigator.clipboard.readText()), /^# Title\n/);
  ok('Markdown and code as elements, sanitised, copied');

  // The CSP, the wall behind the sanitiser: markup put into the page unsanitised still does not run.
  await page.evaluate(() => {
    const d = document.createElement('div');
    d.innerHTML = '<img src="data:," onerror="window.__pwned = 4"><img src=nope onerror="window.__pwned = 5">';
    document.body.appendChild(d);
  });
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await page.evaluate(() => window.__pwned), undefined, 'an inline handler ran despite the CSP');
  await page.evaluate(() => document.body.lastChild.remove());
  ok('the CSP blocks inline handlers');

  // A streamed answer with a thinking part (a reply crafted here, as the test models do not think): the reasoning is
  // folded into a closed <details>, the Markdown is rendered, the markup does not run.
  const pieces = [
    { reasoning_content: 'First ' }, { reasoning_content: 'I think.' }, { content: 'Here:\n\n```js\nlet a' },
    { content: ' = 1;\n```\n\n**done** <img src=x onerror="window.__pwned=6"><scr' },
    { content: 'ipt>window.__pwned=7</script>' },
  ];
  const sse = pieces.map((d) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: d }] })}\n\n`).join('') +
    `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
                              usage: { completion_tokens: 5 } })}\n\ndata: [DONE]\n\n`;
  await page.route('**/v1/chat/completions',
                   (r) => r.fulfill({ status: 200, contentType: 'text/event-stream', body: sse }));
  await send(page, phone, 'Think first.');
  await waitAnswers(page, 3);
  await page.unroute('**/v1/chat/completions');
  const streamed = await page.evaluate(() => {
    const a = document.querySelectorAll('.msg.assistant')[2];
    const d = a.querySelector('details.think');
    return { think: d && d.querySelector('.thinktext').textContent, open: d && d.open,
             code: a.querySelector('pre code.language-js') && a.querySelector('pre code').textContent,
             bold: a.querySelector('.md strong') && a.querySelector('.md strong').textContent,
             scripts: document.querySelectorAll('#log script').length,
             handlers: document.querySelectorAll('#log [onerror]').length };
  });
  assert.deepEqual(streamed, { think: 'First I think.', open: false, code: 'let a = 1;\n', bold: 'done', scripts: 0,
                               handlers: 0 });
  await page.click('.msg.assistant:last-child details.think summary');
  assert.equal(await page.isVisible('.msg.assistant:last-child .thinktext'), true);
  assert.equal(await page.evaluate(() => window.__pwned), undefined, 'markup from a streamed answer ran');
  ok('streamed thinking folded, Markdown rendered, markup inert');

  // Streaming render: block by block it gives what the whole render gives, and keeps the finished blocks.
  const inc = await page.evaluate(() => {
    const text = 'Para one.\n\n```c\nint x;\n```\n\n1. a\n2. b\n\n> quote\n\nlast *words*';
    const el = document.createElement('div');
    let first = null, same = true;
    for (let i = 1; i <= text.length; i++) {
      window.pipitChat.markdownStreaming(el, text.slice(0, i));
      if (i === 12) first = el.firstChild;
      if (i > 12 && el.firstChild !== first) same = false;
    }
    return { html: el.innerHTML, whole: window.pipitChat.markdown(text).innerHTML, same };
  });
  assert.equal(inc.html, inc.whole);
  assert.equal(inc.same, true, 'a finished block was rendered again');
  ok('streaming render == whole render, finished blocks kept');

  // an image: attached, shown in the user's message, answered (once: the vision encoder is the slow part)
  if (!phone) {
    await page.setInputFiles('#image', image);
    await page.waitForFunction(() => /attached/.test(document.getElementById('preview').textContent));
    await send(page, phone, 'What is in this picture?');
    await waitAnswers(page, 4);
    assert.equal(await page.locator('.msg.user img.attached').count(), 1);
    assert.equal(await page.locator('.msg.error').count(), 0);
    stored = await storedConversation(page);
    assert.match(stored.messages[6].image, /^data:image\/png;base64,/);
    ok('image attached and answered');
  }
  await checkComposer(page, w, h, 'a full log');

  // dark mode: the system's preference (auto), then the toggle, kept over a reload
  assert.equal(await page.textContent('#theme'), '◐ Auto');
  const auto = await background(page);
  assert.ok(phone ? auto < 60 : auto > 200, `auto theme background ${auto} for a ${phone ? 'dark' : 'light'} system`);
  await shot(page, `${tag}_${phone ? 'dark' : 'light'}.png`, w, h);
  const toggle = async () => {
    if (phone) await page.click('#menu');
    await page.click('#theme');
    if (phone) {
      await page.keyboard.press('Escape');
      await page.waitForFunction(() => getComputedStyle(document.getElementById('sidebar')).visibility === 'hidden');
    }
  };
  await toggle();  // auto -> light
  assert.ok(await background(page) > 200, 'light theme is not light');
  if (phone) await shot(page, `${tag}_light.png`, w, h);
  await toggle();  // light -> dark
  assert.ok(await background(page) < 60, 'dark theme is not dark');
  await page.reload();
  await page.waitForSelector('.msg.assistant');
  assert.ok(await background(page) < 60, 'the dark theme did not survive a reload');
  assert.equal(await page.textContent('#theme'), '◐ Dark');
  if (!phone) await shot(page, `${tag}_dark.png`, w, h);
  if (phone) {  // the drawer, open, for the record
    await page.click('#menu');
    await page.waitForTimeout(300);
    await shot(page, `${tag}_drawer_dark.png`, w, h);
  }
  ok('dark mode: system, toggle, kept');
}

async function main() {
  if (shotDir) fs.mkdirSync(shotDir, { recursive: true });
  const srv = await startServer(pipit, model, ['--parallel', '2', '--ctx', '4096']);
  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  let checks = 0;
  try {
    // the assets the page loads: this server's own, as JavaScript
    for (const a of ['chat.js', 'marked.min.js', 'purify.min.js']) {
      const r = await fetch(`${srv.url}/assets/${a}`);
      assert.equal(r.status, 200, a);
      assert.match(r.headers.get('content-type'), /^text\/javascript/);
      assert.ok((await r.text()).length > 5000, `${a} is a stub: the build did not find it`);
    }
    checks++;
    checks += await viewport(browser, srv, true);
    checks += await viewport(browser, srv, false);
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
