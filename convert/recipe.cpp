// Recipe parsing, glob matching and the per-tensor plan (see recipe.h for the rules).
#include "convert/recipe.h"

#include "core/storage.h"

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
  return Error::invalid_argument("[convert] unknown type '{}' (expected f32, f16, bf16, q8, q4{})", s,
                                 s.empty() ? "" : ", auto");
}

Result<Recipe> Recipe::parse(const std::string& text, const std::string& origin) {
  const std::string ctx = "[recipe] " + origin;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("rules") || !j["rules"].is_array())
    return Error::format("{}: expected a JSON object {\"rules\": [{\"pattern\": ..., \"dtype\": ...}, ...]}", ctx);
  Recipe r;
  for (size_t i = 0; i < j["rules"].size(); ++i) {
    const auto& e = j["rules"][i];
    if (!e.is_object() || !e.contains("pattern") || !e.contains("dtype") || !e["pattern"].is_string() ||
        !e["dtype"].is_string())
      return Error::format("{}: rules[{}] needs string 'pattern' and 'dtype'", ctx, i);
    auto d = canonical_quant(e["dtype"].get<std::string>());
    if (!d || *d == "auto") return Error::format("{}: rules[{}]: unknown dtype '{}' (f32, f16, bf16, q8, q4, source)",
                                                 ctx, i, e["dtype"].get<std::string>());
    r.rules.push_back({e["pattern"].get<std::string>(), *d});
  }
  return r;
}

Result<Recipe> Recipe::load(const std::string& path) {
  PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse(text, path);
}

std::vector<std::string> default_rule_descriptions(const std::string& q) {
  if (q == "auto") return {"* -> source dtype (auto)"};
  const bool quant = q == "q8_0" || q == "q4_0";
  return {
      "1-D tensors (norms, biases) -> f32",
      std::string("output head (lm_head.weight, or the tied embedding) -> ") + (q == "q4_0" ? "q8_0" : q),
      std::string("model.embed_tokens.weight -> ") + (quant ? "bf16 if the source is bf16, else f16" : q),
      std::string("MoE router (*.mlp.gate.weight beside *.mlp.experts.*) -> ") + (quant ? "source dtype" : q),
      std::string("attention of an MoE checkpoint (*.self_attn.*) -> ") + (q == "q4_0" ? "q8_0" : q),
      std::string("linear-attention gate projections (*linear_attn.in_proj_a/in_proj_b.weight) -> ") +
          (quant ? "bf16 if the source is bf16, else f16" : q),
      "* -> " + q,
      "fallback: a quantized type on a tensor that is not 2-D or whose input dim is not a multiple of 32 -> bf16 if "
      "the source is bf16, else f16 (f32 for 1-D)",
  };
}

Result<std::vector<TensorPlan>> plan_conversion(const Checkpoint& c, const std::string& q, const Recipe& user) {
  const bool quant = q == "q8_0" || q == "q4_0";
  const bool tied = !c.tensors.count("lm_head.weight");
  bool moe = false;  // routed experts (Qwen3-MoE, DeepSeek-OCR's decoder)
  for (auto& [name, t] : c.tensors) moe |= name.find(".mlp.experts.") != std::string::npos;
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
      } else if (t.ndim() != 2) {
        want = "f32", p.rule = "1-D tensors -> f32";
      } else if (head) {
        want = q == "q4_0" ? "q8_0" : q, p.rule = "output head";
      } else if (ends_with(name, "embed_tokens.weight")) {
        want = quant ? std::string(dtype_name(half_of(p.src))) : q, p.rule = "embedding";
      } else if (moe && quant && ends_with(name, ".mlp.gate.weight")) {
        // E x n_embd, a rounding error here moves a token to another expert: a discrete jump, not a small error
        want = "source", p.rule = "MoE router";
      } else if (moe && q == "q4_0" && name.find(".self_attn.") != std::string::npos) {
        // in an MoE model the attention is a few % of the weights but runs for every token while each expert runs
        // for a few; on the test checkpoints it carries most of the q4 error (qwen3_moe relative RMS 0.168 -> 0.027)
        want = "q8_0", p.rule = "MoE attention";
      } else if (quant && (ends_with(name, "linear_attn.in_proj_a.weight") ||
                           ends_with(name, "linear_attn.in_proj_b.weight"))) {
        // Gated DeltaNet (Qwen3.5): these few rows (one per value head) set each head's decay exp(-e^A_log
        // softplus(a + dt_bias)) and write strength sigmoid(b) at every token; an error there compounds through
        // the recurrent state over the whole sequence, so they stay 16-bit (~0.1% of the layer's weights).
        // A_log, dt_bias, the conv and norm weights are not 2-D and stay f32 by the rule above.
        want = dtype_name(half_of(p.src)), p.rule = "linear-attention gates";
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
    if (dtype_is_quantized(p.dst) && (t.ndim() != 2 || t.dim(-1) % kQBlock != 0)) {
      const DType fb = t.ndim() == 1 ? DType::F32 : half_of(p.src);
      p.fallback = t.ndim() != 2 ? fmt("{}-D tensor", t.ndim())
                                 : fmt("input dim {} is not a multiple of {}", t.dim(-1), kQBlock);
      p.dst = fb;
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace pipit
