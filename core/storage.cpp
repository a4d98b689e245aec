// Heap, mmap and arena storages.
#include "core/storage.h"

#include "core/file_probe.h"
#include "core/limits.h"
#include "core/small_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

namespace pipit {

namespace {
// Buffers from 1 MiB up are their own anonymous mapping: the kernel hands out zero pages as they are first
// touched, so they need no memset (which, for weights repacked at load, doubled the cost of faulting their pages
// in: 1.2 GB of f16 -> bf16dot took 5.7 s, a third of it in memset).
constexpr size_t kMapMin = size_t(1) << 20;
size_t rounded_size(size_t size) {
  const size_t r = (size + kAlign - 1) / kAlign * kAlign;
  return r == 0 ? kAlign : r;
}
}  // namespace

std::shared_ptr<HeapStorage> HeapStorage::make(size_t size) {
  auto s = std::shared_ptr<HeapStorage>(new HeapStorage());
  if (size > SIZE_MAX - kAlign) throw std::bad_alloc();
  const size_t rounded = rounded_size(size);
  if (rounded >= kMapMin) {
    // From 2 MiB up the mapping starts on a 2 MiB boundary, so that all of it can be backed by huge pages (the
    // kernel only uses them for aligned 2 MiB ranges): map 2 MiB more, then unmap what lies before and after.
    const size_t huge = size_t(2) << 20, extra = rounded >= huge ? huge : 0;
    void* raw = ::mmap(nullptr, rounded + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    auto* m = static_cast<uint8_t*>(raw);
    if (extra) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
      m = reinterpret_cast<uint8_t*>((a + huge - 1) / huge * huge);
      if (m > raw) ::munmap(raw, size_t(m - static_cast<uint8_t*>(raw)));
      if (size_t tail = extra - size_t(m - static_cast<uint8_t*>(raw))) ::munmap(m + rounded, tail);
    }
    ::madvise(m, rounded, MADV_HUGEPAGE);
    s->data_ = m;
    s->size_ = size;
    return s;
  }
  void* p = std::aligned_alloc(kAlign, rounded);
  // Sizes a user controls are checked before they get here (core/limits.h, runtime/memory_plan.h); what is left is
  // a machine that ran out meanwhile. That is not a bug: it unwinds as bad_alloc to Session/loader, which return
  // an error, and to the CLI / C API boundaries, which report it in one line.
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  s->data_ = static_cast<uint8_t*>(p);
  s->size_ = size;
  return s;
}

void small_pages_head(const HeapStorage& s, size_t bytes) {
  if (rounded_size(s.size()) < kMapMin) return;  // an aligned_alloc buffer: no huge pages asked for
  const size_t huge = size_t(2) << 20, rounded = rounded_size(s.size());
  const size_t head = std::min(rounded, (std::min(bytes, rounded) + huge - 1) / huge * huge);
  // untouched yet (make() maps without populating), so this only changes what the first write faults in
  if (head) ::madvise(s.data(), head, MADV_NOHUGEPAGE);
}

HeapStorage::~HeapStorage() {
  if (rounded_size(size_) >= kMapMin) ::munmap(data_, rounded_size(size_));
  else std::free(data_);
}

Result<std::shared_ptr<MmapStorage>> MmapStorage::open(const std::string& path) {
  // O_NONBLOCK: a FIFO opens at once (to be refused below) instead of waiting for a writer; mmap ignores the flag
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Error::io("[mmap] cannot open '{}': {}", path, std::strerror(errno));
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Error::io("[mmap] cannot stat '{}': {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {  // a directory, FIFO or device: nothing to map (a device's st_size is 0)
    ::close(fd);
    return Error::io("[mmap] '{}' is {}, expected a file", path, file_kind(st.st_mode));
  }
  auto s = std::shared_ptr<MmapStorage>(new MmapStorage());
  s->path_ = path;
  s->size_ = size_t(st.st_size);
  if (s->size_ > 0) {
    // From 2 MiB up the mapping starts on a 2 MiB boundary: weights read in place at first are moved to huge pages
    // at the same addresses later (core/page_migration.h), which needs each 2 MiB of the file on a 2 MiB boundary.
    // An address range 2 MiB larger is reserved (no memory), the file mapped over its aligned part, the rest freed.
    const size_t huge = size_t(2) << 20;
    uint8_t* at = nullptr;
    if (s->size_ >= huge && s->size_ <= SIZE_MAX - 2 * huge) {
      void* r = mmap(nullptr, s->size_ + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (r != MAP_FAILED) {
        auto* rb = static_cast<uint8_t*>(r);
        at = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(rb) + huge - 1) / huge * huge);
        const size_t page = size_t(sysconf(_SC_PAGESIZE)), span = (s->size_ + page - 1) / page * page;
        if (at > rb) munmap(rb, size_t(at - rb));
        if (size_t tail = huge - size_t(at - rb)) munmap(at + span, tail);  // the reservation ends at rb + span + huge
      }
    }
    void* p = mmap(at, s->size_, PROT_READ, at ? MAP_PRIVATE | MAP_FIXED : MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      if (at) munmap(at, s->size_);
      ::close(fd);
      return Error::io("[mmap] cannot map '{}': {}", path, std::strerror(e));
    }
    s->data_ = static_cast<uint8_t*>(p);
    // Pages of the file not in the page cache yet are read in 2 MiB folios, which a fault maps with one huge page
    // (Linux 6.x, ext4 / XFS): a model read from disk is on huge pages from its first token on, with nothing copied.
    if (at) madvise(p, s->size_, MADV_HUGEPAGE);
  }
  ::close(fd);
  return s;
}

