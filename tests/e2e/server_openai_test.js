// `pipit serve` with the official `openai` npm package, as users connect: models.list, a chat and a completion,
// each streamed and not (the streamed deltas add up to the non-streamed text at temperature 0), usage counts, and
// errors surfacing as the SDK's typed exceptions (400 BadRequestError, 401 AuthenticationError, 403
// PermissionDeniedError for another origin's page), and CORS (--cors) as a browser would use it, preflight included.
//
//   node server_openai_test.js PIPIT_BINARY MODEL_DIR NODE_PREFIX   (NODE_PREFIX/node_modules/openai installed)
'use strict';
const assert = require('node:assert/strict');
const path = require('node:path');

const { startServer, stopServer } = require('./server_util.js');

const [pipit, model, prefix] = process.argv.slice(2);
if (!prefix) {
  console.error('usage: node server_openai_test.js PIPIT_BINARY MODEL_DIR NODE_PREFIX');
  process.exit(2);
}
const OpenAI = require(path.join(path.resolve(prefix), 'node_modules', 'openai')).default;

async function main() {
  const srv = await startServer(pipit, model, ['--parallel', '2', '--ctx', '512', '--api-key', 'sekrit']);
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
    // the same counts, except that the repeated prompt now comes from the prompt cache (on by default): all of it
    // but the last token, which is evaluated again for its logits
    const { prompt_tokens_details: cold, ...counts } = full.usage;
    const { prompt_tokens_details: warm, ...streamedCounts } = usage;
    assert.deepEqual(streamedCounts, counts);
    assert.equal(cold.cached_tokens, 0);
    assert.equal(warm.cached_tokens, usage.prompt_tokens - 1);
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

    // a tool call round trip: the tiny random model never calls a tool by itself, so tool_choice names the
    // function (the server forces the call with a grammar); the call goes back as a tool message, then an answer
    const tools = [{
      type: 'function',
      function: {
        name: 'get_weather', description: 'Current weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 },
                                                   unit: { enum: ['celsius', 'fahrenheit'] } },
                      required: ['city', 'unit'] },
      },
    }];
    const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const called = await client.chat.completions.create({
      model: 'qwen3_chat', messages: ask, tools, max_tokens: 100, temperature: 0,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    assert.equal(called.choices[0].finish_reason, 'tool_calls');
    const call = called.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.deepEqual(Object.keys(args), ['city', 'unit']);
    assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
    // the SDK's stream helper puts the streamed call back together
    const callStream = client.chat.completions.stream({
      model: 'qwen3_chat', messages: ask, tools, max_tokens: 100, temperature: 0,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    const streamedCall = (await callStream.finalChatCompletion()).choices[0].message.tool_calls[0];
    assert.equal(streamedCall.function.name, 'get_weather');
    assert.equal(streamedCall.function.arguments, call.function.arguments);
    const answer = await client.chat.completions.create({
      model: 'qwen3_chat', tools, max_tokens: 8, temperature: 0, tool_choice: 'auto',
      messages: [...ask, called.choices[0].message,
                 { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 21 }) }],
    });
    assert.ok(answer.usage.prompt_tokens > called.usage.prompt_tokens);
    assert.equal(typeof answer.choices[0].message.content, 'string');
    await assert.rejects(
      client.chat.completions.create({ model: 'qwen3_chat', messages: ask, tools,
                                       tool_choice: { type: 'function', function: { name: 'launch' } } }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice');
    checks++;

    // structured output and logprobs through the SDK
    const person = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' } },
                     required: ['name', 'age'] };
    const js = await client.chat.completions.create({
      model: 'qwen3_chat', messages: ask, max_tokens: 80, temperature: 1, seed: 4, logprobs: true, top_logprobs: 2,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } },
    });
    const doc = JSON.parse(js.choices[0].message.content);
    assert.deepEqual(Object.keys(doc), ['name', 'age']);
    assert.ok(Number.isInteger(doc.age));
    assert.equal(js.choices[0].logprobs.content.length, js.usage.completion_tokens);
    checks++;

    // issue 34's sampling fields through the SDK: logit_bias bans and forces tokens, reasoning_content streams for
    // the Qwen3 template's <think> part (written by a grammar: the random model never thinks by itself), tool_choice
    // "required" returns parallel calls, and the legacy functions / function_call give message.function_call
    const ids = async (extra) => {
      const r = await client.chat.completions.create({
        model: 'qwen3_chat', messages: ask, max_tokens: 8, temperature: 0, ignore_eos: true, logprobs: true,
        return_tokens_as_token_ids: true, ...extra });
      return r.choices[0].logprobs.content.map((t) => Number(t.token.split(':')[1]));
    };
    const plain = await ids({});
    const banned = await ids({ logit_bias: Object.fromEntries(plain.map((t) => [String(t), -100])) });
    assert.equal(banned.length, 8);
    assert.ok(banned.every((t) => !plain.includes(t)), `${plain} / ${banned}`);
    assert.deepEqual(await ids({ logit_bias: { 12095: 100 }, temperature: 1, seed: 2 }), Array(8).fill(12095));
    checks++;

    const thinking = await client.chat.completions.create({
      model: 'qwen3_chat', messages: ask, max_tokens: 40, temperature: 0, stream: true,
      grammar: 'root ::= "<think>\\n" ("yes" | "no") " maybe\\n</think>\\n\\n" "final " [ab]' });
    let thought = '', said = '';
    for await (const chunk of thinking) {
      const d = chunk.choices[0]?.delta || {};
      thought += d.reasoning_content || '';
      said += d.content || '';
    }
    assert.match(thought, /^(yes|no) maybe$/);
    assert.match(said, /^final [ab]$/);
    checks++;

    const unit = { type: 'function', function: { name: 'set_unit', parameters: {
      type: 'object', properties: { unit: { enum: ['c', 'f'] } }, required: ['unit'], additionalProperties: false } } };
    const calls = await client.chat.completions.create({
      model: 'qwen3_chat', messages: ask, tools: [unit], tool_choice: 'required', parallel_tool_calls: true,
      temperature: 0, max_tokens: 100, ignore_eos: true });
    assert.ok(calls.choices[0].message.tool_calls.length >= 2, JSON.stringify(calls.choices[0].message));
    const legacy = await client.chat.completions.create({
      model: 'qwen3_chat', messages: ask, functions: [unit.function], function_call: { name: 'set_unit' },
      temperature: 0, max_tokens: 60 });
    assert.equal(legacy.choices[0].finish_reason, 'function_call');
    assert.equal(legacy.choices[0].message.function_call.name, 'set_unit');
    assert.ok(['c', 'f'].includes(JSON.parse(legacy.choices[0].message.function_call.arguments).unit));
    await assert.rejects(
      client.chat.completions.create({ model: 'qwen3_chat', messages: ask, functions: [unit.function], tools: [unit] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'functions');
    checks++;

    const stranger = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(stranger.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    await assert.rejects(
      stranger.chat.completions.create({ model: 'qwen3_chat', messages, stream: true }),
      (e) => e instanceof OpenAI.AuthenticationError);
    checks++;

    // a web page of another origin (what a browser adds: Origin) is refused by a server without --cors
    const page = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'sekrit', maxRetries: 0,
                              defaultHeaders: { Origin: PAGE } });
    await assert.rejects(page.models.list(), (e) => e instanceof OpenAI.PermissionDeniedError && e.status === 403);
    checks++;
  } finally {
    const { code, signal } = await stopServer(srv);
    assert.equal(code, 0, `pipit serve exited with ${code} (${signal}):\n${srv.log()}`);
  }
  checks += await corsChecks();
  console.log(`[openai-node] ok: ${checks} checks`);
}

