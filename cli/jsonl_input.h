// Line-by-line input for the commands that take JSONL (`tokenize --jsonl`, `tokenize --decode --jsonl`,
// `template --jsonl`): one reader with a bound on a line, so /dev/zero or a file with no newline is an error naming
// the bound, not gigabytes of memory; and a read that fails (or runs out of memory) is an error, not exit 0.
#pragma once

#include <functional>
#include <string>

#include "core/status.h"

namespace pipit {

// Calls fn(line, line_number) for each line of `path` ("-" = stdin) that is not blank, in order; stops at the first
// error and returns it prefixed with "PATH:LINE: ". A line longer than max_line_bytes is an error.
Status for_each_input_line(const std::string& path, size_t max_line_bytes,
                           const std::function<Status(const std::string& line)>& fn);

}  // namespace pipit
