// The GGUF traits registry and the hooks' shared helpers: see gguf_traits.h.
#include "models/gguf_traits.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/dtype.h"

namespace pipit {

namespace {

// Function-local statics: registrars run during static initialisation, in any order across files.
std::map<std::string, GgufArch>& archs() {
  static std::map<std::string, GgufArch> r;
  return r;
}
std::map<std::string, GgufProjector>& projectors() {
  static std::map<std::string, GgufProjector> r;
  return r;
}
std::map<std::string, GgufVocab>& vocabs() {
  static std::map<std::string, GgufVocab> r;
  return r;
}
std::map<std::string, GgufPreTokenizer>& pre_tokenizers() {  // by its first name
  static std::map<std::string, GgufPreTokenizer> r;
  return r;
}

}  // namespace

void register_gguf_arch(GgufArch arch) {
  const std::string key = arch.gguf;
  archs()[key] = std::move(arch);
}
void register_gguf_projector(GgufProjector projector) {
  const std::string key = projector.type;
  projectors()[key] = std::move(projector);
}

void register_gguf_vocab(GgufVocab vocab) {
  const std::string key = vocab.model;
  vocabs()[key] = std::move(vocab);
}
void register_gguf_pre_tokenizer(GgufPreTokenizer pre) {
  if (pre.names.empty()) return;
  const std::string key = pre.names[0];
  pre_tokenizers()[key] = std::move(pre);
}

const GgufVocab* find_gguf_vocab(const std::string& model) {
  auto it = vocabs().find(model);
  return it == vocabs().end() ? nullptr : &it->second;
}
const GgufPreTokenizer* find_gguf_pre_tokenizer(const std::string& name) {
  for (auto& [first, p] : pre_tokenizers())
    if (std::find(p.names.begin(), p.names.end(), name) != p.names.end()) return &p;
  return nullptr;
}
std::vector<std::string> gguf_vocab_names() {
  std::vector<std::string> out;
  for (auto& [name, v] : vocabs()) out.push_back(name);
  return out;
}
std::vector<std::string> gguf_pre_tokenizer_names() {
  std::vector<std::string> out;
  for (auto& [name, p] : pre_tokenizers()) out.push_back(name);
  return out;
}

const GgufArch* find_gguf_arch(const std::string& gguf) {
  auto it = archs().find(gguf);
  return it == archs().end() ? nullptr : &it->second;
}
const GgufProjector* find_gguf_projector(const std::string& type) {
  auto it = projectors().find(type);
  return it == projectors().end() ? nullptr : &it->second;
}

std::vector<std::string> gguf_arch_names() {
  std::vector<std::string> out;
  for (auto& [name, a] : archs()) out.push_back(name);
  return out;
}
std::vector<std::string> gguf_projector_names() {
  std::vector<std::string> out;
  for (auto& [name, p] : projectors()) out.push_back(name);
  return out;
}

Result<Tensor> gguf_unshift_norm(const Tensor& t, const std::string& name, float shift) {
  if (t.dtype() != DType::F32 && t.dtype() != DType::F16 && t.dtype() != DType::BF16)
    return Error::unsupported("[gguf] {}: a norm weight of type {} (expected F32/F16/BF16)", name,
                              dtype_name(t.dtype()));
  Tensor out = Tensor::empty(DType::F32, t.shape());
  float* o = out.ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.dtype() == DType::F32  ? t.ptr<float>()[i]
                    : t.dtype() == DType::F16 ? f16_to_f32(t.ptr<uint16_t>()[i])
                                              : bf16_to_f32(t.ptr<uint16_t>()[i]);
    o[i] = v - shift;
  }
  return out;
}

Result<Tensor> gguf_join_frames(const GgufTools& tools, Tensor f0, Tensor f1, const std::string& name) {
  if (f0.ndim() != 4 || f0.shape() != f1.shape())
    return Error::format("[gguf] {}: frames {} and {} (expected two [E, C, p, p])", name, f0.shape_str(),
                         f1.shape_str());
  if (f0.dtype() != f1.dtype() || dtype_is_quantized(f0.dtype())) {
    if (!tools.can_widen(f0.dtype()) || !tools.can_widen(f1.dtype()))
      return Error::unsupported("[gguf] {}: type {}", name, dtype_name(f0.dtype()));
    PIPIT_ASSIGN_OR_RETURN(f0, tools.widen_f32(f0, name));
    PIPIT_ASSIGN_OR_RETURN(f1, tools.widen_f32(f1, name));
  }
  const int64_t E = f0.dim(0), C = f0.dim(1), pp = f0.dim(2) * f0.dim(3);
  Tensor out = Tensor::empty(f0.dtype(), {E, C, 2, f0.dim(2), f0.dim(3)});
  const size_t plane = size_t(pp) * size_t(dtype_info(f0.dtype()).block_bytes);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t c = 0; c < C; ++c) {
      const size_t in = size_t(e * C + c) * plane;
      std::memcpy(out.data() + (size_t(e * C + c) * 2 + 0) * plane, f0.data() + in, plane);
      std::memcpy(out.data() + (size_t(e * C + c) * 2 + 1) * plane, f1.data() + in, plane);
    }
  return out;
}

Result<Tensor> gguf_concat_rows(const GgufTools& tools, const std::vector<Tensor>& parts, const std::string& name) {
  bool same = true;
  for (const auto& p : parts) {
    if (p.dim(-1) != parts[0].dim(-1) || p.ndim() != parts[0].ndim())
      return Error::format("[gguf] {}: q / k / v pieces of different widths", name);
    same = same && p.dtype() == parts[0].dtype();
  }
  std::vector<Tensor> src = parts;
  if (!same)
    for (auto& p : src) {
      PIPIT_ASSIGN_OR_RETURN(p, tools.widen_f32(p, name));
    }
  std::vector<int64_t> shape = src[0].shape();
  shape[0] = 0;
  for (const auto& p : src) shape[0] += p.dim(0);
  Tensor out = Tensor::empty(src[0].dtype(), shape);
  size_t off = 0;
  for (const auto& p : src) {
    std::memcpy(out.data() + off, p.data(), p.nbytes());
    off += p.nbytes();
  }
  return out;
}

}  // namespace pipit
