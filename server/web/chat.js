// pipit's chat page (server/web/index.html): conversations kept in localStorage, answers streamed from
// /v1/chat/completions and shown as Markdown (marked) made safe by DOMPurify before it touches the page, the thinking
// part (delta.reasoning_content) folded. Plain JS, no framework. Served as /assets/chat.js from the binary so the
// page's Content-Security-Policy can forbid inline scripts (a second wall behind DOMPurify).
'use strict';

// Storage that never throws: a browser with storage off (or full) still chats, it just forgets.
const store = {
  get(key, fallback) {
    try {
      const v = localStorage.getItem(key);
      return v === null ? fallback : JSON.parse(v);
    } catch (e) {
      return fallback;
    }
  },
  set(key, value) {  // false when the browser refused (quota)
    try {
      localStorage.setItem(key, JSON.stringify(value));
      return true;
    } catch (e) {
      return false;
    }
  },
  remove(key) {
    try {
      localStorage.removeItem(key);
    } catch (e) { /* nothing kept, nothing to remove */ }
  },
};

// The theme before the first paint (this script runs in <head>), so a dark page does not flash white.
const THEMES = ['auto', 'light', 'dark'];
function applyTheme(t) {
  if (t === 'light' || t === 'dark') document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}
applyTheme(store.get('pipit.theme', 'auto'));

// ---- Markdown, sanitised --------------------------------------------------------------------------------------
// The model's text is untrusted: marked turns it into HTML (raw HTML in it passes through), DOMPurify then keeps
// only inert markup. No ids or names (a model's <a id="send"> must not shadow the page's own elements), no style,
// no form controls. Links open in a new tab without access to this page.
const haveMarkdown = typeof window.marked === 'object' && typeof window.DOMPurify === 'function';
const PURIFY = {
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'option', 'dialog'],
  FORBID_ATTR: ['style', 'id', 'name', 'autofocus'],
  RETURN_DOM_FRAGMENT: true,
};
if (haveMarkdown) {
  window.marked.setOptions({ gfm: true, breaks: false, mangle: false, headerIds: false });
  window.DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    if (node.tagName === 'A' && node.hasAttribute('href')) {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer nofollow');
    }
  });
}

function addCodeCopyButtons(root) {
  for (const pre of root.querySelectorAll('pre')) {
    if (pre.querySelector(':scope > .copycode')) continue;
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'copycode';
    b.textContent = 'Copy';
    b.addEventListener('click', () => {
      const code = pre.querySelector('code');
      copyText((code || pre).textContent, b);
    });
    pre.appendChild(b);
  }
}

// HTML of a Markdown text, sanitised: a DocumentFragment (or plain text when the libraries are missing).
function markdownFragment(text) {
  if (!haveMarkdown) {
    const f = document.createDocumentFragment();
    const d = document.createElement('div');
    d.className = 'rawtext';
    d.textContent = text;
    f.appendChild(d);
    return f;
  }
  return window.DOMPurify.sanitize(window.marked.parse(text), PURIFY);
}

// The whole text at once (a finished message).
function renderMarkdown(el, text) {
  el.replaceChildren(markdownFragment(text));
  el._blocks = null;
  addCodeCopyButtons(el);
}

// While an answer streams: the text is split into Markdown blocks (marked's lexer); the blocks already on the page
// whose source has not changed stay as they are, and only the changed tail (usually the last paragraph or the open
// code block) is rendered again. A frame's work is then the size of that tail, not of the answer.
function renderMarkdownStreaming(el, text) {
  if (!haveMarkdown) return renderMarkdown(el, text);
  const tokens = window.marked.lexer(text);
  const blocks = el._blocks || (el.replaceChildren(), []);
  let same = 0;
  while (same < blocks.length && same < tokens.length && blocks[same].raw === tokens[same].raw) same++;
  for (const b of blocks.splice(same)) for (const n of b.nodes) n.remove();
  for (let i = same; i < tokens.length; i++) {
    const one = [tokens[i]];
    one.links = tokens.links;
    const frag = window.DOMPurify.sanitize(window.marked.parser(one), PURIFY);
    const nodes = Array.from(frag.childNodes);
    el.appendChild(frag);
    blocks.push({ raw: tokens[i].raw, nodes });
  }
  el._blocks = blocks;
  addCodeCopyButtons(el);
}

