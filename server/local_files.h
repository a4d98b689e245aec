// Local image files for `--allow-local-files DIR`: a request may name a file under DIR (absolute, or relative to
// DIR), nothing else. The path is resolved (symlinks and "..") before the check, the file is opened without
// following a final symlink and must be a regular file no larger than the cap. Every refusal is the same error
// (kLocalFileRefused), whatever the reason, so that the server is no oracle for what exists on the machine.
#pragma once

#include <string>

#include "core/status.h"

namespace pipit::server {

// DIR as given to the flag, resolved; an error when it is not a directory.
Result<std::string> shared_directory(const std::string& dir);

// The bytes of `path` when it lies in `root` (a shared_directory() result) and is a regular file of at most
// `max_bytes`; else kInvalidArgument with kLocalFileRefused.
Result<std::string> read_shared_file(const std::string& root, const std::string& path, size_t max_bytes);

}  // namespace pipit::server
