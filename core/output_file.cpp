// Output paths the user names: the checks of core/output_file.h, done with lstat / O_EXCL / O_NOFOLLOW so that
// what is checked is what gets written.
#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/file_probe.h"

namespace pipit {

namespace {

// A path that exists now and is not a regular file (nor absent): a replacing writer must not rename onto it.
Status check_replaceable_now(const std::string& path, const std::string& what) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return Error::io("{} cannot check the output '{}': {}", what, path, std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return Status::ok();
  return Error::invalid_argument("{} the output '{}' is {}, not a regular file: the output is written to a new file "
                                 "that is renamed onto this name, which would replace it; give a file name",
                                 what, path, file_kind(st.st_mode));
}

}  // namespace

Result<std::string> replaceable_output(const std::string& path, const std::string& what) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
    PIPIT_TRY(check_replaceable_now(path, what));
    return path;
  }
  // A symlink: its target gets the new file and the link stays (what `cp` and a shell redirection do).
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved)
    return Error::invalid_argument("{} the output '{}' is a symlink to a path that does not exist ({}); give the "
                                   "path to write", what, path, std::strerror(errno));
  std::string target(resolved);
  std::free(resolved);
  struct stat ts{};
  if (::stat(target.c_str(), &ts) != 0 || !S_ISREG(ts.st_mode))
    return Error::invalid_argument("{} the output '{}' is a symlink to '{}', which is {}, not a regular file; give "
                                   "a file name", what, path, target, file_kind(ts.st_mode));
  return target;
}

Result<std::FILE*> create_temp_beside(const std::string& target, std::string* tmp_path) {
  *tmp_path = target + ".tmp." + std::to_string(::getpid());
  // O_EXCL | O_NOFOLLOW: a name someone placed there (a link to another file) is never written through
  const int fd = ::open(tmp_path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) return Error::io("cannot create '{}': {}", *tmp_path, std::strerror(errno));
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp_path->c_str());
    return Error::io("cannot open '{}': {}", *tmp_path, std::strerror(e));
  }
  return f;
}

Status commit_output(const std::string& tmp_path, const std::string& target, const std::string& what) {
  PIPIT_TRY(check_replaceable_now(target, what));  // it may have changed while the file was written
  if (std::rename(tmp_path.c_str(), target.c_str()) != 0)
    return Error::io("{} cannot rename '{}' to '{}': {}", what, tmp_path, target, std::strerror(errno));
  return Status::ok();
}

Result<std::FILE*> open_output_stream(const std::string& path, const std::string& what) {
  auto refuse = [&](const char* kind) {
    return Error::invalid_argument("{} cannot write the output '{}': it is {}", what, path, kind);
  };
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)))
    return refuse(file_kind(st.st_mode));
  // O_NONBLOCK: opening a FIFO that nobody reads fails (ENXIO) instead of blocking for ever
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0666);
  if (fd < 0) {
    if (errno == ENXIO) return refuse("a FIFO with no reader");
    return Error::io("{} cannot create the output '{}': {}", what, path, std::strerror(errno));
  }
  if (::fstat(fd, &st) != 0 || S_ISBLK(st.st_mode)) {  // swapped in between
    ::close(fd);
    return refuse("a block device");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    return Error::io("{} cannot open the output '{}': {}", what, path, std::strerror(errno));
  }
  return f;
}

Status close_output(std::FILE* f, const std::string& path, const std::string& what) {
  const bool flushed = std::fflush(f) == 0 && !std::ferror(f);
  const int e = errno;
  if (std::fclose(f) != 0 || !flushed)
    return Error::io("{} error writing the output '{}': {}", what, path, std::strerror(flushed ? errno : e));
  return Status::ok();
}

}  // namespace pipit
