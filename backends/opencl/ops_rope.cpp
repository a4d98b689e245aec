// rope_ and rope_multi_ (M-RoPE) on the device. The cos / sin table is computed on the host exactly as the CPU
// op does (f32 angle = float(pos) * inv_freq; M-RoPE: the position of the frequency's stream) and uploaded once
// per forward pass: every layer rotates by the same angles, so it is cached on the device by its inputs.
#include <cmath>

#include "backends/opencl/cl_device.h"

namespace pipit::opencl {

Tensor OpenclDevice::rope_table(Ctx& ctx, RopeKey key, int64_t n_tokens) {
  if (rope_table_.defined() && key == rope_key_) return rope_table_;
  const int64_t half = int64_t(key.inv_freq.size());
  std::vector<float> cs(size_t(n_tokens * 2 * half));
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const size_t p = key.stream.empty() ? size_t(t) : size_t(key.stream[size_t(i)] * n_tokens + t);
      const float f = float(key.pos[p]) * key.inv_freq[size_t(i)];
      cs[size_t(t * 2 * half + i)] = std::cos(f) * key.mscale;
      cs[size_t(t * 2 * half + half + i)] = std::sin(f) * key.mscale;
    }
  // kept across passes (not from the arena, which each layer rewinds); grown when a pass needs more
  if (!rope_table_.defined() || rope_table_.numel() < int64_t(cs.size()))
    rope_table_ = empty(DType::F32, {std::max<int64_t>(int64_t(cs.size()), 1)});
  write(rope_table_, cs.data(), cs.size() * 4);
  rope_key_ = std::move(key);
  return rope_table_;
}

namespace {
void rotate(OpenclDevice& d, Tensor& x, const Tensor& table, int64_t half) {
  PIPIT_ASSERT(x.ndim() == 3 && x.is_contiguous() && 2 * half <= x.dim(2), "opencl rope of {}", x.describe());
  d.launch("rope", size_t(half), size_t(x.dim(0) * x.dim(1)), 0, 0, buf(x), buf(table), int(x.dim(1)),
           int(x.dim(2)), int(half));
}
}  // namespace

void OpenclDevice::rope_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const float> inv_freq,
                         float mscale) {
  PIPIT_ASSERT(int64_t(pos.size()) == x.dim(0));
  RopeKey key{{pos.begin(), pos.end()}, {inv_freq.begin(), inv_freq.end()}, {}, mscale};
  std::lock_guard<std::mutex> lock(rope_mu_);
  Tensor table = rope_table(ctx, std::move(key), x.dim(0));
  rotate(*this, x, table, int64_t(inv_freq.size()));
}

void OpenclDevice::rope_multi_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const uint8_t> stream,
                               std::span<const float> inv_freq) {
  PIPIT_ASSERT(stream.size() == inv_freq.size());
  for (uint8_t s : stream) PIPIT_ASSERT(int64_t(s + 1) * x.dim(0) <= int64_t(pos.size()));
  RopeKey key{{pos.begin(), pos.end()}, {inv_freq.begin(), inv_freq.end()}, {stream.begin(), stream.end()}, 1.0f};
  std::lock_guard<std::mutex> lock(rope_mu_);
  Tensor table = rope_table(ctx, std::move(key), x.dim(0));
  rotate(*this, x, table, int64_t(inv_freq.size()));
}

}  // namespace pipit::opencl
