// GGUF import: config from `{arch}.*` metadata, tensor names from llama.cpp's to HF's, permuted q/k rows restored,
// rope_freqs factors turned back into an HF rope_scaling (rope_type "llama3"). What an arch does beyond llama.cpp's
// generic llama-family layout is its GgufArch record (models/gguf_traits.h), registered beside its model. See
// gguf_import.h.
#include "convert/gguf_import.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#include "backends/cpu/kernels.h"
#include "core/limits.h"
#include "format/gguf_meta.h"
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// llama.cpp tensor name -> HF name in its generic llama-family layout: whole names, then per-layer suffixes of blk.N.
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

// "blk.12.attn_q.weight" -> "model.layers.12.self_attn.q_proj.weight"; "" for names we do not know. The arch's own
// per-layer names come first.
std::string hf_name(const std::string& g, const GgufArch& arch) {
  for (auto& [a, b] : kGlobalNames)
    if (g == a) return b;
  const auto layer = gguf_layer_name(g);
  if (!layer) return "";
  const std::string prefix = "model.layers." + layer->first + ".";
  for (auto& [a, b] : arch.layer_names)
    if (layer->second == a) return prefix + b;
  for (auto& [a, b] : kLayerNames)
    if (layer->second == a) return prefix + b;
  return "";
}

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

// HF's rope_type "llama3" per-frequency factors (llama.cpp convert_hf_to_gguf.py, as transformers'
// _compute_llama3_parameters): 1 where wavelen < old_ctx / high, factor where wavelen > old_ctx / low, a smooth
// blend between.
double rope_freqs_factor(double inv_freq, double factor, double low, double high, double old_ctx) {
  const double wavelen = 2 * M_PI / inv_freq;
  if (wavelen < old_ctx / high) return 1.0;
  if (wavelen > old_ctx / low) return factor;
  const double smooth = (old_ctx / wavelen - low) / (high - low);
  return 1.0 / ((1 - smooth) / factor + smooth);
}

double round_if_close(double v) { return std::fabs(v - std::round(v)) < 1e-3 ? std::round(v) : v; }

