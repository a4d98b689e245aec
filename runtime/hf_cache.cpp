// The Hugging Face cache lookup behind `-m org/name` (runtime/hf_cache.h).
#include "runtime/hf_cache.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace pipit {

namespace {

bool exists(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0;
}

bool is_dir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

}  // namespace

bool looks_like_hub_id(const std::string& path) {
  const size_t slash = path.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == path.size()) return false;
  if (path.find('/', slash + 1) != std::string::npos) return false;
  if (path[0] == '.' || path[slash + 1] == '.' || path.size() > 200) return false;
  for (char c : path)
    if (!(std::isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.' || c == '/')) return false;
  return true;
}

std::string hf_hub_cache_dir() {
  if (std::string d = env("HF_HUB_CACHE"); !d.empty()) return d;
  if (std::string d = env("HF_HOME"); !d.empty()) return d + "/hub";
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/huggingface/hub";
  return env("HOME") + "/.cache/huggingface/hub";
}

std::string resolve_model_path(const std::string& path) {
  if (exists(path) || !looks_like_hub_id(path)) return path;
  std::string repo = hf_hub_cache_dir() + "/models--" + path;
  repo.replace(repo.rfind('/'), 1, "--");  // models--org--name
  std::string rev;
  std::getline(std::ifstream(repo + "/refs/main"), rev);
  if (!rev.empty() && is_dir(repo + "/snapshots/" + rev)) return repo + "/snapshots/" + rev;
  // no refs/main (a copied cache): the only snapshot, if there is one
  std::error_code ec;
  std::string only;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(repo + "/snapshots", ec))
    if (e.is_directory(ec)) only = e.path().string(), ++n;
  return n == 1 ? only : "";
}

}  // namespace pipit
