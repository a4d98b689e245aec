#!/usr/bin/python3
"""Writes expected.jsonl: what Python Jinja2, configured exactly as HF transformers configures it, renders for
(1) the real chat templates in this folder with realistic conversations (tools, thinking, images, multi-turn,
errors), and (2) small templates exercising one construct each. The C++ tests (tests/tokenizer/chat_template_*_test.cpp)
must reproduce every line byte for byte, or fail where Jinja2 fails.

Run with Debian's Jinja2 (python3-jinja2, see scripts/setup.sh):  /usr/bin/python3 tests/data/chat_templates/make_expected.py
The environment mirrors transformers' chat_template_utils._compile_jinja_template: ImmutableSandboxedEnvironment(
trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols]), tojson = json.dumps(ensure_ascii=
False, ...), globals raise_exception and strftime_now. strftime_now is pinned to FIXED_NOW so outputs are stable;
the C++ test pins its clock to the same instant.
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
FIXED_NOW = datetime(2024, 7, 26, 9, 30, 0)  # 1721986200 seconds since the epoch, read as UTC by the C++ test


class AssistantTracker(Extension):
    """transformers' {% generation %} tag: renders its body unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[AssistantTracker, jinja2.ext.loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)


def load(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return f.read()


def render_chat(template, special_tokens, messages, add_generation_prompt, kwargs):
    """transformers' apply_chat_template(tokenize=False): special tokens, then kwargs, then the fixed arguments."""
    kwargs = dict(kwargs)
    tools = kwargs.pop("tools", None)
    documents = kwargs.pop("documents", None)
    context = {**special_tokens, **kwargs}
    return ENV.from_string(template).render(messages=messages, tools=tools, documents=documents,
                                            add_generation_prompt=add_generation_prompt, **context)


def outcome(fn):
    try:
        return {"text": fn()}
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"error": f"syntax: {e.message} (line {e.lineno})"}
    except jinja2.exceptions.TemplateError as e:  # raise_exception, undefined, security
        return {"error": str(e), "error_type": type(e).__name__}
    except Exception as e:  # TypeError, ZeroDivisionError, ... raised by Python inside the render
        return {"error": str(e), "error_type": type(e).__name__}


# ---- conversations ----

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What is the capital of France?"}
MULTI = [
    {"role": "user", "content": "Hi! Who are you?"},
    {"role": "assistant", "content": "I am an AI assistant."},
    {"role": "user", "content": "Translate \"good night\" into Chinese: 晚安? Also 'quotes' & <tags>.\n\nThanks 👍"},
]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit, ° or °F"},
                "days": {"type": "integer", "description": "Days ahead", "minimum": 0, "maximum": 7.5},
            },
            "required": ["location"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        "return": {"type": "string", "description": "result text"},
    },
}
TOOL_CALL_CHAT = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "What's the weather in Paris and Berlin?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call12345", "type": "function",
         "function": {"name": "get_current_weather", "arguments": {"location": "Paris, FR", "unit": "celsius"}}},
        {"id": "call67890", "type": "function",
         "function": {"name": "get_current_weather", "arguments": {"location": "Berlin", "days": 2, "x": None,
                                                                    "ok": True, "ratio": 0.5}}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "{\"temperature\": 21, \"sky\": \"sunny\"}"},
    {"role": "tool", "tool_call_id": "call67890", "content": "18 degrees, cloudy"},
    {"role": "assistant", "content": "Paris: 21°C and sunny. Berlin: 18°C, cloudy."},
    {"role": "user", "content": "Thanks!"},
]
SINGLE_TOOL_CALL = [
    {"role": "user", "content": "Weather in Tokyo?"},
    {"role": "assistant", "tool_calls": [{"id": "abcdefghi", "type": "function", "function": {
        "name": "get_current_weather", "arguments": {"location": "Tokyo", "unit": "celsius"}}}]},
    {"role": "tool", "tool_call_id": "abcdefghi", "content": {"temperature": 25, "unit": "celsius"}},
]
THINKING = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "<think>\nSimple arithmetic.\n</think>\n\nIt is 4."},
    {"role": "user", "content": "And 3+3?"},
    {"role": "assistant", "reasoning_content": "Add three and three.", "content": "It is 6."},
]
QWEN3_TOOLS = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "<think>\nI should call the tool.\n</think>\n\nLet me check.",
     "tool_calls": [{"type": "function", "function": {"name": "get_current_weather",
                                                       "arguments": {"location": "Paris"}}},
                    {"name": "search", "arguments": "{\"query\": \"paris weather\"}"}]},
    {"role": "tool", "content": "21 degrees"},
    {"role": "tool", "content": "<tool_response>sunny</tool_response>"},
]
IMAGES = [
    {"role": "user", "content": [
        {"type": "image", "image": "file:///tmp/cat.png"},
        {"type": "text", "text": "What is in this image?"},
        {"type": "video", "video": "file:///tmp/clip.mp4"},
        {"type": "image_url", "image_url": {"url": "http://example.com/x.png"}},
        {"type": "text", "text": "And these?"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "A cat, a clip and a picture."}]},
    {"role": "user", "content": "Thanks"},
]
GEMMA_IMAGES = [
    {"role": "system", "content": [{"type": "text", "text": "Describe images tersely."}]},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  What is this?  "}]},
    {"role": "assistant", "content": "A dog."},
    {"role": "user", "content": "Breed?"},
]
NOT_ALTERNATING = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
UNKNOWN_ROLE = [{"role": "user", "content": "a"}, {"role": "narrator", "content": "b"}]

