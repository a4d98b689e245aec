// Optional side files of a model folder (tokenizer_config.json, generation_config.json, chat_template.jinja, ...):
// absent is fine, but a path that exists and is not a regular file (a directory, a FIFO, a device) is an error,
// not silently the same as absent (issue 35.14). stat() does not open the path, so a FIFO cannot block here.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/file_probe.h"
#include "core/status.h"

namespace pipit {

// true: a regular file to read; false: nothing there.
inline Result<bool> optional_file(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return Error::io("[load] cannot read '{}': {}", path, std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return true;
  return Error::format("[load] '{}' is {}, expected a file (or nothing)", path, file_kind(st.st_mode));
}

}  // namespace pipit