// ---- copying ---------------------------------------------------------------------------------------------------
// navigator.clipboard needs a secure context (https or localhost); a phone on the LAN reaches the server over plain
// http, where only the older execCommand route works.
async function copyText(text, button) {
  let ok = false;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      ok = true;
    }
  } catch (e) { /* fall back below */ }
  if (!ok) {
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('readonly', '');
    ta.style.position = 'fixed';
    ta.style.opacity = '0';
    document.body.appendChild(ta);
    ta.select();
    try {
      ok = document.execCommand('copy');
    } catch (e) {
      ok = false;
    }
    ta.remove();
  }
  if (button) {
    const was = button.dataset.label || button.textContent;
    button.dataset.label = was;
    button.textContent = ok ? 'Copied' : 'Copy failed';
    setTimeout(() => { button.textContent = was; }, 1200);
  }
  return ok;
}

// ---- settings --------------------------------------------------------------------------------------------------
const DEFAULTS = { system: '', temperature: 0.7, top_p: 0.95, top_k: 40, max_tokens: 1024, seed: '', apikey: '' };
const NUMERIC = ['temperature', 'top_p', 'top_k', 'max_tokens', 'seed'];
// What is stored is read as untrusted too (another page version, a hand edit): wrong types fall back to defaults.
function loadSettings() {
  const saved = store.get('pipit.settings', {});
  const s = Object.assign({}, DEFAULTS);
  if (saved && typeof saved === 'object') {
    for (const k of Object.keys(DEFAULTS)) {
      if (typeof saved[k] === 'string' || (typeof saved[k] === 'number' && Number.isFinite(saved[k]))) s[k] = saved[k];
    }
  }
  return s;
}
let settings = loadSettings();

// ---- conversations ---------------------------------------------------------------------------------------------
// 'pipit.chats': [{id, title, updated}] newest first; 'pipit.chat.ID': {id, title, named, messages}. A message:
// {role: 'user' | 'assistant', content, image?: data URL, reasoning?, state?: streaming|done|stopped|error,
// error?, stats?}. A new conversation is stored once it has a message.
let index = store.get('pipit.chats', []);
index = (Array.isArray(index) ? index : []).filter((e) => e && typeof e.id === 'string')
  .map((e) => ({ id: e.id, title: String(e.title || 'Untitled'), updated: Number(e.updated) || 0 }));
let conv = null;      // the conversation on screen
let active = null;    // the answer being streamed: {conv, msg, controller, el, tokens}
let pendingImage = null;

function newId() {
  return Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
}

function freshConversation() {
  return { id: newId(), title: 'New chat', named: false, messages: [] };
}

function loadConversation(id) {
  const c = store.get('pipit.chat.' + id, null);
  if (!c || typeof c !== 'object' || !Array.isArray(c.messages)) return null;
  c.id = id;
  c.title = String(c.title || 'Untitled');
  c.messages = c.messages.filter((m) => m && (m.role === 'user' || m.role === 'assistant')).map((m) => ({
    role: m.role,
    content: String(m.content || ''),
    image: typeof m.image === 'string' && m.image.startsWith('data:image/') ? m.image : null,
    imageDropped: !!m.imageDropped,
    reasoning: m.reasoning ? String(m.reasoning) : '',
    state: m.state === 'streaming' ? 'stopped' : String(m.state || 'done'),  // the page went away mid-answer
    error: m.error ? String(m.error) : undefined,
    stats: m.stats ? String(m.stats) : undefined,
  }));
  return c;
}