QWEN_TOKENS = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
               "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}
LLAMA_TOKENS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
GEMMA_TOKENS = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}
MISTRAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
SMOL_TOKENS = {"eos_token": "<|im_end|>", "pad_token": "<|im_end|>"}

# (name, template file, special tokens, messages, add_generation_prompt, extra kwargs)
CHATS = [
    ("qwen2_5/basic", "qwen2_5.jinja", QWEN_TOKENS, [SYSTEM, USER], True, {}),
    ("qwen2_5/default_system", "qwen2_5.jinja", QWEN_TOKENS, MULTI, False, {}),
    ("qwen2_5/tools", "qwen2_5.jinja", QWEN_TOKENS, TOOL_CALL_CHAT, True, {"tools": [WEATHER_TOOL, SEARCH_TOOL]}),
    ("qwen2_5/tools_no_system", "qwen2_5.jinja", QWEN_TOKENS, SINGLE_TOOL_CALL[:2], True, {"tools": [WEATHER_TOOL]}),
    ("qwen3/basic", "qwen3.jinja", QWEN_TOKENS, [SYSTEM, USER], True, {}),
    ("qwen3/no_thinking", "qwen3.jinja", QWEN_TOKENS, MULTI, True, {"enable_thinking": False}),
    ("qwen3/thinking_history", "qwen3.jinja", QWEN_TOKENS, THINKING, False, {}),
    ("qwen3/thinking_continue", "qwen3.jinja", QWEN_TOKENS, THINKING + [{"role": "user", "content": "4+4?"}], True,
     {"enable_thinking": True}),
    ("qwen3/tools", "qwen3.jinja", QWEN_TOKENS, TOOL_CALL_CHAT, True, {"tools": [WEATHER_TOOL, SEARCH_TOOL]}),
    ("qwen3/tool_calls_reasoning", "qwen3.jinja", QWEN_TOKENS, QWEN3_TOOLS, True, {"tools": [WEATHER_TOOL]}),
    ("qwen2_vl/images", "qwen2_vl.jinja", QWEN_TOKENS, IMAGES, True, {}),
    ("qwen2_vl/vision_ids", "qwen2_vl.jinja", QWEN_TOKENS, [SYSTEM] + IMAGES, True, {"add_vision_id": True}),
    ("qwen2_vl/text_only", "qwen2_vl.jinja", QWEN_TOKENS, MULTI, False, {}),
    ("llama3/multi", "llama3.jinja", LLAMA_TOKENS, [SYSTEM] + MULTI, True, {}),
    ("llama3_1/basic", "llama3_1.jinja", LLAMA_TOKENS, [SYSTEM, USER], True, {}),
    ("llama3_1/date_string", "llama3_1.jinja", LLAMA_TOKENS, MULTI, True, {"date_string": "01 Jan 2025"}),
    ("llama3_1/tools_in_user", "llama3_1.jinja", LLAMA_TOKENS, [SYSTEM] + SINGLE_TOOL_CALL, True,
     {"tools": [WEATHER_TOOL]}),
    ("llama3_1/tools_in_system", "llama3_1.jinja", LLAMA_TOKENS, SINGLE_TOOL_CALL, True,
     {"tools": [WEATHER_TOOL, SEARCH_TOOL], "tools_in_user_message": False}),
    ("llama3_1/builtin_tools", "llama3_1.jinja", LLAMA_TOKENS,
     [{"role": "user", "content": "Search for pipit birds"},
      {"role": "assistant", "tool_calls": [{"type": "function", "function": {
          "name": "brave_search", "arguments": {"query": "pipit bird", "count": "3"}}}]},
      {"role": "ipython", "content": "Pipits are small passerine birds."}], True,
     {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]}),
    ("llama3_1/two_tool_calls_error", "llama3_1.jinja", LLAMA_TOKENS, TOOL_CALL_CHAT[1:3], True, {}),
    ("llama3_1/no_user_for_tools_error", "llama3_1.jinja", LLAMA_TOKENS, [SYSTEM], True, {"tools": [WEATHER_TOOL]}),
    ("llama3_2/strftime", "llama3_2.jinja", LLAMA_TOKENS, [SYSTEM, USER], True, {}),
    ("llama3_2/tools", "llama3_2.jinja", LLAMA_TOKENS, SINGLE_TOOL_CALL, True, {"tools": [WEATHER_TOOL]}),
    ("gemma3/images", "gemma3.jinja", GEMMA_TOKENS, GEMMA_IMAGES, True, {}),
    ("gemma3/string_system", "gemma3.jinja", GEMMA_TOKENS, [SYSTEM] + MULTI, False, {}),
    ("gemma3/not_alternating", "gemma3.jinja", GEMMA_TOKENS, NOT_ALTERNATING, True, {}),
    ("gemma3/bad_content", "gemma3.jinja", GEMMA_TOKENS, [{"role": "user", "content": 42}], True, {}),
    ("mistral_v0_1/multi", "mistral_v0_1.jinja", MISTRAL_TOKENS, MULTI + [{"role": "assistant", "content": "晚安"}],
     False, {}),
    ("mistral_v0_1/system_role_error", "mistral_v0_1.jinja", MISTRAL_TOKENS, [SYSTEM, USER], True, {}),
    ("mistral_v0_1/unknown_role", "mistral_v0_1.jinja", MISTRAL_TOKENS, UNKNOWN_ROLE[:1] +
     [{"role": "assistant", "content": "x"}, {"role": "narrator", "content": "b"}], True, {}),
    ("mistral_nemo/tools", "mistral_nemo.jinja", MISTRAL_TOKENS, TOOL_CALL_CHAT[1:], True,
     {"tools": [WEATHER_TOOL, SEARCH_TOOL]}),
    ("mistral_nemo/system_last_user", "mistral_nemo.jinja", MISTRAL_TOKENS, [SYSTEM] + MULTI, True, {}),
    ("mistral_nemo/bad_tool_id", "mistral_nemo.jinja", MISTRAL_TOKENS,
     [USER, {"role": "assistant", "tool_calls": [{"id": "short", "function": {"name": "f", "arguments": {}}}]}], True, {}),
    ("smollm3/default_think", "smollm3.jinja", SMOL_TOKENS, MULTI, True, {}),
    ("smollm3/no_think_system", "smollm3.jinja", SMOL_TOKENS,
     [{"role": "system", "content": "Be brief. /no_think"}] + MULTI + [{"role": "assistant", "content": "\n\nOK"}],
     True, {}),
    ("smollm3/enable_thinking_false", "smollm3.jinja", SMOL_TOKENS, MULTI, True, {"enable_thinking": False}),
    ("smollm3/xml_tools", "smollm3.jinja", SMOL_TOKENS, [USER, {"role": "tool", "content": "sunny"}], True,
     {"xml_tools": [WEATHER_TOOL["function"], SEARCH_TOOL]}),
    ("smollm3/python_tools", "smollm3.jinja", SMOL_TOKENS, [USER], True,
     {"python_tools": [{"name": "f", "args": [1, 2.5, None, True, "it's \"quoted\""]}]}),
    ("smollm3/system_override", "smollm3.jinja", SMOL_TOKENS,
     [{"role": "system", "content": "Custom system. /system_override  "}, USER], True, {}),
    ("qwen3_coder/tools", "qwen3_coder.jinja", QWEN_TOKENS, TOOL_CALL_CHAT, True,
     {"tools": [WEATHER_TOOL, SEARCH_TOOL]}),
    ("qwen3_coder/no_tools", "qwen3_coder.jinja", QWEN_TOKENS, MULTI, True, {}),
]

