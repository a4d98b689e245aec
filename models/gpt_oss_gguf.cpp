// GPT-OSS's GGUF import (llama.cpp arch gpt-oss): registered beside models/gpt_oss.cpp in models/gguf_traits.h's
// registry, read by convert/gguf_import.cpp.
#include <cstring>

#include "models/gguf_traits.h"

namespace pipit {

namespace {

// llama.cpp conversion/gpt_oss.py GptOssModel, src/models/openai-moe.cpp. The converter splits HF's fused experts:
// gate_up_proj (rows 2j gate, 2j + 1 up; MXFP4 blocks repacked in ggml's nibble order, which is pipit's mxfp4) into
// ffn_gate_exps / ffn_up_exps [E, I, H], and its bias into two [E, I]; down_proj is ffn_down_exps [E, H, I]. pipit's
// GPT-OSS takes the fused layout of models/gpt_oss_import.h: rows interleaved back (whole rows of blocks, no
// requantization).
const std::pair<const char*, const char*> kGptOssLayer[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_sinks.weight", "self_attn.sinks"},
    {"ffn_gate_inp.weight", "mlp.router.weight"},
    {"ffn_gate_inp.bias", "mlp.router.bias"},
    {"ffn_down_exps.weight", "mlp.experts.down_proj.weight"},
    {"ffn_down_exps.bias", "mlp.experts.down_proj_bias"},
};

// [E, I, ...] gate and up -> [E, 2I, ...] with gate row j at 2j and up row j at 2j + 1 (any dtype: whole rows; two
// dtypes: both as f32).
Result<Tensor> interleave_gate_up(const GgufTools& tools, Tensor gate, Tensor up, const std::string& name) {
  if (gate.shape() != up.shape() || gate.ndim() < 2 || gate.numel() == 0)
    return Error::format("[gguf] {}: gate {} and up {} must have one [experts, rows, ...] shape", name,
                         gate.describe(), up.describe());
  if (gate.dtype() != up.dtype()) {
    PIPIT_ASSIGN_OR_RETURN(gate, tools.widen_f32(gate, name));
    PIPIT_ASSIGN_OR_RETURN(up, tools.widen_f32(up, name));
  }
  std::vector<int64_t> shape = gate.shape();
  shape[1] *= 2;
  Tensor out = Tensor::empty(gate.dtype(), shape);
  const int64_t rows = gate.dim(0) * gate.dim(1);
  const size_t row = gate.nbytes() / size_t(rows);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + size_t(2 * r) * row, gate.data() + size_t(r) * row, row);
    std::memcpy(out.data() + size_t(2 * r + 1) * row, up.data() + size_t(r) * row, row);
  }
  return out;
}

Status import_gpt_oss_tensors(const GgufFile& f, const GgufTools& tools, Checkpoint& c) {
  const std::string ctx = "[gguf] " + f.path();
  for (auto& ti : f.tensors()) {
    const std::string& g = ti.name;
    std::string hf = g == "token_embd.weight" ? "model.embed_tokens.weight"
                     : g == "output.weight"   ? "lm_head.weight"
                     : g == "output_norm.weight" ? "model.norm.weight" : "";
    const size_t dot = g.rfind("blk.", 0) == 0 ? g.find('.', 4) : std::string::npos;
    const std::string layer = dot == std::string::npos ? "" : g.substr(4, dot - 4);
    const std::string rest = dot == std::string::npos ? "" : g.substr(dot + 1);
    if (hf.empty() && !layer.empty()) {
      for (auto& [a, b] : kGptOssLayer)
        if (rest == a) hf = "model.layers." + layer + "." + b;
      // the up half is read with its gate half
      if (rest == "ffn_up_exps.weight" || rest == "ffn_up_exps.bias") continue;
      if (rest == "ffn_gate_exps.weight" || rest == "ffn_gate_exps.bias") {
        const std::string kind = rest.substr(rest.rfind('.'));
        const GgufTensorInfo* ui = f.find_tensor("blk." + layer + ".ffn_up_exps" + kind);
        if (!ui)
          return Error::not_found("{}: missing tensor 'blk.{}.ffn_up_exps{}' (the up half of {})", ctx, layer, kind, g);
        PIPIT_ASSIGN_OR_RETURN(Tensor gate, f.tensor(ti));
        PIPIT_ASSIGN_OR_RETURN(Tensor up, f.tensor(*ui));
        PIPIT_ASSIGN_OR_RETURN(c.tensors["model.layers." + layer + ".mlp.experts.gate_up_proj" +
                                         (kind == ".weight" ? ".weight" : "_bias")],
                               interleave_gate_up(tools, gate, up, g));
        continue;
      }
    }
    if (hf.empty()) {
      c.notes.push_back("skipped unknown tensor '" + g + "'");
      continue;
    }
    PIPIT_ASSIGN_OR_RETURN(c.tensors[hf], f.tensor(ti));
  }
  // an up half without its gate half
  for (auto& ti : f.tensors())
    if (ti.name.find(".ffn_up_exps.") != std::string::npos) {
      const std::string gate = std::string(ti.name).replace(ti.name.find(".ffn_up_exps."), 13, ".ffn_gate_exps.");
      if (!f.find_tensor(gate))
        return Error::not_found("{}: missing tensor '{}' (the gate half of {})", ctx, gate, ti.name);
    }
  c.notes.push_back("gpt-oss: ffn_gate_exps / ffn_up_exps rows interleaved back into gate_up_proj");
  return Status::ok();
}

