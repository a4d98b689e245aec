// GGUF import: config from `{arch}.*` metadata, tensor names from llama.cpp's to HF's, llama Q/K rows un-permuted,
// Llama 3 rope_freqs turned back into an HF rope_scaling. See gguf_import.h.
#include "convert/gguf_import.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

#include "backends/cpu/kernels.h"
#include "core/limits.h"

namespace pipit {

namespace {

// What llama.cpp's converter does beyond the shared llama-family layout (conversion/*.py, src/models/*.cpp).
enum class ArchKind { kPlain, kGemma3, kQwen3Moe, kSmolLM3, kQwen2VL, kQwen35, kGptOss, kQwen3VL, kGemma4 };
struct ArchInfo {
  const char* gguf;
  const char* model_type;
  const char* hf_class;
  bool permuted_qk;  // convert_hf_to_gguf permutes q/k rows for this arch (LlamaModel and its subclasses)
  ArchKind kind;
};
const ArchInfo kArchs[] = {
    {"llama", "llama", "LlamaForCausalLM", true, ArchKind::kPlain},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", false, ArchKind::kPlain},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", false, ArchKind::kPlain},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM", false, ArchKind::kGemma3},
    {"qwen3moe", "qwen3_moe", "Qwen3MoeForCausalLM", false, ArchKind::kQwen3Moe},
    {"smollm3", "smollm3", "SmolLM3ForCausalLM", true, ArchKind::kSmolLM3},
    // Qwen2-VL / Qwen2.5-VL's language model: Qwen2 with M-RoPE sections. Alone it is a Qwen2 (text positions turn
    // every M-RoPE stream alike, which is plain RoPE); with an mmproj file it becomes qwen2_vl / qwen2_5_vl
    // (gguf_mmproj.cpp).
    {"qwen2vl", "qwen2", "Qwen2ForCausalLM", false, ArchKind::kQwen2VL},
    // Qwen3.5 (dense): Gated DeltaNet + gated attention, its MTP layer as a NextN block after the decoder's; with a
    // qwen3vl_merger mmproj it becomes qwen3_5 (gguf_mmproj.cpp). Tensors: import_qwen35_tensor.
    {"qwen35", "qwen3_5_text", "Qwen3_5ForCausalLM", false, ArchKind::kQwen35},
    // GPT-OSS: experts as the converter repacks them (MXFP4 as stored): import_gpt_oss_tensors.
    {"gpt-oss", "gpt_oss", "GptOssForCausalLM", false, ArchKind::kGptOss},
    // Qwen3-VL's language model: Qwen3 with interleaved M-RoPE sections (DeepStack features added by the first
    // layers when an mmproj feeds them). Alone it is a Qwen3 (text positions make M-RoPE plain RoPE); with a
    // qwen3vl_merger mmproj it becomes qwen3_vl (gguf_mmproj.cpp).
    {"qwen3vl", "qwen3", "Qwen3ForCausalLM", false, ArchKind::kQwen3VL},
    // Gemma 4 (dense: E2B / E4B / 31B shapes): per-layer head dims, KV sharing, per-layer embeddings; its own
    // importer (import_gemma4).
    {"gemma4", "gemma4_text", "Gemma4ForCausalLM", false, ArchKind::kGemma4},
};

// llama.cpp tensor name -> HF name: whole names, then per-layer suffixes of blk.N.
const std::pair<const char*, const char*> kGlobalNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
const std::pair<const char*, const char*> kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate_inp.weight", "mlp.gate.weight"},  // MoE router
};
// Gemma 3 has four norms per layer; llama.cpp's ffn_norm is its pre_feedforward_layernorm.
const std::pair<const char*, const char*> kGemma3LayerNames[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
};

// "blk.12.attn_q.weight" -> "model.layers.12.self_attn.q_proj.weight"; "" for names we do not know.
std::string hf_name(const std::string& g, ArchKind kind) {
  for (auto& [a, b] : kGlobalNames)
    if (g == a) return b;
  if (g.rfind("blk.", 0) != 0) return "";
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot - 4 > 6) return "";
  for (size_t k = 4; k < dot; ++k)
    if (g[k] < '0' || g[k] > '9') return "";
  const std::string layer = g.substr(4, dot - 4), rest = g.substr(dot + 1);
  if (kind == ArchKind::kGemma3)
    for (auto& [a, b] : kGemma3LayerNames)
      if (rest == a) return "model.layers." + layer + "." + b;
  for (auto& [a, b] : kLayerNames)
    if (rest == a) return "model.layers." + layer + "." + b;
  return "";
}

