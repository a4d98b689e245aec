// A persistent thread pool: workers are started once and wait for jobs, so an op costs a wake-up, not a spawn.
// The caller is worker 0 and runs its share too. Workers spin briefly before sleeping: decode issues hundreds of
// small jobs per token, and a futex wake per job would cost more than the work.
// Two kinds of job: run() gives each of nth threads a fixed share and waits for all of them; parallel_for() lets
// the threads that show up take chunks from a shared counter, and returns once every chunk is done, without waiting
// for a worker that never started. On a machine with more runnable threads than cores a descheduled worker then
// costs at most the chunk it holds, not its whole share (a static split waits for the slowest thread).
#pragma once

#include <algorithm>
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
  // Runs fn(begin, end) over chunks of `grain` items of [0, n), taken by whichever threads are running; each item
  // is done exactly once, in one call. n <= grain (or one thread) runs inline.
  template <class F>
  void parallel_for(int64_t n, F&& fn, int64_t grain = 1) {
    parallel_for_ith(n, [&](int, int64_t b, int64_t e) { fn(b, e); }, grain);
  }
  // The same, also passing the calling thread's index (in [0, size()), unique among concurrent calls: per-thread
  // scratch buffers).
  template <class F>
  void parallel_for_ith(int64_t n, F&& fn, int64_t grain = 1) {
    chunked<false>(n, fn, grain);
  }
  // As parallel_for_ith, but chunks shrink as the work runs out (guided scheduling): a thread takes a share of what
  // is left, (n - taken) / (2 * size()) items, never fewer than min_grain. Long runs while there is much to do, short
  // ones at the end, so that the threads finish close together: for callers whose items are independent of how they
  // are grouped (a matmul's output rows), when the wait for the last chunk matters (a decode step: ~140 regions).
  template <class F>
  void parallel_for_guided(int64_t n, F&& fn, int64_t min_grain = 1) {
    chunked<true>(n, fn, min_grain);
  }

  static int default_threads();  // physical cores (falls back to logical)

 private:
  // parallel_for_ith (chunks of `grain`) and parallel_for_guided (shrinking chunks of at least `grain`)
  template <bool kGuided, class F>
  void chunked(int64_t n, F& fn, int64_t grain) {
    if (grain < 1) grain = 1;
    if (n <= 0) return;
    if (n_threads_ == 1 || n <= grain) {
      fn(0, int64_t(0), n);
      return;
    }
    std::atomic<int64_t> next{0};
    const int64_t parts = 2 * int64_t(n_threads_);
    auto job = [&](int ith, int) {
      if constexpr (!kGuided) {
        for (int64_t b; (b = next.fetch_add(grain, std::memory_order_relaxed)) < n;) fn(ith, b, std::min(n, b + grain));
      } else {
        int64_t b = next.load(std::memory_order_relaxed);
        while (b < n) {
          const int64_t e = std::min(n, b + std::max(grain, (n - b) / parts));
          if (next.compare_exchange_weak(b, e, std::memory_order_relaxed)) {
            fn(ith, b, e);
            b = next.load(std::memory_order_relaxed);
          }
        }
      }
    };
    run_dynamic(JobRef(job));
  }
  void worker(int ith);
  void run_dynamic(JobRef job);  // job(ith, size()) on the caller and on each worker that arrives before it closes
  int n_threads_;
  std::vector<std::thread> threads_;
  // Job number << 1 | 1 for a dynamic job. A static job's job_ stays valid until every worker has acknowledged it
  // (pending_); a dynamic job's only while open_ (workers enter by raising active_, then checking open_).
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> active_{0};
  std::atomic<bool> open_{false};
  std::atomic<bool> stop_{false};
  std::atomic<JobRef*> job_{nullptr};
  int job_nth_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

}  // namespace pipit
