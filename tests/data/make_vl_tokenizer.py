#!/usr/bin/python3
"""A toy tokenizer for the tiny Qwen2-VL checkpoint, so `pipit run --image` can be tested end to end.

The shared VL checkpoints have no tokenizer (their text ids are crc32 toys). This writes
tests/data/vl_tokenizer/{tokenizer.json, tokenizer_config.json}: a byte-level BPE with no merges (ids 0..255 =
the 256 byte symbols, 256..999 unused), Qwen's special tokens at the shifted ids the checkpoint uses
(<|endoftext|> 1000, <|im_start|> 1001, <|im_end|> 1002, ..., <|vision_start|> 1009, <|vision_end|> 1010,
<|image_pad|> 1012), and the Qwen2-VL chat template (images as {"type": "image"} items).
Usage: /usr/bin/python3 tests/data/make_vl_tokenizer.py
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vl_tokenizer")

# Qwen2's special tokens 151643.. shifted to 1000..; tokenizers re-derives added-token ids in list order after the
# model vocab (the "id" fields are not read back), so the vocab is padded to 1000 entries and all 14 are listed
SPECIAL = {t: 1000 + i for i, t in enumerate([
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>"])}

# the Qwen2-VL-Instruct chat template (tokenizer_config.json of Qwen/Qwen2-VL-2B-Instruct)
TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def bytes_to_unicode():
    # GPT-2's byte -> printable character table
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main():
    os.makedirs(OUT, exist_ok=True)
    vocab = {ch: b for b, ch in bytes_to_unicode().items()}
    for i in range(256, 1000):  # never produced (no merges): they only move the special tokens to 1000..
        vocab["<unused_%d>" % i] = i
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for t, i in sorted(SPECIAL.items(), key=lambda x: x[1])]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    cfg = {
        "add_prefix_space": False, "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "model_max_length": 32768, "tokenizer_class": "Qwen2Tokenizer", "chat_template": TEMPLATE,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added},
    }
    with open(os.path.join(OUT, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    with open(os.path.join(OUT, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
