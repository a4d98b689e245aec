// Pooling config and pooling (see embeddings.h).
#include "runtime/pooling.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "runtime/session.h"

namespace pipit {

namespace {

bool read_json(const std::filesystem::path& p, nlohmann::json& out) {
  std::ifstream f(p);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  out = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  return !out.is_discarded();
}

}  // namespace

const char* pooling_name(PoolingConfig::Mode m) {
  switch (m) {
    case PoolingConfig::Mode::kMean: return "mean";
    case PoolingConfig::Mode::kLastToken: return "last-token";
    case PoolingConfig::Mode::kCls: return "cls";
    case PoolingConfig::Mode::kNone: break;
  }
  return "none";
}

PoolingConfig read_pooling_config(const std::string& model_path) {
  namespace fs = std::filesystem;
  PoolingConfig c;
  std::error_code ec;
  const fs::path dir(model_path);
  nlohmann::json modules;
  if (!fs::is_directory(dir, ec) || !read_json(dir / "modules.json", modules) || !modules.is_array()) {
    c.error = "this model has no pooling config (a sentence-transformers modules.json with a Pooling module), so "
              "it does not define embeddings; serve an embedding model";
    return c;
  }
  std::string pooling_dir;
  bool found = false;
  for (const auto& m : modules) {
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) continue;
    const std::string type = m["type"].get<std::string>();
    const std::string path = m.contains("path") && m["path"].is_string() ? m["path"].get<std::string>() : "";
    if (type.find("Pooling") != std::string::npos) {
      found = true;
      pooling_dir = path;
    } else if (type.find("Normalize") != std::string::npos) {
      c.normalize = true;
    }
  }
  nlohmann::json pc;
  if (!found || pooling_dir.find("..") != std::string::npos || !read_json(dir / pooling_dir / "config.json", pc) ||
      !pc.is_object()) {
    c.error = "modules.json names no readable Pooling module config, so this model does not define embeddings";
    return c;
  }
  auto on = [&](const char* k) { return pc.contains(k) && pc[k].is_boolean() && pc[k].get<bool>(); };
  int n_modes = 0;
  for (const char* k : {"pooling_mode_mean_tokens", "pooling_mode_lasttoken", "pooling_mode_cls_token",
                        "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"})
    n_modes += on(k);
  if (n_modes != 1) {
    c.error = fmt("the pooling config sets {} pooling modes; pipit pools with exactly one of mean, lasttoken, cls",
                  n_modes);
    return c;
  }
  if (on("pooling_mode_mean_tokens")) c.mode = PoolingConfig::Mode::kMean;
  else if (on("pooling_mode_lasttoken")) c.mode = PoolingConfig::Mode::kLastToken;
  else if (on("pooling_mode_cls_token")) c.mode = PoolingConfig::Mode::kCls;
  else c.error = "the pooling config asks for a pooling pipit does not do (it does mean, lasttoken, cls)";
  return c;
}

std::vector<float> pool_rows(const float* rows, int64_t n_rows, int64_t n_embd, const PoolingConfig& cfg) {
  std::vector<double> acc(size_t(n_embd), 0.0);
  if (n_rows > 0) {
    switch (cfg.mode) {
      case PoolingConfig::Mode::kMean:
        for (int64_t r = 0; r < n_rows; ++r)
          for (int64_t j = 0; j < n_embd; ++j) acc[size_t(j)] += rows[r * n_embd + j];
        for (double& v : acc) v /= double(n_rows);
        break;
      case PoolingConfig::Mode::kLastToken:
        for (int64_t j = 0; j < n_embd; ++j) acc[size_t(j)] = rows[(n_rows - 1) * n_embd + j];
        break;
      case PoolingConfig::Mode::kCls:
        for (int64_t j = 0; j < n_embd; ++j) acc[size_t(j)] = rows[j];
        break;
      case PoolingConfig::Mode::kNone:
        break;
    }
  }
  if (cfg.normalize) {
    double ss = 0;
    for (double v : acc) ss += v * v;
    // sentence-transformers: F.normalize(p=2, eps=1e-12)
    const double inv = 1.0 / std::max(std::sqrt(ss), 1e-12);
    for (double& v : acc) v *= inv;
  }
  return std::vector<float>(acc.begin(), acc.end());
}

Result<std::vector<float>> embed_tokens(Session& s, const std::vector<int32_t>& ids, const PoolingConfig& cfg) {
  if (cfg.mode == PoolingConfig::Mode::kNone) return Error::unsupported("[embeddings] {}", cfg.error);
  if (ids.empty()) return Error::invalid_argument("[embeddings] no tokens to embed");
  s.reset();
  const int64_t n_embd = s.model().info().n_embd;
  std::vector<float> rows;
  s.ctx().on_tensor = [&](const std::string& name, int, const Tensor& t) {
    if (name != "final_norm" || t.ndim() != 2 || t.dim(1) != n_embd) return;
    const float* p = t.ptr<float>();
    rows.insert(rows.end(), p, p + t.numel());
  };
  // Last-token pooling needs only the last row, which a plain eval already gives; the others need every row.
  const bool all = cfg.mode != PoolingConfig::Mode::kLastToken;
  auto r = s.eval(ids, all);
  s.ctx().on_tensor = nullptr;
  s.reset();
  if (!r.is_ok()) return r.status();
  const int64_t n_rows = int64_t(rows.size()) / n_embd;
  if (n_rows < 1 || (all && n_rows != int64_t(ids.size())))
    return Error::internal("[embeddings] the model gave {} hidden-state rows for {} tokens", n_rows, ids.size());
  return pool_rows(rows.data(), n_rows, n_embd, cfg);
}

}  // namespace pipit
