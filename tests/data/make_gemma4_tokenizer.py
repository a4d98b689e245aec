#!/usr/bin/python3
"""A toy tokenizer for the tiny Gemma 4 checkpoint (../shared/testdata/models/gemma4), so `pipit run --audio` and
the server's input_audio can be tested end to end against the goldens.

The checkpoint has no tokenizer: its text ids are crc32 toys of the pieces listed in its prompts.json. This writes
tests/data/gemma4_tokenizer/{tokenizer.json, tokenizer_config.json} where every id 0..511 is an added token: the
special tokens under their real Gemma 4 names at the ids the test config uses (<bos> 2, <|turn> 105, <turn|> 106,
<|audio> 501, <|audio|> 503, <audio|> 505, ...), the prompt pieces of prompts.json under their text ("user", "\\n",
"Transcribe", " this", ...), and every other id as "<tN>". So the golden audio prompt is the text
"<bos><|turn>user\\n<|audio|>Transcribe this audio.<turn|>\\n<|turn>model\\nSure, here", and a generated id N reads
"<tN>". The chat template is a reduced Gemma 4 one (audio items as <|audio|>, images as <|image|>).
Usage: /usr/bin/python3 tests/data/make_gemma4_tokenizer.py
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gemma4_tokenizer")
PROMPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../shared/testdata/models/gemma4/prompts.json")

SPECIAL = {0: "<pad>", 1: "<eos>", 2: "<bos>", 105: "<|turn>", 106: "<turn|>", 500: "<|image>", 501: "<|audio>",
           502: "<|image|>", 503: "<|audio|>", 504: "<image|>", 505: "<audio|>", 506: "<|video|>",
           507: "<|tool_response>"}

TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|turn>{{ 'model' if message['role'] == 'assistant' "
    "else message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for item in message['content'] %}{% if item['type'] == 'audio' %}<|audio|>{% elif item['type'] == 'image' %}"
    "<|image|>{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}<turn|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)


def main():
    pieces = {}
    if os.path.exists(PROMPTS):
        with open(PROMPTS) as f:
            for case in json.load(f).values():
                for item in case.get("items") or []:
                    if isinstance(item, dict) and "text" in item:
                        pieces[item["id"]] = item["text"]
    else:  # the pieces of the audio case, as prompts.json lists them
        pieces = {135: "user", 423: "\n", 82: "Transcribe", 406: " this", 463: " audio", 298: ".", 405: "model",
                  364: "Sure", 478: ",", 149: " here"}
    names = {i: SPECIAL.get(i, pieces.get(i, "<t%d>" % i)) for i in range(512)}
    assert len(set(names.values())) == 512
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": i in SPECIAL} for i, t in names.items()]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": None, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in names.items()}, "merges": []},
    }
    cfg = {
        "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "model_max_length": 32768,
        "tokenizer_class": "GemmaTokenizer", "chat_template": TEMPLATE,
    }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=0)
    with open(os.path.join(OUT, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=0)


if __name__ == "__main__":
    main()
