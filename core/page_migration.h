// Weights read in place from a file mapping at first, and moved to anonymous memory on 2 MiB pages in the
// background, at the same addresses.
//
// Why: decode reads every weight once per token, and from the page cache's 4 KiB pages it runs slower than from
// anonymous huge pages (the loader's copy, runtime/loader.cpp). But copying at load put the whole copy - the kernel
// zeroing each fresh huge page, then the memcpy - between process start and the first token: about half of the CPU
// time of a cold `pipit run` of a 0.6B q4 .pipit here. A matrix the file already holds in the layout the kernels want
// (a .pipit written for this target, an f16 matrix of a GGUF) needs no rewrite, only other pages.
//
// How: the mapping is 2 MiB aligned (MmapStorage::open). A thread at a low priority (nice 10) copies each 2 MiB
// chunk that holds such matrices into a fresh anonymous huge page and moves that page over the chunk with
// mremap(MREMAP_FIXED): the kernel swaps the page table entries under the mm's write lock, so a thread reading the
// chunk meanwhile sees either the file's page or the copy, the same bytes either way - weights stay exact at every
// instant. A chunk that cannot be moved (out of memory, map count) stays mapped from the file, which is still right.
// A chunk the page cache holds as one 2 MiB folio is mapped by one huge page already and is left where it is: a
// .pipit written by this build (large aligned writes, format/pipit_format.cpp) or read from disk once is held so on
// Linux 6.x ext4/XFS, and then nothing is copied at all - no second copy of the weights in memory, no copying
// thread beside the first tokens.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/storage.h"

namespace pipit {

class MigratingStorage : public Storage {
 public:
  // ranges: [offset, offset + bytes) of `map` to move (each widened to whole 2 MiB chunks); null when the mapping is
  // not 2 MiB aligned (!can_migrate: nothing would land on huge pages, the caller copies instead). The thread starts
  // at once.
  // Whether start() would take chunks of this mapping (it is 2 MiB aligned).
  static bool can_migrate(const MmapStorage& map);
  static std::shared_ptr<MigratingStorage> start(std::shared_ptr<const MmapStorage> map,
                                                 std::vector<std::pair<size_t, size_t>> ranges);
  ~MigratingStorage() override;  // stops the thread after the chunk in hand, and waits for it
  // Waits until every chunk was moved (or failed to): for tests and benchmarks that must see the final pages.
  void wait() const;
  size_t chunks_moved() const { return moved_.load(); }
  // Chunks left where they were because the file's pages there were 2 MiB pages already (see run()).
  size_t chunks_in_place() const { return in_place_.load(); }
  size_t chunks_planned() const { return chunks_.size(); }

 private:
  MigratingStorage() = default;
  void run();

  std::shared_ptr<const MmapStorage> map_;
  std::vector<size_t> chunks_;  // chunk indices (offset / 2 MiB) to move, ascending
  std::atomic<bool> stop_{false};
  std::atomic<size_t> moved_{0}, in_place_{0};
  mutable std::mutex mu_;
  mutable std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace pipit
