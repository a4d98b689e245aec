// The connection layer under cpp-httplib: how long a client may take to send each part of a request, how much
// head it may send, and how many connections one client address may hold at once.
//
// Why here and not in httplib: Debian's cpp-httplib 0.11 times out each read separately (a client that sends one
// header byte every few seconds holds a worker thread for ever), buffers a header line of any length, drains a
// declared body it will refuse, and has no notion of client addresses. Its Server lets a subclass take over
// process_and_close_socket (the per-connection loop) and call process_request with a Stream of its own; that is
// what GuardedHttpServer does. Its Stream enforces one deadline per phase (waiting for a request, its head, its
// body) rather than per read, caps the head's bytes, and counts connections per address before reading anything.
// Handlers reach the connection they run on through the static functions below (each worker thread serves one
// connection at a time).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include <httplib.h>

namespace pipit::server {

struct ConnectionLimits {
  std::chrono::milliseconds idle_timeout{5000};   // keep-alive: from connect / the last response to the next request
  std::chrono::milliseconds head_timeout{10000};  // the request line and every header, from the first byte
  std::chrono::milliseconds body_timeout{30000};  // the body, from the end of the head (plus 1 s per MiB declared)
  std::chrono::milliseconds write_timeout{30000}; // any one write of the response
  size_t max_head_bytes = 64 << 10;               // request line + headers
  int max_per_client = 64;                        // open connections from one address; more are refused (429)
  int max_requests = 100;                         // requests on one keep-alive connection
  // Crowding: each open connection holds one of `workers` threads. Once more than 3/4 of them are held, a
  // connection that is idle or still sending its head (not yet a request) gets `crowded_timeout` from the start of
  // that phase instead of idle_timeout / head_timeout, so trickling or idle sockets from many addresses (each under
  // max_per_client) cannot keep a health check or a real request waiting for long. 0 workers: off.
  int workers = 0;
  std::chrono::milliseconds crowded_timeout{1000};
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(ConnectionLimits lim) : lim_(lim) {}

  // For the handler running on this thread's connection (no-ops off a connection):
  // the head is read and accepted; the body's deadline starts now (`declared`: its Content-Length, 0 if none).
  static void begin_body(size_t declared);
  // Close the connection after this response (a body that was refused unread must not be parsed as a request).
  static void close_after_response();
  static bool closing_after_response();
  // The client has closed its side (or reset): work for it can stop. Never blocks.
  static bool client_gone();

  // httplib listens with a backlog of 5 (compiled in): under a burst of clients (64 connecting at once) the kernel's
  // accept queue overflows and connections are reset. Called after binding: listen() again with a deeper queue.
  void widen_backlog(int n);

  // Open connections (all addresses), and the number refused for being over the per-address cap.
  int open_connections() const;
  bool crowded() const { return lim_.workers > 0 && open_now_.load(std::memory_order_relaxed) * 4 > lim_.workers * 3; }
  uint64_t refused_connections() const;

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool serve(socket_t sock);

  ConnectionLimits lim_;
  mutable std::mutex mu_;
  std::map<std::string, int> per_client_;
  int open_ = 0;
  std::atomic<int> open_now_{0};  // open_, readable without the mutex (crowded(), polled by every waiting stream)
  uint64_t refused_ = 0;
};

}  // namespace pipit::server
