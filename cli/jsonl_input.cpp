#include "cli/jsonl_input.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/limits.h"

namespace pipit {

Status for_each_input_line(const std::string& path, size_t max_line_bytes,
                           const std::function<Status(const std::string& line)>& fn) {
  const bool is_stdin = path == "-";
  const int fd = is_stdin ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::io("cannot open {}: {}", path, std::strerror(errno));
  struct FdCloser {
    int fd;
    bool owned;
    ~FdCloser() {
      if (owned) ::close(fd);
    }
  } closer{fd, !is_stdin};
  const std::string name = is_stdin ? "stdin" : path;

  std::string line;
  int number = 1;
  auto finish_line = [&]() -> Status {
    const bool blank = line.find_first_not_of(" \t\r") == std::string::npos;
    Status st = blank ? Status::ok() : fn(line);
    if (!st) return Error::invalid_argument("{}:{}: {}", name, number, st.message());
    line.clear();
    ++number;
    return Status::ok();
  };
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::io("error reading {} at line {}: {}", name, number, std::strerror(errno));
    }
    if (n == 0) break;
    for (const char* p = buf; p < buf + n;) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', size_t(buf + n - p)));
      const char* end = nl ? nl : buf + n;
      if (line.size() + size_t(end - p) > max_line_bytes)
        return Error::out_of_range("{}:{}: the line goes on past {}, the most one input line may have", name, number,
                                   format_bytes(max_line_bytes));
      line.append(p, end);
      p = end;
      if (nl) {
        PIPIT_TRY(finish_line());
        ++p;
      }
    }
  }
  if (!line.empty()) PIPIT_TRY(finish_line());
  return Status::ok();
}

}  // namespace pipit
