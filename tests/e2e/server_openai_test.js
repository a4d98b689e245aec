// `pipit serve` with the official `openai` npm package, as users connect: models.list, a chat and a completion,
// each streamed and not (the streamed deltas add up to the non-streamed text at temperature 0), usage counts, and
// errors surfacing as the SDK's typed exceptions (400 BadRequestError, 401 AuthenticationError).
//
//   node server_openai_test.js PIPIT_BINARY MODEL_DIR NODE_PREFIX   (NODE_PREFIX/node_modules/openai installed)
'use strict';
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');

const [pipit, model, prefix] = process.argv.slice(2);
if (!prefix) {
  console.error('usage: node server_openai_test.js PIPIT_BINARY MODEL_DIR NODE_PREFIX');
  process.exit(2);
}
const OpenAI = require(path.join(path.resolve(prefix), 'node_modules', 'openai')).default;

// Starts the server on a free port; resolves with {proc, url} once it prints its "listening on" line.
function startServer(args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(pipit, ['serve', '-m', model, '--port', '0', '-t', '1', ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let log = '';
    const timer = setTimeout(() => reject(new Error('pipit serve did not start:\n' + log)), 120000);
    proc.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on (http:\/\/[0-9.]+:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1], log: () => log });
      }
    });
    proc.on('exit', (code) => reject(new Error(`pipit serve exited with ${code}:\n${log}`)));
  });
}

function stopServer(srv) {
  return new Promise((resolve) => {
    srv.proc.removeAllListeners('exit');
    srv.proc.on('exit', (code, signal) => resolve({ code, signal }));
    srv.proc.kill('SIGTERM');
  });
}

async function main() {
  const srv = await startServer(['--parallel', '2', '--ctx', '512', '--api-key', 'sekrit']);
  let checks = 0;
  try {
    const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'sekrit', maxRetries: 0, timeout: 120000 });

    const models = await client.models.list();
    assert.equal(models.data[0].id, 'qwen3_chat');
    checks++;

    const messages = [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'What is the capital of France?' },
    ];
    const full = await client.chat.completions.create({ model: 'qwen3_chat', messages, max_tokens: 24, temperature: 0 });
    assert.equal(full.object, 'chat.completion');
    assert.equal(full.choices[0].message.role, 'assistant');
    assert.ok(full.usage.prompt_tokens > 10 && full.usage.completion_tokens <= 24);
    checks++;

    const stream = await client.chat.completions.create({
      model: 'qwen3_chat', messages, max_tokens: 24, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish = null;
    let usage = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        text += c.delta?.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, full.choices[0].message.content);
    assert.equal(finish, full.choices[0].finish_reason);
    assert.deepEqual(usage, full.usage);
    checks++;

    // the SDK's stream helper with its accumulated final message
    const runner = client.chat.completions.stream({ model: 'qwen3_chat', messages, max_tokens: 24, temperature: 0 });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].message.content, full.choices[0].message.content);
    checks++;

    const comp = await client.completions.create({ model: 'qwen3_chat', prompt: 'Once upon a time', max_tokens: 16,
                                                   temperature: 0 });
    assert.equal(comp.object, 'text_completion');
    const cstream = await client.completions.create({ model: 'qwen3_chat', prompt: 'Once upon a time', max_tokens: 16,
                                                      temperature: 0, stream: true });
    let ctext = '';
    for await (const chunk of cstream) ctext += chunk.choices[0]?.text ?? '';
    assert.equal(ctext, comp.choices[0].text);
    checks++;

    await assert.rejects(
      client.chat.completions.create({ model: 'qwen3_chat', messages: [{ role: 'wizard', content: 'hi' }] }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /wizard/.test(e.message));
    await assert.rejects(
      client.chat.completions.create({ model: 'qwen3_chat', messages, max_tokens: 10 ** 9 }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'max_tokens');
    checks++;

    const stranger = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(stranger.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    await assert.rejects(
      stranger.chat.completions.create({ model: 'qwen3_chat', messages, stream: true }),
      (e) => e instanceof OpenAI.AuthenticationError);
    checks++;
  } finally {
    const { code, signal } = await stopServer(srv);
    assert.equal(code, 0, `pipit serve exited with ${code} (${signal}):\n${srv.log()}`);
  }
  console.log(`[openai-node] ok: ${checks} checks`);
}

main().catch((e) => {
  console.error('[openai-node] FAIL', e);
  process.exit(1);
});
