// GPT-OSS expert import (see gpt_oss_import.h). reference: HF integrations/mxfp4.py convert_moe_packed_tensors
// (byte b of a block: element 2b in the low nibble, 2b + 1 in the high; value FP4_VALUES[nibble] * 2^(scale - 127)).
#include "models/gpt_oss_import.h"

#include <cstring>

#include "models/checkpoint_traits.h"

namespace pipit {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// blocks [E, R, G, 16] + scales [E, R, G] (HF nibble order) -> mxfp4 [E, R, G * 32] (ggml nibble order). The value
// of every element is unchanged: HF's 2^(s - 127) * FP4_VALUES[c] equals ggml's 2^(s - 128) * 2 FP4_VALUES[c].
Result<Tensor> repack_mxfp4(const std::string& name, const Tensor& blocks, const Tensor& scales) {
  if (blocks.ndim() != 4 || blocks.dim(3) != 16 || blocks.dtype() != DType::I8)
    return Error::format("[load] {}_blocks: expected U8 [experts, rows, blocks, 16], got {}", name, blocks.describe());
  if (scales.dtype() != DType::I8 || scales.shape() != std::vector<int64_t>{blocks.dim(0), blocks.dim(1), blocks.dim(2)})
    return Error::format("[load] {}_scales: expected U8 [{}, {}, {}] for {}_blocks {}, got {}", name, blocks.dim(0),
                         blocks.dim(1), blocks.dim(2), name, blocks.shape_str(), scales.describe());
  const int64_t n_blocks = blocks.dim(0) * blocks.dim(1) * blocks.dim(2);
  Tensor out = Tensor::empty(DType::MXFP4, {blocks.dim(0), blocks.dim(1), blocks.dim(2) * kQBlock});
  const uint8_t* bq = blocks.data();
  const uint8_t* sc = scales.data();
  auto* ob = out.ptr<BlockMXFP4>();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* in = bq + b * 16;
    auto code = [&](int i) { return (in[i >> 1] >> ((i & 1) * 4)) & 0x0f; };  // HF: element i
    ob[b].e = sc[b];
    for (int j = 0; j < kQBlock / 2; ++j) ob[b].qs[j] = uint8_t(code(j) | (code(j + kQBlock / 2) << 4));
  }
  return out;
}

// [E, A, B] (any 16-bit or f32 float) -> [E, B, A], same dtype.
Tensor transpose_experts(const Tensor& t) {
  const int64_t E = t.dim(0), A = t.dim(1), B = t.dim(2), es = dtype_info(t.dtype()).block_bytes;
  Tensor out = Tensor::empty(t.dtype(), {E, B, A});
  for (int64_t e = 0; e < E; ++e) {
    const uint8_t* src = t.data() + e * A * B * es;
    uint8_t* dst = out.data() + e * A * B * es;
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b) std::memcpy(dst + (b * A + a) * es, src + (a * B + b) * es, size_t(es));
  }
  return out;
}

}  // namespace

Status import_gpt_oss_experts(Checkpoint& c) {
  // a model_type that is not a string is reported by the model registry, not thrown here (json's value() throws)
  const auto mt = c.config.is_object() ? c.config.find("model_type") : c.config.end();
  if (mt == c.config.end() || !mt->is_string() || mt->get<std::string>() != "gpt_oss") return Status::ok();
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : c.tensors) {
    const bool proj = ends_with(name, ".mlp.experts.gate_up_proj") || ends_with(name, ".mlp.experts.down_proj");
    if (ends_with(name, "_scales") && c.tensors.count(name.substr(0, name.size() - 7) + "_blocks")) continue;
    if (ends_with(name, "_blocks")) {
      const std::string base = name.substr(0, name.size() - 7);
      auto s = c.tensors.find(base + "_scales");
      if (s == c.tensors.end())
        return Error::not_found("[load] missing tensor '{}_scales' (the MXFP4 scales of {})", base, name);
      PIPIT_ASSIGN_OR_RETURN(out[base + ".weight"], repack_mxfp4(base, t, s->second));
      continue;
    }
    if (proj) {
      if (t.ndim() != 3 || !(t.dtype() == DType::BF16 || t.dtype() == DType::F16 || t.dtype() == DType::F32))
        return Error::format("[load] {}: expected a float [experts, in, out] tensor, got {}", name, t.describe());
      out[name + ".weight"] = transpose_experts(t);
      continue;
    }
    if (ends_with(name, "_scales"))
      return Error::not_found("[load] {}: MXFP4 scales without their '{}_blocks'", name,
                              name.substr(0, name.size() - 7));
    out[name] = t;
  }
  c.tensors = std::move(out);
  return Status::ok();
}

static CheckpointLayoutRegistrar kGptOssLayout("gpt_oss", import_gpt_oss_experts);

}  // namespace pipit
