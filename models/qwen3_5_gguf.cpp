// Qwen3.5's GGUF import (llama.cpp arch qwen35): registered beside models/qwen3_5.cpp in models/gguf_traits.h's
// registry, read by convert/gguf_import.cpp. The mmproj for its vision tower (qwen3vl_merger) is
// models/qwen3_vl_gguf.cpp's.
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// llama.cpp conversion/qwen.py Qwen3_5TextModel (with Qwen3NextModel, _QwenMtpMixin,
// _LinearAttentionVReorderBase), src/models/qwen35.cpp. What the converter changed, undone per tensor:
//  - Qwen3_5RMSNorm weights (used as 1 + w) stored as 1 + w, except the gated norm linear_attn.norm (plain w);
//  - A_log stored as ssm_a = -exp(A_log): A_log = log(-ssm_a) (f32; within an ulp of the original);
//  - dt_bias named ssm_dt.bias; conv1d.weight [C, 1, K] squeezed to [C, K];
//  - with fewer key heads than value heads, the value heads reordered from grouped by key head (HF head k * R + r,
//    R = value heads / key heads) to tiled (r * key_heads + k) in in_proj_qkv's v rows, in_proj_z, in_proj_a / b,
//    A_log, dt_bias, conv1d's v channels and out_proj's columns;
//  - the MTP layer (mtp.*) appended as block n_layer: its decoder layer under the usual names, fc as nextn.eh_proj,
//    pre_fc_norm_embedding / _hidden as nextn.enorm / hnorm, mtp.norm as nextn.shared_head_norm.
// The full-attention q_proj keeps HF's [query | gate] rows per head.
struct Qwen35Dims {
  int64_t n_layer, nk, nv, dk, dv;
};

// The value heads back from tiled to grouped order on a copy of t: along rows (cols = false: `per_head` rows per
// head, starting at row `first`) or along columns (cols = true: `per_head` columns per head, every row).
Result<Tensor> untile_value_heads(const GgufTools& tools, Tensor t, const Qwen35Dims& d, int64_t first,
                                  int64_t per_head, bool cols, const std::string& name) {
  const int64_t R = d.nv / d.nk, n = d.nv * per_head;
  if (d.nk == d.nv) return t;  // the converter reorders only when the counts differ
  if (cols) {
    if (t.ndim() != 2 || t.dim(1) != n || t.dim(0) <= 0)
      return Error::format("[gguf] {}: {}, expected [rows, {}]", name, t.describe(), n);
    if (per_head % dtype_info(t.dtype()).block_elems != 0) {
      // a head splits a quantized block (K-quants' 256 with 128-wide heads): move the values as f16, which holds a
      // dequantized K-quant weight within 2^-11 (f32 would be 7x the block's bytes, f16 3.5x)
      PIPIT_ASSIGN_OR_RETURN(Tensor w, tools.widen_f32(t, name));
      t = Tensor::empty(DType::F16, w.shape());
      for (int64_t i = 0; i < w.numel(); ++i) t.ptr<uint16_t>()[i] = f32_to_f16(w.ptr<float>()[i]);
    }
  } else if (t.ndim() < 1 || t.dim(0) != first + n) {
    return Error::format("[gguf] {}: {}, expected {} rows", name, t.describe(), first + n);
  }
  Tensor out = Tensor::empty(t.dtype(), t.shape());
  std::memcpy(out.data(), t.data(), t.nbytes());
  const int64_t outer = cols ? t.dim(0) : 1;
  const size_t stride = cols ? t.nbytes() / size_t(outer) : 0;
  const size_t unit = cols ? size_t(dtype_row_bytes(t.dtype(), per_head))
                           : t.nbytes() / size_t(t.dim(0)) * size_t(per_head);
  const size_t off = cols ? 0 : t.nbytes() / size_t(t.dim(0)) * size_t(first);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < d.nk; ++k)
      for (int64_t r = 0; r < R; ++r)
        std::memcpy(out.data() + size_t(o) * stride + off + size_t(k * R + r) * unit,
                    t.data() + size_t(o) * stride + off + size_t(r * d.nk + k) * unit, unit);
  return out;
}

