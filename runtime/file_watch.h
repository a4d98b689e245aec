// The model files a loaded model maps, watched for changes made in place. The weights stay memory-mapped for the
// life of the model; a file truncated or rewritten under it (an app updating its model at the same path, a copy
// over the file) would fault (SIGBUS: the process dies) or silently compute with other bytes at the next forward
// pass. A file replaced by a rename is harmless: the mapping keeps the old file. So each generation first checks
// the mapped files (one fstat each, ~1 us) and refuses to run over a changed one, naming it.
//
// What this cannot catch: a file truncated during a forward pass (between the check and the pages' use). Replace
// model files by writing a new file and renaming it over the old one.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace pipit {

class FileWatch {
 public:
  FileWatch() = default;
  // The files behind what -m names: the file itself (.pipit, .gguf, .safetensors, an mmproj given separately is
  // not included), or a checkpoint folder's *.safetensors / *.bin / *.pt. Held open, so that a rename over the path
  // is told apart from a change to the mapped file.
  static FileWatch of(const std::string& model_path);
  FileWatch(FileWatch&&) noexcept;
  FileWatch& operator=(FileWatch&&) noexcept;
  ~FileWatch();

  // An error naming the first file whose size or modification time changed since of().
  Status check() const;
  size_t size() const { return files_.size(); }

 private:
  struct File {
    std::string path;
    int fd = -1;
    long long size = 0, mtime_ns = 0;
  };
  std::vector<File> files_;
};

}  // namespace pipit
