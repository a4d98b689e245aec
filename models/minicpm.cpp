// MiniCPM (model_type minicpm: MiniCPM-1B/2B, MiniCPM4/4.1; openbmb's remote code, MiniCPMForCausalLM): the Llama
// graph with muP-style scales and MiniCPM's own LongRoPE.
//   * h0 = embed(ids) * scale_emb;
//   * every residual branch (attention, MLP) is multiplied by scale_depth / sqrt(num_hidden_layers) before the add;
//   * logits = lm_head(norm(h) / (hidden_size / dim_model_base));
//   * rope_scaling {"rope_type"/"type": "longrope"} (MiniCPMLongRoPE): angle(t, i) = t / ext[i] * inv_freq[i] and
//     cos/sin multiplied by sqrt(1 + ln(max_pos / original_max) / ln(original_max)), where ext is long_factor when
//     max_position_embeddings > original_max_position_embeddings, else short_factor.
// reference: openbmb modeling_minicpm.py (MiniCPMLongRoPE._set_cos_sin_cache, MiniCPMDecoderLayer, MiniCPMModel,
// MiniCPMForCausalLM); ../shared/testdata/reference/minicpm.py.
//
// Which factor list: the remote code builds its cos/sin table once, at init, for max_position_embeddings positions,
// and picks the list from that table length — not from the length of the sequence being run (HF's own "longrope" of
// Phi-3 switches per sequence length; llama.cpp picks by its runtime context size and leaves out the cos/sin
// factor). The table is only rebuilt for a sequence longer than the table, which pipit refuses (positions past
// max_position_embeddings are an error naming it), so every position pipit accepts gets exactly the remote code's
// angle and scale.
#include <cmath>

#include "models/llama.h"

