// GuardedHttpServer: the per-connection loop with per-phase deadlines and the per-address connection cap (see
// connection.h for why this replaces httplib's own loop).
#include "server/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pipit::server {

namespace {

using Clock = std::chrono::steady_clock;

// Waits are cut into slices so that a stopping server is noticed within this time.
constexpr auto kSlice = std::chrono::milliseconds(100);

std::string address_of(const sockaddr_storage& ss, int* port) {
  char host[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    inet_ntop(AF_INET, &a.sin_addr, host, sizeof(host));
    if (port) *port = ntohs(a.sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    if (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr)) {  // one client, one key, whichever family it came in on
      inet_ntop(AF_INET, &a.sin6_addr.s6_addr[12], host, sizeof(host));
    } else {
      inet_ntop(AF_INET6, &a.sin6_addr, host, sizeof(host));
    }
    if (port) *port = ntohs(a.sin6_port);
  } else {
    if (port) *port = 0;
  }
  return host;
}

std::string peer_of(int fd, int* port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    if (port) *port = 0;
    return "";
  }
  return address_of(ss, port);
}

enum class Phase { kIdle, kHead, kBody };

// A socket stream whose reads share one deadline per phase instead of a timeout per read.
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int fd, const ConnectionLimits& lim, const std::atomic<socket_t>& listening,
                const GuardedHttpServer& server)
      : fd_(fd), lim_(lim), listening_(listening), server_(server) {}

  bool is_readable() const override { return off_ < len_ || wait(POLLIN, read_deadline()); }
  bool is_writable() const override { return wait(POLLOUT, Clock::now() + lim_.write_timeout); }

  ssize_t read(char* ptr, size_t size) override {
    if (off_ == len_) {
      if (!wait(POLLIN, read_deadline())) return -1;
      ssize_t n;
      do n = ::recv(fd_, buf_, sizeof(buf_), 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      off_ = 0;
      len_ = size_t(n);
    }
    size_t k = std::min(size, len_ - off_);
    if (phase_ == Phase::kHead) {
      if (head_bytes_ + k > lim_.max_head_bytes) return -1;  // httplib answers 400 (malformed)
      head_bytes_ += k;
    }
    std::memcpy(ptr, buf_ + off_, k);
    off_ += k;
    return ssize_t(k);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait(POLLOUT, Clock::now() + lim_.write_timeout)) return -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = peer_of(fd_, &port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
      ip = address_of(ss, &port);
    } else {
      ip.clear();
      port = 0;
    }
  }
  socket_t socket() const override { return fd_; }

  // The connection's next request: waits (up to the idle timeout) for its first byte unless it is buffered.
  bool next_request() {
    phase_ = Phase::kIdle;
    phase_start_ = Clock::now();
    if (off_ == len_ && !wait(POLLIN, phase_start_ + lim_.idle_timeout)) return false;
    phase_ = Phase::kHead;
    head_bytes_ = 0;
    phase_start_ = Clock::now();
    deadline_ = phase_start_ + lim_.head_timeout;
    return true;
  }
  void begin_body(size_t declared) {
    if (phase_ != Phase::kHead) return;
    phase_ = Phase::kBody;
    deadline_ = Clock::now() + lim_.body_timeout + std::chrono::seconds(declared >> 20);
  }
  bool gone() const {
    pollfd p{fd_, short(POLLIN | POLLRDHUP), 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) return true;
    if (!(p.revents & POLLIN)) return false;
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }

  bool close_after = false;

 private:
  Clock::time_point read_deadline() const {
    return phase_ == Phase::kIdle ? Clock::now() + lim_.idle_timeout : deadline_;
  }
  // Polls for `events` until the deadline, in slices so that a stopping server is noticed.
  bool wait(short events, Clock::time_point deadline) const {
    for (;;) {
      if (listening_ == INVALID_SOCKET) return false;
      const auto now = Clock::now();
      // waiting for a request or its head while the workers are scarce: this connection's time is the crowded one
      if ((events & POLLIN) && phase_ != Phase::kBody && server_.crowded() && now - phase_start_ > lim_.crowded_timeout)
        return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      if (left.count() <= 0) return false;
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, int(std::min(left, std::chrono::milliseconds(kSlice)).count()));
      if (r > 0) return true;  // ready, or an error / hang-up that the next read or write reports
      if (r < 0 && errno != EINTR) return false;
    }
  }

  int fd_;
  const ConnectionLimits& lim_;
  const std::atomic<socket_t>& listening_;
  const GuardedHttpServer& server_;
  Phase phase_ = Phase::kIdle;
  Clock::time_point phase_start_ = Clock::now();
  Clock::time_point deadline_;
  size_t head_bytes_ = 0;
  char buf_[16384];
  size_t off_ = 0, len_ = 0;
};

thread_local GuardedStream* tl_stream = nullptr;

}  // namespace

void GuardedHttpServer::begin_body(size_t declared) {
  if (tl_stream) tl_stream->begin_body(declared);
}

void GuardedHttpServer::close_after_response() {
  if (tl_stream) tl_stream->close_after = true;
}

bool GuardedHttpServer::closing_after_response() { return tl_stream && tl_stream->close_after; }

bool GuardedHttpServer::client_gone() { return tl_stream && tl_stream->gone(); }

void GuardedHttpServer::widen_backlog(int n) {
  if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, n);
}

int GuardedHttpServer::open_connections() const {
  std::lock_guard<std::mutex> lk(mu_);
  return open_;
}

uint64_t GuardedHttpServer::refused_connections() const {
  std::lock_guard<std::mutex> lk(mu_);
  return refused_;
}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  const std::string addr = peer_of(sock, nullptr);
  bool admitted = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    int& n = per_client_[addr];
    if (n < lim_.max_per_client) {
      ++n;
      ++open_;
      open_now_.store(open_, std::memory_order_relaxed);
      admitted = true;
    } else {
      ++refused_;
    }
  }
  bool ret = false;
  if (!admitted) {
    // Answered before its request is read (nothing of it is): a 429 the client can show, then the socket closes.
    static const std::string body =
        R"({"error":{"message":"too many connections from this address; close some and retry","type":)"
        R"("invalid_request_error","param":null,"code":"too_many_connections"}})";
    const std::string resp = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\n"
                             "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    (void)::send(sock, resp.data(), resp.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    // Whatever of the request has already arrived is read (without waiting) so that closing does not reset the
    // connection before the client has read the 429.
    ::shutdown(sock, SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 16 && ::recv(sock, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
    }
  } else {
    try {
      ret = serve(sock);
    } catch (...) {  // an allocation failure inside httplib's parsing: this connection ends, the server goes on
      ret = false;
    }
    tl_stream = nullptr;
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = per_client_.find(addr); it != per_client_.end() && --it->second <= 0) per_client_.erase(it);
    --open_;
    open_now_.store(open_, std::memory_order_relaxed);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

bool GuardedHttpServer::serve(socket_t sock) {
  GuardedStream strm(sock, lim_, svr_sock_, *this);
  tl_stream = &strm;
  bool ret = false;
  for (int n = 0; n < lim_.max_requests && svr_sock_ != INVALID_SOCKET; ++n) {
    if (!strm.next_request()) break;
    bool closed = false;
    ret = process_request(strm, /*close_connection=*/n + 1 == lim_.max_requests, closed, nullptr);
    if (!ret || closed || strm.close_after) break;
  }
  tl_stream = nullptr;
  return ret;
}

}  // namespace pipit::server