let saveWarned = false;
function saveConversation(c) {
  if (!c.messages.length || c.deleted) return;
  const entry = { id: c.id, title: c.title, updated: Date.now() };
  const moved = !index.length || index[0].id !== c.id || index[0].title !== c.title;
  index = [entry, ...index.filter((e) => e.id !== c.id)];
  let ok = store.set('pipit.chat.' + c.id, c);
  if (!ok) {
    // full: images are what take the room; keep the words
    for (const m of c.messages) if (m.image) { m.image = null; m.imageDropped = true; }
    ok = store.set('pipit.chat.' + c.id, c);
    if (!saveWarned) {
      setStatus(ok ? 'browser storage is full: attached images are not kept'
                   : 'browser storage is full: this conversation is not saved');
      saveWarned = true;
    }
  }
  store.set('pipit.chats', index);
  if (c === conv) store.set('pipit.current', c.id);  // not an answer streaming on behind another conversation
  if (moved) renderList();  // (not at every save while an answer streams: a rename being typed would be lost)
}

function autoTitle(c) {
  if (c.named) return;
  const first = c.messages.find((m) => m.role === 'user');
  if (!first) return;
  const line = first.content.trim().split('\n')[0] || 'Image';
  c.title = line.length > 48 ? line.slice(0, 47) + '…' : line;
}

// ---- the page --------------------------------------------------------------------------------------------------
let $ = null;  // the page's elements by id, looked up once

function setStatus(text) {
  $.status.textContent = text;
}

function setBusy() {
  const busy = !!active;
  $.send.disabled = busy;
  $.stop.hidden = !busy;
  for (const b of $.log.querySelectorAll('.needsidle')) b.disabled = busy;
}

let renaming = false;  // a name is being typed in the list: it is not rebuilt under the user's fingers
function renderList() {
  $.convname.textContent = conv ? conv.title : 'New chat';
  if (renaming) return;
  $.convs.replaceChildren();
  for (const e of index) {
    const li = document.createElement('li');
    li.dataset.id = e.id;
    if (conv && e.id === conv.id) li.className = 'current';
    const t = document.createElement('button');
    t.type = 'button';
    t.className = 'title';
    t.textContent = e.title;
    t.title = e.title;
    t.addEventListener('click', () => switchTo(e.id));
    const ren = iconButton('✎', 'Rename', () => startRename(li, e));
    ren.classList.add('rename');
    const del = iconButton('×', 'Delete', () => deleteConversation(e.id));
    del.classList.add('delete');
    li.append(t, ren, del);
    $.convs.appendChild(li);
  }
}

function iconButton(symbol, label, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'icon';
  b.textContent = symbol;
  b.title = label;
  b.setAttribute('aria-label', label);
  b.addEventListener('click', onClick);
  return b;
}

function startRename(li, e) {
  const input = document.createElement('input');
  input.value = e.title;
  input.setAttribute('aria-label', 'Conversation name');
  li.replaceChildren(input);
  input.focus();
  input.select();
  renaming = true;
  let done = false;
  const finish = (keep) => {
    if (done) return;
    done = true;
    renaming = false;
    const title = input.value.trim();
    if (keep && title) {
      // the object in use when there is one (on screen, or an answer streaming into it), so no later save of it
      // writes the old name back
      const c = conv && conv.id === e.id ? conv : active && active.conv.id === e.id ? active.conv
        : loadConversation(e.id);
      if (c) {
        c.title = title.slice(0, 120);
        c.named = true;
        saveConversation(c);
      }
    }
    renderList();
  };
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') finish(true);
    if (ev.key === 'Escape') finish(false);
  });
  input.addEventListener('blur', () => finish(true));
}

