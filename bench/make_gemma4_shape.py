#!/usr/bin/env python3
"""Writes a random-weight HF checkpoint shaped like google/gemma-4-E2B-it (Gemma4ForConditionalGeneration: text
decoder, vision tower, audio conformer and both projectors; bf16, ~10.2 GB, 5.1 B parameters of which 2.35 B are the
per-layer embedding table) for the speed benchmarks: `pipit convert` / `pipit bench` on it, llama.cpp on the GGUF +
mmproj its own converter writes from it (bench/llamacpp_convert_novocab.py, bench/compare_gemma4.sh).

usage: make_gemma4_shape.py OUT_DIR [--size e2b] [--layers N]

Sizes, every number from a source (huggingface/transformers, src/transformers/models/gemma4/, the stored versions
listed in ../shared/testdata/models/gemma4/README.md):
  convert_gemma4_weights.py (commit 0f3f063), _VARIANTS["gemma-4-e2b"]: text hidden 1536, hidden_size_per_layer_input
    256, intermediate 4 * 1536 = 6144, 35 layers of types (4 sliding + 1 full) * 7, 8 query heads / 1 key-value head,
    num_kv_shared_layers 20 (layers 15..34 reuse the K/V of layer 13 (sliding) / 14 (full)), use_double_wide_mlp
    (those 20 layers: intermediate 12288), final_logit_softcapping 30, _ROPE_PARAMS (full: theta 1e6, proportional,
    partial_rotary_factor 0.25; sliding: theta 1e4, default); vision _ON_DEVICE_VISION_CONFIG: hidden 768,
    intermediate 3072, 16 layers, 12 heads / 12 KV heads, head_dim 64, global_head_dim 64, default_output_length 280,
    pooling 3, use_clipped_linears; vision_soft_tokens_per_image 280; audio _DEFAULT_AUDIO_CONFIG =
    Gemma4AudioConfig(); the image processor max_soft_tokens = image_seq_length = default_output_length (280).
  configuration_gemma4.py (commit 351f643) defaults for what the variant leaves out: text vocab_size 262144,
    vocab_size_per_layer_input 262144, head_dim 256, global_head_dim 512, sliding_window 512,
    max_position_embeddings 131072, rms_norm_eps 1e-6, gelu_pytorch_tanh, tied embeddings; vision patch 16,
    position_embedding_size 10240, rope theta 100; audio hidden 1024, 12 layers, 8 heads, subsampling channels
    [128, 32], conv kernel 5, chunk 12 / context left 13 / right 0, logit cap 50, residual_weight 0.5,
    output_proj_dims 1536; special ids boi 255999, boa 256000, image 258880, audio 258881, eoi 258882, eoa 258883,
    video 258884.
Tensor names and shapes: the Hub layout (model.language_model.*, model.vision_tower.*, model.audio_tower.*,
model.embed_vision.*, model.embed_audio.*), as in the tiny test checkpoint ../shared/testdata/models/gemma4 (same
names, E2B sizes; KV-shared layers carry their unused k_proj / v_proj / k_norm as the Hub files do; clip bounds of
the clippable linears are 0-d tensors).

Weights: matrices ~ N(0, 0.02) (as bench/make_qwen3_shape.py), norm weights 1 (Gemma 4's RMSNorm multiplies by the
plain weight), layer_scalar 1, per_dim_scale 1, biases 0, clip bounds -/+ 1e4 (never clip: bounds the real model has
but random activations need not respect). Gemma 4 normalizes every branch output (post-attention / post-FFN / PLE
norms) before it joins the residual stream, so these stay finite through 35 layers (checked: `pipit run` greedy
output and llama.cpp both generate). Written streamed, tensor by tensor in chunks of at most 2^25 values, so peak
memory stays near 0.5 GB although the per-layer table alone is 4.7 GB of bf16.

Tokenizer: the Gemma-4-shaped BPE tokenizer of tests/data/llamacpp_gguf/make_gemma4_vocab_gguf.py (its pieces,
merges, normalizer / decoder and named special tokens), with the vocabulary grown to the model's 262144 ids (the
free ids are <unusedN> pieces) and the media tokens moved to their real ids above (its 512-id original has them at
500-506). It must be full size: llama.cpp's converter cuts token_embd to the tokenizer's size, which would shrink the
output matmul (tied embeddings) to the tokenizer's vocabulary. Text tokenizes into a few hundred distinct ids only;
speed does not depend on which ids. chat_template.jinja: Gemma 4's turn format with a message's image / audio items
as <|image|> / <|audio|> (that script's template renders text turns only).

--layers N: fewer text layers (a quick check; N > 20 keeps the KV-sharing layout, whose sources llama.cpp hard-codes).
Needs numpy (Debian python3-numpy). Do not write it into the repo.
"""
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# text (gemma4_text)
HIDDEN, FF, LAYERS, HEADS, KV_HEADS, HEAD_DIM, GLOBAL_HEAD_DIM = 1536, 6144, 35, 8, 1, 256, 512
VOCAB, PLE, KV_SHARED, WINDOW = 262144, 256, 20, 512
# vision (gemma4_vision)
V_HIDDEN, V_FF, V_LAYERS, V_HEADS, V_HEAD_DIM = 768, 3072, 16, 12, 64
PATCH, V_POS, POOL, SOFT_TOKENS = 16, 10240, 3, 280
# audio (gemma4_audio)
A_HIDDEN, A_LAYERS, A_HEADS, A_CHANNELS, A_KERNEL, A_OUT, MEL = 1024, 12, 8, [128, 32], 5, 1536, 128
BOI, BOA, IMAGE, AUDIO, EOI, EOA, VIDEO = 255999, 256000, 258880, 258881, 258882, 258883, 258884


