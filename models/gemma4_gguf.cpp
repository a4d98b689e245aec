// Gemma 4's GGUF import (llama.cpp arch gemma4, dense): registered beside models/gemma4.cpp in
// models/gguf_traits.h's registry, read by convert/gguf_import.cpp, with its vocabulary type (read by
// convert/gguf_tokenizer.cpp). Its mmproj (vision and audio towers) is models/gemma4_mmproj_gguf.cpp's.
#include <algorithm>

#include "core/limits.h"
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// ---- Gemma 4 (arch gemma4): llama.cpp conversion/gemma.py Gemma4Model (on Gemma3Model), src/models/gemma4-iswa.cpp.
// The converter keeps every value (Gemma 4's norms multiply by w: norm_shift 0) and renames; what it moves into
// metadata or graph code, and the config takes back:
//  - per-layer sizes: feed_forward_length one value per layer (double-wide MLPs of the KV-shared layers), head dims
//    key_length (full layers) / key_length_swa (sliding), head_count_kv one value or one per layer;
//  - layer kinds as attention.sliding_window_pattern (one bool per layer), KV sharing as attention.shared_kv_layers;
//  - the full layers' "proportional" partial RoPE as rope_freqs (1 for the rotated frequencies, 1e30 for the rest;
//    only full layers read it), RoPE bases rope.freq_base (full) / freq_base_swa (sliding);
//  - layer_scalar as blk.N.layer_output_scale.weight [1]; per-layer-embedding tensors under gemma3n's names.
// Fixed in llama.cpp's graph as in HF's: attention scale 1, gelu_tanh MLP, embeddings * sqrt(n_embd).
const std::pair<const char*, const char*> kGemma4Global[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output.weight", "lm_head.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"per_layer_token_embd.weight", "model.embed_tokens_per_layer.weight"},
    {"per_layer_model_proj.weight", "model.per_layer_model_projection.weight"},
    {"per_layer_proj_norm.weight", "model.per_layer_projection_norm.weight"},
};
const std::pair<const char*, const char*> kGemma4Layer[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"inp_gate.weight", "per_layer_input_gate.weight"},
    {"proj.weight", "per_layer_projection.weight"},
    {"post_norm.weight", "post_per_layer_input_norm.weight"},
    {"layer_output_scale.weight", "layer_scalar"},
};

