// Shared helpers for the tokenizer tests: where the test data lives, cached tokenizers (gemma3's tokenizer.json is
// 33 MB, so each is loaded once per process), JSONL reading and readable diffs.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace pipit::test {

#ifndef PIPIT_TESTDATA_DIR
#define PIPIT_TESTDATA_DIR "/work/shared/testdata"
#endif

// PIPIT_TESTDATA (environment) overrides the compiled-in folder.
inline std::string testdata_dir() {
  if (const char* e = std::getenv("PIPIT_TESTDATA"); e && *e) return e;
  return PIPIT_TESTDATA_DIR;
}

inline std::string tokenizers_dir() { return testdata_dir() + "/tokenizers"; }

// Folders of testdata/tokenizers that hold a tokenizer.json, sorted.
inline std::vector<std::string> golden_folders() {
  std::vector<std::string> r;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(tokenizers_dir(), ec))
    if (e.is_directory() && std::filesystem::exists(e.path() / "tokenizer.json")) r.push_back(e.path().filename());
  std::sort(r.begin(), r.end());
  return r;
}

// Loads (once) the tokenizer in `dir`; fails the current test with the load error otherwise.
inline std::shared_ptr<Tokenizer> cached_tokenizer(const std::string& dir) {
  static std::map<std::string, std::shared_ptr<Tokenizer>> cache;
  auto it = cache.find(dir);
  if (it != cache.end()) return it->second;
  auto r = Tokenizer::load_dir(dir);
  if (!r) {
    ADD_FAILURE() << "loading " << dir << ": " << r.status().message();
    return nullptr;
  }
  cache[dir] = r.value();
  return r.value();
}

inline std::shared_ptr<Tokenizer> golden_tokenizer(const std::string& folder) {
  return cached_tokenizer(tokenizers_dir() + "/" + folder);
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The tokenizer of a golden folder compiled (Tokenizer::compile) and read back from that (load_compiled), once; the
// compiled bytes are dropped before it is used, so nothing can point into them.
inline std::shared_ptr<Tokenizer> compiled_golden_tokenizer(const std::string& folder) {
  static std::map<std::string, std::shared_ptr<Tokenizer>> cache;
  if (auto it = cache.find(folder); it != cache.end()) return it->second;
  const std::string dir = tokenizers_dir() + "/" + folder;
  const std::string cfg = std::filesystem::exists(dir + "/tokenizer_config.json")
                              ? read_text(dir + "/tokenizer_config.json") : "";
  auto compiled = Tokenizer::compile(read_text(dir + "/tokenizer.json"));
  if (!compiled) {
    ADD_FAILURE() << "compiling " << dir << ": " << compiled.status().message();
    return nullptr;
  }
  std::string bytes = std::move(compiled).value();
  auto r = Tokenizer::load_compiled(bytes, cfg);
  std::fill(bytes.begin(), bytes.end(), '\0');
  if (!r) {
    ADD_FAILURE() << "loading the compiled " << dir << ": " << r.status().message();
    return nullptr;
  }
  return cache[folder] = r.value();
}

struct JsonLine {
  int line;  // 1-based
  nlohmann::json value;
};

// Every non-empty line of a JSONL file; a parse error fails the test and names the line.
inline std::vector<JsonLine> read_jsonl(const std::string& path) {
  std::vector<JsonLine> r;
  std::ifstream f(path);
  if (!f) {
    ADD_FAILURE() << "cannot open " << path;
    return r;
  }
  std::string s;
  int n = 0;
  while (std::getline(f, s)) {
    ++n;
    if (s.empty()) continue;
    try {
      r.push_back({n, nlohmann::json::parse(s)});
    } catch (const std::exception& e) {
      ADD_FAILURE() << path << ":" << n << ": bad JSON: " << e.what();
    }
  }
  return r;
}

inline std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

// "" when equal; otherwise where the id lists first differ, with a little context.
inline std::string diff_ids(const std::vector<int32_t>& want, const std::vector<int32_t>& got) {
  if (want == got) return "";
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto window = [&](const std::vector<int32_t>& v) {
    std::ostringstream os;
    os << "[";
    for (size_t k = i > 3 ? i - 3 : 0; k < v.size() && k < i + 5; ++k) os << (k == i ? " >" : " ") << v[k];
    os << " ] (" << v.size() << " ids)";
    return os.str();
  };
  std::ostringstream os;
  os << "ids differ at position " << i << ": want " << window(want) << ", got " << window(got);
  return os.str();
}

inline std::string diff_text(const std::string& want, const std::string& got) {
  if (want == got) return "";
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto esc = [&](const std::string& s) {
    size_t b = i > 12 ? i - 12 : 0;
    return nlohmann::json(s.substr(b, 40)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::ostringstream os;
  os << "text differs at byte " << i << ": want " << esc(want) << ", got " << esc(got);
  return os.str();
}

}  // namespace pipit::test