# (name, template, context): one construct each.
CONSTRUCTS = [
    ("ws/trim_lstrip", "  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}\n  {# c #}\nz", {}),
    ("ws/dash", "a  \n {{- 'b' -}} \n c {%- if true -%}  d  {%- endif -%}\n e", {}),
    ("ws/plus", "  {%+ if true %}x{% endif +%}\ny", {}),
    ("ws/comment_dash", "a {#- c -#} b\n{# c2 #}\nc", {}),
    ("ws/crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", {}),
    ("ws/trailing_newline", "x\n", {}),
    ("ws/line_start_after_block", "{% if true %}\n    {% if true %}y{% endif %}\n{% endif %}", {}),
    ("ws/raw", "{% raw %}{{ not parsed }} {% if %}{% endraw %}|{%- raw -%}  a  {%- endraw %}", {}),
    ("ws/variable_no_trim", "{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("lit/strings", "{{ 'a\\nb' }}|{{ \"q'\" }}|{{ 'a' \"b\" }}|{{ '\\x41\\u00e9\\U0001F600\\101\\q' }}", {}),
    ("lit/numbers", "{{ 1_000 }}|{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1.5e3 }}|{{ 2.0 }}|{{ 1e16 }}|{{ 1e-5 }}|{{ 0.1 + 0.2 }}", {}),
    ("lit/containers", "{{ [1, 'a', none, true, 1.0, {'k': \"it's\"}, (1,), (1, 2), ()] }}|{{ {'a': [], 'b': {}} }}", {}),
    ("lit/constants", "{{ True }} {{ false }} {{ None }} {{ none is none }}", {}),
    ("print/repr_escapes", "{{ ['\\x01\\t\\n\\u2028\\xa0é\\'', 'a\"b', \"a'b\\\"c\", '\\\\'] }}", {}),
    ("print/floats", "{{ [1.0, 0.5, 100.0, 1e22, 1.5e-7, 123456789.125, -0.0, 3.14159] }}", {}),
    ("print/context", "{{ d }}|{{ d.items() | list }}|{{ l }}", {"d": {"z": 1, "a": [True, None, 2.5]}, "l": ["é"]}),
    ("op/arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 10 / 4 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("op/precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 1 * 2 }} {{ -2 ** 2 }} {{ not true == false }} {{ 1 if 0 else 2 if 0 else 3 }}", {}),
    ("op/mixed", "{{ true + 1 }} {{ 1 == 1.0 }} {{ 'ab' * 3 }} {{ 3 * [1] }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ 1 ~ none ~ x }}", {}),
    ("op/compare_chain", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2 }} {{ none == none }}", {}),
    ("op/in", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in undefined_var }}", {}),
    ("op/and_or_values", "{{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ '' and 'b' }}|{{ none or [] }}|{{ x or 'd' }}", {}),
    ("op/cond_no_else", "[{{ 'a' if false }}]", {}),
    ("op/str_plus_int_error", "{{ 'x' + 1 }}", {}),
    ("op/div_zero_error", "{{ 1 / 0 }}", {}),
    ("op/undefined_plus_error", "{{ nothing + 1 }}", {}),
    ("op/compare_types_error", "{{ 1 < 'a' }}", {}),
    ("op/percent_format", "{{ '%s-%05.2f|%d%%|%r' % ('a', 3.14159, 7, 'q') }}", {}),
    ("sub/index_slice", "{{ l[0] }} {{ l[-1] }} {{ l[1:3] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[5] }} {{ l[:-1] }} {{ 'héllo'[1:3] }} {{ 'abc'[::-1] }} {{ 'héllo'[-1] }}",
     {"l": [1, 2, 3, 4, 5]}),
    ("sub/attr_item", "{{ d.a }} {{ d['a'] }} {{ d.missing }} {{ d.b.c }} {{ d['b']['c'] }} {{ d.items is defined }} {{ l.0 }}",
     {"d": {"a": 1, "b": {"c": 2}, "items": "shadowed"}, "l": ["first"]}),
    ("sub/dict_method_shadow", "{{ d['items'] }}|{{ d.get('items') }}|{{ d.keys() | list }}", {"d": {"items": 5}}),
    ("sub/none_attr", "[{{ none.x }}][{{ none['x'] }}]", {}),
    ("sub/undefined_attr_error", "{{ nothing.attr }}", {}),
    ("sub/missing_chain_error", "{{ d.missing.deeper }}", {"d": {}}),
    ("sub/unsafe_append", "{% set l = [1] %}{{ l.append(2) }}", {}),
    ("sub/unsafe_dict_update", "{% set d = {} %}{{ d.update({'a': 1}) }}", {}),
    ("loop/vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.depth }};{% endfor %}", {}),
    ("loop/cycle_changed", "{% for x in [1, 1, 2] %}{{ loop.cycle('a', 'b') }}{{ loop.changed(x) }}{% endfor %}", {}),
    ("loop/else", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for x in nothing %}{{ x }}{% else %}undef{% endfor %}", {}),
    ("loop/filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }}{% if loop.last %}!{% endif %}{% endfor %}", {}),
    ("loop/unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, (b, c) in [(1, (2, 3))] %}{{ a + b + c }}{% endfor %}",
     {"d": {"b": 1, "a": 2}}),
    ("loop/dict_iter", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"y": 1, "x": 2}}),
    ("loop/nested_loop_var", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index }}{% endfor %}{% endfor %}", {}),
    ("loop/break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("loop/recursive", "{% for n in tree recursive %}[{{ n.name }}{{ loop.depth }}{% if n.children %}{{ loop(n.children) }}{% endif %}]{% endfor %}",
     {"tree": [{"name": "a", "children": [{"name": "b", "children": []}, {"name": "c"}]}, {"name": "d"}]}),
    ("loop/scope", "{% set x = 'o' %}{% for i in [1, 2] %}{% if i == 1 %}{% set x = 'a' %}{% endif %}[{{ x }}]{% endfor %}{{ x }}", {}),
    ("loop/scope_fresh", "{% for i in [1, 2] %}{% if i == 1 %}{% set y = 'a' %}{% endif %}[{{ y }}]{% endfor %}", {}),
    ("loop/over_none_error", "{% for x in none %}{% endfor %}", {}),
    ("loop/over_int_error", "{% for x in 3 %}{% endfor %}", {}),
    ("set/basic", "{% set a = 1 %}{% set b, c = [2, 3] %}{% set t = 1, 2 %}{{ a }}{{ b }}{{ c }}{{ t }}", {}),
    ("set/if_leaks", "{% if true %}{% set a = 5 %}{% endif %}{{ a }}", {}),
    ("set/namespace", "{% set ns = namespace(n=0, s='') %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }} {{ ns.missing }} {{ ns }}", {}),
    ("set/namespace_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", {}),
    ("set/block", "{% set x %}  hello {{ 1 }}  {% endset %}[{{ x }}]{% set y | trim | upper %}  abc  {% endset %}[{{ y }}]", {}),
    ("set/block_namespace", "{% set ns = namespace(t='') %}{% for i in range(2) %}{% set ns.t %}{{ ns.t }}<{{ i }}>{% endset %}{% endfor %}{{ ns.t }}", {}),
    ("set/non_namespace_error", "{% set d = {} %}{% set d.a = 1 %}", {}),
    ("set/unpack_error", "{% set a, b = [1, 2, 3] %}", {}),
    ("macro/basic", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', greeting='Hi') }} {{ greet() }}", {}),
    ("macro/varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}", {}),
    ("macro/late_global", "{% macro m() %}{{ y }}{% endmacro %}{% set y = 5 %}{{ m() }}", {}),
    ("macro/recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}", {}),
    ("macro/caller", "{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner{% endcall %}", {}),
    ("misc/with_filter_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{% filter upper %}abc{{ 'd' }}{% endfilter %}", {}),
    ("misc/generation_tag", "{% generation %}x{% endgeneration %}", {}),
    ("misc/raise", "{% if x is not defined %}{{ raise_exception('x is required: ' ~ 42) }}{% endif %}", {}),
    ("misc/strftime", "{{ strftime_now('%Y-%m-%d %H:%M %b %B %d') }}", {}),
    ("misc/globals", "{{ range(5) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} {{ dict(a=1, b='x') }} {{ dict({'z': 0}, y=1) }}", {}),
    ("misc/joiner", "{% set j = joiner('|') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}", {}),
    ("misc/context_overrides_global", "{{ range }}", {"range": "mine"}),
    ("filter/str", "{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'aBc' | upper }}|{{ 'aBc' | lower }}|{{ \"it's a dog-cat (x)\" | title }}|{{ 'hELLO wORLD' | capitalize }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'a b  c' | wordcount }}|{{ 'abc' | center(9) }}", {}),
    ("filter/length", "{{ 'héllo' | length }} {{ [1, 2] | count }} {{ {'a': 1} | length }} {{ nothing | length }}", {}),
    ("filter/default", "{{ x | default('d') }}|{{ '' | default('d') }}|{{ '' | default('d', true) }}|{{ none | d('n') }}|{{ false | default('f', boolean=true) }}", {}),
    ("filter/join_list", "{{ [1, 2, 3] | join(', ') }}|{{ users | join(',', attribute='name') }}|{{ 'abc' | list }}|{{ {'a': 1} | list }}|{{ [3, 1] | first }}{{ [3, 1] | last }}|{{ [] | first }}",
     {"users": [{"name": "a"}, {"name": "b"}]}),
    ("filter/map_select", "{{ users | map(attribute='name') | join }}|{{ users | map(attribute='age', default=0) | list }}|{{ ['a', 'b'] | map('upper') | list }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [1, 2, 3, 4] | reject('even') | list }}|{{ [0, 1, '', 'x'] | select | list }}|{{ users | selectattr('admin') | map(attribute='name') | list }}|{{ users | rejectattr('name', 'equalto', 'a') | map(attribute='name') | list }}|{{ users | selectattr('name', 'in', ['b']) | list }}",
     {"users": [{"name": "a", "admin": True}, {"name": "b", "age": 3}]}),
    ("filter/map_filter_args", "{{ ['a-b', 'c-d'] | map('replace', '-', '+') | join(' ') }}|{{ [1.25, 2.5] | map('round', 1) | list }}", {}),
    ("filter/sort_unique", "{{ [3, 1, 2] | sort }}|{{ [3, 1, 2] | sort(reverse=true) }}|{{ ['b', 'A', 'c'] | sort }}|{{ ['b', 'A', 'c'] | sort(case_sensitive=true) }}|{{ users | sort(attribute='n') | map(attribute='n') | list }}|{{ [1, 2, 2, 1] | unique | list }}|{{ ['A', 'a', 'b'] | unique | list }}|{{ {'b': 1, 'A': 2} | dictsort }}|{{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }}",
     {"users": [{"n": 2}, {"n": 1}]}),
    ("filter/numbers", "{{ 3.7 | int }} {{ '3.7' | int }} {{ 'x' | int }} {{ '12' | int(base=16) }} {{ '0x1A' | int(0, 16) }} {{ 3 | float }} {{ '1e3' | float }} {{ 'x' | float }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 5 | round }} {{ 1.23456 | round(2) }} {{ 1.21 | round(1, 'ceil') }} {{ -2 | abs }} {{ [1, 2, 3] | sum }} {{ [1, 5, 3] | max }} {{ ['b', 'A'] | min }}", {}),
    ("filter/tojson", "{{ data | tojson }}|{{ data | tojson(indent=2) }}|{{ data | tojson(separators=(',', ':')) }}|{{ data | tojson(sort_keys=true) }}|{{ '<é>&\\'' | tojson }}|{{ 'é😀' | tojson(ensure_ascii=true) }}|{{ [] | tojson(indent=2) }}|{{ {'a': {}} | tojson(indent='\\t') }}",
     {"data": {"z": [1, 2.5, None, True, "x\ny\t\"q\"\\"], "a": {"k": "é\u2028\u0001"}, "e": []}}),
    ("filter/tojson_undefined_error", "{{ nothing | tojson }}", {}),
    ("filter/items", "{{ {'a': 1} | items | list }}|{{ nothing | items | list }}", {}),
    ("filter/items_error", "{{ [1] | items | list }}", {}),
    ("filter/string_reverse", "{{ [1, 'a'] | string }}|{{ none | string }}|{{ 'abc' | reverse }}|{{ [1, 2] | reverse | list }}|{{ 1 | string ~ 2 }}", {}),
    ("filter/batch_slice", "{{ [1, 2, 3, 4, 5] | batch(2) | list }}|{{ [1, 2, 3] | batch(2, 'x') | list }}|{{ [1, 2, 3, 4, 5] | slice(2) | list }}", {}),
    ("filter/indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent('> ', blank=true) }}", {}),
    ("filter/escape_safe", "{{ '<a href=\"x\">&\\'' | e }}|{{ '<b>' | safe }}|{{ 'x' | escape }}", {}),
    ("filter/format_truncate", "{{ '%s=%d' | format('a', 3) }}|{{ 'foo bar baz qux quux' | truncate(9) }}|{{ 'foo bar baz' | truncate(9) }}|{{ 'abcdefghijkl' | truncate(5, true, '..', 0) }}", {}),
    ("filter/unknown_error", "{{ 'a' | frobnicate }}", {}),
    ("filter/unknown_untaken", "{% if false %}{{ 'a' | frobnicate }}{% endif %}ok", {}),
    ("test/types", "{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1 is integer }}{{ 1.0 is float }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is mapping }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ x is iterable }}{{ [] is sequence }}{{ true is boolean }}{{ false is false }}{{ true is true }}", {}),
    ("test/values", "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 2 is in [1, 2] }}{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is ge 3 }}{{ 3 is gt 2 }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ none is sameas none }}{{ x is not defined and y is not defined }}", {}),
    ("test/unknown_error", "{{ 1 is frobnicated }}", {}),
    ("meth/str", "{{ 'a,b,,c'.split(',') }}{{ '  a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}{{ 'l1\\nl2\\r\\nl3'.splitlines() }}{{ 'xyx'.strip('x') }}{{ '  y '.lstrip() }}|{{ 'y\\n\\n'.rstrip('\\n') }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.endswith('bc') }}{{ 'aXbX'.replace('X', '-') }}{{ 'ab'.replace('', '.') }}{{ 'héllo'.find('l') }}{{ 'abc'.find('z') }}{{ 'aaa'.count('a') }}{{ '-'.join(['a', 'b']) }}{{ 'Hello World'.title() }}{{ \"they're\".title() }}{{ 'hello'.capitalize() }}{{ 'ABC'.lower() }}{{ 'abc'.upper() }}{{ '42'.isdigit() }}{{ 'ab'.isalpha() }}{{ '7'.zfill(3) }}{{ 'pre_x'.removeprefix('pre_') }}", {}),
    ("meth/format", "{{ '{} and {}'.format('a', 1) }}|{{ '{0}{0}{1}'.format('x', 'y') }}|{{ '{name}!'.format(name='n') }}|{{ '{:>5}|{:<4}|{:^7}|{:.2f}|{:05d}|{!r}'.format('a', 'b', 'c', 3.14159, 42, 'q') }}|{{ '{{literal}}'.format() }}", {}),
    ("meth/dict_list", "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }} {{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }}", {"d": {"a": 1, "b": 2}}),
    ("op/float_divmod", "{{ 1 // 0.1 }} {{ 1 % 0.1 }} {{ -7.5 // 2 }} {{ 7 // -2.0 }} {{ -0.0 // 1 }}", {}),
    ("sub/slice_non_sequence_error", "{{ x[1:] }}", {"x": 1.5}),
    ("sub/slice_dict_error", "{{ d[1:] }}", {"d": {"a": 1}}),
    ("filter/falsy_inputs", "{{ none | map('upper') | list }}|{{ false | select | list }}|{{ 1.5 | safe }}|{{ (t | safe)[0] }}|{{ nothing | truncate(3) }}", {"t": True}),
    ("filter/int_undefined_error", "{{ nothing | int }}", {}),
    ("test/float_parity", "{{ 2.0 is even }} {{ 2.5 is odd }} {{ 3.0 is odd }} {{ -3 is odd }}", {}),
    ("syntax/unknown_tag", "line1\n{% frobnicate %}", {}),
    ("syntax/unclosed_for", "{% for x in y %}\nbody\n", {}),
    ("syntax/unclosed_var", "a\nb {{ x ", {}),
    ("syntax/bad_expr", "{{ 1 + }}", {}),
    ("syntax/stray_end", "{% endif %}", {}),
    ("syntax/break_outside", "{% break %}", {}),
    ("syntax/unbalanced", "{{ (1 ] }}", {}),
    ("syntax/unterminated_string", "{{ 'abc }}", {}),
    ("syntax/do_tag", "{% do x %}", {}),
]


def main():
    out_path = os.path.join(HERE, "expected.jsonl")
    lines = [{"meta": {"generator": "make_expected.py", "jinja2": jinja2.__version__,
                       "python": sys.version.split()[0], "fixed_now": FIXED_NOW.isoformat()}}]
    for name, tpl, special, messages, agp, kwargs in CHATS:
        src = load(tpl)
        rec = {"name": name, "kind": "chat", "template": tpl, "special_tokens": special, "messages": messages,
               "add_generation_prompt": agp, "kwargs": kwargs}
        rec.update(outcome(lambda: render_chat(src, special, messages, agp, kwargs)))
        lines.append(rec)
    for name, tpl, ctx in CONSTRUCTS:
        rec = {"name": name, "kind": "construct", "source": tpl, "context": ctx}
        rec.update(outcome(lambda: ENV.from_string(tpl).render(**ctx)))
        lines.append(rec)
    with open(out_path, "w", encoding="utf-8") as f:
        for rec in lines:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"wrote {len(lines) - 1} cases to {out_path}")


if __name__ == "__main__":
    main()
