// Helpers for the converter / format tests: a scratch directory, converting a test checkpoint, full-sequence logits,
// and the error measures the accuracy tests assert on (relative RMS, KL divergence, top-1 agreement).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "convert/converter.h"
#include "format/safetensors.h"
#include "runtime/loader.h"
#include "runtime/session.h"
#include "tests/test_util.h"

namespace pipit::test {

// A fresh temporary directory, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    namespace fs = std::filesystem;
    static int counter = 0;
    dir_ = (fs::temp_directory_path() /
            ("pipit_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~ScratchDir() { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// Converts testdata model `name` (or any path) to `out` with the given --quant; fails the test on error.
inline ConvertReport convert_or_fail(const std::string& input, const std::string& out, const std::string& quant,
                                     int threads = 2, const std::string& recipe = "") {
  ConvertOptions o;
  o.output = out;
  o.quant = quant;
  o.n_threads = threads;
  o.progress = false;
  o.recipe_path = recipe;
  auto r = convert_file(input, o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : ConvertReport{};
}

inline LoadedModel load_or_fail(const std::string& path) {
  auto m = load_model(path);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return std::move(m).value();
}

// Logits of every position of `ids`, [ids.size() * n_vocab].
inline std::vector<float> all_logits(Model& m, const std::vector<int32_t>& ids, const Kernels* k = nullptr) {
  Session s(m, SessionOptions{.n_ctx = int(ids.size()) + 8, .n_threads = 2});
  if (k) s.ctx().k = k;
  auto r = s.eval(ids, /*all_logits=*/true);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (!r.is_ok()) return {};
  return {r->ptr<float>(), r->ptr<float>() + r->numel()};
}

inline std::vector<int32_t> golden_ids(const std::string& model) {
  auto f = SafetensorsFile::open(model_dir(model) + "/golden.safetensors");
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  Tensor t = *f->get("input_ids");
  return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
}

// ||a - b|| / ||b||
inline double rel_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// KL(P_ref || P_q) per position and top-1 agreement, from logits [n, V] (as llama.cpp's perplexity --kl-divergence).
struct KlStats {
  double mean_kld = 0, max_kld = 0, top1 = 0;
};
inline KlStats kl_stats(const std::vector<float>& ref, const std::vector<float>& q, int64_t V) {
  KlStats s;
  const int64_t n = int64_t(ref.size()) / V;
  int agree = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float* a = ref.data() + t * V;
    const float* b = q.data() + t * V;
    double ma = a[0], mb = b[0];
    int64_t ia = 0, ib = 0;
    for (int64_t v = 1; v < V; ++v) {
      if (a[v] > ma) ma = a[v], ia = v;
      if (b[v] > mb) mb = b[v], ib = v;
    }
    double za = 0, zb = 0;
    for (int64_t v = 0; v < V; ++v) za += std::exp(a[v] - ma), zb += std::exp(b[v] - mb);
    const double lza = std::log(za), lzb = std::log(zb);
    double kld = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double la = a[v] - ma - lza, lb = b[v] - mb - lzb;
      kld += std::exp(la) * (la - lb);
    }
    s.mean_kld += kld / double(n);
    s.max_kld = std::max(s.max_kld, kld);
    agree += ia == ib;
  }
  s.top1 = double(agree) / double(n);
  return s;
}

}  // namespace pipit::test
