#!/usr/bin/env python3
"""Makes the Gemma 4 and Qwen3-VL GGUF files of tests/unit/gguf_llamacpp_2026_test.cpp (issue 32 item 5) with
llama.cpp's own convert_hf_to_gguf.py, run on the tiny test checkpoints of the shared test data.

usage: make_gemma4_qwen3vl_gguf.py LLAMA_CPP_SRC TESTDATA OUT_DIR      (Debian's /usr/bin/python3: numpy, torch)

As make_qwen35_gpt_oss_gguf.py: the converter runs through bench/llamacpp_convert_novocab.py (stand-ins for
`transformers`, tqdm and torch's float8 names); every tensor name, layout change and metadata key is the converter's.

  gemma4-BF16.gguf           Gemma 4's language model (arch gemma4), --outtype bf16
  gemma4-Q8_0.gguf           the same, --outtype q8_0 (gguf-py's Q8_0 quantizer)
  mmproj-gemma4-BF16.gguf    vision tower (projector gemma4v) and audio tower (gemma4a) in one file, --mmproj
  qwen3_vl-BF16.gguf         Qwen3-VL's language model (arch qwen3vl, n_deepstack_layers 2), --outtype bf16
  qwen3_vl-Q8_0.gguf         the same, --outtype q8_0
  mmproj-qwen3_vl-BF16.gguf  the vision tower with its DeepStack mergers (projector qwen3vl_merger), --mmproj

Gemma 4: the converter's Gemma3Model.modify_tensors opens tokenizer.json (to cut token_embd to the real vocabulary),
so the converter reads a scratch copy of the checkpoint with tests/data/gemma4_tokenizer (its 512 ids: no row is
cut); its vocabulary writer (gguf.LlamaHfVocab) needs `transformers`, so the shim writes the same keys from
tokenizer.json (json_gemma4_vocab: tokenizer model "gemma4", tokens by id, scores 0), which gives the mmproj import
its media token ids by name.
Qwen3-VL: the checkpoint has no tokenizer; a byte-level one with its 1024 ids is made as for Qwen3.5
(make_qwen35_gpt_oss_gguf.make_tokenizer; Qwen's added tokens from <|endoftext|> 1000, so vision_start 1009,
image_pad 1012, video_pad 1013 as the README says) into qwen3vl_tokenizer/, and the converter reads it from a scratch
copy, so the GGUF and the test's HF folder hold the same tokenizer.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SHIM = os.path.join(REPO, "bench", "llamacpp_convert_novocab.py")
sys.path.insert(0, HERE)
import make_qwen35_gpt_oss_gguf as q35  # noqa: E402


def convert(src, model_dir, out, *flags):
    env = dict(os.environ, LLAMA_SRC=src)
    subprocess.run(["/usr/bin/python3", SHIM, model_dir, "--outfile", out, *flags], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(os.path.basename(out), os.path.getsize(out), flush=True)


def scratch_copy(testdata, out, name, tokenizer_dir):
    scratch = os.path.join(out, "tmp", name)
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    src = os.path.join(testdata, "models", name)
    for f in os.listdir(src):
        if f.endswith(".json") or f.endswith(".safetensors") and f != "golden.safetensors":
            os.symlink(os.path.join(src, f), os.path.join(scratch, f))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer_dir, f), os.path.join(scratch, f))
    return scratch


def main(src, testdata, out):
    os.makedirs(out, exist_ok=True)
    g4 = scratch_copy(testdata, out, "gemma4", os.path.join(REPO, "tests", "data", "gemma4_tokenizer"))
    convert(src, g4, os.path.join(out, "gemma4-BF16.gguf"), "--outtype", "bf16")
    convert(src, g4, os.path.join(out, "gemma4-Q8_0.gguf"), "--outtype", "q8_0")
    convert(src, g4, os.path.join(out, "mmproj-gemma4-BF16.gguf"), "--outtype", "bf16", "--mmproj")
    tok = os.path.join(out, "qwen3vl_tokenizer")
    q35.make_tokenizer(tok, n_vocab=1024, first_added=1000, think={})
    vl = scratch_copy(testdata, out, "qwen3_vl", tok)
    convert(src, vl, os.path.join(out, "qwen3_vl-BF16.gguf"), "--outtype", "bf16")
    convert(src, vl, os.path.join(out, "qwen3_vl-Q8_0.gguf"), "--outtype", "q8_0")
    convert(src, vl, os.path.join(out, "mmproj-qwen3_vl-BF16.gguf"), "--outtype", "bf16", "--mmproj")
    shutil.rmtree(os.path.join(out, "tmp"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
