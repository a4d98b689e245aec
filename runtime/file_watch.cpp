#include "runtime/file_watch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace pipit {

namespace {

long long mtime_ns(const struct stat& s) { return (long long)s.st_mtim.tv_sec * 1000000000LL + s.st_mtim.tv_nsec; }

bool is_weight_file(const std::filesystem::path& p) {
  const std::string e = p.extension().string();
  return e == ".safetensors" || e == ".bin" || e == ".pt" || e == ".pth" || e == ".gguf" || e == ".pipit";
}

}  // namespace

FileWatch FileWatch::of(const std::string& model_path) {
  FileWatch w;
  std::vector<std::string> paths;
  std::error_code ec;
  if (std::filesystem::is_directory(model_path, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(model_path, ec))
      if (e.is_regular_file(ec) && is_weight_file(e.path())) paths.push_back(e.path().string());
  } else {
    paths.push_back(model_path);
  }
  for (const auto& p : paths) {
    File f{p};
    f.fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat s {};
    if (f.fd < 0 || ::fstat(f.fd, &s) != 0) {
      if (f.fd >= 0) ::close(f.fd);
      continue;  // not a file this process could map either
    }
    f.size = (long long)s.st_size;
    f.mtime_ns = mtime_ns(s);
    w.files_.push_back(std::move(f));
  }
  return w;
}

FileWatch::FileWatch(FileWatch&& o) noexcept : files_(std::move(o.files_)) { o.files_.clear(); }

FileWatch& FileWatch::operator=(FileWatch&& o) noexcept {
  if (this != &o) {
    for (auto& f : files_) ::close(f.fd);
    files_ = std::move(o.files_);
    o.files_.clear();
  }
  return *this;
}

FileWatch::~FileWatch() {
  for (auto& f : files_) ::close(f.fd);
}

Status FileWatch::check() const {
  for (const auto& f : files_) {
    struct stat s {};
    if (::fstat(f.fd, &s) != 0) continue;
    if ((long long)s.st_size != f.size || mtime_ns(s) != f.mtime_ns)
      return Error::unavailable("[model] '{}' changed on disk while loaded ({} bytes then, {} now): its mapped "
                                "weights are no longer the ones loaded; reload the model (replace model files by "
                                "renaming a new file over them, not by writing into them)",
                                f.path, f.size, (long long)s.st_size);
  }
  return Status::ok();
}

}  // namespace pipit
