// Zip central-directory walk with bounds checks (see zip_reader.h for the records used).
#include "convert/zip_reader.h"

#include <cstdio>
#include <cstring>

#include "core/file_probe.h"

namespace pipit {

namespace {

constexpr uint32_t kEocdSig = 0x06054b50, kEocd64LocSig = 0x07064b50, kEocd64Sig = 0x06064b50;
constexpr uint32_t kCentralSig = 0x02014b50, kLocalSig = 0x04034b50;
constexpr size_t kEocdBytes = 22, kEocd64LocBytes = 20, kEocd64Bytes = 56, kCentralBytes = 46, kLocalBytes = 30;

uint16_t u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) { return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24); }
uint64_t u64(const uint8_t* p) { return uint64_t(u32(p)) | (uint64_t(u32(p + 4)) << 32); }

// Fills 0xFFFFFFFF-marked fields from the zip64 extra field (id 1), in the order the spec lists them.
Status apply_zip64_extra(const uint8_t* extra, size_t n, ZipEntry& e, bool need_size, bool need_csize,
                         bool need_offset, const std::string& ctx) {
  size_t p = 0;
  while (p + 4 <= n) {
    const uint16_t id = u16(extra + p), len = u16(extra + p + 2);
    if (p + 4 + len > n) break;
    if (id == 1) {
      const uint8_t* q = extra + p + 4;
      size_t left = len;
      auto take = [&](uint64_t* v) {
        if (left < 8) return false;
        *v = u64(q);
        q += 8;
        left -= 8;
        return true;
      };
      if ((need_size && !take(&e.size)) || (need_csize && !take(&e.compressed_size)) ||
          (need_offset && !take(&e.local_header_offset)))
        return Error::format("{}: entry '{}': zip64 extra field too short", ctx, e.name);
      return Status::ok();
    }
    p += 4 + len;
  }
  if (need_size || need_csize || need_offset)
    return Error::format("{}: entry '{}': sizes marked zip64 but no zip64 extra field", ctx, e.name);
  return Status::ok();
}

}  // namespace

Result<ZipArchive> ZipArchive::parse(const uint8_t* data, size_t size, const std::string& name) {
  const std::string ctx = "[zip] " + name;
  if (size < kEocdBytes) return Error::format("{}: {} bytes is too small for a zip archive (truncated?)", ctx, size);
  // the EOCD record sits in the last 22 + 65535 (max comment) bytes; search backwards for its signature
  size_t eocd = SIZE_MAX;
  const size_t lowest = size > kEocdBytes + 65535 ? size - kEocdBytes - 65535 : 0;
  for (size_t p = size - kEocdBytes + 1; p-- > lowest;) {
    if (u32(data + p) == kEocdSig && p + kEocdBytes + u16(data + p + 20) <= size) {
      eocd = p;
      break;
    }
  }
  if (eocd == SIZE_MAX) return Error::format("{}: no end-of-central-directory record (not a zip, or truncated)", ctx);
  uint64_t n_entries = u16(data + eocd + 10);
  uint64_t cd_size = u32(data + eocd + 12);
  uint64_t cd_offset = u32(data + eocd + 16);
  if (n_entries == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
    if (eocd < kEocd64LocBytes || u32(data + eocd - kEocd64LocBytes) != kEocd64LocSig)
      return Error::format("{}: zip64 archive without an EOCD64 locator", ctx);
    const uint64_t rec = u64(data + eocd - kEocd64LocBytes + 8);
    if (rec > size || size - rec < kEocd64Bytes || u32(data + rec) != kEocd64Sig)
      return Error::format("{}: bad zip64 end-of-central-directory record at {}", ctx, rec);
    n_entries = u64(data + rec + 32);
    cd_size = u64(data + rec + 40);
    cd_offset = u64(data + rec + 48);
  }
  if (cd_offset > size || cd_size > size - cd_offset)
    return Error::format("{}: central directory [{}, {}) lies outside the file of {} bytes (truncated?)", ctx,
                         cd_offset, cd_offset + cd_size, size);
  if (n_entries > cd_size / kCentralBytes)
    return Error::format("{}: {} entries cannot fit in a central directory of {} bytes", ctx, n_entries, cd_size);

  ZipArchive z;
  z.data_ = data;
  z.size_ = size;
  z.name_ = name;
  const uint8_t* cd = data + cd_offset;
  size_t p = 0;
  for (uint64_t k = 0; k < n_entries; ++k) {
    if (cd_size - p < kCentralBytes || u32(cd + p) != kCentralSig)
      return Error::format("{}: central directory entry {} is damaged", ctx, k);
    const uint8_t* h = cd + p;
    const size_t name_len = u16(h + 28), extra_len = u16(h + 30), comment_len = u16(h + 32);
    if (cd_size - p - kCentralBytes < name_len + extra_len + comment_len)
      return Error::format("{}: central directory entry {} runs past the directory", ctx, k);
    ZipEntry e;
    e.flags = u16(h + 8);
    e.method = u16(h + 10);
    e.compressed_size = u32(h + 20);
    e.size = u32(h + 24);
    e.local_header_offset = u32(h + 42);
    e.name.assign(reinterpret_cast<const char*>(h + kCentralBytes), name_len);
    PIPIT_TRY(apply_zip64_extra(h + kCentralBytes + name_len, extra_len, e, e.size == 0xffffffffu,
                                e.compressed_size == 0xffffffffu, e.local_header_offset == 0xffffffffu, ctx));
    if (z.index_.count(e.name)) return Error::format("{}: entry '{}' appears twice", ctx, e.name);
    z.index_[e.name] = z.entries_.size();
    z.entries_.push_back(std::move(e));
    p += kCentralBytes + name_len + extra_len + comment_len;
  }
  return z;
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Result<std::pair<const uint8_t*, uint64_t>> ZipArchive::data(const ZipEntry& e) const {
  const std::string ctx = "[zip] " + name_ + ": entry '" + e.name + "'";
  if (e.flags & 1) return Error::unsupported("{} is encrypted", ctx);
  if (e.method != 0)
    return Error::unsupported("{} is compressed (method {}); only stored entries are supported, as torch.save "
                              "writes them (re-save the checkpoint with torch.save)",
                              ctx, e.method);
  if (e.compressed_size != e.size)
    return Error::format("{}: stored entry with compressed size {} != size {}", ctx, e.compressed_size, e.size);
  const uint64_t lh = e.local_header_offset;
  if (lh > size_ || size_ - lh < kLocalBytes || u32(data_ + lh) != kLocalSig)
    return Error::format("{}: bad local header at {}", ctx, lh);
  const uint64_t start = lh + kLocalBytes + u16(data_ + lh + 26) + u16(data_ + lh + 28);
  if (start > size_ || e.size > size_ - start)
    return Error::format("{}: data [{}, {}) lies past the end of the file ({} bytes; truncated?)", ctx, start,
                         start + e.size, size_);
  return std::make_pair(data_ + start, e.size);
}

bool is_zip_file(const std::string& path) { return file_starts_with(path, std::string_view("PK\x03\x04", 4)); }

}  // namespace pipit
