// LineInput (see line_input.h).
#include "cli/line_input.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#ifdef PIPIT_WITH_LIBEDIT
#include <histedit.h>
#endif

namespace pipit::cli {

namespace {

// Lines from stdin, read with poll() + read() so a Ctrl-C is noticed within kPollMs whenever it arrives (a
// blocking read could miss a signal that lands just before it starts).
class PlainInput : public LineInput {
 public:
  explicit PlainInput(volatile sig_atomic_t* interrupted) : interrupted_(interrupted) {}

  Got next(const char* prompt, std::string& out) override {
    std::fputs(prompt, stdout);
    std::fflush(stdout);
    out.clear();
    for (;;) {
      const size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty() && line.back() == '\\') {
          line.back() = '\n';
          out += line;
          continue;
        }
        out += line;
        return kLine;
      }
      if (eof_) {
        if (buf_.empty() && out.empty()) return kEof;
        out += buf_;
        buf_.clear();
        return kLine;
      }
      if (*interrupted_) return kInterrupted;
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (poll(&p, 1, kPollMs) <= 0) continue;  // timeout or EINTR: look at the flag again
      char chunk[4096];
      const ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
      if (n > 0) buf_.append(chunk, size_t(n));
      else if (n == 0 || errno != EINTR) eof_ = true;
    }
  }

 private:
  static constexpr int kPollMs = 100;
  volatile sig_atomic_t* interrupted_;
  std::string buf_;
  bool eof_ = false;
};

#ifdef PIPIT_WITH_LIBEDIT
// libedit's el_gets with an in-memory history of this chat's lines. EL_SIGNAL: libedit puts the terminal back on
// a signal and calls the chat's SIGINT handler. Characters come through read_char (EL_GETCFN), which polls stdin
// and looks at the flag every kPollMs: a Ctrl-C that lands outside a read() (libedit redrawing, between keys)
// still ends the line at once instead of at the next key.
class EditInput : public LineInput {
 public:
  explicit EditInput(volatile sig_atomic_t* interrupted) : interrupted_(interrupted) {
    el_ = el_init("pipit", stdin, stdout, stderr);
    hist_ = history_init();
    HistEvent ev;
    history(hist_, &ev, H_SETSIZE, 1000);
    history(hist_, &ev, H_SETUNIQUE, 1);
    el_set(el_, EL_CLIENTDATA, this);
    el_set(el_, EL_PROMPT, &EditInput::prompt_of);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_SIGNAL, 1);
    el_set(el_, EL_HIST, history, hist_);
    el_set(el_, EL_GETCFN, &EditInput::read_char);
    el_source(el_, nullptr);  // the user's ~/.editrc, if any
  }
  ~EditInput() override {
    el_end(el_);
    history_end(hist_);
  }
  bool ok() const { return el_ && hist_; }

  Got next(const char* prompt, std::string& out) override {
    out.clear();
    prompt_ = prompt;
    for (;;) {
      int count = 0;
      errno = 0;
      const char* line = el_gets(el_, &count);
      if (*interrupted_ || (!line && errno == EINTR)) {
        el_reset(el_);
        return kInterrupted;
      }
      if (!line || count <= 0) {
        if (out.empty()) return kEof;
        return kLine;
      }
      std::string s(line, size_t(count));
      while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
      if (!s.empty() && s.back() == '\\') {
        s.back() = '\n';
        out += s;
        prompt_ = "... ";
        continue;
      }
      out += s;
      if (!out.empty()) {
        HistEvent ev;
        history(hist_, &ev, H_ENTER, out.c_str());
      }
      return kLine;
    }
  }

 private:
  // One character from stdin (UTF-8 decoded), or -1 with errno EINTR once the SIGINT flag is set, 0 at EOF.
  static int read_char(EditLine* el, wchar_t* out) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    volatile sig_atomic_t* interrupted = static_cast<EditInput*>(self)->interrupted_;
    unsigned char b[4];
    for (;;) {
      if (*interrupted) {
        errno = EINTR;
        return -1;
      }
      pollfd p{STDIN_FILENO, POLLIN, 0};
      const int r = poll(&p, 1, kPollMs);
      if (r < 0 && errno != EINTR) return -1;
      if (r <= 0) continue;
      const ssize_t n = read(STDIN_FILENO, b, 1);
      if (n == 0) return 0;
      if (n < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      break;
    }
    // the rest of a UTF-8 sequence (a lead byte says how many follow); anything malformed passes as a byte
    const int more = (b[0] & 0xE0) == 0xC0 ? 1 : (b[0] & 0xF0) == 0xE0 ? 2 : (b[0] & 0xF8) == 0xF0 ? 3 : 0;
    uint32_t c = more == 0 ? b[0] : more == 1 ? (b[0] & 0x1F) : more == 2 ? (b[0] & 0x0F) : (b[0] & 0x07);
    for (int i = 1; i <= more; ++i) {
      ssize_t n;
      while ((n = read(STDIN_FILENO, b + i, 1)) < 0 && errno == EINTR) {
      }
      if (n != 1 || (b[i] & 0xC0) != 0x80) {
        *out = wchar_t(b[0]);
        return 1;
      }
      c = (c << 6) | (b[i] & 0x3F);
    }
    *out = wchar_t(c);
    return 1;
  }

  static char* prompt_of(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return const_cast<char*>(static_cast<EditInput*>(self)->prompt_);
  }

  static constexpr int kPollMs = 100;
  volatile sig_atomic_t* interrupted_;
  EditLine* el_ = nullptr;
  History* hist_ = nullptr;
  const char* prompt_ = "> ";
};
#endif

}  // namespace

std::unique_ptr<LineInput> LineInput::open(volatile sig_atomic_t* interrupted) {
#ifdef PIPIT_WITH_LIBEDIT
  if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) && !std::getenv("PIPIT_NO_LINE_EDITING")) {
    auto e = std::make_unique<EditInput>(interrupted);
    if (e->ok()) return e;
  }
#endif
  return std::make_unique<PlainInput>(interrupted);
}

}  // namespace pipit::cli
