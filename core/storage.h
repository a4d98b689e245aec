// Where tensor bytes live: the heap (owned buffers), a read-only file mapping (weights, used in place), or an
// arena (activations, bump-allocated and reset once per forward pass so the decode loop never calls malloc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace pipit {

constexpr size_t kAlign = 64;  // every buffer and every tensor in a .pipit file starts on a 64-byte boundary

class Storage {
 public:
  virtual ~Storage() = default;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 protected:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A 64-byte aligned, zero-initialised heap buffer. make() throws std::bad_alloc when the machine has no memory
// left (sizes users control are checked before, see core/limits.h); Session, the loader and the CLI / C API
// boundaries turn it into an error.
class HeapStorage : public Storage {
 public:
  static std::shared_ptr<HeapStorage> make(size_t size);
  ~HeapStorage() override;
};

// A read-only memory mapping of a whole file. Pages are loaded on first touch; nothing is copied.
class MmapStorage : public Storage {
 public:
  static Result<std::shared_ptr<MmapStorage>> open(const std::string& path);
  ~MmapStorage() override;
  const std::string& path() const { return path_; }
  // Drops the whole pages inside [p, p + n) from this process's resident memory (madvise DONTNEED): they stay in
  // the page cache, and a later read maps them again. For bytes that were copied elsewhere (weights packed at load).
  void release(const void* p, size_t n) const;

 private:
  std::string path_;
};

// Bytes in a device's memory (backends/device.h): not host-addressable. data() is the start of a reserved,
// inaccessible address range of size() bytes, so tensor views (offsets, slices, reshapes) work unchanged and a
// tensor's byte offset in its buffer is t.data() - storage.data(); a host read or write through it faults at once
// instead of touching someone else's memory. A backend derives from it to hold its handle (an OpenCL cl_mem).
class DeviceStorage : public Storage {
 public:
  ~DeviceStorage() override;
  size_t offset_of(const void* p) const { return size_t(static_cast<const uint8_t*>(p) - data_); }
  // Copies `bytes` from byte `offset` to host memory, blocking: the load-time reads of small weights a model keeps
  // as host values after they were uploaded (core/host_f32.h: GPT-OSS's sinks, Gemma 4's scales). False when the
  // backend cannot.
  virtual bool read_back(size_t offset, void* dst, size_t bytes) const { return false; }

 protected:
  explicit DeviceStorage(size_t size);  // reserves the address range (throws std::bad_alloc when it cannot)
};

// Bump allocator for activations. alloc() is a pointer increment; reset() rewinds. When a pass needs more than the
// current chunk, a new chunk is added, and the next reset() merges everything into one chunk of the high-water size,
// so after the first pass of a given size no allocation happens.
class Arena {
 public:
  // Where chunks come from: the heap by default; a device's allocator for activations kept in device memory.
  using ChunkAlloc = std::function<std::shared_ptr<Storage>(size_t bytes)>;
  explicit Arena(size_t initial_bytes = 1 << 20, ChunkAlloc chunk_alloc = nullptr);
  uint8_t* alloc(size_t bytes, std::shared_ptr<Storage>* owner);
  void reset();
  // Everything allocated after mark() is given back by rewind(mark): a model rewinds after each layer, so a pass
  // needs one layer's activations, not all of them.
  struct Mark {
    size_t chunks, used, total_used;
  };
  Mark mark() const { return {chunks_.size(), used_, total_used_}; }
  void rewind(const Mark& m);
  size_t high_water() const { return high_water_; }
  size_t capacity() const;

 private:
  ChunkAlloc chunk_alloc_;
  std::vector<std::shared_ptr<Storage>> chunks_;
  std::shared_ptr<Storage> spare_;  // an overflow chunk given back by rewind(), for the next overflow
  size_t used_ = 0;         // bytes used in chunks_.back()
  size_t total_used_ = 0;   // bytes used across all chunks this pass
  size_t high_water_ = 0;
  std::shared_ptr<Storage> make_chunk(size_t bytes) const;
};

// Rewinds the arena when it goes out of scope.
class ArenaScope {
 public:
  explicit ArenaScope(Arena& a) : arena_(a), mark_(a.mark()) {}
  ~ArenaScope() { arena_.rewind(mark_); }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  Arena& arena_;
  Arena::Mark mark_;
};

// Whole-file read helper for small files (configs, tokenizer.json, prompts). A directory, or a file / device / pipe
// longer than max_bytes (/dev/zero), is an error naming the cap, not an endless read.
constexpr size_t kMaxTextFile = size_t(1) << 30;  // 1 GiB: tokenizer.json files are 2-35 MB
Result<std::string> read_file(const std::string& path, size_t max_bytes = kMaxTextFile);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);

}  // namespace pipit
