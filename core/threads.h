// A persistent thread pool: workers are started once and wait for jobs, so an op costs a wake-up, not a spawn.
// The caller is worker 0 and runs its share too. Workers spin briefly before sleeping: decode issues hundreds of
// small jobs per token, and a futex wake per job would cost more than the work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace pipit {

// Non-owning reference to a callable void(int ith, int nth); no allocation per job.
class JobRef {
 public:
  template <class F>
  JobRef(F& f) : obj_(&f), call_([](void* o, int i, int n) { (*static_cast<F*>(o))(i, n); }) {}  // NOLINT
  void operator()(int ith, int nth) const { call_(obj_, ith, nth); }

 private:
  void* obj_;
  void (*call_)(void*, int, int);
};

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs job(ith, nth) for ith in [0, nth) across the pool and waits for all of them. nth <= size().
  void run(JobRef job, int nth = -1);
  // Splits [0, n) into contiguous ranges, one per thread: fn(begin, end).
  template <class F>
  void parallel_for(int64_t n, F&& fn, int64_t min_per_thread = 1) {
    int nth = n_threads_;
    if (min_per_thread > 0 && n / min_per_thread < nth) nth = int(std::max<int64_t>(1, n / min_per_thread));
    if (nth <= 1) {
      fn(int64_t(0), n);
      return;
    }
    auto job = [&](int ith, int nt) {
      int64_t b = n * ith / nt, e = n * (ith + 1) / nt;
      if (b < e) fn(b, e);
    };
    run(JobRef(job), nth);
  }

  static int default_threads();  // physical cores (falls back to logical)

 private:
  void worker(int ith);
  int n_threads_;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  JobRef* job_ = nullptr;
  int job_nth_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

}  // namespace pipit
