#!/usr/bin/env python3
"""Makes the Qwen3.5 and GPT-OSS GGUF files of tests/unit/gguf_llamacpp_2026_test.cpp (issue 37 item 3) with
llama.cpp's own convert_hf_to_gguf.py, run on the tiny test checkpoints of the shared test data.

usage: make_qwen35_gpt_oss_gguf.py LLAMA_CPP_SRC TESTDATA OUT_DIR      (Debian's /usr/bin/python3: numpy, torch)

The converter runs through bench/llamacpp_convert_novocab.py (stand-ins for `transformers`, tqdm and torch's float8
names, none of which the conversion of these models uses; the vocabulary written straight from tokenizer.json).
Every tensor name, layout change and metadata key is the converter's own; nothing is rewritten afterwards.

  qwen3_5_vl-BF16.gguf         the Qwen3.5 language model + its MTP layer (arch qwen35, block_count 5 with
                               nextn_predict_layers 1), --outtype bf16: the checkpoint's bf16 values as they are,
                               except what the converter computes (norms + 1 and -exp(A_log) in f32)
  qwen3_5_vl-Q8_0.gguf         the same, --outtype q8_0 (the converter's own Q8_0 quantizer, gguf-py)
  mmproj-qwen3_5_vl-BF16.gguf  the vision tower (--mmproj: projector qwen3vl_merger), --outtype bf16
  gpt_oss_mxfp4.gguf           GPT-OSS with the Hub's MXFP4 experts repacked by the converter (MXFP4 as stored),
                               the other weights bf16

The qwen3_5_vl checkpoint has no tokenizer (its prompts are toy ids): a byte-level BPE one with its 512 ids is made
here (qwen35_tokenizer/: the 256 byte tokens of tests/data/vl_tokenizer, 16 merges, unused pieces up to 479; ids 480..511
added tokens, Qwen's at the ids the checkpoint's config and README give: <|endoftext|> 480, <|im_start|> 481, <|im_end|> 482, ...,
<|vision_start|> 489, <|vision_end|> 490, <|image_pad|> 492, <|video_pad|> 493, <think> 504, </think> 505; the chat
template of tests/data/vl_tokenizer). The converter reads it from a scratch copy of the checkpoint (links to the
shared files plus the tokenizer), so the GGUF vocabulary and the test's HF folder hold the same tokenizer.
GPT-OSS has none: its GGUF says tokenizer.ggml.model "none" (logits from ids only).
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SHIM = os.path.join(REPO, "bench", "llamacpp_convert_novocab.py")
VL_TOK = os.path.join(REPO, "tests", "data", "vl_tokenizer")

# Qwen's added tokens in their Hub order, from <|endoftext|> (480 in this checkpoint)
QWEN_ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
              "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
              "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
THINK = {504: "<think>", 505: "</think>"}
# a few byte-level BPE merges (GGUF readers, llama.cpp's and pipit's, want tokenizer.ggml.merges), their tokens at
# ids 256.. in this order ("Ġ" is the space byte)
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "s"), ("Ġ", "a"), ("i", "n"), ("e", "r"), ("o", "n"),
          ("Ġ", "i"), ("Ġi", "s"), ("Ġ", "s"), ("a", "t"), ("e", "s"), ("o", "r"), ("i", "m"), ("a", "g")]
N_VOCAB = 512


def make_tokenizer(out_dir, n_vocab=N_VOCAB, first_added=480, think=THINK):
    """first_added: the checkpoint's id of <|endoftext|>, n_vocab: its vocabulary size
    (make_gemma4_qwen3vl_gguf.py makes Qwen3-VL's: 1024, 1000, no think tokens)."""
    base = json.load(open(os.path.join(VL_TOK, "tokenizer.json"), encoding="utf-8"))
    inv = {i: s for s, i in base["model"]["vocab"].items()}
    # HF's tokenizers (and pipit's) give added tokens the ids after the model's vocabulary in list order, whatever id
    # the file says: ids first_added.. are all added tokens, the unnamed ones "<unused_N>"
    added = {i: f"<unused_{i}>" for i in range(first_added, n_vocab)}
    added.update({first_added + k: s for k, s in enumerate(QWEN_ADDED)})
    added.update(think)
    merged = [a + b for a, b in MERGES]
    vocab = {}
    for i in range(first_added):
        vocab[inv[i] if i < 256 else merged[i - 256] if i - 256 < len(merged) else f"<unused_{i}>"] = i
    tj = dict(base)
    tj["model"] = dict(base["model"], vocab=vocab, merges=[f"{a} {b}" for a, b in MERGES])
    entry = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    tj["added_tokens"] = [dict(entry, id=i, content=s, special=i not in think) for i, s in sorted(added.items())]
    cfg = json.load(open(os.path.join(VL_TOK, "tokenizer_config.json"), encoding="utf-8"))
    cfg["added_tokens_decoder"] = {str(i): dict(entry, content=s, special=i not in think)
                                   for i, s in sorted(added.items())}
    os.makedirs(out_dir, exist_ok=True)
    json.dump(tj, open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    json.dump(cfg, open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8"), ensure_ascii=False,
              indent=1)


def convert(model_dir, out, *flags):
    env = dict(os.environ, LLAMA_SRC=SRC)
    subprocess.run(["/usr/bin/python3", SHIM, model_dir, "--outfile", out, *flags], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(os.path.basename(out), os.path.getsize(out), flush=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    tok = os.path.join(OUT, "qwen35_tokenizer")
    make_tokenizer(tok)
    scratch = os.path.join(OUT, "tmp", "qwen3_5_vl")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    vl = os.path.join(TESTDATA, "models", "qwen3_5_vl")
    for f in ("config.json", "model.safetensors", "preprocessor_config.json", "video_preprocessor_config.json",
              "generation_config.json"):
        os.symlink(os.path.join(vl, f), os.path.join(scratch, f))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, f), os.path.join(scratch, f))
    convert(scratch, os.path.join(OUT, "qwen3_5_vl-BF16.gguf"), "--outtype", "bf16")
    convert(scratch, os.path.join(OUT, "qwen3_5_vl-Q8_0.gguf"), "--outtype", "q8_0")
    convert(scratch, os.path.join(OUT, "mmproj-qwen3_5_vl-BF16.gguf"), "--outtype", "bf16", "--mmproj")
    convert(os.path.join(TESTDATA, "models", "gpt_oss_mxfp4"), os.path.join(OUT, "gpt_oss_mxfp4.gguf"),
            "--outtype", "bf16")
    shutil.rmtree(os.path.join(OUT, "tmp"))


if __name__ == "__main__":
    SRC, TESTDATA, OUT = sys.argv[1:4]
    main()
