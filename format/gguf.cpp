// GGUF parsing with bounds checks on every read: a cursor over the mapped bytes that fails cleanly at the end.
#include "format/gguf.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/file_probe.h"
#include "core/storage.h"

namespace pipit {

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 4;

const GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},       {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},       {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},    {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},  {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},    {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},          {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},         {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},    {39, "MXFP4", 32, 17},
};

// Bounds-checked little-endian cursor.
class Cursor {
 public:
  // base: where p lies in the file, so that errors name file offsets (an array's elements are read by a cursor of
  // their own)
  Cursor(const uint8_t* p, size_t n, const std::string& ctx, size_t base = 0) : p_(p), n_(n), base_(base), ctx_(ctx) {}
  size_t pos() const { return pos_; }
  size_t base() const { return base_; }
  size_t left() const { return n_ - pos_; }
  const uint8_t* here() const { return p_ + pos_; }
  void skip(size_t n) { pos_ += n; }  // n <= left(), as the caller checked

  template <class T>
  Status read(T* v, const char* what) {
    if (left() < sizeof(T))
      return Error::format("{}: file ends at byte {} while reading {} (truncated?)", ctx_, base_ + n_, what);
    std::memcpy(v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }
  Status read_string(std::string* s, const char* what) {
    uint64_t len = 0;
    PIPIT_TRY(read(&len, what));
    if (len > left())
      return Error::format("{}: {} of {} bytes at byte {} runs past the end of the file ({} bytes)", ctx_, what, len,
                           base_ + pos_, base_ + n_);
    s->assign(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return Status::ok();
  }
  Status skip_string(const char* what) {  // read_string without the copy
    uint64_t len = 0;
    PIPIT_TRY(read(&len, what));
    if (len > left())
      return Error::format("{}: {} of {} bytes at byte {} runs past the end of the file ({} bytes)", ctx_, what, len,
                           base_ + pos_, base_ + n_);
    pos_ += size_t(len);
    return Status::ok();
  }

 private:
  const uint8_t* p_;
  size_t n_, base_;
  size_t pos_ = 0;
  const std::string& ctx_;
};

// Smallest encoded size of a value of this type, to reject counts the remaining bytes cannot hold before
// allocating anything.
size_t min_encoded_bytes(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
  }
  return 1;
}

bool valid_type(uint32_t t) { return t <= uint32_t(GgufType::kF64); }

bool fixed_size(GgufType t) { return t != GgufType::kString && t != GgufType::kArray; }

Status read_value(Cursor& c, GgufType type, GgufValue* v, int depth, const std::string& ctx, const std::string& key) {
  v->type = type;
  switch (type) {
    case GgufType::kU8: { uint8_t x = 0; PIPIT_TRY(c.read(&x, "a u8")); v->u = x; v->i = x; break; }
    case GgufType::kI8: { int8_t x = 0; PIPIT_TRY(c.read(&x, "an i8")); v->i = x; break; }
    case GgufType::kU16: { uint16_t x = 0; PIPIT_TRY(c.read(&x, "a u16")); v->u = x; v->i = x; break; }
    case GgufType::kI16: { int16_t x = 0; PIPIT_TRY(c.read(&x, "an i16")); v->i = x; break; }
    case GgufType::kU32: { uint32_t x = 0; PIPIT_TRY(c.read(&x, "a u32")); v->u = x; v->i = x; break; }
    case GgufType::kI32: { int32_t x = 0; PIPIT_TRY(c.read(&x, "an i32")); v->i = x; break; }
    case GgufType::kU64: { uint64_t x = 0; PIPIT_TRY(c.read(&x, "a u64")); v->u = x; v->i = int64_t(x); break; }
    case GgufType::kI64: { int64_t x = 0; PIPIT_TRY(c.read(&x, "an i64")); v->i = x; break; }
    case GgufType::kF32: { float x = 0; PIPIT_TRY(c.read(&x, "an f32")); v->f = x; break; }
    case GgufType::kF64: { double x = 0; PIPIT_TRY(c.read(&x, "an f64")); v->f = x; break; }
    case GgufType::kBool: {
      uint8_t x = 0;
      PIPIT_TRY(c.read(&x, "a bool"));
      if (x > 1) return Error::format("{}: '{}': bool value {} (expected 0 or 1)", ctx, key, int(x));
      v->i = x;
      break;
    }
    case GgufType::kString: PIPIT_TRY(c.read_string(&v->s, "a string")); break;
    case GgufType::kArray: {
      if (depth >= kMaxArrayDepth) return Error::format("{}: '{}': arrays nested deeper than {}", ctx, key, depth);
      uint32_t et = 0;
      uint64_t n = 0;
      PIPIT_TRY(c.read(&et, "an array type"));
      PIPIT_TRY(c.read(&n, "an array length"));
      if (!valid_type(et)) return Error::format("{}: '{}': unknown array element type {}", ctx, key, et);
      size_t used = 0;
      PIPIT_TRY(v->set_array(c.here(), c.left(), c.pos() + c.base(), GgufType(et), n, depth, ctx, key, &used));
      c.skip(used);
      break;
    }
  }
  return Status::ok();
}

}  // namespace

