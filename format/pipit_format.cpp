// .pipit reader (bounds-checked, zero-copy views into the mapping) and streaming writer. The layout is documented
// at the top of pipit_format.h.
#include "format/pipit_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "core/file_probe.h"
#include "core/json_depth.h"
#include "core/output_file.h"
#include "core/storage.h"
#include "core/utf8_check.h"

namespace pipit {

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

const char* const kTextKeys[] = {"tokenizer", "tokenizer_config", "preprocessor_config", "processor_config",
                                 "chat_template"};
const char* const kBlobKeys[] = {"tokenizer_compiled"};

// "generator" and "quantization" only describe the file (inspect prints them), but their types are checked here like
// every other field, so no reader meets a string where it expects an object.
Status check_descriptive_fields(const nlohmann::json& h, const std::string& ctx) {
  if (h.contains("generator") && !h["generator"].is_string())
    return Error::format("{}: 'generator' must be a string, got {}", ctx, h["generator"].type_name());
  if (!h.contains("quantization")) return Status::ok();
  const auto& q = h["quantization"];
  if (!q.is_object()) return Error::format("{}: 'quantization' must be an object, got {}", ctx, q.type_name());
  for (const char* k : {"quant", "target", "layout", "source_format"})
    if (q.contains(k) && !q[k].is_string())
      return Error::format("{}: 'quantization.{}' must be a string, got {}", ctx, k, q[k].type_name());
  for (const char* k : {"rules", "fallbacks"})
    if (q.contains(k) && !q[k].is_array())
      return Error::format("{}: 'quantization.{}' must be a list, got {}", ctx, k, q[k].type_name());
  return Status::ok();
}

// One entry of the "tensors" array, every field checked.
Result<PipitTensorEntry> parse_entry(const nlohmann::json& j, size_t index, uint64_t data_bytes,
                                     const std::string& ctx) {
  const std::string ectx = fmt("{}: tensors[{}]", ctx, index);
  if (!j.is_object()) return Error::format("{}: expected an object", ectx);
  for (const char* k : {"name", "dtype", "shape", "offset", "nbytes"})
    if (!j.contains(k)) return Error::format("{}: missing '{}'", ectx, k);
  if (!j["name"].is_string() || j["name"].get_ref<const std::string&>().empty())
    return Error::format("{}: 'name' must be a non-empty string", ectx);
  PipitTensorEntry e;
  e.name = j["name"].get<std::string>();
  const std::string tctx = fmt("{}: tensor '{}'", ctx, e.name);
  if (!j["dtype"].is_string() || !dtype_from_name(j["dtype"].get_ref<const std::string&>(), &e.dtype))
    return Error::format("{}: unknown dtype {} (expected f32, f16, bf16, i32, i8, q8_0, q4_0, q4_k, q5_k, q6_k, ...)", tctx,
                         j["dtype"].dump());
  const auto& js = j["shape"];
  if (!js.is_array() || js.empty() || js.size() > size_t(kMaxDims))
    return Error::format("{}: shape {} must be a list of 1 to {} dimensions", tctx, js.dump(), kMaxDims);
  for (auto& d : js) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40))
      return Error::format("{}: shape {} has an entry that is not a dimension", tctx, js.dump());
    e.shape.push_back(int64_t(d.get<uint64_t>()));
  }
  if (!j["offset"].is_number_unsigned() || !j["nbytes"].is_number_unsigned())
    return Error::format("{}: offset and nbytes must be non-negative integers", tctx);
  e.offset = j["offset"].get<uint64_t>();
  e.nbytes = j["nbytes"].get<uint64_t>();
  auto want = pipit_tensor_bytes(e.dtype, e.shape);
  if (!want) return want.status().with_context(tctx);
  if (*want != e.nbytes)
    return Error::format("{}: nbytes {} but dtype {} and shape {} need {} (the header lies about sizes)", tctx,
                         e.nbytes, dtype_name(e.dtype), shape_to_string(e.shape), *want);
  if (e.offset % kAlign)
    return Error::format("{}: offset {} is not a multiple of {}", tctx, e.offset, kAlign);
  if (e.offset > data_bytes || e.nbytes > data_bytes - e.offset)
    return Error::format("{}: bytes [{}, {}) lie outside the data section of {} bytes (truncated file?)", tctx,
                         e.offset, e.offset + e.nbytes, data_bytes);
  return e;
}

}  // namespace

