// Building blocks shared by the decoder families: self-attention over the KV cache (GQA, optional qkv bias,
// q/k RMSNorm, RoPE, sliding window, soft-cap), the gated MLP, and the output head. Model files compose these so
// their forward() reads like the HF modeling code.
#pragma once

#include <string>

#include "models/model.h"
#include "models/rope.h"

namespace pipit {

struct AttnWeights {
  Tensor q, k, v, o;                 // [n_head*head_dim, n_embd], [n_head_kv*head_dim, n_embd] x2, [n_embd, n_head*head_dim]
  Tensor q_bias, k_bias, v_bias;     // optional (Qwen2)
  Tensor o_bias;                     // optional
  Tensor q_norm, k_norm;             // optional [head_dim] (Qwen3, Gemma3)
};

struct AttnConfig {
  int64_t n_embd, n_head, n_head_kv, head_dim;
  float scale;                  // usually head_dim^-0.5
  float norm_eps = 1e-6f;       // for q_norm / k_norm
  float norm_offset = 0.0f;     // 1 for Gemma's (1 + w) norms
  int window = 0;               // sliding window (0: full causal)
  float softcap = 0.0f;         // attention logit soft-capping (0: off)
  const float* sinks = nullptr; // per-head attention-sink logits [n_head] (GPT-OSS), or none
};

struct MlpWeights {
  Tensor gate, up, down;  // [n_ff, n_embd] x2, [n_embd, n_ff]
};
enum class MlpAct { kSilu, kGeluTanh };

// Loads "<prefix>q_proj.weight" etc. Biases/norms are loaded when present (and required when `need_*` is set).
Result<AttnWeights> load_attn(const WeightSource& w, const std::string& prefix, const AttnConfig& c, bool need_qkv_bias,
                              bool need_qk_norm);
Result<MlpWeights> load_mlp(const WeightSource& w, const std::string& prefix, int64_t n_embd, int64_t n_ff);

// x: [n_tokens, n_embd] (already normed). rope may be null (NoPE layers). Returns the o_proj output.
Tensor self_attention(Ctx& ctx, const Tensor& x, const AttnWeights& w, const AttnConfig& c, const RopeSpec* rope,
                      const Batch& batch, KvCache& kv, int layer);
// The attention core of self_attention: appends each sequence's k/v ([n, n_head_kv, head_dim], RoPE applied) to its
// cache rows and attends q ([n, n_head, head_dim]) over them; returns [n, n_head, head_dim], named "attn_out".
Tensor cached_attention(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, const AttnConfig& c,
                        const Batch& batch, KvCache& kv, int layer);
// Token embeddings of the batch with the media features spliced in (Batch::media: image, video, audio tokens).
Tensor input_embeddings(Ctx& ctx, const Tensor& tok_embd, const Batch& batch);
// DeepStack (Qwen3-VL): after decoder layer `layer`, x [n_tokens, n_embd] += row media.row[i] of
// batch.deepstack[layer] at each media token i. No-op when the batch has no such layer (text, a tower without
// DeepStack, a layer past the last).
// reference: HF modeling_qwen3_vl.py Qwen3VLTextModel._deepstack_process.
void add_deepstack_(Ctx& ctx, Tensor& x, const Batch& batch, int layer);
Tensor gated_mlp(Ctx& ctx, const Tensor& x, const MlpWeights& w, MlpAct act);

// Final norm on the rows the batch wants logits for, then the output projection: [n_rows, n_vocab].
Tensor output_logits(Ctx& ctx, const Tensor& x, const Tensor& norm, float eps, float norm_offset, const Tensor& head,
                     const Batch& batch, float final_softcap = 0.0f);

// Errors when a sequence of the batch adds more tokens at once than the cache's sliding-window rings can take
// (KvCache::max_chunk), or runs past the context.
// The ops the blocks of this file call (embeddings in, RoPE attention over the KV cache, norms, gated MLPs, logits
// out): where a decoder's Model::ops_used starts.
OpSet decoder_block_ops();

Status check_batch_fits(const char* arch, const Batch& batch, const KvCache& kv);

// Common validation: positive sizes, head counts that divide.
Status check_dims(const char* arch, int64_t n_embd, int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t n_ff,
                  int64_t n_layer, int64_t n_vocab);

// The tokens' ids as a span (for embedding lookups) and eos/bos from config + generation_config.
void fill_common_info(ModelInfo& info, const HfConfig& cfg);

}  // namespace pipit