function deleteConversation(id) {
  const e = index.find((x) => x.id === id);
  if (!e || !window.confirm(`Delete "${e.title}"?`)) return;
  if (active && active.conv.id === id) {
    active.conv.deleted = true;  // its stream's last save must not bring it back
    active.controller.abort();
  }
  if (conv && conv.id === id) conv.deleted = true;
  index = index.filter((x) => x.id !== id);
  store.set('pipit.chats', index);
  store.remove('pipit.chat.' + id);
  if (conv && conv.id === id) {
    conv = (index.length && loadConversation(index[0].id)) || freshConversation();
    store.set('pipit.current', conv.id);
    renderConversation();
  }
  renderList();
}

function switchTo(id) {
  closeDrawer();
  if (conv && conv.id === id) return;
  const c = active && active.conv.id === id ? active.conv : loadConversation(id);
  if (!c) return;
  conv = c;
  store.set('pipit.current', id);
  renderConversation();
  renderList();
}

function newChat() {
  closeDrawer();
  if (!conv || conv.messages.length) {
    conv = freshConversation();
    renderConversation();
    renderList();
  }
  $.input.focus();
}

function closeDrawer() {
  document.body.classList.remove('drawer');
}

// Whether the log is scrolled to (near) its end: only then does new text pull it down, so a reader who scrolled
// up is left where they are.
function atBottom() {
  const l = $.log;
  return l.scrollHeight - l.scrollTop - l.clientHeight < 80;
}

function scrollToEnd() {
  $.log.scrollTop = $.log.scrollHeight;
}

function renderConversation() {
  $.log.replaceChildren();
  if (active) active.el = null;
  if (!conv.messages.length) $.log.appendChild($.empty);
  conv.messages.forEach((m, i) => $.log.appendChild(buildMessage(m, i)));
  scrollToEnd();
  setBusy();
}

// One message's element: its text (Markdown for answers, plain for the user's words), the folded thinking, and
// its buttons.
function buildMessage(m, i) {
  const div = document.createElement('div');
  div.className = 'msg ' + m.role;
  div.dataset.index = i;
  if (m.role === 'user') {
    if (m.image) {
      const img = document.createElement('img');
      img.className = 'attached';
      img.src = m.image;
      img.alt = 'attached image';
      div.appendChild(img);
    }
    const t = document.createElement('div');
    t.className = 'text';
    t.textContent = m.content + (m.imageDropped ? '\n[image not kept: browser storage was full]' : '');
    div.appendChild(t);
  } else {
    const body = document.createElement('div');
    body.className = 'body md';
    div.appendChild(body);
    if (active && active.msg === m) active.el = div;
  }
  paintMessage(div, m, true);
  div.appendChild(buildActions(m, i));
  return div;
}

function buildActions(m, i) {
  const bar = document.createElement('div');
  bar.className = 'actions';
  const last = i === conv.messages.length - 1;
  const copy = actionButton('Copy', 'copy', () => copyText(m.content, copy));
  bar.appendChild(copy);
  if (m.role === 'user') {
    bar.appendChild(actionButton('Edit', 'edit needsidle', () => startEdit(i)));
    if (last) bar.appendChild(actionButton('Send again', 'retry needsidle', () => regenerate()));
  } else if (last) {
    bar.appendChild(actionButton('Regenerate', 'regen needsidle', () => regenerate()));
  }
  if (m.stats) {
    const s = document.createElement('span');
    s.className = 'stats';
    s.textContent = m.stats;
    bar.appendChild(s);
  }
  return bar;
}

function actionButton(label, cls, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'icon ' + cls;
  b.textContent = label;
  b.addEventListener('click', onClick);
  if (cls.includes('needsidle')) b.disabled = !!active;
  return b;
}