Result<uint64_t> pipit_tensor_bytes(DType dtype, const std::vector<int64_t>& shape) {
  const auto& info = dtype_info(dtype);
  if (shape.empty()) return Error::format("a tensor needs at least one dimension");
  if (dtype_is_panel(dtype) && (shape.size() != 2 || shape[0] % kPanelRows))
    return Error::format("dtype {} holds panels of {} rows: it needs a 2-d shape with rows a multiple of {}, shape is {}",
                         info.name, kPanelRows, kPanelRows, shape_to_string(shape));
  const int64_t last = shape.back();
  if (last % info.block_elems)
    return Error::format("dtype {} needs the last dimension to be a multiple of {}, shape is {}", info.name,
                         info.block_elems, shape_to_string(shape));
  uint64_t n = uint64_t(last / info.block_elems) * uint64_t(info.block_bytes);
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    const uint64_t d = uint64_t(shape[i]);
    if (d && n > (uint64_t(1) << 50) / d) return Error::format("shape {} is too large", shape_to_string(shape));
    n *= d;
  }
  if (n > (uint64_t(1) << 50)) return Error::format("shape {} is too large", shape_to_string(shape));
  return n;
}

Result<PipitFile> PipitFile::open(const std::string& path) {
  PIPIT_ASSIGN_OR_RETURN(auto map, MmapStorage::open(path));
  const uint8_t* data = map->data();
  const size_t size = map->size();
  return parse(data, size, std::move(map), path);
}