Status gpt_oss_config(const GgufArchInput& in, nlohmann::json& cfg, std::vector<std::string>& notes) {
  const GgufMeta& m = in.m;
  const std::string ctx = "[gguf] " + in.f.path();
  PIPIT_ASSIGN_OR_RETURN(int64_t n_expert, m.get_int("expert_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_used, m.get_int("expert_used_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_ff_exp,
                         m.get_int_or("expert_feed_forward_length", cfg["intermediate_size"].get<int64_t>()));
  PIPIT_ASSIGN_OR_RETURN(int64_t window, m.get_int("attention.sliding_window"));
  cfg["num_local_experts"] = n_expert;
  cfg["num_experts_per_tok"] = n_used;
  cfg["experts_per_token"] = n_used;
  cfg["intermediate_size"] = n_ff_exp;
  cfg["sliding_window"] = window;
  PIPIT_ASSIGN_OR_RETURN(auto sliding, m.sliding_layers(in.n_layer, 2));
  nlohmann::json types = nlohmann::json::array();
  for (bool sl : sliding) types.push_back(sl ? "sliding_attention" : "full_attention");
  cfg["layer_types"] = types;
  cfg["attention_bias"] = true;
  // llama.cpp's graph fixes the clamped SwiGLU (alpha 1.702, limit 7.0), as every GPT-OSS config does
  cfg["swiglu_limit"] = 7.0;
  // YaRN: rope.scaling.* as the converter writes them. truncate: false is every GPT-OSS config's value (HF's
  // correction range unrounded); ggml's rope rounds it, so llama.cpp itself differs from HF there.
  const GgufValue* st = m.find("rope.scaling.type");
  if (st && st->type == GgufType::kString && st->s == "yarn") {
    PIPIT_ASSIGN_OR_RETURN(double factor, m.get_float_or("rope.scaling.factor", 1.0));
    PIPIT_ASSIGN_OR_RETURN(int64_t orig, m.get_int_or("rope.scaling.original_context_length", 4096));
    PIPIT_ASSIGN_OR_RETURN(double beta_fast, m.get_float_or("rope.scaling.yarn_beta_fast", 32.0));
    PIPIT_ASSIGN_OR_RETURN(double beta_slow, m.get_float_or("rope.scaling.yarn_beta_slow", 1.0));
    cfg["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", factor}, {"original_max_position_embeddings", orig},
                           {"beta_fast", beta_fast}, {"beta_slow", beta_slow}, {"truncate", false}};
  } else if (st && st->type == GgufType::kString && st->s != "none") {
    return Error::unsupported("{}: gpt-oss rope scaling '{}' is not supported (yarn and none are)", ctx, st->s);
  }
  return Status::ok();
}

Status gpt_oss_tensors(const GgufArchInput& in, Checkpoint& c) {
  PIPIT_TRY(gguf_check_layer_tensors(in.f, in.n_layer, [](int64_t) -> std::vector<const char*> {
    return {"attn_norm.weight", "post_attention_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
            "attn_output.weight", "attn_sinks.weight", "ffn_gate_inp.weight", "ffn_gate_exps.weight",
            "ffn_up_exps.weight", "ffn_down_exps.weight"};
  }));
  return import_gpt_oss_tensors(in.f, in.tools, c);
}

// Experts as the converter repacks them (MXFP4 as stored); rope.scaling.* (YaRN) read by gpt_oss_config.
const GgufArchRegistrar kGptOssGguf({.gguf = "gpt-oss", .model_type = "gpt_oss", .hf_class = "GptOssForCausalLM",
                                     .own_rope_scaling = true, .config = gpt_oss_config,
                                     .tensors = gpt_oss_tensors});

}  // namespace

}  // namespace pipit