enum class Q35Fix { kNone, kNorm, kQkvRows, kHeadRows, kScalarRows, kHeadCols, kALog, kConv };
struct Q35Name {
  const char* gguf;
  const char* hf;
  Q35Fix fix;
};
const Q35Name kQwen35Layer[] = {
    {"attn_norm.weight", "input_layernorm.weight", Q35Fix::kNorm},
    {"post_attention_norm.weight", "post_attention_layernorm.weight", Q35Fix::kNorm},
    {"attn_q.weight", "self_attn.q_proj.weight", Q35Fix::kNone},
    {"attn_k.weight", "self_attn.k_proj.weight", Q35Fix::kNone},
    {"attn_v.weight", "self_attn.v_proj.weight", Q35Fix::kNone},
    {"attn_output.weight", "self_attn.o_proj.weight", Q35Fix::kNone},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", Q35Fix::kNorm},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", Q35Fix::kNorm},
    {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight", Q35Fix::kQkvRows},
    {"attn_gate.weight", "linear_attn.in_proj_z.weight", Q35Fix::kHeadRows},
    {"ssm_beta.weight", "linear_attn.in_proj_b.weight", Q35Fix::kScalarRows},
    {"ssm_alpha.weight", "linear_attn.in_proj_a.weight", Q35Fix::kScalarRows},
    {"ssm_out.weight", "linear_attn.out_proj.weight", Q35Fix::kHeadCols},
    {"ssm_a", "linear_attn.A_log", Q35Fix::kALog},
    {"ssm_dt.bias", "linear_attn.dt_bias", Q35Fix::kScalarRows},
    {"ssm_conv1d.weight", "linear_attn.conv1d.weight", Q35Fix::kConv},
    {"ssm_norm.weight", "linear_attn.norm.weight", Q35Fix::kNone},
    {"ffn_gate.weight", "mlp.gate_proj.weight", Q35Fix::kNone},
    {"ffn_up.weight", "mlp.up_proj.weight", Q35Fix::kNone},
    {"ffn_down.weight", "mlp.down_proj.weight", Q35Fix::kNone},
};
// The MTP block's own tensors (full names under mtp.).
const Q35Name kQwen35NextN[] = {
    {"nextn.eh_proj.weight", "mtp.fc.weight", Q35Fix::kNone},
    {"nextn.enorm.weight", "mtp.pre_fc_norm_embedding.weight", Q35Fix::kNorm},
    {"nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight", Q35Fix::kNorm},
    {"nextn.shared_head_norm.weight", "mtp.norm.weight", Q35Fix::kNorm},
};

// An f32 copy of a small F32 / F16 / BF16 tensor.
Result<Tensor> small_f32(const Tensor& t, const std::string& name) {
  if (t.dtype() != DType::F32 && t.dtype() != DType::F16 && t.dtype() != DType::BF16)
    return Error::unsupported("[gguf] {}: type {} (expected F32/F16/BF16)", name, dtype_name(t.dtype()));
  return gguf_unshift_norm(t, name, 0.0f);
}

// One tensor of a qwen35 file under its HF name (false: a name this arch does not have).
Result<bool> import_qwen35_tensor(const GgufFile& f, const GgufTools& tools, const GgufTensorInfo& ti,
                                  const Qwen35Dims& d, Checkpoint& c) {
  const std::string& g = ti.name;
  std::string hf;
  Q35Fix fix = Q35Fix::kNone;
  if (g == "token_embd.weight") {
    hf = "model.embed_tokens.weight";
  } else if (g == "output.weight") {
    hf = "lm_head.weight";
  } else if (g == "output_norm.weight") {
    hf = "model.norm.weight", fix = Q35Fix::kNorm;
  } else if (g.rfind("blk.", 0) == 0) {
    const size_t dot = g.find('.', 4);
    if (dot == std::string::npos || dot == 4 || dot - 4 > 6) return false;
    for (size_t k = 4; k < dot; ++k)
      if (g[k] < '0' || g[k] > '9') return false;
    const int64_t il = std::stoll(g.substr(4, dot - 4));
    const std::string rest = g.substr(dot + 1);
    const bool mtp = il >= d.n_layer;
    if (mtp)
      for (auto& n : kQwen35NextN)
        if (rest == n.gguf) hf = n.hf, fix = n.fix;
    if (hf.empty())
      for (auto& n : kQwen35Layer)
        if (rest == n.gguf) {
          hf = (mtp ? "mtp.layers." + std::to_string(il - d.n_layer) : "model.layers." + std::to_string(il)) + "." +
               n.hf;
          fix = n.fix;
        }
  }
  if (hf.empty()) return false;
  PIPIT_ASSIGN_OR_RETURN(Tensor t, f.tensor(ti));
  const int64_t kdim = d.nk * d.dk;
  switch (fix) {
    case Q35Fix::kNone: break;
    case Q35Fix::kNorm: {
      PIPIT_ASSIGN_OR_RETURN(t, gguf_unshift_norm(t, g));
      break;
    }
    case Q35Fix::kQkvRows: {
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(tools, t, d, 2 * kdim, d.dv, false, g));
      break;
    }
    case Q35Fix::kHeadRows: {
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(tools, t, d, 0, d.dv, false, g));
      break;
    }
    case Q35Fix::kHeadCols: {
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(tools, t, d, 0, d.dv, true, g));
      break;
    }
    case Q35Fix::kScalarRows: {
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(tools, t, d, 0, 1, false, g));
      break;
    }
    case Q35Fix::kALog: {
      PIPIT_ASSIGN_OR_RETURN(t, small_f32(t, g));
      float* a = t.ptr<float>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (!(a[i] < 0) || !std::isfinite(a[i]))
          return Error::format("[gguf] {}: {}[{}] = {} (ssm_a = -exp(A_log) must be negative)", f.path(), g, i, a[i]);
        a[i] = std::log(-a[i]);
      }
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(tools, t, d, 0, 1, false, g));
      break;
    }
    case Q35Fix::kConv: {  // [C, K] -> HF's [C, 1, K]
      if (t.ndim() != 2) return Error::format("[gguf] {}: {} (expected [channels, kernel])", g, t.describe());
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(tools, t, d, 2 * kdim, d.dv, false, g));
      t = t.reshape({t.dim(0), 1, t.dim(1)});
      break;
    }
  }
  c.tensors[hf] = t;
  return true;
}

