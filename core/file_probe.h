// Questions about a path that must not block or follow a user into a device: what kind of file it is (for error
// messages) and whether a regular file begins with a format's magic bytes.
#pragma once

#include <string>
#include <string_view>

namespace pipit {

// What a path with this st_mode is: "a regular file", "a directory", "a FIFO", "a character device", ...
const char* file_kind(unsigned mode);

// True when `path` is a regular file that begins with `magic`. Never blocks: a FIFO or a device is simply "no" (the
// format sniffers ask this of any path a user names, and opening a FIFO nobody writes would wait for ever).
bool file_starts_with(const std::string& path, std::string_view magic);

}  // namespace pipit
