// The .pipit file: one self-contained, memory-mappable model file — weights, HF config, tokenizer files, generation
// defaults, the quantization recipe — so a model is one path and loads with no copy (tensors are views of the
// mapping). Design goals: zero-copy load, byte-identical output for the same input, every byte bounds-checked on
// read. Non-goals: in-place editing, compression, big-endian hosts.
//
// Bytes, in order (integers little-endian):
//   offset  size  field
//   0       8     magic "PIPIT\0\r\n" (50 49 50 49 54 00 0d 0a; the CR LF catches text-mode transfers)
//   8       4     u32 version = 2 (1 is read too: texts as JSON strings in the header)
//   12      4     u32 flags = 0 (reserved; a reader rejects bits it does not know)
//   16      8     u64 header_bytes: length of the JSON header
//   24      8     u64 data_offset: start of the data section; a multiple of 64, >= 40 + header_bytes
//   32      8     u64 data_bytes: length of the data section; the file holds at least data_offset + data_bytes bytes
//   40      ...   the JSON header (UTF-8, header_bytes long), then zero bytes up to data_offset
//   data_offset   tensor data, each tensor at a multiple of 64 from data_offset (hence 64-byte aligned in the file
//                 and in the mapping), zero bytes between tensors; tensors appear in directory order; then (version 2)
//                 the texts, each at a multiple of 64, in the order of the header's "texts" object
//
// The JSON header (keys in sorted order, as written by nlohmann::json):
//   "format": "pipit", "version": 2 (same as the preamble), "generator": "pipit <version>",
//   "arch": HF model_type,
//   "config": the HF config.json object (models read their hyper-parameters from it),
//   "generation_config": generation_config.json object (optional),
//   "texts": {"tokenizer" | "tokenizer_config" | "preprocessor_config" | "processor_config" | "chat_template":
//       {"offset", "nbytes"}}: the text of the HF files tokenizer.json, tokenizer_config.json, ... (optional, kept
//       byte for byte, UTF-8), as raw bytes in the data section (offset from data_offset, after the tensors).
//       Version 1 stored each as a JSON string under its own key at the top of the header, which cost a load the
//       lexing and unescaping of Qwen's 11 MB tokenizer.json before any tensor was known (0.3-0.5 s here);
//   "blobs": {"tokenizer_compiled": {"offset", "nbytes"}} (optional): binary sections after the texts, each at a
//       multiple of 64. tokenizer_compiled is the tokenizer.json text compiled (Tokenizer::compile: its vocabulary
//       and merges as records), which a load reads instead of lexing the text (~0.2 s for Qwen3's 11 MB); the text
//       stays the reference (older readers ignore "blobs", and a blob that does not read back falls to the text);
//   "quantization": {"quant", "target", "layout", "rules": [...], "fallbacks": [...], "source_format"},
//   "tensors": [{"name", "dtype", "shape", "offset", "nbytes"}, ...]
//       name: the HF tensor name (models look tensors up by HF name); dtype: f32 f16 bf16 i32 i8 q8_0 q4_0
//       q8_0x16 q4_0x16, or llama.cpp's q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k q8_k iq4_nl iq4_xs; shape: 1..4 dims outermost-first (a Linear weight is [out, in]); offset: from data_offset;
//       nbytes: exactly what dtype and shape need (q8_0 / q4_0 rows are whole blocks of 32 along the last dim,
//       byte-identical to GGUF Q8_0 / Q4_0; q8_0x16 / q4_0x16 are the same blocks 16 rows to a panel, interleaved
//       as core/dtype.h defines: 2-d, rows a multiple of 16, the same size; "layout": "panel16" marks such files).
// docs/format.md describes the same layout with the reasons behind it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/tensor.h"

namespace pipit {

constexpr char kPipitMagic[8] = {'P', 'I', 'P', 'I', 'T', '\0', '\r', '\n'};
constexpr uint32_t kPipitVersion = 2;      // what the writer writes
constexpr uint32_t kPipitOldestVersion = 1;  // the reader takes kPipitOldestVersion..kPipitVersion
constexpr size_t kPipitPreambleBytes = 40;
constexpr uint64_t kPipitMaxHeaderBytes = uint64_t(1) << 30;

struct PipitTensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
};

