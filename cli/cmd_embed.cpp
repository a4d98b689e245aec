// `pipit embed`: sentence embeddings from the command line, the vectors /v1/embeddings and pipit_embed give
// (runtime/pooling.h: the checkpoint's sentence-transformers pooling, or --pooling for a model without that config),
// one per -p text or per line of -f, with the cosine similarity of every pair when there are several (as
// llama-embedding prints them).
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "runtime/pooling.h"
#include "tokenizer/tokenizer.h"

namespace pipit::cli {

namespace {

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

int cmd_embed(Args& a) {
  add_model_options(a);
  a.multi({"-p", "--prompt"}, "a text to embed (repeatable)");
  a.option({"-f", "--file"}, "texts to embed, one per line (\"-\": stdin)");
  a.option({"--pooling"}, "mean, last or cls: overrides the checkpoint's sentence-transformers pooling (a decoder-only "
                          "chat model has none: say which its embedding recipe uses)");
  a.flag({"--normalize"}, "L2-normalize the vectors (with --pooling; the checkpoint's Normalize module otherwise)");
  a.flag({"--json"}, "print {\"embeddings\": [[...], ...]} instead of one line per text");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || !a.has("-m") || (!a.has("-p") && !a.has("-f"))) {
    std::printf("usage: pipit embed -m MODEL -p TEXT [-p TEXT ...] | -f LINES_FILE [--pooling mean|last|cls] "
                "[--normalize] [--json]\n%s", a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  std::vector<std::string> texts = a.get_all("-p");
  if (a.has("-f")) {
    auto body = read_prompt_file(a.get("-f"));
    if (!body) return fail(a, body.status().message());
    std::istringstream in(*body);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) texts.push_back(line);
  }
  if (texts.empty()) return fail(a, "no text to embed");
  auto lo = load_options(a, /*need_tokenizer=*/true);
  if (!lo) return fail(a, lo.status().message());
  auto lm = load_model(a.get("-m"), *lo);
  if (!lm) return fail(a, lm.status().message());
  PoolingConfig cfg = read_pooling_config(a.get("-m"));
  if (a.has("--pooling")) {
    const std::string p = a.get("--pooling");
    cfg = PoolingConfig{};
    if (p == "mean") cfg.mode = PoolingConfig::Mode::kMean;
    else if (p == "last") cfg.mode = PoolingConfig::Mode::kLastToken;
    else if (p == "cls") cfg.mode = PoolingConfig::Mode::kCls;
    else return fail(a, "--pooling must be mean, last or cls, got '" + p + "'");
    cfg.normalize = a.get_flag("--normalize");
  } else if (a.get_flag("--normalize")) {
    cfg.normalize = true;
  }
  if (cfg.mode == PoolingConfig::Mode::kNone) return fail(a, cfg.error + " (or give --pooling mean|last|cls)");
  auto so = session_options(a);
  if (!so) return fail(a, so.status().message());
  auto pool = std::make_shared<ThreadPool>(so->n_threads > 0 ? so->n_threads : ThreadPool::default_threads());
  std::vector<std::vector<int32_t>> ids;
  int64_t longest = 1;
  for (const auto& t : texts) {
    auto e = lm->tokenizer->encode(t, /*add_special_tokens=*/true);
    if (!e) return fail(a, e.status().message());
    if (e->empty()) return fail(a, "a text tokenizes to no tokens");
    longest = std::max<int64_t>(longest, int64_t(e->size()));
    ids.push_back(std::move(e).value());
  }
  if (so->n_ctx == 0) so->n_ctx = int(std::min<int64_t>(std::max<int64_t>(longest, 16), default_ctx(*lm->model, 0)));
  auto s = Session::create(*lm->model, *so, pool);
  if (!s) return fail(a, s.status().message());
  std::vector<std::vector<float>> vecs;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (int64_t(ids[i].size()) > (*s)->n_ctx())
      return fail(a, fmt("text {} has {} tokens, more than the context of {} (-c)", i + 1, ids[i].size(),
                         (*s)->n_ctx()));
    auto v = embed_tokens(**s, ids[i], cfg);
    if (!v) return fail(a, v.status().message());
    vecs.push_back(std::move(v).value());
  }
  if (a.get_flag("--json")) {
    std::printf("%s\n", nlohmann::json{{"embeddings", vecs}, {"pooling", pooling_name(cfg.mode)},
                                       {"normalized", cfg.normalize}}.dump().c_str());
    return 0;
  }
  for (const auto& v : vecs) {
    std::string line;
    for (size_t i = 0; i < v.size(); ++i) line += fmt(i ? " {}" : "{}", v[i]);
    std::printf("%s\n", line.c_str());
  }
  if (vecs.size() > 1) {
    std::fprintf(stderr, "cosine similarity (%s pooling%s):\n", pooling_name(cfg.mode),
                 cfg.normalize ? ", normalized" : "");
    for (size_t i = 0; i < vecs.size(); ++i) {
      std::string row;
      for (size_t j = 0; j < vecs.size(); ++j) row += fmt(" {}", std::round(cosine(vecs[i], vecs[j]) * 1e4) / 1e4);
      std::fprintf(stderr, "%s\n", row.c_str());
    }
  }
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("embed", "sentence embeddings of texts (the model's pooling, or --pooling)", cmd_embed);

}  // namespace pipit::cli