Result<Checkpoint> import_gemma4(const GgufMeta& m, const GgufArch& arch, const GgufTools& tools) {
  const GgufFile& f = m.file();
  const std::string ctx = "[gguf] " + f.path();
  Checkpoint c;
  c.path = f.path();
  c.format = "gguf";
  if (m.find("expert_count"))  // the 26B-A4B: router scale / per-expert scale layout not mapped back here
    return Error::unsupported("{}: Gemma 4 MoE files (gemma4.expert_count) are not supported; the dense ones are",
                              ctx);
  PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, m.get_int("embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, m.get_int("block_count"));
  if (n_layer <= 0 || n_layer > Limits::kMaxLayers)
    return Error::format("{}: block_count {} outside [1, {}]", ctx, n_layer, Limits::kMaxLayers);
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, m.get_int("attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(auto n_ff, m.per_layer_ints("feed_forward_length", n_layer));
  PIPIT_ASSIGN_OR_RETURN(auto n_kv, m.per_layer_ints("attention.head_count_kv", n_layer, n_head));
  PIPIT_ASSIGN_OR_RETURN(int64_t hd_full, m.get_int("attention.key_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t hd_swa, m.get_int_or("attention.key_length_swa", hd_full));
  PIPIT_ASSIGN_OR_RETURN(int64_t vd_full, m.get_int_or("attention.value_length", hd_full));
  PIPIT_ASSIGN_OR_RETURN(int64_t vd_swa, m.get_int_or("attention.value_length_swa", hd_swa));
  if (vd_full != hd_full || vd_swa != hd_swa)
    return Error::unsupported("{}: value_length {} / {} differ from key_length {} / {}", ctx, vd_full, vd_swa,
                              hd_full, hd_swa);
  if (hd_full <= 0 || hd_swa <= 0 || hd_full % 2 || hd_swa % 2 || n_head <= 0)
    return Error::format("{}: head dims {} / {} must be even and positive", ctx, hd_full, hd_swa);
  PIPIT_ASSIGN_OR_RETURN(int64_t window, m.get_int("attention.sliding_window"));
  PIPIT_ASSIGN_OR_RETURN(auto sliding, m.sliding_layers(n_layer, 0));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_shared, m.get_int_or("attention.shared_kv_layers", 0));
  if (n_shared > n_layer) return Error::format("{}: shared_kv_layers {} > block_count {}", ctx, n_shared, n_layer);
  PIPIT_ASSIGN_OR_RETURN(int64_t n_ple, m.get_int_or("embedding_length_per_layer_input", 0));
  PIPIT_ASSIGN_OR_RETURN(double eps, m.get_float_or("attention.layer_norm_rms_epsilon", 1e-6));
  PIPIT_ASSIGN_OR_RETURN(double theta, m.get_float_or("rope.freq_base", 1e6));
  PIPIT_ASSIGN_OR_RETURN(double theta_swa, m.get_float_or("rope.freq_base_swa", 10000.0));
  PIPIT_ASSIGN_OR_RETURN(int64_t rot_swa, m.get_int_or("rope.dimension_count_swa", hd_swa));
  PIPIT_ASSIGN_OR_RETURN(int64_t rot_full, m.get_int_or("rope.dimension_count", hd_full));
  PIPIT_ASSIGN_OR_RETURN(double softcap, m.get_float_or("final_logit_softcapping", 0.0));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_ctx, m.get_int_or("context_length", 131072));
  if (rot_swa != hd_swa)
    return Error::unsupported("{}: partial RoPE on sliding layers (rope.dimension_count_swa {} of {})", ctx, rot_swa,
                              hd_swa);

  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2) return Error::format("{}: no 2-d token_embd.weight tensor", ctx);
  const int64_t n_vocab = int64_t(embd->ne[1]);

  // full layers: rope_freqs 1 for each rotated frequency then 1e30 (no rotation) = HF's proportional RoPE with
  // partial_rotary_factor 2 * rotated / head_dim; without it ggml rotates rope.dimension_count dims (HF default)
  nlohmann::json rope_full = {{"rope_type", "default"}, {"rope_theta", theta}};
  if (rot_full != hd_full) rope_full["partial_rotary_factor"] = double(rot_full) / double(hd_full);
  if (const GgufTensorInfo* rf = f.find_tensor("rope_freqs.weight")) {
    PIPIT_ASSIGN_OR_RETURN(Tensor t, f.tensor(*rf));
    if (t.dtype() != DType::F32 || t.numel() != hd_full / 2 || rot_full != hd_full)
      return Error::format("{}: rope_freqs.weight is {}, expected f32 [{}] with rope.dimension_count {}", ctx,
                           t.describe(), hd_full / 2, hd_full);
    int64_t rotated = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float v = t.ptr<float>()[i];
      if (v == 1.0f && rotated == i) ++rotated;
      else if (!(v >= 1e29f))  // rotated frequencies first, then "infinite" factors
        return Error::unsupported("{}: rope_freqs[{}] = {} is not Gemma 4's proportional RoPE (1 ... 1, 1e30 ...)",
                                  ctx, i, v);
    }
    rope_full = {{"rope_type", "proportional"}, {"rope_theta", theta},
                 {"partial_rotary_factor", double(2 * rotated) / double(hd_full)}};
  }
  nlohmann::json types = nlohmann::json::array();
  for (bool sl : sliding) types.push_back(sl ? "sliding_attention" : "full_attention");
  // KV-shared layers (the last n_shared) have a double-wide MLP when the file says twice the width there
  const int64_t first_shared = n_layer - n_shared;
  const int64_t ff0 = n_ff[0];
  bool double_wide = false;
  for (int64_t il = 0; il < n_layer; ++il) {
    const int64_t want = il >= first_shared && n_ff[size_t(il)] == 2 * ff0 ? 2 * ff0 : ff0;
    if (n_ff[size_t(il)] != want)
      return Error::unsupported("{}: feed_forward_length of layer {} is {} (Gemma 4 has {} or, in KV-shared layers, "
                                "{})", ctx, il, n_ff[size_t(il)], ff0, 2 * ff0);
    double_wide = double_wide || n_ff[size_t(il)] == 2 * ff0;
  }
  // KV heads: one count for sliding layers, one for full; full layers without attn_v share K as V (31B's
  // attention_k_eq_v, where the full layers' count is num_global_key_value_heads)
  int64_t kv_swa = -1, kv_full = -1;
  bool k_eq_v = false;
  for (int64_t il = 0; il < n_layer; ++il) {
    int64_t& kv = sliding[size_t(il)] ? kv_swa : kv_full;
    if (kv >= 0 && kv != n_kv[size_t(il)])
      return Error::unsupported("{}: head_count_kv varies within one layer kind", ctx);
    kv = n_kv[size_t(il)];
    if (!sliding[size_t(il)] && il < first_shared &&
        !f.find_tensor("blk." + std::to_string(il) + ".attn_v.weight"))
      k_eq_v = true;
  }
  if (kv_swa < 0) kv_swa = kv_full;
  if (kv_swa <= 0 || n_head % kv_swa || (kv_full > 0 && n_head % kv_full))
    return Error::format("{}: head_count {} / head_count_kv {} / {} are not a GQA layout", ctx, n_head, kv_swa,
                         kv_full);
  if (kv_full >= 0 && kv_full != kv_swa && !k_eq_v)
    return Error::unsupported("{}: full layers with {} KV heads and sliding with {} but separate V", ctx, kv_full,
                              kv_swa);

  nlohmann::json cfg = {
      {"architectures", {arch.hf_class}},
      {"model_type", arch.model_type},
      {"hidden_size", n_embd},
      {"num_hidden_layers", n_layer},
      {"intermediate_size", ff0},
      {"use_double_wide_mlp", double_wide},
      {"num_attention_heads", n_head},
      {"num_key_value_heads", kv_swa},
      {"head_dim", hd_swa},
      {"global_head_dim", hd_full},
      {"attention_k_eq_v", k_eq_v},
      {"rms_norm_eps", eps},
      {"max_position_embeddings", n_ctx},
      {"vocab_size", n_vocab},
      {"tie_word_embeddings", f.find_tensor("output.weight") == nullptr},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"sliding_window", window},
      {"layer_types", types},
      {"num_kv_shared_layers", n_shared},
      {"hidden_size_per_layer_input", n_ple},
      {"rope_parameters",
       {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", theta_swa}}}, {"full_attention", rope_full}}},
      {"enable_moe_block", false},
  };
  if (k_eq_v) cfg["num_global_key_value_heads"] = kv_full;
  if (softcap > 0) cfg["final_logit_softcapping"] = softcap;
  if (n_ple > 0) {
    const GgufTensorInfo* pe = f.find_tensor("per_layer_token_embd.weight");
    if (!pe || pe->ne.size() != 2)
      return Error::not_found("{}: missing tensor 'per_layer_token_embd.weight' (embedding_length_per_layer_input {})",
                              ctx, n_ple);
    cfg["vocab_size_per_layer_input"] = int64_t(pe->ne[1]);
  }
  for (auto [key, field] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token_id"},
                            std::pair{"tokenizer.ggml.eos_token_id", "eos_token_id"},
                            std::pair{"tokenizer.ggml.padding_token_id", "pad_token_id"}}) {
    const GgufValue* v = f.find(key);
    if (v && v->is_int() && v->as_int() >= 0 && v->as_int() < n_vocab) {
      cfg[field] = v->as_int();
      c.generation_config[field] = v->as_int();
    }
  }
  // generation stops where llama.cpp's does: at <turn|> and <|tool_response> as well as <eos>
  if (auto eog = tools.eog_ids(f, n_vocab); eog.size() > 1) c.generation_config["eos_token_id"] = eog;
  c.config = cfg;

  PIPIT_TRY(gguf_check_layer_tensors(f, n_layer, [&](int64_t il) -> std::vector<const char*> {
    std::vector<const char*> need = {"attn_norm.weight", "attn_q.weight", "attn_output.weight", "attn_q_norm.weight",
                                     "post_attention_norm.weight", "ffn_norm.weight", "post_ffw_norm.weight",
                                     "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    if (il < first_shared) {  // KV-shared layers' own k/v (in Hub files) are unused, as in HF
      need.insert(need.end(), {"attn_k.weight", "attn_k_norm.weight"});
      if (sliding[size_t(il)] || !k_eq_v) need.push_back("attn_v.weight");
    }
    if (n_ple > 0) need.insert(need.end(), {"inp_gate.weight", "proj.weight", "post_norm.weight"});
    return need;
  }));
  for (const char* g : {"output_norm.weight", "per_layer_model_proj.weight", "per_layer_proj_norm.weight"})
    if (!f.find_tensor(g) && (n_ple > 0 || g == std::string("output_norm.weight")))
      return Error::not_found("{}: missing tensor '{}'", ctx, g);
  for (auto& ti : f.tensors()) {
    if (ti.name == "rope_freqs.weight") continue;
    std::string hf;
    for (auto& [a, b] : kGemma4Global)
      if (ti.name == a) hf = b;
    if (hf.empty() && ti.name.rfind("blk.", 0) == 0) {
      const size_t dot = ti.name.find('.', 4);
      if (dot != std::string::npos && dot > 4 && dot - 4 <= 6 &&
          std::all_of(ti.name.begin() + 4, ti.name.begin() + long(dot), [](char ch) { return ch >= '0' && ch <= '9'; }))
        for (auto& [a, b] : kGemma4Layer)
          if (ti.name.compare(dot + 1, std::string::npos, a) == 0)
            hf = "model.layers." + ti.name.substr(4, dot - 4) + "." + b;
    }
    if (hf.empty()) {
      c.notes.push_back("skipped unknown tensor '" + ti.name + "'");
      continue;
    }
    PIPIT_ASSIGN_OR_RETURN(c.tensors[hf], f.tensor(ti));
  }
  c.notes.push_back("gemma4: per-layer sizes, layer kinds and proportional RoPE taken from metadata / rope_freqs");
  tools.attach_tokenizer(f, c);
  return c;
}

