// ThreadPool: every item of a parallel loop runs exactly once, chunks respect their grain, and the guided loop's
// chunks shrink towards the end (the property the matmuls' load balance relies on), on 1 and on several threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "core/threads.h"

namespace pipit {
namespace {

struct Chunks {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> runs;  // [begin, end) in the order taken
  std::vector<int> hits;
  explicit Chunks(int64_t n) : hits(size_t(n), 0) {}
  void add(int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lk(mu);
    runs.emplace_back(b, e);
    for (int64_t i = b; i < e; ++i) ++hits[size_t(i)];
  }
  bool each_once() const {
    return std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; });
  }
};

class Pool : public ::testing::TestWithParam<int> {};

TEST_P(Pool, ParallelForRunsEachItemOnceInGrainChunks) {
  ThreadPool pool(GetParam());
  for (int64_t n : {0, 1, 7, 64, 1000, 4097}) {
    for (int64_t grain : {1, 3, 16}) {
      Chunks c(n);
      pool.parallel_for(n, [&](int64_t b, int64_t e) { c.add(b, e); }, grain);
      EXPECT_TRUE(c.each_once()) << "n " << n << " grain " << grain;
      for (auto [b, e] : c.runs) {
        EXPECT_EQ(b % grain, 0) << "chunks start on the grain";
        EXPECT_TRUE(e - b == grain || e == n) << "n " << n << " grain " << grain << " chunk " << b << ".." << e;
      }
    }
  }
}

TEST_P(Pool, GuidedRunsEachItemOnceAndShrinksItsChunks) {
  ThreadPool pool(GetParam());
  for (int64_t n : {0, 1, 5, 100, 4096, 9973}) {
    for (int64_t min_grain : {1, 2, 8}) {
      Chunks c(n);
      std::atomic<int> bad_ith{0};
      pool.parallel_for_guided(n, [&](int ith, int64_t b, int64_t e) {
        if (ith < 0 || ith >= pool.size()) bad_ith.fetch_add(1);
        c.add(b, e);
      }, min_grain);
      EXPECT_TRUE(c.each_once()) << "n " << n << " min_grain " << min_grain;
      EXPECT_EQ(bad_ith.load(), 0);
      if (n == 0) continue;
      // Chunks come out in increasing order of begin; sorted by it, each is a share of what was left when it was
      // taken: at least min_grain (except the last), at most what was left / (2 threads) or min_grain.
      std::sort(c.runs.begin(), c.runs.end());
      const int64_t parts = 2 * int64_t(pool.size());
      for (size_t i = 0; i < c.runs.size(); ++i) {
        const auto [b, e] = c.runs[i];
        const int64_t left = n - b;
        if (pool.size() == 1 || n <= min_grain) {
          EXPECT_EQ(c.runs.size(), 1u);
          EXPECT_EQ(e - b, n);
          continue;
        }
        EXPECT_EQ(e - b, std::min(left, std::max(min_grain, left / parts))) << "n " << n << " chunk " << b << ".." << e;
      }
      if (pool.size() > 1 && n >= 100 * min_grain) {
        EXPECT_GT(c.runs.front().second - c.runs.front().first, c.runs.back().second - c.runs.back().first)
            << "the last chunk is shorter than the first";
      }
    }
  }
}

TEST_P(Pool, RunGivesEachThreadItsIndex) {
  ThreadPool pool(GetParam());
  std::vector<std::atomic<int>> seen(size_t(pool.size()));
  auto job = [&](int ith, int nth) {
    EXPECT_EQ(nth, pool.size());
    seen[size_t(ith)].fetch_add(1);
  };
  pool.run(JobRef(job));
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(Threads, Pool, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace pipit