// block_count counts the MTP blocks, which follow the decoder's.
Result<int64_t> qwen35_decoder_layers(const GgufMeta& m, int64_t n_layer) {
  PIPIT_ASSIGN_OR_RETURN(int64_t n_mtp, m.get_int_or("nextn_predict_layers", 0));
  if (n_mtp >= n_layer)
    return Error::format("[gguf] {}: nextn_predict_layers {} leaves no decoder layer of block_count {}",
                         m.file().path(), n_mtp, n_layer);
  return n_layer - n_mtp;
}

Status qwen35_config(const GgufArchInput& in, nlohmann::json& cfg, std::vector<std::string>& notes) {
  const GgufMeta& m = in.m;
  const std::string ctx = "[gguf] " + in.f.path();
  const int64_t n_layer = in.n_layer, head_dim = in.head_dim;
  // the Gated DeltaNet sizes (Qwen3NextModel.set_gguf_parameters): key heads = ssm.group_count, value heads =
  // ssm.time_step_rank, key head dim = ssm.state_size, value head dim = ssm.inner_size / value heads
  PIPIT_ASSIGN_OR_RETURN(int64_t kconv, m.get_int("ssm.conv_kernel"));
  PIPIT_ASSIGN_OR_RETURN(int64_t dk, m.get_int("ssm.state_size"));
  PIPIT_ASSIGN_OR_RETURN(int64_t nk, m.get_int("ssm.group_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t nv, m.get_int("ssm.time_step_rank"));
  PIPIT_ASSIGN_OR_RETURN(int64_t inner, m.get_int("ssm.inner_size"));
  if (nk <= 0 || nv <= 0 || nv % nk || inner <= 0 || inner % nv || dk <= 0 || kconv <= 0)
    return Error::format("{}: ssm.group_count {} / time_step_rank {} / inner_size {} / state_size {} / "
                         "conv_kernel {} are not a Gated DeltaNet layout (positive; value heads a multiple of key "
                         "heads, inner_size of value heads)", ctx, nk, nv, inner, dk, kconv);
  cfg["linear_conv_kernel_dim"] = kconv;
  cfg["linear_key_head_dim"] = dk;
  cfg["linear_num_key_heads"] = nk;
  cfg["linear_num_value_heads"] = nv;
  cfg["linear_value_head_dim"] = inner / nv;
  // which layers are linear: attention.recurrent_layers (one bool per block, MTP blocks included), else
  // llama.cpp's rule from full_attention_interval (default 4): layer il is full when (il + 1) % interval == 0
  nlohmann::json types = nlohmann::json::array();
  const GgufValue* rv = m.find("attention.recurrent_layers");
  if (rv && rv->type == GgufType::kArray) {
    if (int64_t(rv->arr_size()) < n_layer || (rv->arr_size() && !rv->at(0).is_int()))
      return Error::format("{}: qwen35.attention.recurrent_layers must hold a bool per layer", ctx);
    for (int64_t il = 0; il < n_layer; ++il)
      types.push_back(rv->at(size_t(il)).as_int() != 0 ? "linear_attention" : "full_attention");
  } else {
    PIPIT_ASSIGN_OR_RETURN(int64_t interval, m.get_int_or("full_attention_interval", 4));
    if (interval <= 0) return Error::format("{}: qwen35.full_attention_interval must be positive", ctx);
    for (int64_t il = 0; il < n_layer; ++il)
      types.push_back((il + 1) % interval != 0 ? "linear_attention" : "full_attention");
  }
  cfg["layer_types"] = types;
  // partial interleaved M-RoPE: rope.dimension_count rotary dims of head_dim, sections (t, h, w, 0)
  PIPIT_ASSIGN_OR_RETURN(int64_t rope_dim, m.get_int_or("rope.dimension_count", head_dim));
  if (rope_dim <= 0 || rope_dim > head_dim || rope_dim % 2)
    return Error::format("{}: rope.dimension_count {} must be even and in (0, head_dim {}]", ctx, rope_dim,
                         head_dim);
  nlohmann::json sec = nlohmann::json::array();
  const GgufValue* sv = m.find("rope.dimension_sections");
  if (sv && sv->type == GgufType::kArray && sv->arr_size() >= 3) {
    for (size_t k = 0; k < 3; ++k) {
      const GgufValue x = sv->at(k);
      if (!x.is_int() || x.as_int() < 0)
        return Error::format("{}: qwen35.rope.dimension_sections must hold non-negative integers", ctx);
      sec.push_back(x.as_int());
    }
  } else {
    sec = {11, 11, 10};  // what the converter writes when the config names none (_Qwen35MRopeMixin)
  }
  cfg["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", cfg["rope_theta"]},
                            {"partial_rotary_factor", double(rope_dim) / double(head_dim)},
                            {"mrope_section", sec}, {"mrope_interleaved", true}};
  cfg["attn_output_gate"] = true;  // llama.cpp's qwen35 graph always splits q_proj into query and gate
  PIPIT_ASSIGN_OR_RETURN(int64_t n_mtp, m.get_int_or("nextn_predict_layers", 0));
  cfg["mtp_num_hidden_layers"] = n_mtp;
  const std::string mtp_embd = "blk." + std::to_string(n_layer) + ".nextn.embed_tokens.weight";
  cfg["mtp_use_dedicated_embeddings"] = in.f.find_tensor(mtp_embd) != nullptr;
  notes.push_back("qwen35: norm weights stored as 1 + w and ssm_a = -exp(A_log) taken back; value heads "
                  "regrouped by key head");
  return Status::ok();
}

Status qwen35_tensors(const GgufArchInput& in, Checkpoint& c) {
  const GgufFile& f = in.f;
  const int64_t n_layer = in.n_layer;
  const nlohmann::json& cfg = c.config;
  const nlohmann::json types = cfg["layer_types"];
  PIPIT_TRY(gguf_check_layer_tensors(f, n_layer, [&](int64_t il) -> std::vector<const char*> {
    if (types[size_t(il)] == "linear_attention")
      return {"attn_norm.weight", "post_attention_norm.weight", "attn_qkv.weight", "attn_gate.weight",
              "ssm_beta.weight", "ssm_alpha.weight", "ssm_out.weight", "ssm_a", "ssm_dt.bias", "ssm_conv1d.weight",
              "ssm_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    return {"attn_norm.weight", "post_attention_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
            "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight", "ffn_gate.weight", "ffn_up.weight",
            "ffn_down.weight"};
  }));
  const Qwen35Dims d{n_layer, cfg["linear_num_key_heads"].get<int64_t>(), cfg["linear_num_value_heads"].get<int64_t>(),
                     cfg["linear_key_head_dim"].get<int64_t>(), cfg["linear_value_head_dim"].get<int64_t>()};
  for (auto& ti : f.tensors()) {
    PIPIT_ASSIGN_OR_RETURN(bool known, import_qwen35_tensor(f, in.tools, ti, d, c));
    if (!known) c.notes.push_back("skipped unknown tensor '" + ti.name + "'");
  }
  return Status::ok();
}

// Qwen3.5 (dense): Gated DeltaNet + gated attention, its MTP layer as a NextN block after the decoder's; with a
// qwen3vl_merger mmproj it becomes qwen3_5 (models/qwen3_vl_gguf.cpp).
const GgufArchRegistrar kQwen35Gguf({.gguf = "qwen35", .model_type = "qwen3_5_text", .hf_class = "Qwen3_5ForCausalLM",
                                     .partial_rope = true, .decoder_layers = qwen35_decoder_layers,
                                     .config = qwen35_config, .tensors = qwen35_tensors});

// Qwen3.5's byte-level BPE pre-tokenizer (llama.cpp's "qwen35": the regex of the Hub tokenizer.json, quoted in
// llama-vocab.cpp): Qwen2's with combining marks kept in words ([\p{L}\p{M}]+ where Qwen2 has \p{L}+); NFC as
// Qwen2's tokenizer.json (Qwen3.5's is taken to keep it: the GGUF does not say).
const GgufPreTokenizerRegistrar kQwen35Pre(
    {.names = {"qwen35"},
     .regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+"
              "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     .nfc = true});

}  // namespace

}  // namespace pipit
