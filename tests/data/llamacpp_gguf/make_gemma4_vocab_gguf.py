#!/usr/bin/env python3
"""Makes a small Gemma-4-shaped HF tokenizer and llama.cpp's GGUF of the tiny Gemma 4 checkpoint with it, for the
GGUF vocabulary tests of tests/unit/gguf_llamacpp_2026_test.cpp (tokenizer.ggml.model "gemma4", issue 32 item 5).

usage: make_gemma4_vocab_gguf.py LLAMA_CPP_SRC TESTDATA      (Debian's /usr/bin/python3: numpy, torch)

  tests/data/gemma4_bpe_tokenizer/   tokenizer.json, tokenizer_config.json, chat_template.jinja
  tests/data/llamacpp_gguf/gemma4_bpe-Q8_0.gguf   the checkpoint's language model with that vocabulary, --outtype q8_0

No real Gemma 4 tokenizer is in the test data, so this one has the shape of the Hub's (transformers v5 GemmaTokenizer
as convert_gemma4_weights.py builds it from the SentencePiece model): a BPE model with byte_fallback and fuse_unk, the
normalizer Replace(" " -> "▁"), the pre-tokenizer Split(" ", merged_with_previous), the decoder Replace("▁" -> " ") +
ByteFallback + Fuse, no prefix space, no BOS added by the post-processor (add_bos_token=False); the merges are what
SentencePieceExtractor derives from a SentencePiece vocabulary (every split of a piece into two pieces, pieces by
score, here the id order); <pad> <eos> <bos> <unk> <mask> at 0-4, the 256 byte pieces <0x00>..<0xFF> at 238-493 as in
Gemma's vocabulary, the named special tokens of the Hub's tokenizer_config.json (<|turn> 105, <turn|> 106 as the
checkpoint's eos_token_id [1, 106]; the media tokens at the checkpoint's config ids 500-505), special added tokens.
512 ids, the checkpoint's vocabulary size.

The GGUF: llama.cpp's convert_hf_to_gguf.py through bench/llamacpp_convert_novocab.py, whose stand-in for
transformers' AutoTokenizer lets the converter's own Gemma4Model.set_vocab (gguf.LlamaHfVocab, SpecialVocab with the
merges) write the vocabulary. Rerunning gives the same bytes.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SHIM = os.path.join(REPO, "bench", "llamacpp_convert_novocab.py")
TOK_DIR = os.path.join(REPO, "tests", "data", "gemma4_bpe_tokenizer")
N_VOCAB = 512

SPECIAL = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>",
           46: "<|tool>", 47: "<tool|>", 48: "<|tool_call>", 49: "<tool_call|>", 50: "<|tool_response>",
           51: "<tool_response|>", 52: '<|"|>', 98: "<|think|>", 100: "<|channel>", 101: "<channel|>",
           105: "<|turn>", 106: "<turn|>",
           500: "<|image>", 501: "<|audio>", 502: "<|image|>", 503: "<|audio|>", 504: "<image|>", 505: "<audio|>",
           506: "<|video|>"}
BYTE0 = 238  # <0x00>; <0xFF> at 493

# tokenizer_config.json as the Hub's Gemma 4 one names its tokens (extra_special_tokens: the video token)
NAMED = {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>",
         "mask_token": "<mask>", "image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
         "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>", "sot_token": "<|turn>",
         "eot_token": "<turn|>", "soc_token": "<|channel>", "eoc_token": "<channel|>", "think_token": "<|think|>",
         "escape_token": '<|"|>', "str_token": "<|tool_response>", "etr_token": "<tool_response|>",
         "stc_token": "<|tool_call>", "etc_token": "<tool_call|>", "std_token": "<|tool>", "etd_token": "<tool|>"}

# the normal pieces, highest score first (SentencePiece's order): words and whitespace runs, then single characters
WORDS = ["▁▁", "\n\n", "he", "ll", "▁t", "▁w", "or", "th", "in", "er", "▁a", "an", "on", "es", "is", "it", "at", "re",
         "ed", "en", "of", "to", "▁▁▁▁", "▁▁▁", "\n\n\n", "\t\t", "llo", "hello", "▁hello", "orld", "▁world", "the",
         "▁the", "ing", "▁in", "and", "▁and", "▁is", "▁it", "▁re", "▁of", "▁to", "▁on", "He", "Hello", "▁Hello",
         "ld", "de", "del", "nd",
         "ca", "caf", "café", "▁café", "中文", "▁中文", "▁—", "<|", "|>", "mo", "model", "us", "user", "▁user", "▁▁▁▁▁▁▁▁"]
CHARS = (["▁", "\n", "\t"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] +
         [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [str(d) for d in range(10)] +
         list(".,!?'\"-:;()<>|/_=*#&") + ["é", "ü", "ñ", "—", "中", "文", "“", "”"])


def pieces_by_id():
    vocab = {i: t for i, t in SPECIAL.items()}
    for b in range(256):
        vocab[BYTE0 + b] = f"<0x{b:02X}>"
    normal = WORDS + CHARS
    free = [i for i in range(N_VOCAB) if i not in vocab]
    assert len(normal) <= len(free), (len(normal), len(free))
    normal += [f"<unused{k}>" for k in range(len(free) - len(normal))]
    for i, t in zip(free, normal):
        vocab[i] = t
    assert len(set(vocab.values())) == N_VOCAB
    return [vocab[i] for i in range(N_VOCAB)], set(WORDS)


def spm_merges(tokens, words):
    """SentencePieceExtractor's merges: for each piece in score order (here: id order) its splits into two pieces of
    the vocabulary, by (id of left, id of right)."""
    ids = {t: i for i, t in enumerate(tokens)}
    merges = []
    for t in tokens:
        if t not in words:
            continue
        local = [(ids[t[:k]], ids[t[k:]]) for k in range(1, len(t)) if t[:k] in ids and t[k:] in ids]
        merges += [[tokens[a], tokens[b]] for a, b in sorted(local)]
    return merges


def bpe(word, ranks):
    """Plain BPE (lowest rank first, leftmost on ties), to check each word piece is reachable from its characters."""
    syms = list(word)
    while True:
        best = min(((ranks.get((a, b), 1 << 30), k) for k, (a, b) in enumerate(zip(syms, syms[1:]))),
                   default=(1 << 30, -1))
        if best[0] == 1 << 30:
            return syms
        k = best[1]
        syms[k:k + 2] = [syms[k] + syms[k + 1]]


def make_tokenizer():
    tokens, words = pieces_by_id()
    merges = spm_merges(tokens, words)
    ranks = {(a, b): r for r, (a, b) in enumerate(merges)}
    for w in WORDS:
        assert bpe(w, ranks) == [w], (w, bpe(w, ranks))
    added = [{"id": i, "content": SPECIAL[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in sorted(SPECIAL)]
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }
    cfg = dict(NAMED)
    cfg.update({"backend": "tokenizers", "extra_special_tokens": ["<|video|>"], "model_max_length": 131072,
                "padding_side": "left", "tokenizer_class": "GemmaTokenizer"})
    cfg = {k: cfg[k] for k in sorted(cfg)}
    # Gemma 4's turn format (the Hub's chat_template.jinja, cut to plain text turns)
    template = ("{{ bos_token }}{% for message in messages %}"
                "<|turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
                "{{ message['content'] | trim }}<turn|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|turn>model\n{% endif %}")
    os.makedirs(TOK_DIR, exist_ok=True)
    with open(os.path.join(TOK_DIR, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(TOK_DIR, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    with open(os.path.join(TOK_DIR, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(template)
    print("tokenizer:", len(tokens), "ids,", len(merges), "merges", flush=True)


def main(src, testdata):
    make_tokenizer()
    out = os.path.join(HERE, "gemma4_bpe-Q8_0.gguf")
    scratch = os.path.join(HERE, "tmp_gemma4_bpe")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    try:
        model = os.path.join(testdata, "models", "gemma4")
        for f in os.listdir(model):
            if f.endswith(".json") or f.endswith(".safetensors") and f != "golden.safetensors":
                os.symlink(os.path.join(model, f), os.path.join(scratch, f))
        for f in os.listdir(TOK_DIR):
            shutil.copy(os.path.join(TOK_DIR, f), os.path.join(scratch, f))
        env = dict(os.environ, LLAMA_SRC=src)
        subprocess.run(["/usr/bin/python3", SHIM, scratch, "--outfile", out, "--outtype", "q8_0"], check=True,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(os.path.basename(out), os.path.getsize(out), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