// Recovers {factor, low_freq_factor, high_freq_factor, original_max_position_embeddings} from the rope_freqs factors.
Result<nlohmann::json> rope_scaling_from_factors(const float* f, int64_t n, double theta, int64_t head_dim,
                                                   const std::string& ctx) {
  std::vector<double> inv(static_cast<size_t>(n));
  double factor = 1;
  for (int64_t i = 0; i < n; ++i) {
    inv[size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
    if (!(f[i] > 0) || !std::isfinite(f[i]))
      return Error::format("{}: rope_freqs[{}] = {} is not positive", ctx, i, f[i]);
    factor = std::max(factor, double(f[i]));
  }
  if (factor - 1 < 1e-6) return nlohmann::json();  // all ones: no scaling
  factor = round_if_close(factor);
  auto matches = [&](double low, double high, double old_ctx) {
    for (int64_t i = 0; i < n; ++i) {
      const double want = rope_freqs_factor(inv[size_t(i)], factor, low, high, old_ctx);
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


// The parts of import a family's hooks borrow from convert/ (models/ calls no kernel table).
class Tools final : public GgufTools {
 public:
  bool can_widen(DType d) const override { return ref_kernels().to_f32[int(d)] != nullptr; }
  Result<Tensor> widen_f32(const Tensor& t, const std::string& name) const override {
    const auto to_f32 = ref_kernels().to_f32[int(t.dtype())];
    if (!to_f32) return Error::unsupported("[gguf] {}: type {}", name, dtype_name(t.dtype()));
    Tensor w = Tensor::empty(DType::F32, t.shape());
    const int64_t n = t.dim(-1);
    for (int64_t r = 0; r < t.rows(); ++r) to_f32(t.row_ptr(r), w.ptr<float>() + r * n, n);
    return w;
  }
  // The GGUF vocabulary as an HF tokenizer's parts (texts only when asked: with_tokenizer_texts); a file without one
  // (tokenizer.ggml.model "none") keeps its reason.
  void attach_tokenizer(const GgufFile& f, Checkpoint& c) const override {
    if (auto tok = gguf_tokenizer_parts(f); tok.is_ok()) {
      c.tokenizer_parts = std::move(tok).value();
    } else {
      c.tokenizer_error = tok.status().message();
      c.notes.push_back("no tokenizer: " + c.tokenizer_error);
    }
  }
  std::vector<int64_t> eog_ids(const GgufFile& f, int64_t n_vocab) const override {
    return gguf_vocab_eog_ids(f, n_vocab);
  }
};

// llama.cpp stores a layer's experts stacked: blk.N.ffn_{gate,up,down}_exps [n_expert, rows, cols]. The MoE block
// reads HF's per-expert matrices; each is a view of its slice of the stacked tensor (no copy).
bool split_experts(const std::string& gname, const Tensor& t, std::map<std::string, Tensor>& out) {
  static const std::pair<const char*, const char*> kExps[] = {
      {".ffn_gate_exps.weight", "gate_proj"},
      {".ffn_up_exps.weight", "up_proj"},
      {".ffn_down_exps.weight", "down_proj"}};
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

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

const GgufTools& gguf_tools() {
  static const Tools tools;
  return tools;
}

Result<Checkpoint> import_gguf(const GgufFile& f) {
  const std::string ctx = "[gguf] " + f.path();
  Checkpoint c;
  c.path = f.path();
  c.format = "gguf";
  const GgufValue* av = f.find("general.architecture");
  if (!av || av->type != GgufType::kString) return Error::format("{}: no general.architecture string", ctx);
  const GgufArch* arch = find_gguf_arch(av->s);
  if (!arch)
    return Error::unsupported("{}: architecture '{}' is not supported ({} are)", ctx, av->s,
                              joined(gguf_arch_names()));
  const GgufTools& tools = gguf_tools();
  GgufMeta m(f, arch->gguf);
  if (arch->import) return arch->import(m, *arch, tools);

  PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, m.get_int("embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, m.get_int("block_count"));
  if (arch->decoder_layers) {
    PIPIT_ASSIGN_OR_RETURN(n_layer, arch->decoder_layers(m, n_layer));
  }
  // a MoE model may have no dense width (its experts' is expert_feed_forward_length)
  PIPIT_ASSIGN_OR_RETURN(int64_t n_ff, arch->optional_ffn ? m.get_int_or("feed_forward_length", 0)
                                                          : m.get_int("feed_forward_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, m.get_int("attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head_kv, m.get_int_or("attention.head_count_kv", n_head));
  if (n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv)
    return Error::format("{}: head_count {} / head_count_kv {} are not a valid GQA layout", ctx, n_head, n_head_kv);
  PIPIT_ASSIGN_OR_RETURN(int64_t head_dim, m.get_int_or("attention.key_length", n_embd / n_head));
  PIPIT_ASSIGN_OR_RETURN(int64_t v_dim, m.get_int_or("attention.value_length", head_dim));
  PIPIT_ASSIGN_OR_RETURN(int64_t rope_dim, m.get_int_or("rope.dimension_count", head_dim));
  if (v_dim != head_dim) return Error::unsupported("{}: value_length {} != key_length {}", ctx, v_dim, head_dim);
  if (rope_dim != head_dim && !arch->partial_rope)  // an arch with partial RoPE reads it in its config hook
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
      st && st->type == GgufType::kString && st->s != "none" && !arch->own_rope_scaling) {
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
    PIPIT_ASSIGN_OR_RETURN(auto scaling, rope_scaling_from_factors(t.ptr<float>(), t.numel(), theta, head_dim, ctx));
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
  // per-layer lists are built by the arch's hook, before the config's sizes are checked (HfConfig::validate_sizes)
  if (n_layer > Limits::kMaxLayers)
    return Error::format("{}: block_count {} is over the maximum of {}", ctx, n_layer, Limits::kMaxLayers);
  const GgufArchInput in{f, m, tools, n_layer, n_embd, n_head, n_head_kv, head_dim};
  if (arch->config) PIPIT_TRY(arch->config(in, cfg, c.notes));
  c.config = cfg;

  if (arch->tensors) {
    PIPIT_TRY(arch->tensors(in, c));
  } else {
    for (auto& ti : f.tensors()) {
      if (ti.name == "rope_freqs.weight") continue;
      const std::string name = hf_name(ti.name, *arch);
      if (name.empty()) {
        if (arch->stacked_experts && ti.ne.size() == 3) {
          PIPIT_ASSIGN_OR_RETURN(Tensor t, f.tensor(ti));
          if (split_experts(ti.name, t, c.tensors)) continue;
        }
        c.notes.push_back("skipped unknown tensor '" + ti.name + "'");
        continue;
      }
      PIPIT_ASSIGN_OR_RETURN(Tensor t, f.tensor(ti));
      if (arch->shifted_norms && ti.name.size() > 11 &&
          ti.name.compare(ti.name.size() - 11, 11, "norm.weight") == 0) {
        PIPIT_ASSIGN_OR_RETURN(t, gguf_unshift_norm(t, ti.name));
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

  tools.attach_tokenizer(f, c);
  return c;
}

}  // namespace pipit
