// Recipe parsing, glob matching and the per-tensor plan (see recipe.h for the rules).
#include "convert/recipe.h"

#include "backends/cpu/kernels.h"
#include "core/json_depth.h"
#include "core/storage.h"
#include "models/recipe_rules.h"

#include <algorithm>

namespace pipit {

namespace {

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool is_weight(DType t) { return is_float(t) || dtype_is_quantized(t); }

// 16-bit float for tensors kept unquantized: bf16 stays bf16 (lossless), anything else f16.
DType half_of(DType src) { return src == DType::BF16 ? DType::BF16 : DType::F16; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool glob_match(std::string_view p, std::string_view s) {
  // iterative wildcard match with one backtrack point (the last '*'): linear in practice, no recursion
  size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi, ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

Result<std::string> canonical_quant(const std::string& s) {
  if (s == "q8" || s == "q8_0") return std::string("q8_0");
  if (s == "q4" || s == "q4_0") return std::string("q4_0");
  if (s == "f32" || s == "f16" || s == "bf16" || s == "auto" || s == "source") return s;
  // llama.cpp's K-quant mixes; like llama-quantize, "q4_k" / "q5_k" name the _M mixes
  if (s == "q4_k" || s == "q4_k_m") return std::string("q4_k_m");
  if (s == "q5_k" || s == "q5_k_m") return std::string("q5_k_m");
  if (s == "q4_k_s" || s == "q5_k_s" || s == "q6_k") return s;
  return Error::invalid_argument(
      "[convert] unknown type '{}' (expected f32, f16, bf16, q8, q4, q4_k_m, q4_k_s, q5_k_m, q5_k_s, q6_k{})", s,
      s.empty() ? "" : ", auto");
}

bool is_kquant_mix(const std::string& q) {
  return q == "q4_k_m" || q == "q4_k_s" || q == "q5_k_m" || q == "q5_k_s" || q == "q6_k";
}

namespace {

// llama.cpp's use_more_bits (llama-quant.cpp): the first and last eighth of the layers, and every third layer
// between, get the larger type under the _M mixes.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// Layer index of "model.layers.N.<suffix>" (or a VLM's "model.language_model.layers.N.<suffix>"), -1 otherwise.
int64_t layer_of(const std::string& name, const std::string& suffix) {
  if (!ends_with(name, "." + suffix)) return -1;
  const size_t at = name.rfind(".layers.", name.size() - suffix.size() - 1);
  if (at == std::string::npos) return -1;
  const size_t b = at + 8, e = name.size() - suffix.size() - 1;
  if (b >= e) return -1;
  int64_t v = 0;
  for (size_t i = b; i < e; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

// The dtype a K-quant mix gives a 2-D weight that no earlier rule decided (llama_tensor_get_type for the llama-like
// architectures without experts): the base type, and under _M the value projection and the FFN down projection of
// the layers use_more_bits picks get q6_K; under q4_k_s the first 4 value projections and the first eighth of the
// down projections get q5_K.
DType kquant_mix_type(const std::string& q, const std::string& name, int64_t n_layers) {
  const DType base = q == "q6_k" ? DType::Q6_K : (q == "q5_k_m" || q == "q5_k_s") ? DType::Q5_K : DType::Q4_K;
  const int64_t v = layer_of(name, "self_attn.v_proj.weight"), down = layer_of(name, "mlp.down_proj.weight");
  if (q == "q4_k_m" || q == "q5_k_m") {
    if (v >= 0 && use_more_bits(v, n_layers)) return DType::Q6_K;
    if (down >= 0 && use_more_bits(down, n_layers)) return DType::Q6_K;
  } else if (q == "q4_k_s") {
    if (v >= 0 && v < 4) return DType::Q5_K;
    if (down >= 0 && down < n_layers / 8) return DType::Q5_K;
  }
  return base;
}

// llama.cpp's tensor_type_fallback for rows that are not whole 256-weight super-blocks.
DType kquant_fallback(DType t) {
  switch (t) {
    case DType::Q4_K: return DType::Q5_0;
    case DType::Q5_K: return DType::Q5_1;
    case DType::Q6_K: return DType::Q8_0;
    case DType::Q2_K: case DType::Q3_K: return DType::Q4_0;
    case DType::IQ4_XS: return DType::IQ4_NL;
    default: return t;
  }
}

// A family's rule (models/recipe_rules.h) as a glob list for the description: "model.tower.*, *.proj.weight".
std::string family_rule_names(const FamilyRecipeRule& r) {
  std::string s;
  auto add = [&](const std::string& glob) { s += (s.empty() ? "" : ", ") + glob; };
  for (const auto& p : r.prefix) add(p + "*");
  for (const auto& p : r.suffix) add("*" + p);
  for (const auto& p : r.contains) add("*" + p + "*");
  return s;
}

std::string family_rule_gives(RuleGives g) {
  switch (g) {
    case RuleGives::kQ8_0: return "q8_0";
    case RuleGives::kSource: return "source dtype";
    case RuleGives::kHalf: return "bf16 if the source is bf16, else f16";
    case RuleGives::kMxfp4: return "mxfp4";
  }
  return "?";
}

// The dtype name a family rule asks for ("source": the tensor's own).
std::string family_dtype(const FamilyRecipeRule& r, DType src) {
  switch (r.gives) {
    case RuleGives::kQ8_0: return "q8_0";
    case RuleGives::kSource: return "source";
    case RuleGives::kHalf: return std::string(dtype_name(half_of(src)));
    case RuleGives::kMxfp4: return "mxfp4";
  }
  return "source";
}

bool applies_under(const FamilyRecipeRule& r, const std::string& q) {
  return std::find(r.quants.begin(), r.quants.end(), q) != r.quants.end();
}

// The lines describing the family rules that apply under `q`: those of `model_type`, or every registered one
// (with the model types it is registered for) when `model_type` is empty.
void describe_family_rules(const std::string& q, const std::string& model_type, std::vector<std::string>& d) {
  for (const FamilyRecipeRules* set : all_family_recipe_rules()) {
    const auto& types = set->model_types;
    if (!model_type.empty() && std::find(types.begin(), types.end(), model_type) == types.end()) continue;
    std::string who;
    if (model_type.empty())
      for (const auto& t : types) who += (who.empty() ? " [" : ", ") + t;
    if (!who.empty()) who += "]";
    for (const FamilyRecipeRule& r : set->rules) {
      if (!applies_under(r, q)) continue;
      std::string only;
      for (const auto& w : r.only_with) only += (only.empty() ? "" : " or ") + ("*" + w + "*");
      d.push_back(r.label + who + " (" + (r.ndim ? std::to_string(r.ndim) + "-D " : std::string()) +
                  family_rule_names(r) + (only.empty() ? "" : " in a checkpoint with " + only) + ") -> " +
                  family_rule_gives(r.gives));
    }
  }
}

}  // namespace

Result<Recipe> Recipe::parse(const std::string& text, const std::string& origin) {
  const std::string ctx = "[recipe] " + origin;
  if (json_depth(text) > kMaxJsonDepth)
    return Error::format("{}: JSON nested deeper than {} levels", ctx, kMaxJsonDepth);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("rules") || !j["rules"].is_array())
    return Error::format("{}: expected a JSON object {\"rules\": [{\"pattern\": ..., \"dtype\": ...}, ...]}", ctx);
  Recipe r;
  for (size_t i = 0; i < j["rules"].size(); ++i) {
    const auto& e = j["rules"][i];
    if (!e.is_object() || !e.contains("pattern") || !e.contains("dtype") || !e["pattern"].is_string() ||
        !e["dtype"].is_string())
      return Error::format("{}: rules[{}] needs string 'pattern' and 'dtype'", ctx, i);
    const std::string want = e["dtype"].get<std::string>();
    DType block;
    if (want != "q4_0" && want != "q8_0" && dtype_from_name(want, &block) && dtype_is_quantized(block) &&
        !dtype_is_panel(block) && block != DType::Q8_K && ref_kernels().from_f32[int(block)]) {
      r.rules.push_back({e["pattern"].get<std::string>(), want});  // q4_k, q5_k, q6_k, q4_1, q5_0, q5_1
      continue;
    }
    auto d = canonical_quant(want);
    if (!d || *d == "auto" || is_kquant_mix(*d))
      return Error::format("{}: rules[{}]: unknown dtype '{}' (f32, f16, bf16, q8, q4, q4_k, q5_k, q6_k, q4_1, "
                           "q5_0, q5_1, source)", ctx, i, want);
    r.rules.push_back({e["pattern"].get<std::string>(), *d});
  }
  return r;
}

Result<Recipe> Recipe::load(const std::string& path) {
  constexpr size_t kMaxRecipeFile = size_t(1) << 20;  // a recipe is a list of glob rules: 1 MiB is ~20k of them
  Result<std::string> text = read_file(path, kMaxRecipeFile);
  if (!text) return text.status().with_context("[recipe]");
  return parse(*text, path);
}

std::vector<std::string> default_rule_descriptions(const std::string& q, const std::string& model_type) {
  if (q == "auto") return {"* -> source dtype (auto)"};
  if (is_kquant_mix(q)) {
    const std::string base = q == "q6_k" ? "q6_k" : q.substr(0, 4);
    std::vector<std::string> d = {
        "1-D tensors (norms, biases) -> f32",
        "output head (lm_head.weight, or the tied embedding) -> q6_k (q8_0 when its rows are not whole 256-blocks)",
    };
    describe_family_rules(q, model_type, d);
    if (q == "q4_k_m" || q == "q5_k_m")
      d.push_back("self_attn.v_proj / mlp.down_proj of layer i -> q6_k when use_more_bits(i, n_layers): i < n/8, "
                  "i >= 7n/8 or (i - n/8) % 3 == 2 (llama.cpp's " + std::string(q == "q4_k_m" ? "Q4_K_M" : "Q5_K_M") +
                  ")");
    if (q == "q4_k_s") d.push_back("self_attn.v_proj of layers < 4 and mlp.down_proj of layers < n/8 -> q5_k (Q4_K_S)");
    d.push_back("* (the embedding included) -> " + base);
    d.push_back("fallback (llama.cpp's): rows not whole 256-blocks: q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0; rows "
                "not whole 32-blocks -> bf16 if the source is bf16, else f16");
    return d;
  }
  const bool quant = q == "q8_0" || q == "q4_0";
  std::vector<std::string> d = {
      "1-D tensors (norms, biases) and biases (*.bias, *_bias) -> f32",
      "mxfp4 tensors -> kept mxfp4",
      std::string("output head (lm_head.weight, or the tied embedding) -> ") + (q == "q4_0" ? "q8_0" : q),
      std::string("model.embed_tokens.weight -> ") + (quant ? "bf16 if the source is bf16, else f16" : q),
  };
  describe_family_rules(q, model_type, d);
  d.push_back("* -> " + q);
  d.push_back("fallback: a quantized type on a tensor that is not 2-D (nor stacked experts [E, out, in], "
              "*.experts.*) or whose input dim is not a multiple of 32 -> bf16 if the source is bf16, else f16 (f32 "
              "for 1-D)");
  return d;
}

Result<std::vector<TensorPlan>> plan_conversion(const Checkpoint& c, const std::string& q, const Recipe& user) {
  const bool quant = q == "q8_0" || q == "q4_0";
  const bool mix = is_kquant_mix(q);
  const bool tied = !c.tensors.count("lm_head.weight");
  // the rules of the checkpoint's family (models/recipe_rules.h, registered beside the model) that apply under q in
  // this checkpoint (a rule that needs some tensor, e.g. the experts, is dropped when none has that name)
  const nlohmann::json mt = c.config.is_object() ? c.config.value("model_type", nlohmann::json()) : nlohmann::json();
  std::vector<const FamilyRecipeRule*> family;
  for (const FamilyRecipeRule* r : family_recipe_rules(mt.is_string() ? mt.get<std::string>() : std::string())) {
    bool present = r->only_with.empty();
    for (auto it = c.tensors.begin(); !present && it != c.tensors.end(); ++it)
      for (const auto& w : r->only_with) present |= it->first.find(w) != std::string::npos;
    if (present && applies_under(*r, q)) family.push_back(r);
  }
  auto family_rule = [&](const std::string& name, const Tensor& t) -> const FamilyRecipeRule* {
    for (const FamilyRecipeRule* r : family) {
      if (r->ndim && t.ndim() != r->ndim) continue;
      for (const auto& p : r->prefix)
        if (name.rfind(p, 0) == 0) return r;
      for (const auto& p : r->suffix)
        if (ends_with(name, p)) return r;
      for (const auto& p : r->contains)
        if (name.find(p) != std::string::npos) return r;
    }
    return nullptr;
  };
  int64_t n_layers = 0;  // for the mixes' per-layer rules: the config's, else the highest layer index seen + 1
  if (c.config.contains("num_hidden_layers") && c.config["num_hidden_layers"].is_number_integer())
    n_layers = c.config["num_hidden_layers"].get<int64_t>();
  if (c.config.contains("text_config") && c.config["text_config"].is_object() &&
      c.config["text_config"].contains("num_hidden_layers") &&
      c.config["text_config"]["num_hidden_layers"].is_number_integer())
    n_layers = c.config["text_config"]["num_hidden_layers"].get<int64_t>();
  if (n_layers <= 0)
    for (auto& [name, t] : c.tensors)
      n_layers = std::max(n_layers, layer_of(name, "self_attn.v_proj.weight") + 1);
  // stacked MoE experts ([E, out, in], the HF convention names them *.experts.*) are matrices too: quantized row by
  // row like a 2-D weight
  auto matrix = [](const std::string& name, const Tensor& t) {
    return t.ndim() == 2 || (t.ndim() == 3 && name.find(".experts.") != std::string::npos);
  };
  std::vector<TensorPlan> plans;
  for (auto& [name, t] : c.tensors) {
    TensorPlan p;
    p.name = name;
    p.src = t.dtype();
    p.shape = t.shape();
    std::string want;
    for (auto& r : user.rules)
      if (glob_match(r.pattern, name)) {
        want = r.dtype;
        p.rule = "recipe: " + r.pattern + " -> " + r.dtype;
        break;
      }
    if (want.empty()) {
      const bool head = name == "lm_head.weight" || (tied && ends_with(name, "embed_tokens.weight"));
      if (q == "auto" || !is_weight(p.src)) {
        want = "source", p.rule = is_weight(p.src) ? "auto: source dtype" : "non-weight dtype kept";
      } else if (p.src == DType::MXFP4) {
        want = "source", p.rule = "mxfp4 kept";
      } else if (!matrix(name, t) || ends_with(name, "_bias") || ends_with(name, ".bias")) {
        want = "f32", p.rule = "1-D tensors and biases -> f32";
      } else if (mix) {
        if (head) {
          want = t.dim(-1) % kQK == 0 ? "q6_k" : "q8_0", p.rule = "output head";
        } else if (const FamilyRecipeRule* r = family_rule(name, t)) {
          want = family_dtype(*r, p.src), p.rule = r->label;
        } else {
          want = std::string(dtype_name(kquant_mix_type(q, name, n_layers)));
          p.rule = want == "q6_k" && q != "q6_k" ? "more bits (use_more_bits)" : want == "q5_k" && q == "q4_k_s"
                       ? "more bits (first layers)" : "default";
        }
      } else if (head) {
        want = q == "q4_0" ? "q8_0" : q, p.rule = "output head";
      } else if (ends_with(name, "embed_tokens.weight")) {
        want = quant ? std::string(dtype_name(half_of(p.src))) : q, p.rule = "embedding";
      } else if (const FamilyRecipeRule* r = family_rule(name, t)) {
        want = family_dtype(*r, p.src), p.rule = r->label;
      } else {
        want = q, p.rule = "default";
      }
    }
    if (want == "source") {
      p.dst = p.src;
    } else if (!dtype_from_name(want, &p.dst)) {
      return Error::internal("[convert] no dtype '{}'", want);
    }
    p.wanted = dtype_name(p.dst);
    if (!is_weight(p.src) && p.dst != p.src)
      return Error::invalid_argument("[convert] {}: cannot convert a {} tensor to {}", name, dtype_name(p.src),
                                     dtype_name(p.dst));
    if (dtype_is_quantized(p.dst) && p.dst != p.src && matrix(name, t) &&
        t.dim(-1) % dtype_info(p.dst).block_elems != 0 && kquant_fallback(p.dst) != p.dst) {
      p.fallback = fmt("input dim {} is not a multiple of {}", t.dim(-1), dtype_info(p.dst).block_elems);
      p.dst = kquant_fallback(p.dst);
    }
    if (dtype_is_quantized(p.dst) && p.dst != p.src &&
        (!matrix(name, t) || t.dim(-1) % dtype_info(p.dst).block_elems != 0)) {
      const DType fb = t.ndim() == 1 ? DType::F32 : half_of(p.src);
      p.fallback = !matrix(name, t) ? fmt("{}-D tensor", t.ndim())
                                    : fmt("input dim {} is not a multiple of {}", t.dim(-1),
                                          dtype_info(p.dst).block_elems);
      p.dst = fb;
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace pipit