// Gemma 4's vocabulary (tokenizer.ggml.model "gemma4", llama.cpp's own tokenizer model): HF's Gemma 4 tokenizer.json
// (transformers v5 GemmaTokenizer) — normalizer Replace(" " -> "▁"), pre-tokenizer Split(" ", merged_with_previous)
// (a no-op after that normalizer: the whole text between added tokens is one BPE word), byte fallback (<0xXX>
// pieces), the merges as stored, no prefix space; the decoder Replace("▁" -> " ") + ByteFallback + Fuse. llama.cpp's
// tokenizer (LLAMA_VOCAB_PRE_TYPE_GEMMA4) escapes the same spaces and also splits the text at newline runs; with a
// vocabulary whose pieces never mix newlines with other characters (Gemma 3's, and so presumably Gemma 4's) no merge
// crosses such a boundary and the two agree, but for runs of newlines, which llama.cpp takes as one piece when the
// vocabulary has it and HF merges. BOS is always added, as llama.cpp forces for this model (HF's Gemma 4 tokenizer
// adds none; its chat template writes <bos>).
Status gemma4_vocab(const GgufFile& f, const std::vector<std::string>& tokens, int64_t unk, nlohmann::json& tj,
                    nlohmann::json& bpe) {
  tj["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  tj["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
  tj["decoder"] = {{"type", "Sequence"},
                   {"decoders", nlohmann::json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}},
                                                        {"content", " "}},
                                                       {{"type", "ByteFallback"}},
                                                       {{"type", "Fuse"}}})}};
  // llama.cpp refuses a gemma4 vocabulary without merges ("cannot find tokenizer merges")
  PIPIT_ASSIGN_OR_RETURN(auto merges, gguf_string_array(f, "tokenizer.ggml.merges", true));
  bpe["unk_token"] = unk >= 0 ? nlohmann::json(tokens[size_t(unk)]) : nlohmann::json(nullptr);
  bpe["continuing_subword_prefix"] = nullptr;
  bpe["end_of_word_suffix"] = nullptr;
  bpe["fuse_unk"] = true;
  bpe["byte_fallback"] = true;
  bpe["ignore_merges"] = false;
  bpe["merges"] = merges;
  return Status::ok();
}

