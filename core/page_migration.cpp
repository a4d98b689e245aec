// Moving file-mapped weights to anonymous huge pages in the background: see page_migration.h.
#include "core/page_migration.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace pipit {

namespace {

constexpr size_t kChunk = size_t(2) << 20;  // one huge page

// A fresh anonymous, 2 MiB aligned, 2 MiB region asking for a huge page; null when there is no memory.
uint8_t* huge_chunk() {
  void* raw = ::mmap(nullptr, 2 * kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* r = static_cast<uint8_t*>(raw);
  auto* m = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(r) + kChunk - 1) / kChunk * kChunk);
  if (m > r) ::munmap(r, size_t(m - r));
  if (size_t tail = kChunk - size_t(m - r)) ::munmap(m + kChunk, tail);
  ::madvise(m, kChunk, MADV_HUGEPAGE);
  return m;
}

// The pagemap scan of Linux 6.7 (include/uapi/linux/fs.h; declared here, as the build's headers may be older).
constexpr unsigned long kPageIsHuge = 1ul << 6;
struct PageRegion {
  uint64_t start, end, categories;
};
struct PmScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
      category_anyof_mask, return_mask;
};
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);
constexpr int kMadvPopulateRead = 22;  // Linux 5.14

// Whether the chunk at `p` is mapped by one 2 MiB page already: the page cache holds the file's bytes there in a
// 2 MiB folio (ext4 and XFS make those from large writes and from reads of a file not yet cached, Linux 6.x), which
// a fault maps whole. Such a chunk reads as fast as an anonymous huge page, and copying it would only double its
// memory. False when this kernel cannot say (before 6.7, or /proc not mounted): the chunk is moved, as before.
bool mapped_huge(int pagemap, uint8_t* p) {
  if (pagemap < 0) return false;
  ::madvise(p, kChunk, kMadvPopulateRead);  // fault it in (cheap when it is one folio; the copy would read it anyway)
  PageRegion r{};
  PmScanArg a{};
  a.size = sizeof(a);
  a.start = reinterpret_cast<uintptr_t>(p);
  a.end = a.start + kChunk;
  a.vec = reinterpret_cast<uintptr_t>(&r);
  a.vec_len = 1;
  a.category_mask = kPageIsHuge;
  a.return_mask = kPageIsHuge;
  return ::ioctl(pagemap, kPagemapScan, &a) == 1 && r.start == a.start && r.end == a.end;
}

}  // namespace

bool MigratingStorage::can_migrate(const MmapStorage& map) {
  return map.data() && reinterpret_cast<uintptr_t>(map.data()) % kChunk == 0;
}

std::shared_ptr<MigratingStorage> MigratingStorage::start(std::shared_ptr<const MmapStorage> map,
                                                          std::vector<std::pair<size_t, size_t>> ranges) {
  if (!map || !can_migrate(*map)) return nullptr;
  auto s = std::shared_ptr<MigratingStorage>(new MigratingStorage());
  s->data_ = map->data();
  s->size_ = map->size();
  // Whole chunks only: the last, partial one (the file's end) stays mapped, as moving part of a page past the end
  // of the file would be moving bytes the file does not have.
  const size_t n_whole = map->size() / kChunk;
  for (const auto& [off, bytes] : ranges) {
    if (bytes == 0 || off >= map->size()) continue;
    const size_t last = std::min(off + bytes, map->size()) - 1;
    for (size_t c = off / kChunk; c <= last / kChunk && c < n_whole; ++c) s->chunks_.push_back(c);
  }
  std::sort(s->chunks_.begin(), s->chunks_.end());
  s->chunks_.erase(std::unique(s->chunks_.begin(), s->chunks_.end()), s->chunks_.end());
  s->map_ = std::move(map);
  if (s->chunks_.empty()) {
    s->done_ = true;
    return s;
  }
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

void MigratingStorage::run() {
  // Below the compute threads, so that the first token comes first, but not at the lowest priority: at nice 19 it
  // got ~1.5% of a core beside busy compute threads (2 cores, 2 threads decoding: ~80 MB moved in 10 s, the rest
  // of the decode read from the mapping's small pages); at nice 10 about a tenth of one.
  ::setpriority(PRIO_PROCESS, id_t(::syscall(SYS_gettid)), 10);
  const int pagemap = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  for (size_t c : chunks_) {
    if (stop_.load(std::memory_order_relaxed)) break;
    uint8_t* dst = data_ + c * kChunk;
    if (mapped_huge(pagemap, dst)) {
      in_place_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    uint8_t* fresh = huge_chunk();
    if (!fresh) break;  // out of memory: the rest stays mapped from the file
    std::memcpy(fresh, dst, kChunk);
    ::mprotect(fresh, kChunk, PROT_READ);  // weights stay read-only, as the file mapping was
    // Atomic for every other thread of the process (see page_migration.h): the old pages are unmapped and the new
    // ones put in their place under the mm's write lock.
    void* at = ::mremap(fresh, kChunk, kChunk, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
    if (at == MAP_FAILED) {
      ::munmap(fresh, kChunk);
      break;  // e.g. the process's map count: moving the rest would fail alike
    }
    moved_.fetch_add(1, std::memory_order_relaxed);
  }
  if (pagemap >= 0) ::close(pagemap);
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  done_cv_.notify_all();
}

void MigratingStorage::wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return done_; });
}

MigratingStorage::~MigratingStorage() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  // data_ belongs to map_, which unmaps it, moved chunks included (munmap takes whatever is mapped there)
}

}  // namespace pipit