// An answer's moving parts: the thinking block, the text, the error, the state. `whole`: render the text at once
// (a finished message) rather than block by block.
function paintMessage(div, m, whole) {
  div.dataset.state = m.state || 'done';
  if (m.role !== 'assistant') return;
  let think = div.querySelector(':scope > details.think');
  if (m.reasoning) {
    if (!think) {
      think = document.createElement('details');
      think.className = 'think';
      const s = document.createElement('summary');
      const t = document.createElement('div');
      t.className = 'thinktext';
      think.append(s, t);
      div.insertBefore(think, div.firstChild);
    }
    think.querySelector('summary').textContent =
      m.state === 'streaming' && !m.content ? 'Thinking…' : `Thought (${m.reasoning.length} characters)`;
    think.querySelector('.thinktext').textContent = m.reasoning;
  }
  const body = div.querySelector(':scope > .body');
  if (whole) renderMarkdown(body, m.content);
  else renderMarkdownStreaming(body, m.content);
  let err = div.querySelector(':scope > .errtext');
  div.classList.toggle('error', m.state === 'error');
  if (m.error) {
    if (!err) {
      err = document.createElement('div');
      err.className = 'errtext';
      body.after(err);
    }
    err.textContent = 'Error: ' + m.error;
  } else if (err) {
    err.remove();
  }
}

// At most one repaint of the streaming answer per animation frame, however fast the tokens come.
let frame = 0;
function schedulePaint() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    if (!active || !active.el) return;
    const follow = atBottom();
    paintMessage(active.el, active.msg, false);
    if (follow) scrollToEnd();
  });
}

function startEdit(i) {
  if (active) return;
  const m = conv.messages[i];
  const div = $.log.querySelector(`.msg[data-index="${i}"]`);
  if (!div) return;
  const box = document.createElement('div');
  box.className = 'edit';
  const ta = document.createElement('textarea');
  ta.value = m.content;
  ta.setAttribute('aria-label', 'Edit the message');
  const row = document.createElement('div');
  row.className = 'row';
  const cancel = document.createElement('button');
  cancel.type = 'button';
  cancel.className = 'plain';
  cancel.textContent = 'Cancel';
  const ok = document.createElement('button');
  ok.type = 'button';
  ok.className = 'editsend';
  ok.textContent = 'Send';
  row.append(cancel, ok);
  box.append(ta, row);
  div.replaceChildren(box);
  div.classList.add('editing');
  ta.focus();
  cancel.addEventListener('click', () => renderConversation());
  ok.addEventListener('click', () => {
    const text = ta.value.trim();
    if (!text || active) return;
    // from this message on, the conversation is new: the later turns go, the edited one is sent again
    conv.messages = conv.messages.slice(0, i);
    conv.messages.push({ role: 'user', content: text, image: m.image || null });
    autoTitle(conv);
    renderConversation();
    generate();
  });
}

function regenerate() {
  if (active || !conv.messages.length) return;
  if (conv.messages[conv.messages.length - 1].role === 'assistant') conv.messages.pop();
  if (!conv.messages.length) return;
  renderConversation();
  generate();
}

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (settings.apikey) h.Authorization = 'Bearer ' + settings.apikey;
  return h;
}

// The request for the conversation so far: the system prompt, the user's turns (with their image), the answers
// that have text (an error or an empty stop says nothing the model should see).
function requestBody(messages) {
  const out = [];
  if (settings.system.trim()) out.push({ role: 'system', content: settings.system });
  for (const m of messages) {
    if (m.role === 'user') {
      out.push({ role: 'user', content: m.image
        ? [{ type: 'image_url', image_url: { url: m.image } }, { type: 'text', text: m.content }]
        : m.content });
    } else if (m.content && m.state !== 'error') {
      out.push({ role: 'assistant', content: m.content });
    }
  }
  const body = { messages: out, stream: true, stream_options: { include_usage: true } };
  for (const k of NUMERIC) {
    const v = settings[k];
    if (v !== '' && v !== null && Number.isFinite(Number(v))) body[k] = Number(v);
  }
  if (body.top_k === 0) delete body.top_k;
  return body;
}

