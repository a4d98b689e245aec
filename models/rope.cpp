// RoPE inverse frequencies, in float32 as HF computes them.
#include "models/rope.h"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace pipit {

namespace {

// YaRN. reference: HF modeling_rope_utils.py _compute_yarn_parameters (v4.55+, with `truncate`). The correction
// range [low, high] of dimensions between interpolation and extrapolation is floored/ceiled only when `truncate`
// is true (the default); GPT-OSS ships truncate = false and keeps the fractional range (llama.cpp always rounds it:
// ggml_rope_yarn_corr_dims). Scalars are Python floats (double) as in HF; the tensor arithmetic is float32, so the
// scalars are rounded to float where they meet a tensor.
Result<RopeSpec> yarn(const HfConfig& cfg, const HfConfig& sc, double theta, int64_t dim, RopeSpec r) {
  const double max_pos = double(cfg.get_int_or("max_position_embeddings", 0));
  const double omax = sc.has("original_max_position_embeddings")
                          ? double(sc.get_int_or("original_max_position_embeddings", 0)) : max_pos;
  double factor = sc.get_float_or("factor", 0.0);
  if (factor <= 0.0 && omax > 0.0) factor = max_pos / omax;
  if (factor <= 0.0 || omax <= 0.0 || theta <= 1.0)
    return Error::invalid_argument("[rope] yarn needs a positive factor and original_max_position_embeddings (got "
                                   "factor {}, original_max_position_embeddings {})", factor, omax);
  auto get_mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  double attention_factor;
  if (sc.has("attention_factor")) {
    PIPIT_ASSIGN_OR_RETURN(attention_factor, sc.get_float("attention_factor"));
  } else {
    const double mscale = sc.get_float_or("mscale", 0.0), mscale_all = sc.get_float_or("mscale_all_dim", 0.0);
    attention_factor = mscale != 0.0 && mscale_all != 0.0 ? get_mscale(factor, mscale) / get_mscale(factor, mscale_all)
                                                          : get_mscale(factor, 1.0);
  }
  const double beta_fast = sc.get_float_or("beta_fast", 0.0) != 0.0 ? sc.get_float_or("beta_fast", 32.0) : 32.0;
  const double beta_slow = sc.get_float_or("beta_slow", 0.0) != 0.0 ? sc.get_float_or("beta_slow", 1.0) : 1.0;
  const double pi = 3.14159265358979323846;
  auto correction_dim = [&](double rot) { return double(dim) * std::log(omax / (rot * 2 * pi)) / (2 * std::log(theta)); };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (sc.get_bool_or("truncate", true)) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // HF linear_ramp_factor: no division by zero
  const float flow = float(low), frange = float(high - low), ffactor = float(factor);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float pos_freq = std::pow(float(theta), float(2 * i) / float(dim));  // as the default inv_freq's base
    const float extrapolation = 1.0f / pos_freq, interpolation = 1.0f / (ffactor * pos_freq);
    const float ramp = std::clamp((float(i) - flow) / frange, 0.0f, 1.0f);
    const float extra_factor = 1.0f - ramp;
    r.inv_freq[size_t(i)] = interpolation * (1.0f - extra_factor) + extrapolation * extra_factor;
  }
  r.attention_factor = float(attention_factor);
  return r;
}

}  // namespace

nlohmann::json rope_parameters_of(const HfConfig& cfg, const char* layer_type) {
  if (!cfg.has("rope_parameters")) return nullptr;
  const nlohmann::json& p = cfg.json()["rope_parameters"];
  if (p.is_object() && p.contains(layer_type) && p[layer_type].is_object()) return p[layer_type];
  if (p.is_object() && (p.contains("full_attention") || p.contains("sliding_attention"))) return nullptr;
  return p;
}