class Meta {
 public:
  Meta(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}
  const GgufValue* find(const std::string& key) const { return f_.find(arch_ + "." + key); }
  Result<int64_t> get_int(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) return Error::format("[gguf] {}: missing metadata '{}.{}'", f_.path(), arch_, key);
    if (!v->is_int() || v->as_int() < 0)
      return Error::format("[gguf] {}: '{}.{}' is {}, expected a non-negative integer", f_.path(), arch_, key,
                           v->type == GgufType::kArray ? "an array (per-layer values are not supported)"
                                                       : v->to_string());
    return v->as_int();
  }
  Result<int64_t> get_int_or(const std::string& key, int64_t def) const {
    if (!find(key)) return def;
    return get_int(key);
  }
  Result<double> get_float_or(const std::string& key, double def) const {
    const GgufValue* v = find(key);
    if (!v) return def;
    if (!v->is_number()) return Error::format("[gguf] {}: '{}.{}' is not a number", f_.path(), arch_, key);
    return v->as_double();
  }

 private:
  const GgufFile& f_;
  std::string arch_;
};

// Inverse of llama.cpp's q/k permutation: within each head of head_dim rows, GGUF row 2i + j holds HF row
// j * head_dim/2 + i. Works on whole rows of any dtype (a bias is rows of one element).
Tensor unpermute_rows(const Tensor& src, int64_t n_head) {
  const int64_t rows = src.dim(0), head_dim = rows / n_head, half = head_dim / 2;
  Tensor dst = Tensor::empty(src.dtype(), src.shape());
  const size_t row_bytes = src.nbytes() / size_t(rows);
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t from = h * head_dim + 2 * i + j, to = h * head_dim + j * half + i;
        std::memcpy(dst.data() + size_t(to) * row_bytes, src.data() + size_t(from) * row_bytes, row_bytes);
      }
  return dst;
}

// Llama 3 per-frequency factors (llama.cpp convert_hf_to_gguf.py, as transformers' _compute_llama3_parameters):
// 1 where wavelen < old_ctx / high, factor where wavelen > old_ctx / low, a smooth blend between.
double llama3_factor(double inv_freq, double factor, double low, double high, double old_ctx) {
  const double wavelen = 2 * M_PI / inv_freq;
  if (wavelen < old_ctx / high) return 1.0;
  if (wavelen > old_ctx / low) return factor;
  const double smooth = (old_ctx / wavelen - low) / (high - low);
  return 1.0 / ((1 - smooth) / factor + smooth);
}

double round_if_close(double v) { return std::fabs(v - std::round(v)) < 1e-3 ? std::round(v) : v; }

// Recovers {factor, low_freq_factor, high_freq_factor, original_max_position_embeddings} from the rope_freqs factors.
Result<nlohmann::json> llama3_scaling_from_factors(const float* f, int64_t n, double theta, int64_t head_dim,
                                                   const std::string& ctx) {
  std::vector<double> inv(static_cast<size_t>(n));
  double factor = 1;
  for (int64_t i = 0; i < n; ++i) {
    inv[size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
    if (!(f[i] > 0) || !std::isfinite(f[i])) return Error::format("{}: rope_freqs[{}] = {} is not positive", ctx, i, f[i]);
    factor = std::max(factor, double(f[i]));
  }
  if (factor - 1 < 1e-6) return nlohmann::json();  // all ones: no scaling
  factor = round_if_close(factor);
  auto matches = [&](double low, double high, double old_ctx) {
    for (int64_t i = 0; i < n; ++i) {
      const double want = llama3_factor(inv[size_t(i)], factor, low, high, old_ctx);
      if (std::fabs(want - f[i]) > 1e-4 * want) return false;
    }
    return true;
  };
  // medium frequencies: 1/f = (1 - s)/factor + s with s = old_ctx/(high-low) * (1/wavelen) - low/(high-low);
  // a least-squares line through them gives old_ctx and high when low_freq_factor = 1 (every Llama 3.x uses 1)
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double fi = f[i];
    if (fi < 1 + 1e-5 || fi > factor * (1 - 1e-5)) continue;
    const double s = (1 / fi - 1 / factor) / (1 - 1 / factor), x = inv[size_t(i)] / (2 * M_PI);
    sx += x, sy += s, sxx += x * x, sxy += x * s, ++m;
  }
  std::vector<std::array<double, 3>> candidates;  // (low, high, old_ctx)
  if (m >= 2 && m * sxx - sx * sx > 0) {
    const double a = (m * sxy - sx * sy) / (m * sxx - sx * sx), b = (sy - a * sx) / m;
    if (b < 0) {
      const double high = round_if_close(1 - 1 / b), old_ctx = std::round(-a / b);
      candidates.push_back({1.0, high, old_ctx});
    }
  }
  for (double old_ctx : {8192.0, 4096.0, 2048.0, 1024.0, 16384.0, 32768.0, 65536.0, 131072.0})
    candidates.push_back({1.0, 4.0, old_ctx});
  for (auto& [low, high, old_ctx] : candidates)
    if (matches(low, high, old_ctx))
      return nlohmann::json{{"rope_type", "llama3"}, {"factor", factor}, {"low_freq_factor", low},
                            {"high_freq_factor", high}, {"original_max_position_embeddings", int64_t(old_ctx)}};
  return Error::unsupported("{}: rope_freqs does not match a Llama 3 rope_scaling (factor {}); this kind of RoPE "
                            "scaling is not supported",
                            ctx, factor);
}