const PAGE = 'http://localhost:5173';  // a web app's dev server on another port

// `--cors PAGE`: the preflight a browser sends before the SDK's POST, then the SDK's own requests from that origin
// (Origin set as the browser would), with the CORS headers the browser checks.
async function corsChecks() {
  const srv = await startServer(pipit, model, ['--parallel', '1', '--ctx', '256', '--api-key', 'sekrit',
                                               '--cors', PAGE]);
  try {
    const pre = await fetch(srv.url + '/v1/chat/completions', {
      method: 'OPTIONS',
      headers: { Origin: PAGE, 'Access-Control-Request-Method': 'POST',
                 'Access-Control-Request-Headers': 'authorization,content-type,x-stainless-lang' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), PAGE);
    assert.match(pre.headers.get('access-control-allow-headers'), /authorization.*content-type.*x-stainless-lang/);
    assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
    const res = await fetch(srv.url + '/v1/chat/completions', {
      method: 'POST',
      headers: { Origin: PAGE, Authorization: 'Bearer sekrit', 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), PAGE);
    assert.match(res.headers.get('vary'), /Origin/);
    const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'sekrit', maxRetries: 0,
                                defaultHeaders: { Origin: PAGE } });
    const out = await client.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 4,
                                                      model: 'qwen3_chat' });
    assert.equal(out.object, 'chat.completion');
    const other = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'sekrit', maxRetries: 0,
                               defaultHeaders: { Origin: 'http://localhost:5174' } });
    await assert.rejects(other.models.list(), (e) => e instanceof OpenAI.PermissionDeniedError);
  } finally {
    const { code, signal } = await stopServer(srv);
    assert.equal(code, 0, `pipit serve exited with ${code} (${signal}):\n${srv.log()}`);
  }
  return 1;
}

main().catch((e) => {
  console.error('[openai-node] FAIL', e);
  process.exit(1);
});