// Streams an answer to the conversation's last user turn into a new assistant message.
async function generate() {
  const c = conv;
  const body = requestBody(c.messages);
  const msg = { role: 'assistant', content: '', reasoning: '', state: 'streaming' };
  c.messages.push(msg);
  active = { conv: c, msg, controller: new AbortController(), el: null, tokens: 0 };
  renderConversation();
  saveConversation(c);
  setStatus('');
  const t0 = performance.now();
  let tFirst = 0, usage = null, finish = null, lastSave = t0;
  try {
    const r = await fetch('/v1/chat/completions', {
      method: 'POST', headers: headers(), body: JSON.stringify(body), signal: active.controller.signal,
    });
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      throw new Error(j.error ? j.error.message : `${r.status} ${r.statusText}`);
    }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true }).replace(/\r\n/g, '\n');
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        if (!event.startsWith('data: ')) continue;  // keep-alive comments
        const data = event.slice(6);
        if (data === '[DONE]') continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        if (j.usage) usage = j.usage;
        for (const ch of j.choices || []) {
          const d = ch.delta || {};
          if (d.content || d.reasoning_content) {
            if (!tFirst) tFirst = performance.now();
            active.tokens++;
            if (d.reasoning_content) msg.reasoning += d.reasoning_content;
            if (d.content) msg.content += d.content;
          }
          if (ch.finish_reason) finish = ch.finish_reason;
        }
      }
      schedulePaint();
      const now = performance.now();
      const secs = (now - (tFirst || t0)) / 1000;
      if (active.tokens > 1 && secs > 0) setStatus(`${(active.tokens / secs).toFixed(1)} tokens/s`);
      if (now - lastSave > 1500) {  // a reload mid-answer keeps most of it
        lastSave = now;
        saveConversation(c);
      }
    }
    const n = usage ? usage.completion_tokens : active.tokens;
    const secs = (performance.now() - (tFirst || t0)) / 1000;
    msg.stats = `${n} tokens · ${secs > 0 ? (n / secs).toFixed(1) : '-'} tokens/s`;
    const first = ((tFirst || performance.now()) - t0).toFixed(0);
    setStatus(`${msg.stats} · first token ${first} ms · ${finish || 'stop'}`);
    msg.state = 'done';
  } catch (e) {
    if (e.name === 'AbortError') {
      setStatus(`stopped after ${active.tokens} tokens`);
      msg.state = 'stopped';
    } else {
      msg.state = 'error';
      msg.error = e.message;
      setStatus('error');
    }
  } finally {
    active = null;
    if (frame) cancelAnimationFrame(frame);
    frame = 0;
    saveConversation(c);
    if (conv === c) renderConversation();  // the finished answer rendered whole, with its buttons
    setBusy();
  }
}

function submit() {
  const text = $.input.value.trim();
  if ((!text && !pendingImage) || active) return;
  if (!conv) conv = freshConversation();
  conv.messages.push({ role: 'user', content: text, image: pendingImage });
  autoTitle(conv);
  $.input.value = '';
  growInput();
  clearImage();
  generate();
}

function growInput() {
  const el = $.input;
  el.style.height = 'auto';
  el.style.height = Math.min(el.scrollHeight + 2, Math.round(window.innerHeight * 0.4)) + 'px';
}

function clearImage() {
  pendingImage = null;
  $.image.value = '';
  $.preview.replaceChildren();
  $.preview.hidden = true;
}

async function loadModel() {
  try {
    const r = await fetch('/v1/models', { headers: headers() });
    const j = await r.json();
    if (!r.ok) throw new Error(j.error ? j.error.message : r.statusText);
    const m = j.data[0];
    const vision = !!(m.meta && m.meta.vision);
    $.model.textContent = `${m.id} · ${m.context_length} tokens` + (vision ? ' · images' : '');
    $.attach.hidden = !vision;
  } catch (e) {
    $.model.textContent = 'cannot list the model: ' + e.message + (settings.apikey ? '' : ' (API key: Settings)');
  }
}

