// GGUF reader (llama.cpp's model file), versions 2 and 3, little-endian. Parses the metadata and the tensor
// directory with every length, count and offset checked against the file size; tensor bytes stay in the mapping.
// Mapping llama.cpp names and metadata to HF ones is convert/gguf_import's job; this file only knows the bytes.
//
// Bytes, in order (reference: llama.cpp ggml/include/gguf.h, docs/gguf.md):
//   u32 magic "GGUF" (47 47 55 46), u32 version (2 or 3), u64 n_tensors, u64 n_kv
//   n_kv times: string key, u32 value type, value
//       string = u64 length + bytes (no terminator); types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32,
//       7 bool (1 byte), 8 string, 9 array (u32 element type, u64 count, elements), 10 u64, 11 i64, 12 f64
//   n_tensors times: string name, u32 n_dims (1..4), u64 ne[n_dims] (ne[0] is the innermost, contiguous dim),
//       u32 ggml type, u64 offset (from the start of the data section, a multiple of the alignment)
//   padding to `general.alignment` (u32 metadata, default 32), then the data section.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace pipit {

enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9,
  kU64 = 10, kI64 = 11, kF64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Integers keep their value in `i` (signed) or `u` (unsigned) per type. An array is a view of
// its elements' bytes in the file's mapping, read on demand (at, str_at): a vocabulary is ~450k elements (tokens,
// merges, scores), and parsing each into a GgufValue of its own (96 bytes) took ~0.15 s and ~45 MB at every load.
// A view points into the GgufFile's mapping, so it (and what at() returns) is valid while that file is open.
struct GgufValue {
  GgufType type = GgufType::kU8;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  GgufType elem_type = GgufType::kU8;  // arrays

  bool is_int() const;
  bool is_number() const { return is_int() || type == GgufType::kF32 || type == GgufType::kF64; }
  int64_t as_int() const;     // integers and bools (callers check is_int())
  double as_double() const;   // any number
  std::string to_string(size_t max_items = 8) const;  // for `pipit inspect`

  // Arrays: the element count, and element k < arr_size() (its bytes were checked when the file was opened).
  size_t arr_size() const { return size_t(n_elems_); }
  GgufValue at(size_t k) const;
  // Element k of an array of strings, without a copy; "" when the elements are not strings.
  std::string_view str_at(size_t k) const;
  // The bytes of one array (after its element type and count; `avail` of them left in the file, the first at file
  // offset `at`): checks them all, and records where each element starts when they are of variable size (strings,
  // arrays). For the parser (format/gguf.cpp).
  Status set_array(const uint8_t* elems, size_t avail, size_t at, GgufType et, uint64_t n, int depth,
                   const std::string& ctx, const std::string& key, size_t* used);

 private:
  const uint8_t* elems_ = nullptr;  // the first element's bytes, in the mapping
  uint64_t n_elems_ = 0, bytes_ = 0;  // element count, and the bytes they take
  // start of each element from elems_, for strings and nested arrays (fixed-size ones are at k * size)
  std::shared_ptr<const std::vector<uint64_t>> starts_;
};

// ggml tensor types by id, with block geometry so sizes of types pipit does not run can still be checked.
struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
  int block_elems, block_bytes;
};
const GgmlTypeInfo* ggml_type_info(uint32_t id);  // null for unknown ids
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ8_0 = 8, kGgmlBF16 = 30;
constexpr uint32_t kGgmlMXFP4 = 39;  // block_mxfp4: the bytes of pipit's mxfp4 (core/dtype.h)
// The pipit dtype of a ggml type (F32, F16, BF16, the Q*_0/Q*_1/K-quants, IQ4_NL/IQ4_XS and MXFP4); false for the rest.
bool ggml_to_dtype(uint32_t ggml_type, DType* out);

struct GgufTensorInfo {
  std::string name;
  uint32_t type = 0;
  std::vector<uint64_t> ne;  // GGUF order: ne[0] innermost
  uint64_t offset = 0;       // from the data section
  uint64_t nbytes = 0;
  std::vector<int64_t> shape() const;  // pipit order (outermost first)
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);
  static Result<GgufFile> parse(const uint8_t* data, size_t size, std::shared_ptr<Storage> owner,
                                const std::string& name);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // A view of the tensor's bytes for the types pipit runs (ggml_to_dtype); an error naming the type (e.g.
  // "IQ2_XXS is not supported") otherwise.
  Result<Tensor> tensor(const GgufTensorInfo& t) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32, data_offset_ = 0;
  const uint8_t* data_ = nullptr;
  std::shared_ptr<Storage> owner_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

bool is_gguf_file(const std::string& path);

}  // namespace pipit
