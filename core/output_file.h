// Files pipit writes at a path the user names (convert -o, logits --output, vision -o), opened so that a path to
// a device, a pipe, a directory or a symlink is never silently replaced by a regular file.
//
// Two kinds of writer, two rules (docs/robustness.md, "Output paths"):
//  - Replacing writers (convert) write a temporary file beside the output and rename it over the output, so a
//    failed run never leaves half a file. Renaming replaces whatever the name is, so the output must be absent or
//    a regular file; a symlink is followed to its target, which must itself be a regular file (the link stays a
//    link, its target gets the new file). Anything else is refused before any work is done.
//  - Streaming writers (logits, vision) write into the path as a shell redirection would: a regular file is
//    truncated, /dev/null or a terminal or a pipe with a reader takes the bytes, a write error (/dev/full) is an
//    error. Directories, block devices and a FIFO nobody reads (which would block for ever) are refused.
#pragma once

#include <cstdio>
#include <string>

#include "core/status.h"

namespace pipit {

// The path a replacing writer must rename onto: `path` itself, or a symlink's target. `what` names the writer
// in messages ("[convert]").
Result<std::string> replaceable_output(const std::string& path, const std::string& what);

// Creates the temporary file for a replacing writer beside `target` (O_EXCL, never following a link); `*tmp_path`
// receives its name. The caller renames it with commit_output or removes it.
Result<std::FILE*> create_temp_beside(const std::string& target, std::string* tmp_path);

// Renames `tmp_path` onto `target` after checking again that target is still absent or a regular file.
Status commit_output(const std::string& tmp_path, const std::string& target, const std::string& what);

// Opens `path` for a streaming writer (see above).
Result<std::FILE*> open_output_stream(const std::string& path, const std::string& what);

// Closes `f`, reporting a failed flush or close (a full disk, /dev/full) as an error naming `path`.
Status close_output(std::FILE* f, const std::string& path, const std::string& what);

}  // namespace pipit