Result<PipitFile> PipitFile::parse(const uint8_t* data, size_t size, std::shared_ptr<Storage> owner,
                                   const std::string& name) {
  const std::string ctx = "[pipit] " + name;
  if (size < kPipitPreambleBytes)
    return Error::format("{}: file is {} bytes, smaller than the {}-byte preamble (truncated?)", ctx, size,
                         kPipitPreambleBytes);
  if (std::memcmp(data, kPipitMagic, 8) != 0) return Error::format("{}: not a .pipit file (bad magic)", ctx);
  PipitFile f;
  f.path_ = name;
  f.owner_ = owner;
  f.file_size_ = size;
  f.version_ = read_u32(data + 8);
  if (f.version_ < kPipitOldestVersion || f.version_ > kPipitVersion)
    return Error::unsupported("{}: format version {}, this pipit reads versions {} to {} (re-convert the model with "
                              "this pipit, or use a newer pipit)",
                              ctx, f.version_, kPipitOldestVersion, kPipitVersion);
  if (uint32_t flags = read_u32(data + 12); flags != 0)
    return Error::unsupported("{}: unknown flags {} in the preamble", ctx, flags);
  const uint64_t header_bytes = read_u64(data + 16);
  const uint64_t data_offset = read_u64(data + 24);
  const uint64_t data_bytes = read_u64(data + 32);
  if (header_bytes > kPipitMaxHeaderBytes || header_bytes > size - kPipitPreambleBytes)
    return Error::format("{}: header of {} bytes does not fit in the file of {} bytes (truncated?)", ctx,
                         header_bytes, size);
  if (data_offset % kAlign || data_offset < kPipitPreambleBytes + header_bytes)
    return Error::format("{}: data offset {} must be a multiple of {} after the {}-byte header", ctx, data_offset,
                         kAlign, header_bytes);
  if (data_offset > size || data_bytes > size - data_offset)
    return Error::format("{}: data section [{}, {}) ends past the end of the file ({} bytes; truncated?)", ctx,
                         data_offset, data_offset + data_bytes, size);
  f.data_offset_ = data_offset;

  const char* hb = reinterpret_cast<const char*>(data) + kPipitPreambleBytes;
  if (json_depth(std::string_view(hb, header_bytes)) > kMaxJsonDepth)
    return Error::format("{}: the header JSON is nested deeper than {} levels", ctx, kMaxJsonDepth);
  f.header_ = nlohmann::json::parse(hb, hb + header_bytes, nullptr, /*allow_exceptions=*/false);
  if (f.header_.is_discarded() || !f.header_.is_object())
    return Error::format("{}: the header is not a JSON object", ctx);
  const auto& h = f.header_;
  if (!h.contains("format") || h["format"] != "pipit") return Error::format("{}: header 'format' is not \"pipit\"", ctx);
  if (!h.contains("version") || !h["version"].is_number_unsigned() || h["version"].get<uint64_t>() != f.version_)
    return Error::format("{}: header 'version' disagrees with the preamble's {}", ctx, f.version_);
  if (!h.contains("config") || !h["config"].is_object())
    return Error::format("{}: header has no 'config' object", ctx);
  if (h.contains("generation_config") && !h["generation_config"].is_object())
    return Error::format("{}: 'generation_config' must be an object", ctx);
  if (f.version_ == 1) {
    for (const char* k : kTextKeys) {
      if (!h.contains(k)) continue;
      if (!h[k].is_string()) return Error::format("{}: '{}' must be a string", ctx, k);
    }
  } else {
    for (const char* k : kTextKeys)
      if (h.contains(k)) return Error::format("{}: '{}' belongs under 'texts' in a version {} file", ctx, k, f.version_);
  }
  PIPIT_TRY(check_descriptive_fields(h, ctx));
  if (!h.contains("tensors") || !h["tensors"].is_array())
    return Error::format("{}: header has no 'tensors' list", ctx);

  const uint8_t* base = data + data_offset;
  for (size_t i = 0; i < h["tensors"].size(); ++i) {
    PIPIT_ASSIGN_OR_RETURN(PipitTensorEntry e, parse_entry(h["tensors"][i], i, data_bytes, ctx));
    if (f.tensors_.count(e.name)) return Error::format("{}: tensor '{}' appears twice", ctx, e.name);
    f.tensors_[e.name] = Tensor::from_data(e.dtype, e.shape, const_cast<uint8_t*>(base + e.offset), owner);
    f.entries_.push_back(std::move(e));
  }
  // tensors and texts must not overlap (a lying header could alias two weights, or a weight and the tokenizer)
  struct Span {
    uint64_t offset, nbytes;
    std::string what;
  };
  std::vector<Span> spans;
  for (auto& e : f.entries_) spans.push_back({e.offset, e.nbytes, "tensor '" + e.name + "'"});
  // A text's or blob's {offset, nbytes}: checked to lie in the data section, its span noted for the overlap check.
  auto placed_bytes = [&](const nlohmann::json& v, const char* what, const std::string& k) -> Result<std::string_view> {
    if (!v.is_object() || !v.contains("offset") || !v.contains("nbytes") || !v["offset"].is_number_unsigned() ||
        !v["nbytes"].is_number_unsigned())
      return Error::format("{}: {} '{}' must be an object of two non-negative integers, offset and nbytes", ctx, what,
                           k);
    const uint64_t off = v["offset"].get<uint64_t>(), n = v["nbytes"].get<uint64_t>();
    if (off > data_bytes || n > data_bytes - off)
      return Error::format("{}: {} '{}' [{}, {}) lies outside the data section of {} bytes (truncated file?)", ctx,
                           what, k, off, off + n, data_bytes);
    spans.push_back({off, n, fmt("{} '{}'", what, k)});
    return std::string_view(reinterpret_cast<const char*>(base + off), size_t(n));
  };
  if (f.version_ >= 2 && h.contains("texts")) {
    const auto& t = h["texts"];
    if (!t.is_object()) return Error::format("{}: 'texts' must be an object, got {}", ctx, t.type_name());
    for (auto it = t.begin(); it != t.end(); ++it) {
      const std::string& k = it.key();
      if (std::find_if(std::begin(kTextKeys), std::end(kTextKeys), [&](const char* x) { return k == x; }) ==
          std::end(kTextKeys))
        return Error::format("{}: unknown text '{}' (expected tokenizer, tokenizer_config, preprocessor_config, "
                             "processor_config or chat_template)", ctx, k.substr(0, 64));
      PIPIT_ASSIGN_OR_RETURN(const std::string_view text, placed_bytes(it.value(), "text", k));
      // JSON strings were UTF-8 by construction; raw bytes are checked (the tokenizer and templates assume it)
      if (const size_t bad = utf8_error_offset(text); bad != std::string_view::npos)
        return Error::format("{}: text '{}' is not valid UTF-8 (byte {} of {})", ctx, k, bad, text.size());
      f.texts_[k] = text;
    }
  }
  // Binary sections (kBlobKeys); a key this reader does not know is skipped (a newer writer's), not refused.
  if (f.version_ >= 2 && h.contains("blobs")) {
    const auto& b = h["blobs"];
    if (!b.is_object()) return Error::format("{}: 'blobs' must be an object, got {}", ctx, b.type_name());
    for (const char* k : kBlobKeys) {
      if (!b.contains(k)) continue;
      PIPIT_ASSIGN_OR_RETURN(f.blobs_[k], placed_bytes(b[k], "blob", k));
    }
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < spans.size(); ++i) {
    const Span& p = spans[i - 1];
    if (spans[i].offset < p.offset + p.nbytes)
      return Error::format("{}: {} and {} overlap", ctx, p.what, spans[i].what);
  }
  return f;
}

