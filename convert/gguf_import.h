// GGUF -> the HF view of a checkpoint: llama.cpp tensor names and metadata mapped to HF names and an HF config.json
// for the llama, qwen2, qwen3, gemma3, qwen3moe, smollm3, qwen2vl, qwen35 (Qwen3.5 + its MTP layer), gpt-oss,
// qwen3vl and gemma4 (dense) architectures (plus llama.cpp's mmproj vision files for Qwen2-VL / Qwen2.5-VL / Qwen3.5 /
// Qwen3-VL with DeepStack / Gemma 4's vision and audio towers), and the GGUF vocabulary turned into an HF tokenizer.json.
//
// Layout differences undone here:
//  - llama.cpp's convert_hf_to_gguf.py permutes the rows of q_proj / k_proj (weights and biases) of llama-arch
//    models so its RoPE can rotate adjacent pairs: within each head, HF row j*(head_dim/2) + i becomes GGUF row 2i + j.
//    We apply the inverse (a row copy, the only tensors not used in place) so HF's rotate_half RoPE applies.
//    qwen2 / qwen3 are stored unpermuted (llama.cpp runs them with NEOX-style RoPE).
//  - Gemma 3 norm weights are stored as 1 + w (llama.cpp multiplies by the stored value): 1 is subtracted again.
//  - MoE experts are stored stacked per layer ([n_expert, rows, cols]): each expert is a view of its slice.
//  - Qwen3.5 (qwen35): norms stored as 1 + w (but the gated norm), A_log as -exp(A_log), the conv kernel squeezed,
//    value heads tiled for ggml's broadcast, the MTP layer as block n_layer (nextn.*): all taken back to HF's.
//  - GPT-OSS (gpt-oss): the fused gate_up experts split into ffn_gate_exps / ffn_up_exps: rows interleaved back
//    (MXFP4 blocks as stored, whole rows moved).
//  - Gemma 4 (gemma4): per-layer feed_forward_length / head_count_kv arrays, key_length(_swa) head dims, the full
//    layers' proportional RoPE as a rope_freqs tensor (1 rotated, 1e30 not): back to HF's config; its mmproj's patch
//    embedder linear stored as a conv kernel: back to the linear layout. Qwen3-VL (qwen3vl): Qwen3 + interleaved
//    M-RoPE sections; its mmproj's DeepStack mergers named by vision block (v.deepstack.B.*).
//  - Settings llama.cpp fixes in its graph code rather than the metadata take llama.cpp's values: Gemma 3's sliding
//    pattern (6 unless attention.sliding_window_pattern says), local RoPE base 10000 (rope.freq_base_swa) and
//    attention scale (head_dim, n_embd / n_head for the 62-layer 27B, unless attention.scale says); SmolLM3's NoPE
//    layers (every 4th); Qwen3-MoE's renormalised top-k (expert_weights_norm).
//  - Llama 3 RoPE scaling is stored as a `rope_freqs` tensor of per-frequency factors instead of config values; the
//    HF rope_scaling (llama3: factor, low/high_freq_factor, original_max_position_embeddings) is recovered from it and
//    checked to reproduce every factor.
// Tensors of types F32, F16, BF16, Q8_0, Q4_0 and the other block types of ggml_to_dtype (K-quants, IQ4_NL/XS, Q4_1,
// Q5_0/1) are views of the mapped file (their bytes are pipit's blocks, core/dtype.h); any other type is an error naming it.
#pragma once

#include <string>

#include "convert/checkpoint.h"
#include "format/gguf.h"

namespace pipit {

Result<Checkpoint> import_gguf(const GgufFile& f);
// mmproj: llama.cpp's vision-tower file for a multimodal model (gguf_mmproj.cpp); empty: text only.
Result<Checkpoint> open_gguf_checkpoint(const std::string& path, const std::string& mmproj = "");
// Adds an mmproj file's vision tower, image processor and multimodal config to the checkpoint of its language
// model (`text`, imported into `c`): Qwen2-VL / Qwen2.5-VL (projector qwen2vl_merger / qwen2.5vl_merger),
// Qwen3.5 / Qwen3-VL (qwen3vl_merger with a qwen35 / qwen3vl language model) and Gemma 4 (gemma4v + gemma4a: the
// vision and audio towers of one file).
Status add_gguf_mmproj(Checkpoint& c, const GgufFile& text, const GgufFile& mmproj);

// The HF tokenizer.json and tokenizer_config.json texts for the vocabulary in a GGUF file
// (tokenizer.ggml.model "gpt2": byte-level BPE; "llama": SentencePiece-style BPE with byte fallback; "gemma4":
// Gemma 4's BPE with byte fallback and merges).
struct HfTokenizerTexts {
  std::string tokenizer_json, tokenizer_config_json;
};
Result<HfTokenizerTexts> gguf_tokenizer_to_hf(const GgufFile& f);
// The end-of-generation ids of a "gemma4" vocabulary, as llama.cpp picks them by their text (llama-vocab.cpp): the
// EOS id, then <eos>, <turn|> (end of a turn) and <|tool_response> (the model hands over to a tool) where the
// vocabulary has them below n_vocab; these are the eos_token_id of HF's instruction-tuned Gemma 4
// generation_config.json ([eos, eot, str] in transformers' convert_gemma4_weights.py). Empty for other vocabularies.
std::vector<int64_t> gguf_gemma4_eog_ids(const GgufFile& f, int64_t n_vocab);

}  // namespace pipit