namespace pipit {

namespace {

Result<std::vector<double>> factor_list(const HfConfig& rs, const char* key, size_t n) {
  if (!rs.has(key) || !rs.json()[key].is_array())
    return Error::invalid_argument("[minicpm] rope_scaling.{} must be a list of {} numbers (longrope)", key, n);
  const auto& v = rs.json()[key];
  if (v.size() != n)
    return Error::invalid_argument("[minicpm] rope_scaling.{} has {} entries, expected head_dim / 2 = {}", key,
                                   v.size(), n);
  std::vector<double> out;
  for (const auto& x : v) {
    if (!x.is_number() || !(x.get<double>() > 0))
      return Error::invalid_argument("[minicpm] rope_scaling.{} entry {} must be a positive number", key, x.dump());
    out.push_back(x.get<double>());
  }
  return out;
}

Result<std::unique_ptr<Model>> make_minicpm(const HfConfig& cfg, const WeightSource& w) {
  if (cfg.has("sparse_config"))
    return Error::unsupported("[minicpm] sparse_config (MiniCPM4's InfLLM-v2 sparse attention) is not supported");
  if (cfg.get_bool_or("attention_bias", false))
    return Error::unsupported("[minicpm] attention_bias = true is not supported");
  const std::string act = cfg.get_string_or("hidden_act", "silu");
  if (act != "silu") return Error::unsupported("[minicpm] hidden_act '{}' (only silu is supported)", act);
  if (cfg.get_int_or("pretraining_tp", 1) != 1)
    return Error::unsupported("[minicpm] pretraining_tp {} (only 1 is supported)", cfg.get_int_or("pretraining_tp", 1));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_embd, cfg.get_int("hidden_size"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, cfg.get_int("num_hidden_layers"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, cfg.get_int("num_attention_heads"));
  if (n_embd <= 0 || n_layer <= 0 || n_head <= 0 || n_embd % n_head)
    return Error::invalid_argument("[minicpm] hidden_size {} must be a positive multiple of num_attention_heads {} "
                                   "(layers {})", n_embd, n_head, n_layer);
  // MiniCPMAttention: head_dim = hidden_size // num_heads (a "head_dim" field is not read)
  const int64_t head_dim = n_embd / n_head;
  const int64_t max_pos = cfg.get_int_or("max_position_embeddings", 2048);
  if (max_pos <= 0) return Error::invalid_argument("[minicpm] max_position_embeddings {} must be positive", max_pos);

  LlamaOptions opt;
  // MiniCPMConfig defaults: scale_emb 1, scale_depth 1, dim_model_base 1. The products are taken in double and then
  // used as float32 scalars, as torch multiplies a float32 tensor by a Python float.
  const double scale_emb = cfg.get_float_or("scale_emb", 1.0);
  const double scale_depth = cfg.get_float_or("scale_depth", 1.0);
  const double dim_model_base = cfg.get_float_or("dim_model_base", 1.0);
  if (!(dim_model_base > 0)) return Error::invalid_argument("[minicpm] dim_model_base {} must be positive", dim_model_base);
  opt.embd_scale = float(scale_emb);
  opt.residual_scale = float(scale_depth / std::sqrt(double(n_layer)));
  // HF divides the normed hidden state by hidden/dim_model_base before lm_head; pipit scales the logits instead (the
  // head is linear: equal up to one rounding, exact when the ratio is a power of two as in every MiniCPM config)
  opt.logit_scale = float(dim_model_base / double(n_embd));
  opt.max_pos = max_pos;

  // RoPE: the base frequencies as Llama's; LongRoPE divides them by the chosen factors and scales cos/sin
  nlohmann::json base = cfg.json();
  base.erase("rope_scaling");
  base.erase("rope_parameters");
  PIPIT_ASSIGN_OR_RETURN(RopeSpec rope, rope_from_config(HfConfig(base), head_dim));
  if (cfg.has("rope_scaling")) {
    if (!cfg.json()["rope_scaling"].is_object())
      return Error::invalid_argument("[minicpm] rope_scaling must be an object or null");
    HfConfig rs(cfg.json()["rope_scaling"]);
    const std::string type = rs.get_string_or("rope_type", rs.get_string_or("type", ""));
    if (type != "longrope")
      return Error::unsupported("[minicpm] rope_scaling type '{}' is not supported (longrope is)", type);
    PIPIT_ASSIGN_OR_RETURN(int64_t orig, rs.get_int("original_max_position_embeddings"));
    if (orig <= 1) return Error::invalid_argument("[minicpm] original_max_position_embeddings {} must be > 1", orig);
    const size_t n = rope.inv_freq.size();
    PIPIT_ASSIGN_OR_RETURN(auto long_f, factor_list(rs, "long_factor", n));
    PIPIT_ASSIGN_OR_RETURN(auto short_f, factor_list(rs, "short_factor", n));
    const std::vector<double>& ext = max_pos > orig ? long_f : short_f;
    // remote code: torch.outer(t, 1.0 / ext) * inv_freq, in float32; (t * (1/e)) * f and t * (f * (1/e)) differ by
    // at most a rounding of the angle, far below the golden tolerance at any position a table holds
    for (size_t i = 0; i < n; ++i) rope.inv_freq[i] = rope.inv_freq[i] * (1.0f / float(ext[i]));
    const double scale = double(max_pos) / double(orig);
    rope.attention_factor = float(std::sqrt(1.0 + std::log(scale) / std::log(double(orig))));
    if (!std::isfinite(rope.attention_factor) || !(rope.attention_factor > 0))
      return Error::invalid_argument("[minicpm] LongRoPE scaling factor sqrt(1 + ln({}/{}) / ln({})) is not a "
                                     "positive number", max_pos, orig, orig);
  }
  opt.rope = rope;

  nlohmann::json j = cfg.json();
  j["head_dim"] = head_dim;
  if (!cfg.has("tie_word_embeddings")) j["tie_word_embeddings"] = true;  // MiniCPMConfig default
  return make_llama_like(HfConfig(j), w, opt);
}

}  // namespace

PIPIT_REGISTER_MODEL("minicpm", make_minicpm);

}  // namespace pipit