function openSettings() {
  closeDrawer();
  for (const k of Object.keys(DEFAULTS)) $[k].value = settings[k];
  $.settings.showModal();
}

function readSettings() {
  // Numbers: a field left empty is not sent for seed and top_k (random seed, no top-k), is the default for the
  // others; what is not a number is the default.
  const s = {};
  for (const k of Object.keys(DEFAULTS)) {
    const v = $[k].value;
    if (!NUMERIC.includes(k)) s[k] = v;
    else if (v.trim() === '') s[k] = k === 'seed' || k === 'top_k' ? '' : DEFAULTS[k];
    else s[k] = Number.isFinite(Number(v)) ? Number(v) : DEFAULTS[k];
  }
  return s;
}

function themeLabel() {
  const t = store.get('pipit.theme', 'auto');
  $.theme.textContent = '◐ ' + t[0].toUpperCase() + t.slice(1);
  $.theme.title = 'Colour theme: ' + (t === 'auto' ? 'as the system' : t) + ' (click to change)';
}

function init() {
  $ = {};
  for (const el of document.querySelectorAll('[id]')) $[el.id] = el;

  $.composer.addEventListener('submit', (ev) => {
    ev.preventDefault();
    submit();
  });
  // Enter sends on a keyboard; on a touch screen Enter is a new line and Send is the button.
  const touch = window.matchMedia('(pointer: coarse)');
  $.input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing && !touch.matches) {
      ev.preventDefault();
      submit();
    }
  });
  $.input.addEventListener('input', growInput);
  $.stop.addEventListener('click', () => active && active.controller.abort());
  $.attach.addEventListener('click', () => $.image.click());
  $.image.addEventListener('change', () => {
    const f = $.image.files[0];
    if (!f) return;
    const rd = new FileReader();
    rd.onload = () => {
      pendingImage = rd.result;
      const img = document.createElement('img');
      img.src = pendingImage;
      img.alt = '';
      const name = document.createElement('span');
      name.textContent = `${f.name} (${Math.round(f.size / 1024)} KiB) attached`;
      const x = iconButton('✕', 'Remove the image', clearImage);
      $.preview.replaceChildren(img, name, x);
      $.preview.hidden = false;
    };
    rd.readAsDataURL(f);
  });
  $.newchat.addEventListener('click', newChat);
  $.newchat2.addEventListener('click', newChat);
  $.menu.addEventListener('click', () => document.body.classList.add('drawer'));
  $.closemenu.addEventListener('click', closeDrawer);
  $.scrim.addEventListener('click', closeDrawer);
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') closeDrawer();
  });
  $.opensettings.addEventListener('click', openSettings);
  $.settingsform.addEventListener('submit', () => {  // method=dialog: the dialog closes itself
    settings = readSettings();
    store.set('pipit.settings', settings);
    loadModel();
  });
  $.resetsettings.addEventListener('click', () => {
    for (const k of Object.keys(DEFAULTS)) if (k !== 'apikey') $[k].value = DEFAULTS[k];
  });
  $.cancelsettings.addEventListener('click', () => $.settings.close());
  $.theme.addEventListener('click', () => {
    const now = store.get('pipit.theme', 'auto');
    const next = THEMES[(THEMES.indexOf(now) + 1) % THEMES.length];
    store.set('pipit.theme', next);
    applyTheme(next);
    themeLabel();
  });
  themeLabel();

  const current = store.get('pipit.current', null);
  conv = (current && index.some((e) => e.id === current) && loadConversation(current)) || freshConversation();
  renderConversation();
  renderList();
  loadModel();
}

// For tests and the curious: the renderer the page uses.
window.pipitChat = {
  markdown(text) {
    const d = document.createElement('div');
    renderMarkdown(d, text);
    return d;
  },
  markdownStreaming: renderMarkdownStreaming,
  haveMarkdown,
};

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
else init();
