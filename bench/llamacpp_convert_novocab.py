#!/usr/bin/env python3
"""Runs llama.cpp's own convert_hf_to_gguf.py on a random-weight, tokenizer-less benchmark checkpoint (the
bench/make_*_shape.py models), so llama.cpp benchmarks run its converter's exact tensor layout and transformations
(Qwen3.5's A_log / conv / norm rewrites, GPT-OSS's MXFP4 repacking) on the same weights as pipit.

usage: llamacpp_convert_novocab.py HF_DIR --outfile OUT.gguf [--outtype f16|bf16|q8_0|...]   (converter's flags)

Four changes: `transformers`, tqdm and torch's float8 dtypes are replaced by stand-ins (see below), and every vocabulary writer (set_vocab and the _set_vocab_* helpers, which need `transformers` and a
tokenizer) writes tokenizer.ggml.model = "none" and the config's vocab_size instead, which llama-bench accepts (it
feeds random token ids); when HF_DIR holds a tokenizer.json (Qwen's byte-level BPE, for llama-mtmd-cli, which
tokenizes its prompt) its vocabulary is written instead, read without `transformers` (json_bpe_vocab; Gemma 4's toy
tokenizer: json_gemma4_vocab; a Gemma-4-shaped BPE tokenizer with merges: the converter's own Gemma4Model.set_vocab,
with a stand-in for transformers' AutoTokenizer that reads tokenizer.json, _JsonFastTokenizer). LLAMA_SRC: llama.cpp's
source folder (default /tmp/lc/src). Needs Debian's python3-torch
and python3-numpy (run it with /usr/bin/python3).
"""
import os
import sys

src = os.environ.get("LLAMA_SRC", "/tmp/lc/src")
sys.path.insert(0, os.path.join(src, "gguf-py"))
sys.path.insert(0, src)

import types  # noqa: E402

# `transformers` is not in Debian: the converter imports it for AutoConfig only, and falls back to reading
# config.json when AutoConfig fails, which this stand-in always does
_tf = types.ModuleType("transformers")


class _NoAutoConfig:
    @staticmethod
    def from_pretrained(*args, **kwargs):
        raise RuntimeError("transformers is not installed; reading config.json")


_tf.AutoConfig = _NoAutoConfig


