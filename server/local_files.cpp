// See local_files.h.
#include "server/local_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <memory>

#include "server/openai_request.h"

namespace pipit::server {

namespace {

// realpath() into a std::string; "" when the path does not resolve.
std::string resolved(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> r(::realpath(path.c_str(), nullptr), &std::free);
  return r ? std::string(r.get()) : std::string();
}

}  // namespace

Result<std::string> shared_directory(const std::string& dir) {
  if (dir.empty() || dir.find('\0') != std::string::npos)
    return Error::invalid_argument("--allow-local-files needs a directory");
  std::string r = resolved(dir);
  struct stat sb{};
  if (r.empty() || ::stat(r.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode))
    return Error::invalid_argument("--allow-local-files {}: not a directory", dir);
  return r;
}

Result<std::string> read_shared_file(const std::string& root, const std::string& path, size_t max_bytes) {
  const Status refused = Error::invalid_argument("{}", kLocalFileRefused);
  if (root.empty() || path.empty() || path.find('\0') != std::string::npos) return refused;
  const std::string full = resolved(path[0] == '/' ? path : root + "/" + path);
  // Inside root: root itself is no file, and "/srv/img" must not admit "/srv/img2/x".
  const std::string prefix = root == "/" ? root : root + "/";
  if (full.size() <= prefix.size() || full.compare(0, prefix.size(), prefix) != 0) return refused;
  const int fd = ::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);  // no waiting on a FIFO
  if (fd < 0) return refused;
  struct stat sb{};
  std::string data;
  bool ok = ::fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 && uint64_t(sb.st_size) <= max_bytes;
  if (ok) {
    data.resize(size_t(sb.st_size));
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n <= 0) break;
      got += size_t(n);
    }
    ok = got == data.size();
  }
  ::close(fd);
  if (!ok) return refused;
  return data;
}

}  // namespace pipit::server
