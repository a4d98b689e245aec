#!/usr/bin/python3
"""A toy tokenizer for the tiny Gemma 4 checkpoint, so `pipit run --image` can be tested end to end.

The shared checkpoint (../shared/testdata/models/gemma4) has no tokenizer: its text ids are crc32 toys (prompts.json).
This writes tests/data/gemma4_tokenizer/{tokenizer.json, tokenizer_config.json}: a byte-level BPE over 512 ids whose
only reachable entries are the pieces of prompts.json (each an added token at the id the goldens use: "Describe"
336, " this" 406, ...), Gemma 4's special tokens at the checkpoint's ids (<bos> 2, <|turn> 105, <turn|> 106,
<|image> 500, <|image|> 502, <image|> 504, ...; every other id is an unused placeholder), <bos> added in front by a
TemplateProcessing post-processor, and a short Gemma-4-style chat template (an image item writes <|image|>; the
processor, not the template, adds <|image> / <image|>).
Usage: /usr/bin/python3 tests/data/make_gemma4_tokenizer.py [path/to/prompts.json]
"""
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemma4_tokenizer")
PROMPTS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "../../../shared/testdata/models/gemma4/prompts.json")

SPECIAL = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<|turn>": 105, "<turn|>": 106, "<|image>": 500, "<|audio>": 501,
           "<|image|>": 502, "<|audio|>": 503, "<image|>": 504, "<audio|>": 505, "<|video|>": 506,
           "<|tool_response>": 507}
N_VOCAB = 512

TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}<|turn>{{ role }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<|image|>{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<turn|>\n{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)


def main():
    with open(PROMPTS, encoding="utf-8") as f:
        prompts = json.load(f)
    pieces = {}
    for case in prompts.values():
        for item in case.get("items") or []:
            if isinstance(item, dict) and "text" in item:
                assert pieces.get(item["text"], item["id"]) == item["id"]
                pieces[item["text"]] = item["id"]
    # the vocab holds every id; an added token takes the id of the vocab entry with its exact content (HF's rule),
    # so the pieces are stored as they are, not in the byte-level alphabet
    names = {i: "<unused_%d>" % i for i in range(N_VOCAB)}
    for t, i in SPECIAL.items():
        names[i] = t
    for t, i in pieces.items():
        assert i not in SPECIAL.values()
        names[i] = t
    vocab = {name: i for i, name in names.items()}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for t, i in SPECIAL.items()]
    added += [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
               "special": False} for t, i in pieces.items()]
    added.sort(key=lambda a: a["id"])
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    cfg = {
        "bos_token": "<bos>", "eos_token": "<turn|>", "pad_token": "<pad>", "model_max_length": 131072,
        "tokenizer_class": "GemmaTokenizer", "chat_template": TEMPLATE,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added},
    }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    with open(os.path.join(OUT, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