class _JsonFastTokenizer:
    """What gguf-py's LlamaHfVocab reads from a transformers fast tokenizer (AutoTokenizer.from_pretrained of a folder
    with tokenizer.json), computed from the files as transformers v5's TokenizersBackend defines it: vocab_size the
    model's vocabulary without added tokens, get_added_vocab() the added tokens, get_vocab() both, and the special
    tokens the bos/eos/unk/sep/pad/cls/mask names of tokenizer_config.json plus its model-specific named tokens (a
    "*_token" key, e.g. Gemma 4's sot_token "<|turn>") and its extra_special_tokens list."""
    is_fast = True

    def __init__(self, path):
        import json
        with open(os.path.join(path, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        cfg = {}
        if os.path.exists(os.path.join(path, "tokenizer_config.json")):
            with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as f:
                cfg = json.load(f)
        self.vocab_size = len(tj["model"]["vocab"])
        self._added = {a["content"]: a["id"] for a in tj.get("added_tokens", [])}
        self.vocab = dict(tj["model"]["vocab"])
        self.vocab.update(self._added)
        special = []
        for key, value in cfg.items():
            if key.endswith("_token") and isinstance(value, str):
                special.append(value)
            elif key.endswith("_token") and isinstance(value, dict) and isinstance(value.get("content"), str):
                special.append(value["content"])
        extra = cfg.get("extra_special_tokens", [])
        special += list(extra.values()) if isinstance(extra, dict) else list(extra)
        self.all_special_tokens = [t for i, t in enumerate(special) if t in self.vocab and t not in special[:i]]
        self.all_special_ids = [self.vocab[t] for t in self.all_special_tokens]

    def get_added_vocab(self):
        return dict(self._added)

    def get_vocab(self):
        return dict(self.vocab)


class _JsonAutoTokenizer:
    @staticmethod
    def from_pretrained(path, **kwargs):
        return _JsonFastTokenizer(str(path))


_tf.AutoTokenizer = _JsonAutoTokenizer
sys.modules.setdefault("transformers", _tf)

# the GGUF writer's progress bar (tqdm, not installed): a silent one
if "tqdm" not in sys.modules:
    _tq = types.ModuleType("tqdm")

    class _SilentBar:
        def __init__(self, *args, **kwargs): pass
        def update(self, *args): pass
        def reset(self, *args, **kwargs): pass
        def set_description(self, *args): pass
        def close(self): pass

    _tq.tqdm = _SilentBar
    sys.modules["tqdm"] = _tq

# Debian's torch 1.13 has no float8 dtypes, which the converter names in its dtype tables: stand-ins that match no
# tensor (the benchmark checkpoints have none)
import torch  # noqa: E402

for _name in ("float8_e4m3fn", "float8_e5m2"):
    if not hasattr(torch, _name):
        setattr(torch, _name, object())

import conversion  # noqa: E402
from conversion import base  # noqa: E402


def json_bpe_vocab(self, hp, path):
    """A byte-level BPE vocabulary (Qwen's) straight from tokenizer.json, as _set_vocab_gpt2 writes it through
    transformers' AutoTokenizer: ids past the tokenizer padded with [PADi], added tokens CONTROL when special, else
    USER_DEFINED, the merges and special ids by gguf-py's SpecialVocab. Pre-tokenizer: "qwen2" (the tokenizers of the
    VL benchmark checkpoints are Qwen's). llama-mtmd-cli tokenizes its prompt, so it needs one."""
    import json
    import gguf
    tj = json.load(open(path, encoding="utf-8"))
    n = hp["vocab_size"]
    tokens, types = [f"[PAD{i}]" for i in range(n)], [gguf.TokenType.UNUSED] * n
    for tok, i in tj["model"]["vocab"].items():
        if i < n:
            tokens[i], types[i] = tok, gguf.TokenType.NORMAL
    for a in tj.get("added_tokens", []):
        if a["id"] < n:
            tokens[a["id"]] = a["content"]
            types[a["id"]] = gguf.TokenType.CONTROL if a.get("special") else gguf.TokenType.USER_DEFINED
    self.gguf_writer.add_tokenizer_model("gpt2")
    self.gguf_writer.add_tokenizer_pre("qwen2")
    self.gguf_writer.add_token_list(tokens)
    self.gguf_writer.add_token_types(types)
    gguf.SpecialVocab(self.dir_model, load_merges=True, n_vocab=n).add_to_gguf(self.gguf_writer)


def json_gemma4_vocab(self, hp, path):
    """A Gemma 4 vocabulary straight from tokenizer.json (the toy tests/data/gemma4_tokenizer: every id in the model's
    vocab, specials among them), with the keys Gemma4Model.set_vocab writes through transformers: tokenizer model
    "gemma4", the tokens by id, CONTROL for special added tokens else NORMAL, scores 0 (the writer's scores come from
    the HF tokenizer; these tests read no scores), the special ids by gguf-py's SpecialVocab, no space prefix, BOS."""
    import json
    import gguf
    tj = json.load(open(path, encoding="utf-8"))
    n = hp["vocab_size"]
    tokens, types = [f"<unused{i}>" for i in range(n)], [gguf.TokenType.UNUSED] * n
    for tok, i in tj["model"]["vocab"].items():
        if i < n:
            tokens[i], types[i] = tok, gguf.TokenType.NORMAL
    for a in tj.get("added_tokens", []):
        if a["id"] < n and a.get("special"):
            types[a["id"]] = gguf.TokenType.CONTROL
    self.gguf_writer.add_tokenizer_model("gemma4")
    self.gguf_writer.add_token_list(tokens)
    self.gguf_writer.add_token_scores([0.0] * n)
    self.gguf_writer.add_token_types(types)
    gguf.SpecialVocab(self.dir_model, load_merges=True, n_vocab=n).add_to_gguf(self.gguf_writer)
    self.gguf_writer.add_add_space_prefix(False)
    self.gguf_writer.add_add_bos_token(True)


def no_vocab(self, *args, **kwargs):
    hp = self.hparams.get("text_config", self.hparams)
    tj = os.path.join(str(self.dir_model), "tokenizer.json")
    if os.path.exists(tj) and hp.get("model_type", "").startswith("gemma4"):
        import json
        with open(tj, encoding="utf-8") as f:
            model = json.load(f)["model"]
        if model.get("byte_fallback") and model.get("merges"):
            # a Gemma-4-shaped tokenizer (BPE with merges and byte fallback): the converter's own writer, its
            # AutoTokenizer the stand-in above
            return _GEMMA4_SET_VOCAB(self)
        return json_gemma4_vocab(self, hp, tj)  # the toy Gemma 4 tokenizer (no merges)
    if os.path.exists(tj):  # a tokenizer copied beside the random weights
        return json_bpe_vocab(self, hp, tj)
    self.gguf_writer.add_tokenizer_model("none")
    self.gguf_writer.add_vocab_size(hp["vocab_size"])


def patch(cls):
    for name in list(vars(cls)):
        if name == "set_vocab" or name.startswith("_set_vocab"):
            setattr(cls, name, no_vocab)


conversion.load_all_models()
from conversion import gemma as _gemma  # noqa: E402

_GEMMA4_SET_VOCAB = _gemma.Gemma4Model.set_vocab  # kept before patch() replaces it
for by_name in base.ModelBase._model_classes.values():
    for cls in by_name.values():
        for c in cls.__mro__:
            if issubclass(c, base.ModelBase):
                patch(c)

sys.argv[0] = os.path.join(src, "convert_hf_to_gguf.py")
import convert_hf_to_gguf  # noqa: E402

convert_hf_to_gguf.main()
