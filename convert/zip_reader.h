// A read-only zip reader for torch.save archives: finds entries through the central directory (zip64 included) and
// hands out their bytes in place. torch.save writes STORED (uncompressed) entries, which is all this supports: a
// compressed entry is an error naming it. Every offset and size is checked against the buffer.
//
// Bytes used (reference: PKWARE APPNOTE.TXT 4.3): end of central directory record (sig 50 4b 05 06, 22 bytes + comment)
// at the end; for zip64 the EOCD64 locator (sig 50 4b 06 07, 20 bytes) right before it points at the EOCD64 record
// (sig 50 4b 06 06); central directory entries (sig 50 4b 01 02, 46 bytes + name + extra + comment, zip64 sizes and
// offset in extra field 0x0001); each entry's local header (sig 50 4b 03 04, 30 bytes + name + extra) precedes its data.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace pipit {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 = stored
  uint16_t flags = 0;
  uint64_t compressed_size = 0, size = 0;
  uint64_t local_header_offset = 0;
};

class ZipArchive {
 public:
  static Result<ZipArchive> parse(const uint8_t* data, size_t size, const std::string& name);
  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& name) const;
  // The bytes of a stored entry, in place. Error for compressed or encrypted entries and bad local headers.
  Result<std::pair<const uint8_t*, uint64_t>> data(const ZipEntry& e) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, size_t> index_;
};

bool is_zip_file(const std::string& path);

}  // namespace pipit