TEMPLATE = ("{{ bos_token }}{% for message in messages %}"
            "<|turn>{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
            "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
            "{% for item in message['content'] %}{% if item['type'] == 'image' %}<|image|>"
            "{% elif item['type'] == 'audio' %}<|audio|>{% elif item['type'] == 'text' %}{{ item['text'] | trim }}"
            "{% endif %}{% endfor %}{% endif %}<turn|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|turn>model\n{% endif %}")


def layer_types(n):
    return [("full_attention" if i % 5 == 4 else "sliding_attention") for i in range(n)]


def clippable(s, prefix, out_dim, in_dim):
    s[prefix + ".linear.weight"] = (out_dim, in_dim)
    for b in ("input_min", "input_max", "output_min", "output_max"):
        s[prefix + "." + b] = ()


def text_shapes(n_layers):
    t = "model.language_model."
    s = {t + "embed_tokens.weight": (VOCAB, HIDDEN), t + "embed_tokens_per_layer.weight": (VOCAB, n_layers * PLE),
         t + "per_layer_model_projection.weight": (n_layers * PLE, HIDDEN),
         t + "per_layer_projection_norm.weight": (PLE,),
         t + "norm.weight": (HIDDEN,)}
    first_shared = n_layers - KV_SHARED
    for i, kind in enumerate(layer_types(n_layers)):
        p = f"{t}layers.{i}."
        hd = GLOBAL_HEAD_DIM if kind == "full_attention" else HEAD_DIM
        ff = 2 * FF if i >= first_shared else FF  # use_double_wide_mlp: the KV-shared layers
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm", "post_per_layer_input_norm"):
            s[p + n + ".weight"] = (HIDDEN,)
        s.update({
            p + "layer_scalar": (1,),
            p + "self_attn.q_proj.weight": (HEADS * hd, HIDDEN), p + "self_attn.k_proj.weight": (KV_HEADS * hd, HIDDEN),
            p + "self_attn.v_proj.weight": (KV_HEADS * hd, HIDDEN), p + "self_attn.o_proj.weight": (HIDDEN, HEADS * hd),
            p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
            p + "mlp.gate_proj.weight": (ff, HIDDEN), p + "mlp.up_proj.weight": (ff, HIDDEN),
            p + "mlp.down_proj.weight": (HIDDEN, ff),
            p + "per_layer_input_gate.weight": (PLE, HIDDEN), p + "per_layer_projection.weight": (HIDDEN, PLE),
        })
    return s