namespace {

Result<RopeSpec> rope_from_config_unchecked(const HfConfig& cfg, int64_t rot_dim, const char* theta_key,
                                            bool with_scaling) {
  RopeSpec r;
  const bool local = std::string_view(theta_key) == "rope_local_base_freq";
  const nlohmann::json params = rope_parameters_of(cfg, local ? "sliding_attention" : "full_attention");
  if (!params.is_null() && !params.is_object())
    return Error::invalid_argument("[rope] rope_parameters must be an object, got {}", params.dump());
  double theta = 10000.0;
  if (cfg.has(theta_key)) {  // "1e4" is an error, not a silent 10000
    PIPIT_ASSIGN_OR_RETURN(theta, cfg.get_float(theta_key));
  }
  if (params.is_object() && params.contains("rope_theta")) {
    if (!params["rope_theta"].is_number())
      return Error::invalid_argument("[rope] rope_parameters.rope_theta must be a number");
    theta = params["rope_theta"].get<double>();
  }
  // theta 0, negative, tiny or huge makes every frequency 0, inf or NaN, and so every logit NaN
  if (!(std::isfinite(theta) && theta > 1.0 && theta <= 1e12))
    return Error::invalid_argument("[rope] {} is {}; a RoPE base must be a finite number in (1, 1e12]", theta_key,
                                   theta);
  if (rot_dim <= 0 || rot_dim % 2) return Error::invalid_argument("[rope] rotary dimension {} must be even", rot_dim);
  // HF: 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), computed in float32
  for (int64_t i = 0; i < rot_dim; i += 2) {
    float expo = float(i) / float(rot_dim);
    r.inv_freq.push_back(1.0f / std::pow(float(theta), expo));
  }
  if (!with_scaling) return r;
  if (params.is_null() && !cfg.has("rope_scaling")) return r;
  const auto& s = params.is_object() ? params : cfg.json()["rope_scaling"];
  if (!s.is_object()) return Error::invalid_argument("[rope] rope_scaling must be an object or null");
  HfConfig sc(s);
  std::string type = sc.get_string_or("rope_type", sc.get_string_or("type", "default"));
  if (sc.has("mrope_section")) {  // Qwen2-VL: frequencies split into (t, h, w) sections
    const auto& ms = sc.json()["mrope_section"];
    int64_t total = 0;
    if (!ms.is_array() || ms.size() != 3) return Error::invalid_argument("[rope] mrope_section must list 3 sizes");
    for (size_t k = 0; k < 3; ++k) {
      if (!ms[k].is_number_integer() || ms[k].get<int64_t>() < 0)
        return Error::invalid_argument("[rope] mrope_section {} must hold non-negative integers", ms.dump());
      for (int64_t i = 0; i < ms[k].get<int64_t>(); ++i) r.mrope_stream.push_back(uint8_t(k));
      total += ms[k].get<int64_t>();
    }
    if (total != int64_t(r.inv_freq.size()))
      return Error::invalid_argument("[rope] mrope_section {} sums to {}, expected rotary dim / 2 = {}", ms.dump(),
                                     total, r.inv_freq.size());
    if (sc.get_bool_or("mrope_interleaved", false)) {
      // Qwen3-VL (apply_interleaved_mrope): frequency i turns with h when i % 3 == 1 and i < 3 * section[1], with
      // w when i % 3 == 2 and i < 3 * section[2], else with t; the sizes still count each stream's frequencies
      const int64_t sh = ms[1].get<int64_t>(), sw = ms[2].get<int64_t>();
      for (int64_t i = 0; i < total; ++i)
        r.mrope_stream[size_t(i)] = i % 3 == 1 && i < 3 * sh ? 1 : i % 3 == 2 && i < 3 * sw ? 2 : 0;
    }
    if (type == "mrope") type = "default";  // HF maps the old "type": "mrope" to the default rope
  }
  if (type == "default") return r;
  if (type == "proportional") {
    // Gemma 4's full-attention layers (HF _compute_proportional_rope_parameters): the first
    // int(partial_rotary_factor * rot_dim // 2) frequencies of the default RoPE over the whole rot_dim (exponent
    // denominator rot_dim, not the rotated part), the rest 0 (those dim pairs do not turn), all divided by factor.
    const double prf = sc.get_float_or("partial_rotary_factor", 1.0), factor = sc.get_float_or("factor", 1.0);
    if (!(prf > 0.0 && prf <= 1.0) || !(factor > 0.0))
      return Error::invalid_argument("[rope] proportional RoPE needs partial_rotary_factor in (0, 1] and factor > 0 "
                                     "(got {}, {})", prf, factor);
    const size_t a = size_t(std::floor(prf * double(rot_dim) / 2.0));
    for (size_t i = 0; i < r.inv_freq.size(); ++i) r.inv_freq[i] = i < a ? r.inv_freq[i] / float(factor) : 0.0f;
    return r;
  }
  if (type == "linear") {
    PIPIT_ASSIGN_OR_RETURN(double factor, sc.get_float("factor"));
    for (auto& f : r.inv_freq) f = f / float(factor);
    return r;
  }
  if (type == "llama3") {
    PIPIT_ASSIGN_OR_RETURN(double factor, sc.get_float("factor"));
    PIPIT_ASSIGN_OR_RETURN(double low, sc.get_float("low_freq_factor"));
    PIPIT_ASSIGN_OR_RETURN(double high, sc.get_float("high_freq_factor"));
    PIPIT_ASSIGN_OR_RETURN(int64_t old_ctx, sc.get_int("original_max_position_embeddings"));
    const float low_wavelen = float(old_ctx) / float(low), high_wavelen = float(old_ctx) / float(high);
    const float pi = 3.14159265358979323846f;
    for (auto& f : r.inv_freq) {
      const float wavelen = 2 * pi / f;
      // long wavelengths are scaled by 1/factor, short ones kept, the band between smoothly interpolated
      float scaled = wavelen > low_wavelen ? f / float(factor) : f;
      const float smooth = (float(old_ctx) / wavelen - float(low)) / float(high - low);
      const float smoothed = (1 - smooth) * scaled / float(factor) + smooth * scaled;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : scaled;
    }
    return r;
  }
  if (type == "yarn") return yarn(cfg, sc, theta, rot_dim, std::move(r));
  return Error::unsupported("[rope] rope_scaling type '{}' is not supported (default, linear, llama3, yarn, proportional are)", type);
}

}  // namespace

// Whatever the scaling type and its factors (linear factor 0, llama3 low_freq_factor = high_freq_factor, a yarn
// mscale of -1e30), the frequencies and the attention factor that come out must be finite numbers, or every logit is
// NaN: checked once here for all of them.
Result<RopeSpec> rope_from_config(const HfConfig& cfg, int64_t rot_dim, const char* theta_key, bool with_scaling) {
  PIPIT_ASSIGN_OR_RETURN(RopeSpec r, rope_from_config_unchecked(cfg, rot_dim, theta_key, with_scaling));
  for (size_t i = 0; i < r.inv_freq.size(); ++i)
    if (!std::isfinite(r.inv_freq[i]) || r.inv_freq[i] < 0)
      return Error::invalid_argument("[rope] the rope_scaling factors give frequency {} = {} (expected a finite, "
                                     "non-negative number): check rope_scaling", i, r.inv_freq[i]);
  if (!std::isfinite(r.attention_factor) || r.attention_factor <= 0)
    return Error::invalid_argument("[rope] the rope_scaling factors give an attention factor of {} (expected a "
                                   "finite, positive number): check rope_scaling", r.attention_factor);
  return r;
}

}  // namespace pipit