// Gemma's RMSNorm multiplies by (1 + w); llama.cpp's converter stores 1 + w (Gemma3Model.norm_shift) so its graph
// multiplies by the stored value. pipit's Gemma 3 takes HF's w: subtract the 1 again (f32; for weights from bf16
// both steps are exact). Qwen3.5's norms likewise; shift 0: a plain f32 copy.
Result<Tensor> unshift_norm(const Tensor& t, const std::string& name, float shift = 1.0f) {
  if (t.dtype() != DType::F32 && t.dtype() != DType::F16 && t.dtype() != DType::BF16)
    return Error::unsupported("[gguf] {}: a norm weight of type {} (expected F32/F16/BF16)", name,
                              dtype_name(t.dtype()));
  Tensor out = Tensor::empty(DType::F32, t.shape());
  float* o = out.ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.dtype() == DType::F32  ? t.ptr<float>()[i]
                    : t.dtype() == DType::F16 ? f16_to_f32(t.ptr<uint16_t>()[i])
                                              : bf16_to_f32(t.ptr<uint16_t>()[i]);
    o[i] = v - shift;
  }
  return out;
}

// llama.cpp stores a layer's experts stacked: blk.N.ffn_{gate,up,down}_exps [n_expert, rows, cols]. The MoE block
// reads HF's per-expert matrices; each is a view of its slice of the stacked tensor (no copy).
bool split_experts(const std::string& gname, const Tensor& t, std::map<std::string, Tensor>& out) {
  static const std::pair<const char*, const char*> kExps[] = {
      {".ffn_gate_exps.weight", "gate_proj"}, {".ffn_up_exps.weight", "up_proj"}, {".ffn_down_exps.weight", "down_proj"}};
  for (auto& [suffix, proj] : kExps) {
    const std::string sfx = suffix;
    if (gname.size() <= sfx.size() || gname.compare(gname.size() - sfx.size(), sfx.size(), sfx) != 0) continue;
    const std::string layer = gname.substr(4, gname.size() - sfx.size() - 4);  // "blk.N" -> N
    const int64_t n_expert = t.dim(0);
    const size_t bytes = t.nbytes() / size_t(n_expert);
    for (int64_t e = 0; e < n_expert; ++e)
      out["model.layers." + layer + ".mlp.experts." + std::to_string(e) + "." + proj + ".weight"] =
          Tensor::from_data(t.dtype(), {t.dim(1), t.dim(2)}, t.data() + size_t(e) * bytes, t.storage());
    return true;
  }
  return false;
}

// A layer's sliding-window kinds as llama.cpp's load_swa_pattern reads them: one bool per layer
// (attention.sliding_window_pattern as an array), or an int n (layer il slides when il % n < n - 1), else the arch's
// default n (Gemma 3: 6, GPT-OSS: 2).
Result<std::vector<bool>> sliding_layers(const Meta& m, const GgufFile& f, const std::string& arch, int64_t n_layer,
                                         int64_t default_pattern) {
  std::vector<bool> sliding(size_t(n_layer), false);
  const GgufValue* pv = m.find("attention.sliding_window_pattern");
  if (pv && pv->type == GgufType::kArray) {
    if (int64_t(pv->arr.size()) != n_layer || (!pv->arr.empty() && !pv->arr[0].is_int()))
      return Error::format("[gguf] {}: {}.attention.sliding_window_pattern must hold {} bools", f.path(), arch,
                           n_layer);
    for (int64_t il = 0; il < n_layer; ++il) sliding[size_t(il)] = pv->arr[size_t(il)].as_int() != 0;
    return sliding;
  }
  PIPIT_ASSIGN_OR_RETURN(int64_t n, m.get_int_or("attention.sliding_window_pattern", default_pattern));
  for (int64_t il = 0; il < n_layer; ++il) sliding[size_t(il)] = n == 0 || il % n < n - 1;
  return sliding;
}

// ---- Qwen3.5 (arch qwen35): llama.cpp conversion/qwen.py Qwen3_5TextModel (with Qwen3NextModel, _QwenMtpMixin,
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

// An f32 copy of any tensor the CPU kernels can read (whole rows).
Result<Tensor> widen_f32(const Tensor& t, const std::string& name) {
  const auto to_f32 = ref_kernels().to_f32[int(t.dtype())];
  if (!to_f32) return Error::unsupported("[gguf] {}: type {}", name, dtype_name(t.dtype()));
  Tensor w = Tensor::empty(DType::F32, t.shape());
  const int64_t n = t.dim(-1);
  for (int64_t r = 0; r < t.rows(); ++r) to_f32(t.row_ptr(r), w.ptr<float>() + r * n, n);
  return w;
}