std::optional<std::string_view> PipitFile::blob(const std::string& key) const {
  auto it = blobs_.find(key);
  if (it == blobs_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string_view> PipitFile::text(const std::string& key) const {
  if (version_ == 1) {
    if (!header_.contains(key) || !header_[key].is_string()) return std::nullopt;
    return std::string_view(header_[key].get_ref<const std::string&>());
  }
  auto it = texts_.find(key);  // views into the mapping, which every copy of this PipitFile keeps alive
  if (it == texts_.end()) return std::nullopt;
  return it->second;
}

bool is_pipit_file(const std::string& path) { return file_starts_with(path, std::string_view(kPipitMagic, 8)); }

// ---- writer ----

Result<std::unique_ptr<PipitWriter>> PipitWriter::create(const std::string& path, nlohmann::json header,
                                                         const std::vector<Spec>& tensors) {
  std::unique_ptr<PipitWriter> w(new PipitWriter());
  PIPIT_ASSIGN_OR_RETURN(w->path_, replaceable_output(path, "[pipit]"));
  nlohmann::json dir = nlohmann::json::array();
  uint64_t off = 0;
  for (auto& s : tensors) {
    auto nb = pipit_tensor_bytes(s.dtype, s.shape);
    if (!nb) return nb.status().with_context("[pipit] writing tensor '" + s.name + "'");
    PipitTensorEntry e{s.name, s.dtype, s.shape, off, *nb};
    dir.push_back({{"name", e.name}, {"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"offset", e.offset},
                   {"nbytes", e.nbytes}});
    off = align_up(off + e.nbytes, kAlign);
    w->entries_.push_back(std::move(e));
  }
  w->data_bytes_ = w->entries_.empty() ? 0 : w->entries_.back().offset + w->entries_.back().nbytes;
  // Each text (kTextKeys), then each blob (kBlobKeys), moved out of the header to the data section after the tensors,
  // each at a multiple of 64, and listed under `section` as {offset, nbytes}.
  auto place = [&](const auto& keys, const char* section, const char* what) -> Status {
    nlohmann::json placed = nlohmann::json::object();
    for (const char* k : keys) {
      if (!header.contains(k)) continue;
      if (!header[k].is_string()) return Error::invalid_argument("[pipit] {} '{}' must be a string", what, k);
      std::string bytes = header[k].get<std::string>();
      header.erase(k);
      const uint64_t at = align_up(w->data_bytes_, kAlign);
      placed[k] = {{"offset", at}, {"nbytes", uint64_t(bytes.size())}};
      w->data_bytes_ = at + bytes.size();
      w->texts_.emplace_back(at, std::move(bytes));
    }
    if (!placed.empty()) header[section] = std::move(placed);
    return Status::ok();
  };
  PIPIT_TRY(place(kTextKeys, "texts", "text"));
  PIPIT_TRY(place(kBlobKeys, "blobs", "blob"));
  header["format"] = "pipit";
  header["version"] = kPipitVersion;
  header["tensors"] = std::move(dir);
  const std::string text = header.dump();
  w->data_offset_ = align_up(kPipitPreambleBytes + text.size(), kAlign);

  PIPIT_ASSIGN_OR_RETURN(w->f_, create_temp_beside(w->path_, &w->tmp_path_));
  // Writes of whole, aligned 2 MiB: the page cache then holds the new file in 2 MiB folios (Linux 6.x, ext4 / XFS),
  // and every later load maps it with huge pages at once (core/page_migration.h). glibc sizes a buffer it allocates
  // itself by the file system's block (setvbuf's size is ignored without a buffer): its 4 KiB writes left the
  // file in small folios, whose first token here read the weights at ~2 GB/s (180 ms, against 25 ms). With a 2 MiB
  // buffer, stdio writes whole multiples of it, so every write starts on a 2 MiB boundary of the file.
  w->buffer_.reset(new char[kWriteBuffer]);
  std::setvbuf(w->f_, w->buffer_.get(), _IOFBF, kWriteBuffer);
  uint8_t pre[kPipitPreambleBytes] = {};
  std::memcpy(pre, kPipitMagic, 8);
  const uint32_t version = kPipitVersion, flags = 0;
  const uint64_t hb = text.size();
  std::memcpy(pre + 8, &version, 4);
  std::memcpy(pre + 12, &flags, 4);
  std::memcpy(pre + 16, &hb, 8);
  std::memcpy(pre + 24, &w->data_offset_, 8);
  std::memcpy(pre + 32, &w->data_bytes_, 8);
  PIPIT_TRY(w->write_raw(pre, sizeof(pre)));
  PIPIT_TRY(w->write_raw(text.data(), text.size()));
  PIPIT_TRY(w->pad_to(w->data_offset_));
  return w;
}

PipitWriter::~PipitWriter() {
  if (f_) std::fclose(f_);
  if (!finished_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

Status PipitWriter::write_raw(const void* p, size_t n) {
  if (n && std::fwrite(p, 1, n, f_) != n)
    return Error::io("[pipit] error writing '{}': {}", tmp_path_, std::strerror(errno));
  pos_ += n;
  return Status::ok();
}

Status PipitWriter::pad_to(uint64_t file_pos) {
  static const uint8_t kZeros[kAlign] = {};
  PIPIT_ASSERT(file_pos >= pos_, "pad to {} at {}", file_pos, pos_);
  while (pos_ < file_pos) PIPIT_TRY(write_raw(kZeros, std::min<uint64_t>(kAlign, file_pos - pos_)));
  return Status::ok();
}

Status PipitWriter::append(size_t index, const void* bytes, size_t n) {
  PIPIT_ASSERT(!finished_ && index < entries_.size());
  PIPIT_ASSERT(index >= cur_, "tensor {} written after tensor {}", index, cur_);
  while (cur_ < index) {  // move on: the current tensor must be complete
    PIPIT_ASSERT(cur_written_ == entries_[cur_].nbytes, "tensor '{}' incomplete", entries_[cur_].name);
    ++cur_;
    cur_written_ = 0;
  }
  const auto& e = entries_[cur_];
  PIPIT_ASSERT(cur_written_ + n <= e.nbytes, "tensor '{}': {} bytes written, {} expected", e.name, cur_written_ + n,
               e.nbytes);
  if (cur_written_ == 0) PIPIT_TRY(pad_to(data_offset_ + e.offset));
  PIPIT_TRY(write_raw(bytes, n));
  cur_written_ += n;
  return Status::ok();
}

Status PipitWriter::finish() {
  PIPIT_ASSERT(!finished_);
  for (size_t i = cur_; i < entries_.size(); ++i) {
    const uint64_t want = entries_[i].nbytes;
    const uint64_t have = i == cur_ ? cur_written_ : 0;
    PIPIT_ASSERT(have == want || want == 0, "tensor '{}' incomplete: {} of {} bytes", entries_[i].name, have, want);
  }
  for (auto& [offset, text] : texts_) {
    PIPIT_TRY(pad_to(data_offset_ + offset));
    PIPIT_TRY(write_raw(text.data(), text.size()));
  }
  PIPIT_TRY(pad_to(data_offset_ + data_bytes_));
  if (std::fclose(f_) != 0) {
    f_ = nullptr;
    return Error::io("[pipit] error closing '{}': {}", tmp_path_, std::strerror(errno));
  }
  f_ = nullptr;
  PIPIT_TRY(commit_output(tmp_path_, path_, "[pipit]"));
  finished_ = true;
  return Status::ok();
}

}  // namespace pipit