Status GgufValue::set_array(const uint8_t* elems, size_t avail, size_t at, GgufType et, uint64_t n, int depth,
                            const std::string& ctx, const std::string& key, size_t* used) {
  elem_type = et;
  elems_ = elems;
  n_elems_ = n;
  starts_.reset();
  if (n > avail / min_encoded_bytes(et))
    return Error::format("{}: '{}': array of {} elements cannot fit in the {} bytes left (truncated?)", ctx, key, n,
                         avail);
  if (fixed_size(et)) {
    *used = bytes_ = size_t(n) * min_encoded_bytes(et);
    if (et == GgufType::kBool)
      for (size_t k = 0; k < size_t(n); ++k)
        if (elems[k] > 1) return Error::format("{}: '{}': bool value {} (expected 0 or 1)", ctx, key, int(elems[k]));
    return Status::ok();
  }
  // Strings and nested arrays: walked once here, checking every length, and their starts kept so that at(k) and
  // str_at(k) are one lookup. Strings are only skipped (no copy); a nested array is checked as a value of its own.
  auto starts = std::make_shared<std::vector<uint64_t>>();
  starts->reserve(size_t(n));
  Cursor c(elems, avail, ctx, at);
  for (uint64_t k = 0; k < n; ++k) {
    starts->push_back(c.pos());
    if (et == GgufType::kString) {
      PIPIT_TRY(c.skip_string("a string"));
    } else {
      GgufValue e;
      PIPIT_TRY(read_value(c, et, &e, depth + 1, ctx, key));
    }
  }
  *used = c.pos();
  bytes_ = c.pos();
  starts_ = std::move(starts);
  return Status::ok();
}

GgufValue GgufValue::at(size_t k) const {
  GgufValue v;
  if (k >= n_elems_) return v;
  const size_t off = starts_ ? size_t((*starts_)[k]) : k * min_encoded_bytes(elem_type);
  // The bytes were checked by set_array, so this read cannot fail. Depth 0: the nesting below this element was
  // already held to kMaxArrayDepth when the file was opened.
  static const std::string kNone;
  Cursor c(elems_ + off, size_t(bytes_) - off, kNone);
  if (!read_value(c, elem_type, &v, 0, kNone, kNone).is_ok()) return GgufValue{};
  return v;
}

std::string_view GgufValue::str_at(size_t k) const {
  if (type != GgufType::kArray || elem_type != GgufType::kString || k >= n_elems_) return {};
  const uint8_t* p = elems_ + (*starts_)[k];
  uint64_t len = 0;
  std::memcpy(&len, p, sizeof len);
  return {reinterpret_cast<const char*>(p + sizeof len), size_t(len)};
}

const char* gguf_type_name(GgufType t) {
  static const char* const kNames[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
                                       "u64", "i64", "f64"};
  return valid_type(uint32_t(t)) ? kNames[uint32_t(t)] : "?";
}

bool GgufValue::is_int() const {
  switch (type) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16: case GgufType::kU32:
    case GgufType::kI32: case GgufType::kU64: case GgufType::kI64: case GgufType::kBool: return true;
    default: return false;
  }
}
int64_t GgufValue::as_int() const { return i; }
double GgufValue::as_double() const {
  if (type == GgufType::kF32 || type == GgufType::kF64) return f;
  if (type == GgufType::kU64) return double(u);
  return double(i);
}