// The value heads back from tiled to grouped order on a copy of t: along rows (cols = false: `per_head` rows per
// head, starting at row `first`) or along columns (cols = true: `per_head` columns per head, every row).
Result<Tensor> untile_value_heads(Tensor t, const Qwen35Dims& d, int64_t first, int64_t per_head, bool cols,
                                  const std::string& name) {
  const int64_t R = d.nv / d.nk, n = d.nv * per_head;
  if (d.nk == d.nv) return t;  // the converter reorders only when the counts differ
  if (cols) {
    if (t.ndim() != 2 || t.dim(1) != n || t.dim(0) <= 0)
      return Error::format("[gguf] {}: {}, expected [rows, {}]", name, t.describe(), n);
    if (per_head % dtype_info(t.dtype()).block_elems != 0) {
      // a head splits a quantized block (K-quants' 256 with 128-wide heads): move the values as f16, which holds a
      // dequantized K-quant weight within 2^-11 (f32 would be 7x the block's bytes, f16 3.5x)
      PIPIT_ASSIGN_OR_RETURN(Tensor w, widen_f32(t, name));
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

// Every tensor the layers need, checked by its GGUF name before any is mapped (the model would otherwise report the
// HF name it misses, which the file's owner cannot find in it).
Status check_layer_tensors(const GgufFile& f, int64_t n_layer,
                           const std::function<std::vector<const char*>(int64_t)>& need) {
  for (int64_t il = 0; il < n_layer; ++il)
    for (const char* n : need(il)) {
      const std::string name = "blk." + std::to_string(il) + "." + n;
      if (!f.find_tensor(name)) return Error::not_found("[gguf] {}: missing tensor '{}'", f.path(), name);
    }
  return Status::ok();
}

// An f32 copy of a small F32 / F16 / BF16 tensor.
Result<Tensor> small_f32(const Tensor& t, const std::string& name) {
  if (t.dtype() != DType::F32 && t.dtype() != DType::F16 && t.dtype() != DType::BF16)
    return Error::unsupported("[gguf] {}: type {} (expected F32/F16/BF16)", name, dtype_name(t.dtype()));
  return unshift_norm(t, name, 0.0f);
}

// One tensor of a qwen35 file under its HF name (false: a name this arch does not have).
Result<bool> import_qwen35_tensor(const GgufFile& f, const GgufTensorInfo& ti, const Qwen35Dims& d, Checkpoint& c) {
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
      PIPIT_ASSIGN_OR_RETURN(t, unshift_norm(t, g));
      break;
    }
    case Q35Fix::kQkvRows: {
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(t, d, 2 * kdim, d.dv, false, g));
      break;
    }
    case Q35Fix::kHeadRows: {
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(t, d, 0, d.dv, false, g));
      break;
    }
    case Q35Fix::kHeadCols: {
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(t, d, 0, d.dv, true, g));
      break;
    }
    case Q35Fix::kScalarRows: {
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(t, d, 0, 1, false, g));
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
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(t, d, 0, 1, false, g));
      break;
    }
    case Q35Fix::kConv: {  // [C, K] -> HF's [C, 1, K]
      if (t.ndim() != 2) return Error::format("[gguf] {}: {} (expected [channels, kernel])", g, t.describe());
      PIPIT_ASSIGN_OR_RETURN(t, untile_value_heads(t, d, 2 * kdim, d.dv, false, g));
      t = t.reshape({t.dim(0), 1, t.dim(1)});
      break;
    }
  }
  c.tensors[hf] = t;
  return true;
}