// The end-of-generation ids of a "gemma4" vocabulary, as llama.cpp picks them by their text (llama-vocab.cpp): the
// EOS id, then <eos>, <turn|> (end of a turn) and <|tool_response> (the model hands over to a tool) where the
// vocabulary has them below n_vocab; these are the eos_token_id of HF's instruction-tuned Gemma 4
// generation_config.json ([eos, eot, str] in transformers' convert_gemma4_weights.py).
std::vector<int64_t> gemma4_eog_ids(const GgufFile& f, int64_t n_vocab) {
  std::vector<int64_t> out;
  const GgufValue* tv = f.find("tokenizer.ggml.tokens");
  if (!tv || tv->type != GgufType::kArray || tv->elem_type != GgufType::kString) return out;
  const GgufValue* ev = f.find("tokenizer.ggml.eos_token_id");
  if (ev && ev->is_int() && ev->as_int() >= 0 && ev->as_int() < n_vocab) out.push_back(ev->as_int());
  for (const char* name : {"<eos>", "<turn|>", "<|tool_response>"}) {
    for (size_t id = 0; id < tv->arr_size() && int64_t(id) < n_vocab; ++id) {
      if (tv->str_at(id) != name) continue;
      if (std::find(out.begin(), out.end(), int64_t(id)) == out.end()) out.push_back(int64_t(id));
      break;
    }
  }
  return out;
}

// llama.cpp overrides a gemma4 file's add_bos_token false to true (its PR 21500): Gemma 4 needs the BOS
const GgufVocabRegistrar kGemma4Vocab({.model = "gemma4", .tokenizer_class = "GemmaTokenizer", .force_bos = true,
                                       .build = gemma4_vocab, .eog_ids = gemma4_eog_ids});

// Per-layer head dims, KV sharing, per-layer embeddings: its own import, not the shared llama-family path.
const GgufArchRegistrar kGemma4Gguf({.gguf = "gemma4", .model_type = "gemma4_text", .hf_class = "Gemma4ForCausalLM",
                                     .import = import_gemma4});

}  // namespace

}  // namespace pipit