MmapStorage::~MmapStorage() {
  if (data_) munmap(data_, size_);
}

// Only for pages still mapped from the file: a chunk page_migration.h moved to anonymous memory would read back as
// zeros (the loader releases before it starts moving anything).
void MmapStorage::release(const void* p, size_t n) const {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t b = reinterpret_cast<uintptr_t>(p), e = b + n;
  b = (b + page - 1) / page * page;  // whole pages only: a neighbour's bytes may share the edge pages
  e = e / page * page;
  if (e > b && b >= reinterpret_cast<uintptr_t>(data_) && e <= reinterpret_cast<uintptr_t>(data_) + size_)
    madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

DeviceStorage::DeviceStorage(size_t size) {
  // PROT_NONE + MAP_NORESERVE: address space only, no memory; any host access through it faults
  void* p = mmap(nullptr, std::max<size_t>(size, 1), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
}

DeviceStorage::~DeviceStorage() {
  if (data_) munmap(data_, std::max<size_t>(size_, 1));
}

Arena::Arena(size_t initial_bytes, ChunkAlloc chunk_alloc) : chunk_alloc_(std::move(chunk_alloc)) {
  chunks_.push_back(make_chunk(initial_bytes));
}

std::shared_ptr<Storage> Arena::make_chunk(size_t bytes) const {
  return chunk_alloc_ ? chunk_alloc_(bytes) : std::shared_ptr<Storage>(HeapStorage::make(bytes));
}

uint8_t* Arena::alloc(size_t bytes, std::shared_ptr<Storage>* owner) {
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  if (used_ + bytes > chunks_.back()->size()) {
    const size_t want = std::max(bytes, chunks_.back()->size());
    if (spare_ && spare_->size() >= want) chunks_.push_back(std::move(spare_));
    else chunks_.push_back(make_chunk(want));
    spare_.reset();
    used_ = 0;
  }
  uint8_t* p = chunks_.back()->data() + used_;
  used_ += bytes;
  total_used_ += bytes;
  if (total_used_ > high_water_) high_water_ = total_used_;
  if (owner) *owner = chunks_.back();
  return p;
}

void Arena::reset() {
  // Grow to one chunk that fits the whole high-water pass. Chunks added within a pass are given back by rewind()
  // (a layer's activations), so a pass that overflowed leaves one chunk behind, smaller than its high water: that
  // one is replaced too, else every later pass would allocate (and page in) the overflow again, layer after layer.
  if (chunks_.size() > 1 || chunks_.front()->size() < high_water_) {
    spare_.reset();
    chunks_.clear();
    chunks_.push_back(make_chunk(high_water_ + high_water_ / 8));
  }
  used_ = 0;
  total_used_ = 0;
}

void Arena::rewind(const Mark& m) {
  // Chunks added since the mark are given back (or kept alive by tensors still using them), except the largest one
  // nothing else holds: it is kept as the spare for the next overflow, so that layer after layer of a pass (a model
  // rewinds per layer) does not allocate, zero and page in the same overflow again.
  for (size_t i = m.chunks; i < chunks_.size(); ++i)
    if (chunks_[i].use_count() == 1 && (!spare_ || chunks_[i]->size() > spare_->size())) spare_ = chunks_[i];
  chunks_.resize(m.chunks);
  used_ = m.used;
  total_used_ = m.total_used;
}

size_t Arena::capacity() const {
  size_t c = 0;
  for (auto& ch : chunks_) c += ch->size();
  return c;
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::io("cannot open '{}': {}", path, std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (fstat(fd, &st) != 0) return Error::io("cannot stat '{}': {}", path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return Error::io("'{}' is a directory, expected a file", path);
  if (S_ISREG(st.st_mode) && uint64_t(st.st_size) > max_bytes)
    return Error::out_of_range("'{}' is {}, more than the {} this file may have", path,
                               format_bytes(uint64_t(st.st_size)), format_bytes(max_bytes));
  // Devices, pipes and files that grow are read up to the cap: /dev/zero must end in an error, not in bad_alloc.
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(size_t(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::io("error reading '{}': {}", path, std::strerror(errno));
    }
    if (n == 0) break;
    if (out.size() + size_t(n) > max_bytes)
      return Error::out_of_range("'{}' goes on past {}, the most this file may have", path, format_bytes(max_bytes));
    out.append(buf, size_t(n));
  }
  return out;
}

bool file_exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace pipit