// ---- GPT-OSS (arch gpt-oss): conversion/gpt_oss.py GptOssModel, src/models/openai-moe.cpp. The converter splits
// HF's fused experts: gate_up_proj (rows 2j gate, 2j + 1 up; MXFP4 blocks repacked in ggml's nibble order, which is
// pipit's mxfp4) into ffn_gate_exps / ffn_up_exps [E, I, H], and its bias into two [E, I]; down_proj is
// ffn_down_exps [E, H, I]. pipit's GPT-OSS takes the fused layout of gpt_oss_import.h: rows interleaved back (whole
// rows of blocks, no requantization).
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
Result<Tensor> interleave_gate_up(Tensor gate, Tensor up, const std::string& name) {
  if (gate.shape() != up.shape() || gate.ndim() < 2 || gate.numel() == 0)
    return Error::format("[gguf] {}: gate {} and up {} must have one [experts, rows, ...] shape", name,
                         gate.describe(), up.describe());
  if (gate.dtype() != up.dtype()) {
    PIPIT_ASSIGN_OR_RETURN(gate, widen_f32(gate, name));
    PIPIT_ASSIGN_OR_RETURN(up, widen_f32(up, name));
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

Status import_gpt_oss_tensors(const GgufFile& f, Checkpoint& c) {
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
                               interleave_gate_up(gate, up, g));
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

// The per-architecture HF config fields llama.cpp keeps as metadata (or as the fixed rules of its graph code).
Status arch_config(const ArchInfo& arch, const Meta& m, const GgufFile& f, int64_t n_layer, int64_t n_embd,
                   int64_t n_head, int64_t head_dim, nlohmann::json& cfg, std::vector<std::string>& notes) {
  const std::string ctx = "[gguf] " + f.path();
  // per-layer lists are built here, before the config's sizes are checked (HfConfig::validate_sizes)
  if (n_layer > Limits::kMaxLayers)
    return Error::format("{}: block_count {} is over the maximum of {}", ctx, n_layer, Limits::kMaxLayers);
  switch (arch.kind) {
    case ArchKind::kPlain: break;
    case ArchKind::kGemma3: {
      cfg["hidden_activation"] = "gelu_pytorch_tanh";
      cfg["head_dim"] = head_dim;
      // sliding layers: the pattern key (int n: layer il slides when il % n < n - 1; or one bool per layer), else
      // llama.cpp's default of 6 (every Gemma 3 size); no window key: every layer global
      PIPIT_ASSIGN_OR_RETURN(int64_t window, m.get_int_or("attention.sliding_window", 0));
      std::vector<bool> sliding(size_t(n_layer), false);
      if (window > 0) {
        PIPIT_ASSIGN_OR_RETURN(sliding, sliding_layers(m, f, arch.gguf, n_layer, 6));
        cfg["sliding_window"] = window;
      }
      nlohmann::json types = nlohmann::json::array();
      for (bool sl : sliding) types.push_back(sl ? "sliding_attention" : "full_attention");
      cfg["layer_types"] = types;
      PIPIT_ASSIGN_OR_RETURN(double swa_theta, m.get_float_or("rope.freq_base_swa", 10000.0));
      cfg["rope_local_base_freq"] = swa_theta;
      // attention scale: the metadata's when present; else llama.cpp's rule (query_pre_attn_scalar = head_dim,
      // n_embd / n_head for the 62-layer 27B), which is what every released Gemma 3 config says
      PIPIT_ASSIGN_OR_RETURN(double scale, m.get_float_or("attention.scale", 0.0));
      if (scale < 0) return Error::format("{}: gemma3.attention.scale {} must be positive", ctx, scale);
      cfg["query_pre_attn_scalar"] = scale > 0 ? 1.0 / (scale * scale)
                                     : n_layer == 62 ? double(n_embd / n_head) : double(head_dim);
      PIPIT_ASSIGN_OR_RETURN(double softcap, m.get_float_or("final_logit_softcapping", 0.0));
      if (softcap > 0) cfg["final_logit_softcapping"] = softcap;
      notes.push_back("gemma3: norm weights stored as 1 + w, taken back to w");
      break;
    }
    case ArchKind::kQwen3Moe: {
      PIPIT_ASSIGN_OR_RETURN(int64_t n_expert, m.get_int("expert_count"));
      PIPIT_ASSIGN_OR_RETURN(int64_t n_used, m.get_int("expert_used_count"));
      PIPIT_ASSIGN_OR_RETURN(int64_t n_ff_exp, m.get_int("expert_feed_forward_length"));
      cfg["num_experts"] = n_expert;
      cfg["num_experts_per_tok"] = n_used;
      cfg["moe_intermediate_size"] = n_ff_exp;
      // llama.cpp's qwen3moe graph always renormalises the kept weights (every released Qwen3-MoE has
      // norm_topk_prob true); expert_weights_norm overrides when present
      const GgufValue* nv = m.find("expert_weights_norm");
      cfg["norm_topk_prob"] = nv && nv->is_int() ? nv->as_int() != 0 : true;
      cfg["decoder_sparse_step"] = 1;
      cfg["mlp_only_layers"] = nlohmann::json::array();
      break;
    }
    case ArchKind::kSmolLM3: {
      // llama.cpp's smollm3 graph: layer il has no RoPE when (il + 1) % 4 == 0 (HF's no_rope_layer_interval 4)
      nlohmann::json nope = nlohmann::json::array();
      for (int64_t il = 0; il < n_layer; ++il) nope.push_back((il + 1) % 4 != 0 ? 1 : 0);
      cfg["no_rope_layers"] = nope;
      break;
    }
    case ArchKind::kQwen2VL:
    case ArchKind::kQwen3VL: {
      // rope.dimension_sections holds (t, h, w, 0): kept as HF's mrope_section for an mmproj to use
      const GgufValue* sv = m.find("rope.dimension_sections");
      if (!sv || sv->type != GgufType::kArray || sv->arr.size() < 3)
        return Error::format("{}: {} needs the array '{}.rope.dimension_sections'", ctx, arch.gguf, arch.gguf);
      nlohmann::json sec = nlohmann::json::array();
      for (size_t k = 0; k < 3; ++k) {
        if (!sv->arr[k].is_int() || sv->arr[k].as_int() < 0)
          return Error::format("{}: {}.rope.dimension_sections must hold non-negative integers", ctx, arch.gguf);
        sec.push_back(sv->arr[k].as_int());
      }
      if (arch.kind == ArchKind::kQwen3VL) {
        // llama.cpp's qwen3vl graph always interleaves the sections (LLAMA_ROPE_TYPE_IMROPE), as HF's Qwen3-VL
        if (!cfg["rope_scaling"].is_null())
          return Error::unsupported("{}: qwen3vl with rope scaling {} is not supported", ctx,
                                    cfg["rope_scaling"].dump());
        cfg["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", sec}, {"mrope_interleaved", true}};
        PIPIT_ASSIGN_OR_RETURN(int64_t n_ds, m.get_int_or("n_deepstack_layers", 0));
        if (n_ds > 0) notes.push_back("qwen3vl: " + std::to_string(n_ds) + " DeepStack layers (fed by an mmproj)");
        break;
      }
      if (cfg["rope_scaling"].is_null()) cfg["rope_scaling"] = {{"type", "mrope"}};
      cfg["rope_scaling"]["mrope_section"] = sec;
      cfg["use_sliding_window"] = false;
      break;
    }
    case ArchKind::kGemma4: break;  // import_gemma4
    case ArchKind::kQwen35: {
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
        if (int64_t(rv->arr.size()) < n_layer || (!rv->arr.empty() && !rv->arr[0].is_int()))
          return Error::format("{}: qwen35.attention.recurrent_layers must hold a bool per layer", ctx);
        for (int64_t il = 0; il < n_layer; ++il)
          types.push_back(rv->arr[size_t(il)].as_int() != 0 ? "linear_attention" : "full_attention");
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
      if (sv && sv->type == GgufType::kArray && sv->arr.size() >= 3) {
        for (size_t k = 0; k < 3; ++k) {
          if (!sv->arr[k].is_int() || sv->arr[k].as_int() < 0)
            return Error::format("{}: qwen35.rope.dimension_sections must hold non-negative integers", ctx);
          sec.push_back(sv->arr[k].as_int());
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
      cfg["mtp_use_dedicated_embeddings"] = f.find_tensor(mtp_embd) != nullptr;
      notes.push_back("qwen35: norm weights stored as 1 + w and ssm_a = -exp(A_log) taken back; value heads "
                      "regrouped by key head");
      break;
    }
    case ArchKind::kGptOss: {
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
      PIPIT_ASSIGN_OR_RETURN(auto sliding, sliding_layers(m, f, arch.gguf, n_layer, 2));
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
      break;
    }
  }
  return Status::ok();
}

// The GGUF vocabulary as HF tokenizer texts; a file without one (tokenizer.ggml.model "none") keeps its reason.
void attach_tokenizer(const GgufFile& f, Checkpoint& c) {
  if (auto tok = gguf_tokenizer_to_hf(f); tok.is_ok()) {
    c.texts["tokenizer"] = std::move(tok->tokenizer_json);
    c.texts["tokenizer_config"] = std::move(tok->tokenizer_config_json);
  } else {
    c.tokenizer_error = tok.status().message();
    c.notes.push_back("no tokenizer: " + c.tokenizer_error);
  }
}

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

// A per-layer integer key: an array of n_layer values, or one value for every layer.
Result<std::vector<int64_t>> per_layer_ints(const Meta& m, const GgufFile& f, const std::string& key, int64_t n_layer,
                                            std::optional<int64_t> def = std::nullopt) {
  const GgufValue* v = m.find(key);
  if (v && v->type == GgufType::kArray) {
    if (int64_t(v->arr.size()) != n_layer)
      return Error::format("[gguf] {}: gemma4.{} holds {} values for {} layers", f.path(), key, v->arr.size(),
                           n_layer);
    std::vector<int64_t> out;
    for (const auto& x : v->arr) {
      if (!x.is_int() || x.as_int() < 0)
        return Error::format("[gguf] {}: gemma4.{} must hold non-negative integers", f.path(), key);
      out.push_back(x.as_int());
    }
    return out;
  }
  PIPIT_ASSIGN_OR_RETURN(int64_t one, def ? m.get_int_or(key, *def) : m.get_int(key));
  return std::vector<int64_t>(size_t(n_layer), one);
}

Result<Checkpoint> import_gemma4(const GgufFile& f, const Meta& m, const ArchInfo& arch) {
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
  PIPIT_ASSIGN_OR_RETURN(auto n_ff, per_layer_ints(m, f, "feed_forward_length", n_layer));
  PIPIT_ASSIGN_OR_RETURN(auto n_kv, per_layer_ints(m, f, "attention.head_count_kv", n_layer, n_head));
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
  PIPIT_ASSIGN_OR_RETURN(auto sliding, sliding_layers(m, f, arch.gguf, n_layer, 0));
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
  if (auto eog = gguf_gemma4_eog_ids(f, n_vocab); eog.size() > 1) c.generation_config["eos_token_id"] = eog;
  c.config = cfg;

  PIPIT_TRY(check_layer_tensors(f, n_layer, [&](int64_t il) -> std::vector<const char*> {
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
  attach_tokenizer(f, c);
  return c;
}

}  // namespace

Result<Checkpoint> import_gguf(const GgufFile& f) {
  const std::string ctx = "[gguf] " + f.path();
  Checkpoint c;
  c.path = f.path();
  c.format = "gguf";
  const GgufValue* av = f.find("general.architecture");
  if (!av || av->type != GgufType::kString) return Error::format("{}: no general.architecture string", ctx);
  const ArchInfo* arch = nullptr;
  for (auto& a : kArchs)
    if (av->s == a.gguf) arch = &a;
  if (!arch)
    return Error::unsupported("{}: architecture '{}' is not supported (llama, qwen2, qwen3, gemma3, qwen3moe, "
                              "smollm3, qwen2vl, qwen35, gpt-oss, qwen3vl, gemma4 are)", ctx, av->s);
  Meta m(f, arch->gguf);
  if (arch->kind == ArchKind::kGemma4) return import_gemma4(f, m, *arch);

  PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, m.get_int("embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, m.get_int("block_count"));
  if (arch->kind == ArchKind::kQwen35) {  // block_count counts the MTP blocks, which follow the decoder's
    PIPIT_ASSIGN_OR_RETURN(int64_t n_mtp, m.get_int_or("nextn_predict_layers", 0));
    if (n_mtp >= n_layer)
      return Error::format("{}: nextn_predict_layers {} leaves no decoder layer of block_count {}", ctx, n_mtp,
                           n_layer);
    n_layer -= n_mtp;
  }
  // a MoE model may have no dense width (its experts' is expert_feed_forward_length)
  PIPIT_ASSIGN_OR_RETURN(int64_t n_ff, arch->kind == ArchKind::kQwen3Moe ? m.get_int_or("feed_forward_length", 0)
                                                                          : m.get_int("feed_forward_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, m.get_int("attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head_kv, m.get_int_or("attention.head_count_kv", n_head));
  if (n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv)
    return Error::format("{}: head_count {} / head_count_kv {} are not a valid GQA layout", ctx, n_head, n_head_kv);
  PIPIT_ASSIGN_OR_RETURN(int64_t head_dim, m.get_int_or("attention.key_length", n_embd / n_head));
  PIPIT_ASSIGN_OR_RETURN(int64_t v_dim, m.get_int_or("attention.value_length", head_dim));
  PIPIT_ASSIGN_OR_RETURN(int64_t rope_dim, m.get_int_or("rope.dimension_count", head_dim));
  if (v_dim != head_dim) return Error::unsupported("{}: value_length {} != key_length {}", ctx, v_dim, head_dim);
  if (rope_dim != head_dim && arch->kind != ArchKind::kQwen35)  // Qwen3.5's partial RoPE: arch_config
    return Error::unsupported("{}: rope.dimension_count {} != head_dim {} (partial RoPE is not supported)", ctx,
                              rope_dim, head_dim);
  if (head_dim <= 0 || head_dim % 2) return Error::format("{}: head_dim {} must be even and positive", ctx, head_dim);
  PIPIT_ASSIGN_OR_RETURN(double eps, m.get_float_or("attention.layer_norm_rms_epsilon", 1e-6));
  PIPIT_ASSIGN_OR_RETURN(double theta, m.get_float_or("rope.freq_base", 10000.0));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_ctx, m.get_int_or("context_length", 4096));

  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2) return Error::format("{}: no 2-d token_embd.weight tensor", ctx);
  const int64_t n_vocab = int64_t(embd->ne[1]);

  nlohmann::json cfg = {
      {"architectures", {arch->hf_class}},
      {"model_type", arch->model_type},
      {"hidden_size", n_embd},
      {"num_hidden_layers", n_layer},
      {"intermediate_size", n_ff},
      {"num_attention_heads", n_head},
      {"num_key_value_heads", n_head_kv},
      {"head_dim", head_dim},
      {"rms_norm_eps", eps},
      {"rope_theta", theta},
      {"max_position_embeddings", n_ctx},
      {"vocab_size", n_vocab},
      {"tie_word_embeddings", f.find_tensor("output.weight") == nullptr},
      {"hidden_act", "silu"},
      {"rope_scaling", nullptr},
  };
  if (const GgufValue* st = m.find("rope.scaling.type");
      st && st->type == GgufType::kString && st->s != "none" && arch->kind != ArchKind::kGptOss) {
    if (st->s != "linear")
      return Error::unsupported("{}: rope scaling '{}' is not supported (none, linear, and Llama 3 rope_freqs are)",
                                ctx, st->s);
    PIPIT_ASSIGN_OR_RETURN(double factor, m.get_float_or("rope.scaling.factor", 1.0));
    cfg["rope_scaling"] = {{"rope_type", "linear"}, {"factor", factor}};
  }
  if (const GgufTensorInfo* rf = f.find_tensor("rope_freqs.weight")) {
    PIPIT_ASSIGN_OR_RETURN(Tensor t, f.tensor(*rf));
    if (t.dtype() != DType::F32 || t.numel() != head_dim / 2)
      return Error::format("{}: rope_freqs.weight is {}, expected f32 [{}]", ctx, t.describe(), head_dim / 2);
    PIPIT_ASSIGN_OR_RETURN(auto scaling, llama3_scaling_from_factors(t.ptr<float>(), t.numel(), theta, head_dim, ctx));
    if (!scaling.is_null()) {
      cfg["rope_scaling"] = scaling;
      c.notes.push_back("rope_freqs -> rope_scaling " + scaling.dump());
    }
  }
  auto token_id = [&](const char* key) -> std::optional<int64_t> {
    const GgufValue* v = f.find(key);
    if (v && v->is_int() && v->as_int() >= 0 && v->as_int() < n_vocab) return v->as_int();
    return std::nullopt;
  };
  if (auto b = token_id("tokenizer.ggml.bos_token_id")) {
    cfg["bos_token_id"] = *b;
    c.generation_config["bos_token_id"] = *b;
  }
  if (auto e = token_id("tokenizer.ggml.eos_token_id")) {
    cfg["eos_token_id"] = *e;
    c.generation_config["eos_token_id"] = *e;
  }
  if (arch->model_type == std::string("qwen2")) cfg["use_sliding_window"] = false;
  PIPIT_TRY(arch_config(*arch, m, f, n_layer, n_embd, n_head, head_dim, cfg, c.notes));
  c.config = cfg;

  if (arch->kind == ArchKind::kQwen35) {
    const nlohmann::json types = cfg["layer_types"];
    PIPIT_TRY(check_layer_tensors(f, n_layer, [&](int64_t il) -> std::vector<const char*> {
      if (types[size_t(il)] == "linear_attention")
        return {"attn_norm.weight", "post_attention_norm.weight", "attn_qkv.weight", "attn_gate.weight",
                "ssm_beta.weight", "ssm_alpha.weight", "ssm_out.weight", "ssm_a", "ssm_dt.bias", "ssm_conv1d.weight",
                "ssm_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
      return {"attn_norm.weight", "post_attention_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
              "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight", "ffn_gate.weight", "ffn_up.weight",
              "ffn_down.weight"};
    }));
    const Qwen35Dims d{n_layer, cfg["linear_num_key_heads"].get<int64_t>(),
                       cfg["linear_num_value_heads"].get<int64_t>(), cfg["linear_key_head_dim"].get<int64_t>(),
                       cfg["linear_value_head_dim"].get<int64_t>()};
    for (auto& ti : f.tensors()) {
      PIPIT_ASSIGN_OR_RETURN(bool known, import_qwen35_tensor(f, ti, d, c));
      if (!known) c.notes.push_back("skipped unknown tensor '" + ti.name + "'");
    }
  } else if (arch->kind == ArchKind::kGptOss) {
    PIPIT_TRY(check_layer_tensors(f, n_layer, [](int64_t) -> std::vector<const char*> {
      return {"attn_norm.weight", "post_attention_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
              "attn_output.weight", "attn_sinks.weight", "ffn_gate_inp.weight", "ffn_gate_exps.weight",
              "ffn_up_exps.weight", "ffn_down_exps.weight"};
    }));
    PIPIT_TRY(import_gpt_oss_tensors(f, c));
  } else {
    for (auto& ti : f.tensors()) {
      if (ti.name == "rope_freqs.weight") continue;
      const std::string name = hf_name(ti.name, arch->kind);
      if (name.empty()) {
        if (arch->kind == ArchKind::kQwen3Moe && ti.ne.size() == 3) {
          PIPIT_ASSIGN_OR_RETURN(Tensor t, f.tensor(ti));
          if (split_experts(ti.name, t, c.tensors)) continue;
        }
        c.notes.push_back("skipped unknown tensor '" + ti.name + "'");
        continue;
      }
      PIPIT_ASSIGN_OR_RETURN(Tensor t, f.tensor(ti));
      if (arch->kind == ArchKind::kGemma3 && ti.name.size() > 11 &&
          ti.name.compare(ti.name.size() - 11, 11, "norm.weight") == 0) {
        PIPIT_ASSIGN_OR_RETURN(t, unshift_norm(t, ti.name));
      }
      const bool is_q = ti.name.find(".attn_q.") != std::string::npos;
      const bool is_k = ti.name.find(".attn_k.") != std::string::npos;
      if (arch->permuted_qk && (is_q || is_k)) {
        const int64_t heads = is_q ? n_head : n_head_kv;
        if (t.dim(0) != heads * head_dim)
          return Error::format("{}: {} has {} rows, expected {} heads x {}", ctx, ti.name, t.dim(0), heads,
                               head_dim);
        t = unpermute_rows(t, heads);
      }
      c.tensors[name] = t;
    }
  }
  if (arch->permuted_qk) c.notes.push_back("un-permuted llama.cpp q/k rows for HF rotate_half RoPE");

  attach_tokenizer(f, c);
  return c;
}

}  // namespace pipit