class PipitFile {
 public:
  static Result<PipitFile> open(const std::string& path);
  // Parses bytes already in memory (`owner` keeps them alive); used by open() and by the fuzzer.
  static Result<PipitFile> parse(const uint8_t* data, size_t size, std::shared_ptr<Storage> owner,
                                 const std::string& name);

  uint32_t version() const { return version_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t data_offset() const { return data_offset_; }
  const nlohmann::json& header() const { return header_; }
  const nlohmann::json& config() const { return header_["config"]; }
  // One of the texts ("tokenizer", "tokenizer_config", ...), nullopt when absent: a view into the mapping
  // (version 2) or into the header (version 1), valid as long as this PipitFile.
  std::optional<std::string_view> text(const std::string& key) const;
  // One of the binary sections ("tokenizer_compiled"), nullopt when absent: a view into the mapping.
  std::optional<std::string_view> blob(const std::string& key) const;
  const std::vector<PipitTensorEntry>& entries() const { return entries_; }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const std::string& path() const { return path_; }
  // What keeps the file's bytes (the texts' views of a version-2 file, the tensors) alive.
  const std::shared_ptr<Storage>& owner() const { return owner_; }

 private:
  std::string path_;
  std::shared_ptr<Storage> owner_;
  uint32_t version_ = 0;
  uint64_t file_size_ = 0, data_offset_ = 0;
  nlohmann::json header_;
  std::map<std::string, std::string_view> texts_;  // version 2: into the data section
  std::map<std::string, std::string_view> blobs_;  // the same
  std::vector<PipitTensorEntry> entries_;
  std::map<std::string, Tensor> tensors_;
};

// Bytes a tensor of this dtype and shape takes; error when the last dim is not whole blocks or the size overflows.
Result<uint64_t> pipit_tensor_bytes(DType dtype, const std::vector<int64_t>& shape);

// Streaming writer: the directory (names, dtypes, shapes) is fixed up front, so offsets are known before any data
// is produced; then each tensor's bytes are appended in directory order, in as many pieces as the caller likes.
// Writes to PATH.tmp and renames on finish(), so a failed conversion never leaves a half-written PATH.
class PipitWriter {
 public:
  struct Spec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  // `header` holds everything but "tensors", "format" and "version" (added here); its text keys ("tokenizer",
  // "tokenizer_config", ...: strings) are moved out of it into the data section after the tensors ("texts"), then
  // its blob keys ("tokenizer_compiled": strings of any bytes) after those ("blobs").
  static Result<std::unique_ptr<PipitWriter>> create(const std::string& path, nlohmann::json header,
                                                     const std::vector<Spec>& tensors);
  ~PipitWriter();
  // Appends bytes to tensor `index` (must be the current tensor, or the next one once the current is complete).
  Status append(size_t index, const void* bytes, size_t n);
  Status finish();
  uint64_t total_bytes() const { return data_offset_ + data_bytes_; }

 private:
  PipitWriter() = default;
  Status write_raw(const void* p, size_t n);
  Status pad_to(uint64_t file_pos);
  std::string path_, tmp_path_;
  static constexpr size_t kWriteBuffer = size_t(2) << 20;
  std::unique_ptr<char[]> buffer_;  // f_'s stdio buffer; outlives it (f_ is closed in finish() or the destructor)
  std::FILE* f_ = nullptr;
  std::vector<PipitTensorEntry> entries_;
  std::vector<std::pair<uint64_t, std::string>> texts_;  // texts and blobs: offset in the data section, bytes
  uint64_t data_offset_ = 0, data_bytes_ = 0, pos_ = 0;
  size_t cur_ = 0;
  uint64_t cur_written_ = 0;
  bool finished_ = false;
};

// True when the first bytes of `path` are the .pipit magic.
bool is_pipit_file(const std::string& path);

}  // namespace pipit
