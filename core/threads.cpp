// Thread pool implementation: generation counter + spin-then-sleep workers.
#include "core/threads.h"

#include <fstream>
#include <set>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#define PIPIT_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define PIPIT_PAUSE() asm volatile("yield")
#else
#define PIPIT_PAUSE() do {} while (0)
#endif

namespace pipit {

namespace {
constexpr int kSpinIters = 1 << 14;      // worker: pauses before sleeping on the condition variable
constexpr int kWaitSpinIters = 1 << 12;  // caller: pauses before yielding while workers finish
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true);
    generation_.fetch_add(2);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::run(JobRef job, int nth) {
  if (nth < 0 || nth > n_threads_) nth = n_threads_;
  if (nth == 1) {
    job(0, 1);
    return;
  }
  job_.store(&job, std::memory_order_relaxed);
  job_nth_ = nth;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    // The lock orders the generation bump with sleepers checking it (no lost wake-up).
    std::lock_guard<std::mutex> lk(mu_);
    generation_.store((generation_.load() | 1) + 1, std::memory_order_release);  // next even number: static
  }
  if (sleepers_.load() > 0) cv_.notify_all();
  job(0, nth);
  // Spin briefly (the usual case: workers finish within microseconds of us), then yield the core so that a worker
  // that was descheduled (an oversubscribed machine) can run instead of us burning its time slice.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kWaitSpinIters) {
      PIPIT_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
  job_.store(nullptr, std::memory_order_relaxed);
}

void ThreadPool::run_dynamic(JobRef job) {
  job_.store(&job, std::memory_order_relaxed);
  job_nth_ = n_threads_;
  open_.store(true, std::memory_order_release);  // after job_: a worker that sees it open sees this job
  {
    std::lock_guard<std::mutex> lk(mu_);
    generation_.store((generation_.load() + 1) | 1, std::memory_order_release);  // next odd number: dynamic
  }
  if (sleepers_.load() > 0) cv_.notify_all();
  job(0, n_threads_);
  // Every chunk has been taken; close the job and wait only for the workers inside it (seq_cst: a worker that
  // raises active_ after we read it must see open_ == false).
  open_.store(false, std::memory_order_seq_cst);
  for (int spin = 0; active_.load(std::memory_order_seq_cst) != 0; ++spin) {
    if (spin < kWaitSpinIters) {
      PIPIT_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
  job_.store(nullptr, std::memory_order_relaxed);
}

void ThreadPool::worker(int ith) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinIters; ++spin) {
      if (spin < kSpinIters / 4) PIPIT_PAUSE(); else std::this_thread::yield();
      g = generation_.load(std::memory_order_acquire);
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1);
      cv_.wait(lk, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      g = generation_.load();
    }
    seen = g;
    if (stop_.load()) return;
    if ((g & 1) == 0) {
      // static: this job cannot end (nor the next begin) before we acknowledge it, so job_ is still this job's
      JobRef* job = job_.load(std::memory_order_relaxed);
      if (ith < job_nth_) (*job)(ith, job_nth_);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    } else {
      // dynamic: join whichever dynamic job is open now (g's, or a later one if we woke late), if any
      active_.fetch_add(1, std::memory_order_seq_cst);
      if (open_.load(std::memory_order_seq_cst)) (*job_.load(std::memory_order_acquire))(ith, n_threads_);
      active_.fetch_sub(1, std::memory_order_release);
    }
  }
}

int ThreadPool::default_threads() {
  // Count distinct (physical id, core id) pairs in /proc/cpuinfo; hyper-threads share a core's SIMD units.
  std::ifstream f("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(f, line)) {
    auto val = [&] { return std::atoi(line.substr(line.find(':') + 1).c_str()); };
    if (line.rfind("physical id", 0) == 0) phys = val();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, val()});
  }
  int n = int(cores.size());
  int logical = int(std::thread::hardware_concurrency());
  if (n <= 0 || n > logical) n = logical;
  return n > 0 ? n : 1;
}

}  // namespace pipit