def vision_shapes():
    v = "model.vision_tower."
    s = {v + "patch_embedder.input_proj.weight": (V_HIDDEN, PATCH * PATCH * 3),
         v + "patch_embedder.position_embedding_table": (2, V_POS, V_HIDDEN),
         "model.embed_vision.embedding_projection.weight": (HIDDEN, V_HIDDEN)}
    for i in range(V_LAYERS):
        p = f"{v}encoder.layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            s[p + n + ".weight"] = (V_HIDDEN,)
        s[p + "self_attn.q_norm.weight"] = (V_HEAD_DIM,)
        s[p + "self_attn.k_norm.weight"] = (V_HEAD_DIM,)
        for n in ("q_proj", "k_proj", "v_proj"):
            clippable(s, p + "self_attn." + n, V_HEADS * V_HEAD_DIM, V_HIDDEN)
        clippable(s, p + "self_attn.o_proj", V_HIDDEN, V_HEADS * V_HEAD_DIM)
        clippable(s, p + "mlp.gate_proj", V_FF, V_HIDDEN)
        clippable(s, p + "mlp.up_proj", V_FF, V_HIDDEN)
        clippable(s, p + "mlp.down_proj", V_HIDDEN, V_FF)
    return s


def audio_shapes():
    a = "model.audio_tower."
    c0, c1 = A_CHANNELS
    s = {a + "subsample_conv_projection.layer0.conv.weight": (c0, 1, 3, 3),
         a + "subsample_conv_projection.layer0.norm.weight": (c0,),
         a + "subsample_conv_projection.layer1.conv.weight": (c1, c0, 3, 3),
         a + "subsample_conv_projection.layer1.norm.weight": (c1,),
         # HF sizes it (channels0 // 4) * channels1 (= (128 mel / 4) * channels1 since channels0 is 128)
         a + "subsample_conv_projection.input_proj_linear.weight": (A_HIDDEN, (c0 // 4) * c1),
         a + "output_proj.weight": (A_OUT, A_HIDDEN), a + "output_proj.bias": (A_OUT,),
         "model.embed_audio.embedding_projection.weight": (HIDDEN, A_OUT)}
    for i in range(A_LAYERS):
        p = f"{a}layers.{i}."
        for ff in ("feed_forward1", "feed_forward2"):
            clippable(s, p + ff + ".ffw_layer_1", 4 * A_HIDDEN, A_HIDDEN)
            clippable(s, p + ff + ".ffw_layer_2", A_HIDDEN, 4 * A_HIDDEN)
            s[p + ff + ".pre_layer_norm.weight"] = (A_HIDDEN,)
            s[p + ff + ".post_layer_norm.weight"] = (A_HIDDEN,)
        s[p + "lconv1d.depthwise_conv1d.weight"] = (A_HIDDEN, 1, A_KERNEL)
        s[p + "lconv1d.conv_norm.weight"] = (A_HIDDEN,)
        s[p + "lconv1d.pre_layer_norm.weight"] = (A_HIDDEN,)
        clippable(s, p + "lconv1d.linear_start", 2 * A_HIDDEN, A_HIDDEN)
        clippable(s, p + "lconv1d.linear_end", A_HIDDEN, A_HIDDEN)
        for n in ("norm_out", "norm_post_attn", "norm_pre_attn"):
            s[p + n + ".weight"] = (A_HIDDEN,)
        for n in ("q_proj", "k_proj", "v_proj", "post"):
            clippable(s, p + "self_attn." + n, A_HIDDEN, A_HIDDEN)
        s[p + "self_attn.per_dim_scale"] = (A_HIDDEN // A_HEADS,)
        s[p + "self_attn.relative_k_proj.weight"] = (A_HIDDEN, A_HIDDEN)
    return s


def to_bf16(x):
    """float32 -> bf16 bits, round to nearest even."""
    u = x.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def fill(name):
    """The constant of a tensor that is not random, else None."""
    if name.endswith("_min"):
        return -1e4
    if name.endswith("_max"):
        return 1e4
    if name.endswith("bias"):
        return 0.0
    if name.endswith("norm.weight") or name.endswith("layer_scalar") or name.endswith("per_dim_scale"):
        return 1.0
    return None


def write_streamed(path, sh, chunk=1 << 25):
    """One bf16 safetensors file of `sh` (name -> shape, sorted by name), each random tensor drawn and written in
    chunks of `chunk` values so no whole big tensor is ever in memory."""
    names = sorted(sh)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name in names:
        n = int(np.prod(sh[name], dtype=np.int64)) * 2
        header[name] = {"dtype": "BF16", "shape": list(sh[name]), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in names:
            total = int(np.prod(sh[name], dtype=np.int64))
            c = fill(name)
            done = 0
            while done < total:
                n = min(chunk, total - done)
                if c is not None:
                    x = np.full(n, c, dtype=np.float32)
                else:
                    x = rng.standard_normal(n, dtype=np.float32)
                    x *= np.float32(0.02)
                f.write(to_bf16(x).tobytes())
                done += n
    return off


def config(n_layers):
    text = {
        "attention_bias": False, "attention_dropout": 0.0, "attention_k_eq_v": False, "bos_token_id": 2,
        "dtype": "bfloat16", "enable_moe_block": False, "eos_token_id": 1, "final_logit_softcapping": 30.0,
        "global_head_dim": GLOBAL_HEAD_DIM, "head_dim": HEAD_DIM, "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": HIDDEN, "hidden_size_per_layer_input": PLE, "initializer_range": 0.02,
        "intermediate_size": FF, "layer_types": layer_types(n_layers), "max_position_embeddings": 131072,
        "model_type": "gemma4_text", "moe_intermediate_size": None, "num_attention_heads": HEADS,
        "num_experts": None, "num_global_key_value_heads": None, "num_hidden_layers": n_layers,
        "num_key_value_heads": KV_HEADS, "num_kv_shared_layers": KV_SHARED, "pad_token_id": 0, "rms_norm_eps": 1e-6,
        "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                               "rope_type": "proportional"},
                            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
        "sliding_window": WINDOW, "tie_word_embeddings": True, "top_k_experts": None,
        "use_bidirectional_attention": None, "use_cache": True, "use_double_wide_mlp": True, "vocab_size": VOCAB,
        "vocab_size_per_layer_input": VOCAB}
    vision = {
        "attention_bias": False, "attention_dropout": 0.0, "default_output_length": SOFT_TOKENS, "dtype": "bfloat16",
        "global_head_dim": V_HEAD_DIM, "head_dim": V_HEAD_DIM, "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": V_HIDDEN, "initializer_range": 0.02, "intermediate_size": V_FF,
        "max_position_embeddings": 131072, "model_type": "gemma4_vision", "num_attention_heads": V_HEADS,
        "num_hidden_layers": V_LAYERS, "num_key_value_heads": V_HEADS, "patch_size": PATCH,
        "pooling_kernel_size": POOL, "position_embedding_size": V_POS, "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 100.0, "rope_type": "default"}, "standardize": False,
        "use_clipped_linears": True}
    audio = {
        "attention_chunk_size": 12, "attention_context_left": 13, "attention_context_right": 0,
        "attention_invalid_logits_value": -1000000000.0, "attention_logit_cap": 50.0, "conv_kernel_size": A_KERNEL,
        "dtype": "bfloat16", "gradient_clipping": 10000000000.0, "hidden_act": "silu", "hidden_size": A_HIDDEN,
        "initializer_range": 0.02, "model_type": "gemma4_audio", "num_attention_heads": A_HEADS,
        "num_hidden_layers": A_LAYERS, "output_proj_dims": A_OUT, "residual_weight": 0.5, "rms_norm_eps": 1e-6,
        "subsampling_conv_channels": A_CHANNELS, "use_clipped_linears": True}
    return {"architectures": ["Gemma4ForConditionalGeneration"], "audio_config": audio, "audio_token_id": AUDIO,
            "boa_token_id": BOA, "boi_token_id": BOI, "dtype": "bfloat16", "eoa_token_id": EOA, "eoa_token_index": EOA,
            "eoi_token_id": EOI, "eos_token_id": [1, 106], "image_token_id": IMAGE, "initializer_range": 0.02,
            "model_type": "gemma4", "text_config": text, "tie_word_embeddings": True, "transformers_version": "5.5.0",
            "video_token_id": VIDEO, "vision_config": vision, "vision_soft_tokens_per_image": SOFT_TOKENS}


def write_processor_configs(out):
    image = {"do_convert_rgb": True, "do_normalize": False, "do_rescale": True, "do_resize": True,
             "image_mean": [0.0, 0.0, 0.0], "image_processor_type": "Gemma4ImageProcessor",
             "image_seq_length": SOFT_TOKENS, "image_std": [1.0, 1.0, 1.0], "max_soft_tokens": SOFT_TOKENS,
             "patch_size": PATCH, "pooling_kernel_size": POOL, "resample": 3, "rescale_factor": 1 / 255}
    features = {"dither": 0.0, "feature_extractor_type": "Gemma4AudioFeatureExtractor", "feature_size": MEL,
                "fft_length": 512, "fft_overdrive": False, "frame_length": 320, "hop_length": 160,
                "input_scale_factor": 1.0, "max_frequency": 8000.0, "mel_floor": 0.001, "min_frequency": 0.0,
                "padding_side": "right", "padding_value": 0.0, "per_bin_mean": None, "per_bin_stddev": None,
                "preemphasis": 0.0, "preemphasis_htk_flavor": True, "return_attention_mask": True,
                "sampling_rate": 16000}
    json.dump(dict(image, processor_class="Gemma4Processor"),
              open(os.path.join(out, "preprocessor_config.json"), "w"), indent=2)
    json.dump({"audio_ms_per_token": 40, "audio_seq_length": 750, "feature_extractor": features,
               "image_processor": image, "image_seq_length": SOFT_TOKENS, "processor_class": "Gemma4Processor"},
              open(os.path.join(out, "processor_config.json"), "w"), indent=2)
    json.dump({"bos_token_id": 2, "eos_token_id": [1, 106, 50], "pad_token_id": 0, "do_sample": True,
               "temperature": 1.0, "top_k": 64, "top_p": 0.95},
              open(os.path.join(out, "generation_config.json"), "w"), indent=2)


def write_tokenizer(out):
    """make_gemma4_vocab_gguf.py's tokenizer at the model's vocabulary size, media tokens at their real ids."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "data", "llamacpp_gguf"))
    import make_gemma4_vocab_gguf as tok
    moved = {500: BOI, 501: BOA, 502: IMAGE, 503: AUDIO, 504: EOI, 505: EOA, 506: VIDEO}
    tok.SPECIAL = {moved.get(i, i): t for i, t in tok.SPECIAL.items()}
    tok.N_VOCAB = VOCAB
    tok.TOK_DIR = out
    tok.make_tokenizer()
    # that script's template renders text turns only; this one also places a message's image / audio items as the
    # placeholder the processor expands (<|image|>, <|audio|>), as the Hub's template does, so that `pipit run
    # --audio` and llama-mtmd-cli (whose prompt is one string with its media marker) template the same text
    with open(os.path.join(out, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(TEMPLATE)


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    out = sys.argv[1]
    if "--size" in sys.argv and sys.argv[sys.argv.index("--size") + 1] != "e2b":
        sys.exit("only --size e2b")
    n_layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else LAYERS
    if n_layers <= KV_SHARED:
        sys.exit(f"--layers must exceed the {KV_SHARED} KV-shared layers")
    os.makedirs(out, exist_ok=True)
    json.dump(config(n_layers), open(os.path.join(out, "config.json"), "w"), indent=2)
    write_processor_configs(out)
    write_tokenizer(out)
    sh = {**text_shapes(n_layers), **vision_shapes(), **audio_shapes()}
    size = write_streamed(os.path.join(out, "model.safetensors"), sh)
    params = sum(int(np.prod(s, dtype=np.int64)) for s in sh.values())
    print(f"wrote {out}/model.safetensors: {len(sh)} tensors, {params / 1e9:.3f} B parameters, {size / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
