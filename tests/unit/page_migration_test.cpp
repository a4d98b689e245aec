// File-mapped bytes moved to anonymous huge pages in the background (core/page_migration.h): the mapping is 2 MiB
// aligned, every chunk that holds a given range is moved (or found on a huge page of the page cache already, and left)
// and no other, the bytes never change - not after the move and not for a thread reading them while it happens - and
// a storage dropped mid-way stops its thread cleanly.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/page_migration.h"
#include "core/storage.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

uint8_t byte_at(size_t i) { return uint8_t((i * 2654435761u) >> 13); }

// The file is written `piece` bytes at a time: 4 KiB writes leave it in the page cache in small folios (a chunk the
// migration must copy), whole aligned 2 MiB ones in 2 MiB folios where the kernel makes them (ext4 / XFS, Linux 6.x).
std::string write_pattern(const test::ScratchDir& d, size_t n, size_t piece = 4096,
                          const std::string& name = "pattern.bin") {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = byte_at(i);
  const std::string path = d.path(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::setvbuf(f, nullptr, _IONBF, 0);
  for (size_t at = 0; at < n; at += piece) std::fwrite(b.data() + at, 1, std::min(piece, n - at), f);
  std::fclose(f);
  return path;
}

uint64_t checksum(const uint8_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; i += 64) s = s * 31 + p[i];
  return s;
}

// Bytes of the mapping at [base, base + n) that /proc/self/smaps counts under `key`: "Anonymous" (moved chunks),
// "FilePmdMapped" (the file's own 2 MiB pages).
size_t smaps_bytes(const uint8_t* base, size_t n, const std::string& key) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  size_t total = 0;
  bool inside = false;
  const uintptr_t b = reinterpret_cast<uintptr_t>(base), e = b + n;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;  // a mapping's first line: "lo-hi perms ..."; the others are "Key: value"
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      inside = lo >= b && hi <= e;
      continue;
    }
    size_t kb = 0;
    if (inside && line.rfind(key + ":", 0) == 0 && std::sscanf(line.c_str() + key.size() + 1, "%zu", &kb) == 1)
      total += kb << 10;
  }
  return total;
}

TEST(PageMigration, MovesTheChunksOfTheRangesAndKeepsEveryByte) {
  test::ScratchDir d("migrate");
  const size_t n = 9 * kMiB + 4000;  // 4 whole chunks and a partial one at the end
  auto map = MmapStorage::open(write_pattern(d, n));
  ASSERT_TRUE(map.is_ok());
  const MmapStorage& m = **map;
  ASSERT_TRUE(MigratingStorage::can_migrate(m)) << "the mapping is 2 MiB aligned";
  const uint64_t want = checksum(m.data(), n);
  // chunk 0 (the file's start, say a header) is not asked for; [2.5, 5) MiB spans chunks 1 and 2, [6.5, 7) MiB lies
  // in chunk 3; the last range is in the partial chunk 4 at the file's end, which stays mapped from the file
  auto s = MigratingStorage::start(*map, {{5 * kMiB / 2, 5 * kMiB / 2}, {13 * kMiB / 2, kMiB / 2},
                                          {8 * kMiB + 100, kMiB}});
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->chunks_planned(), 3u);
  EXPECT_EQ(s->data(), m.data());
  // a reader going over all the bytes while they move sees them unchanged every time
  std::atomic<bool> done{false};
  std::atomic<int> bad{0}, passes{0};
  std::thread reader([&] {
    while (!done.load()) {
      if (checksum(m.data(), n) != want) bad.fetch_add(1);
      passes.fetch_add(1);
    }
  });
  s->wait();
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0) << "over " << passes.load() << " passes";
  EXPECT_EQ(s->chunks_moved() + s->chunks_in_place(), 3u);
  EXPECT_EQ(checksum(m.data(), n), want);
  for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(m.data()[i], byte_at(i)) << i;
  EXPECT_EQ(m.data()[n - 1], byte_at(n - 1));
  EXPECT_EQ(smaps_bytes(m.data(), n, "Anonymous"), s->chunks_moved() * 2 * kMiB)
      << "the moved ones of chunks 1 to 3 are anonymous now, 0 and 4 are not";
  EXPECT_GE(smaps_bytes(m.data(), n, "FilePmdMapped"), s->chunks_in_place() * 2 * kMiB)
      << "a chunk left in place is mapped by a 2 MiB page of the file";
}

// A file written in whole 2 MiB pieces (as PipitWriter writes a .pipit) is held by the page cache in 2 MiB folios
// where the kernel can; such chunks are mapped whole already, and nothing is copied.
TEST(PageMigration, LeavesChunksTheFileHoldsInHugePages) {
  test::ScratchDir d("migrate_huge");
  const size_t n = 8 * kMiB;
  auto map = MmapStorage::open(write_pattern(d, n, 2 * kMiB));
  ASSERT_TRUE(map.is_ok());
  const MmapStorage& m = **map;
  const uint64_t want = checksum(m.data(), n);
  auto s = MigratingStorage::start(*map, {{0, n}});
  ASSERT_NE(s, nullptr);
  s->wait();
  EXPECT_EQ(s->chunks_moved() + s->chunks_in_place(), 4u);
  EXPECT_EQ(checksum(m.data(), n), want);
  EXPECT_EQ(smaps_bytes(m.data(), n, "Anonymous"), s->chunks_moved() * 2 * kMiB);
  if (s->chunks_in_place() == 0)
    GTEST_SKIP() << "this kernel or file system keeps the file in small pages (or cannot report huge mappings)";
  EXPECT_EQ(s->chunks_in_place(), 4u) << "every chunk of the file is one 2 MiB folio";
  EXPECT_EQ(smaps_bytes(m.data(), n, "FilePmdMapped"), n);
}

TEST(PageMigration, StopsWhenDroppedAndLeavesTheMappingWhole) {
  test::ScratchDir d("migrate_stop");
  const size_t n = 64 * kMiB;
  auto map = MmapStorage::open(write_pattern(d, n));
  ASSERT_TRUE(map.is_ok());
  const uint64_t want = checksum((*map)->data(), n);
  auto s = MigratingStorage::start(*map, {{0, n}});
  ASSERT_NE(s, nullptr);
  s.reset();  // joins its thread, whatever it had moved by then
  EXPECT_EQ(checksum((*map)->data(), n), want);
}

TEST(PageMigration, SmallFilesAndEmptyRanges) {
  test::ScratchDir d("migrate_small");
  auto small = MmapStorage::open(write_pattern(d, 100000));
  ASSERT_TRUE(small.is_ok());
  // under one chunk: nothing to move (the mapping need not be aligned, and a partial chunk is never moved)
  if (MigratingStorage::can_migrate(**small)) {
    auto s = MigratingStorage::start(*small, {{0, 100000}});
    ASSERT_NE(s, nullptr);
    s->wait();
    EXPECT_EQ(s->chunks_planned(), 0u);
  }
  auto big = MmapStorage::open(write_pattern(d, 4 * kMiB));
  ASSERT_TRUE(big.is_ok());
  auto s = MigratingStorage::start(*big, {{kMiB, 0}, {5 * kMiB, kMiB}});  // empty, and past the end
  ASSERT_NE(s, nullptr);
  s->wait();
  EXPECT_EQ(s->chunks_planned(), 0u);
}

}  // namespace
}  // namespace pipit