std::string GgufValue::to_string(size_t max_items) const {
  std::ostringstream os;
  switch (type) {
    case GgufType::kString: {
      std::string t = s.size() > 60 ? s.substr(0, 57) + "..." : s;
      for (auto& ch : t)
        if (ch == '\n') ch = ' ';
      os << '"' << t << '"';
      break;
    }
    case GgufType::kBool: os << (i ? "true" : "false"); break;
    case GgufType::kF32: case GgufType::kF64: os << f; break;
    case GgufType::kU64: os << u; break;
    case GgufType::kArray:
      os << "[" << arr_size() << " x " << gguf_type_name(elem_type) << ":";
      for (size_t k = 0; k < arr_size() && k < max_items; ++k) os << " " << at(k).to_string(0);
      if (arr_size() > max_items) os << " ...";
      os << "]";
      break;
    default: os << i;
  }
  return os.str();
}

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (auto& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

bool ggml_to_dtype(uint32_t ggml_type, DType* out) {
  switch (ggml_type) {
    case kGgmlF32: *out = DType::F32; return true;
    case kGgmlF16: *out = DType::F16; return true;
    case kGgmlBF16: *out = DType::BF16; return true;
    case kGgmlQ8_0: *out = DType::Q8_0; return true;
    case kGgmlQ4_0: *out = DType::Q4_0; return true;
    // the rest of llama.cpp's block formats keep their bytes (core/dtype.h); the ids are ggml's enum ggml_type
    case 3: *out = DType::Q4_1; return true;
    case 6: *out = DType::Q5_0; return true;
    case 7: *out = DType::Q5_1; return true;
    case 10: *out = DType::Q2_K; return true;
    case 11: *out = DType::Q3_K; return true;
    case 12: *out = DType::Q4_K; return true;
    case 13: *out = DType::Q5_K; return true;
    case 14: *out = DType::Q6_K; return true;
    case 15: *out = DType::Q8_K; return true;
    case 20: *out = DType::IQ4_NL; return true;
    case 23: *out = DType::IQ4_XS; return true;
    case kGgmlMXFP4: *out = DType::MXFP4; return true;
    default: return false;
  }
}

std::vector<int64_t> GgufTensorInfo::shape() const {
  std::vector<int64_t> s;
  for (size_t k = ne.size(); k-- > 0;) s.push_back(int64_t(ne[k]));
  return s;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  PIPIT_ASSIGN_OR_RETURN(auto map, MmapStorage::open(path));
  const uint8_t* data = map->data();
  const size_t size = map->size();
  return parse(data, size, std::move(map), path);
}

Result<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, std::shared_ptr<Storage> owner,
                                 const std::string& name) {
  const std::string ctx = "[gguf] " + name;
  Cursor c(data, size, ctx);
  uint32_t magic = 0;
  GgufFile f;
  f.path_ = name;
  f.data_ = data;
  f.owner_ = std::move(owner);
  PIPIT_TRY(c.read(&magic, "the magic"));
  if (magic != kGgufMagic) return Error::format("{}: not a GGUF file (bad magic)", ctx);
  PIPIT_TRY(c.read(&f.version_, "the version"));
  if (f.version_ == 1) return Error::unsupported("{}: GGUF version 1 is not supported (2 and 3 are)", ctx);
  if (f.version_ != 2 && f.version_ != 3) {
    if ((f.version_ & 0xffff) == 0)
      return Error::unsupported("{}: version {} looks big-endian; only little-endian GGUF is supported", ctx,
                                f.version_);
    return Error::unsupported("{}: GGUF version {} (2 and 3 are supported)", ctx, f.version_);
  }
  uint64_t n_tensors = 0, n_kv = 0;
  PIPIT_TRY(c.read(&n_tensors, "the tensor count"));
  PIPIT_TRY(c.read(&n_kv, "the metadata count"));
  // each KV needs >= 13 bytes, each tensor info >= 28: reject counts the file cannot hold before allocating
  if (n_kv > c.left() / 13) return Error::format("{}: {} metadata entries cannot fit in the file", ctx, n_kv);
  if (n_tensors > c.left() / 28) return Error::format("{}: {} tensors cannot fit in the file", ctx, n_tensors);

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    uint32_t type = 0;
    PIPIT_TRY(c.read_string(&key, "a metadata key"));
    PIPIT_TRY(c.read(&type, "a metadata type"));
    if (!valid_type(type)) return Error::format("{}: metadata '{}' has unknown type {}", ctx, key, type);
    GgufValue v;
    PIPIT_TRY(read_value(c, GgufType(type), &v, 0, ctx, key));
    if (f.kv_index_.count(key)) return Error::format("{}: metadata key '{}' appears twice", ctx, key);
    f.kv_index_[key] = f.kv_.size();
    f.kv_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type != GgufType::kU32 || a->u == 0 || (a->u & (a->u - 1)) || a->u > 65536)
      return Error::format("{}: general.alignment must be a u32 power of two, got {}", ctx, a->to_string());
    f.alignment_ = a->u;
  }

  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    uint32_t n_dims = 0;
    PIPIT_TRY(c.read_string(&t.name, "a tensor name"));
    PIPIT_TRY(c.read(&n_dims, "a tensor's dimension count"));
    const std::string tctx = ctx + ": tensor '" + t.name + "'";
    constexpr uint32_t kGgufMaxDims = 4;  // GGML_MAX_DIMS (pipit tensors allow 5, GGUF files hold at most 4)
    if (n_dims < 1 || n_dims > kGgufMaxDims)
      return Error::format("{}: {} dimensions (1 to {} supported)", tctx, n_dims, kGgufMaxDims);
    t.ne.resize(n_dims);
    for (auto& d : t.ne) PIPIT_TRY(c.read(&d, "a tensor dimension"));
    PIPIT_TRY(c.read(&t.type, "a tensor type"));
    PIPIT_TRY(c.read(&t.offset, "a tensor offset"));
    const GgmlTypeInfo* ti = ggml_type_info(t.type);
    if (!ti) return Error::format("{}: unknown ggml type {}", tctx, t.type);
    // A dimension of 0 is a tensor with no elements: no model has one, and the importers divide by dimensions
    // (bytes per expert, rows per head), so it is refused here, where the tensor can be named.
    for (size_t i = 0; i < t.ne.size(); ++i)
      if (t.ne[i] == 0) return Error::format("{}: dimension {} is 0 (a tensor needs elements)", tctx, i);
    uint64_t numel = 1;
    for (auto d : t.ne) {
      if (d > (uint64_t(1) << 40) || (d && numel > (uint64_t(1) << 40) / d))
        return Error::format("{}: dimensions are too large", tctx);
      numel *= d;
    }
    if (t.ne[0] % uint64_t(ti->block_elems))
      return Error::format("{}: innermost dimension {} is not a multiple of the {} block size {}", tctx, t.ne[0],
                           ti->name, ti->block_elems);
    t.nbytes = numel / uint64_t(ti->block_elems) * uint64_t(ti->block_bytes);
    if (t.offset % f.alignment_)
      return Error::format("{}: offset {} is not a multiple of the alignment {}", tctx, t.offset, f.alignment_);
    if (f.tensor_index_.count(t.name)) return Error::format("{}: appears twice", tctx);
    f.tensor_index_[t.name] = f.tensors_.size();
    f.tensors_.push_back(std::move(t));
  }
  const uint64_t data_offset = (uint64_t(c.pos()) + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  f.data_offset_ = data_offset;
  const uint64_t data_size = data_offset <= size ? size - data_offset : 0;
  for (auto& t : f.tensors_) {
    if (data_offset > size || t.offset > data_size || t.nbytes > data_size - t.offset)
      return Error::format("{}: tensor '{}' bytes [{}, {}) lie past the end of the file ({} bytes; truncated?)", ctx,
                           t.name, data_offset + t.offset, data_offset + t.offset + t.nbytes, size);
  }
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<Tensor> GgufFile::tensor(const GgufTensorInfo& t) const {
  DType dt;
  if (!ggml_to_dtype(t.type, &dt)) {
    const GgmlTypeInfo* ti = ggml_type_info(t.type);
    return Error::unsupported("[gguf] {}: tensor '{}' has type {}; {} is not supported (F32, F16, BF16, Q8_0, "
                              "Q4_0, Q4_1, Q5_0, Q5_1, Q2_K-Q6_K, IQ4_NL, IQ4_XS and MXFP4 are; re-quantize the model with "
                              "llama-quantize to one of those, or convert from the HF checkpoint)",
                              path_, t.name, ti ? ti->name : "?", ti ? ti->name : "this type");
  }
  auto* p = const_cast<uint8_t*>(data_ + data_offset_ + t.offset);
  return Tensor::from_data(dt, t.shape(), p, owner_);
}

bool is_gguf_file(const std::string& path) { return file_starts_with(path, "GGUF"); }

}  // namespace pipit
