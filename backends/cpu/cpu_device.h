// The CPU as a Device: the kernels of backends/cpu/kernels.h (the best ISA level this CPU has, or the table a test
// puts in Ctx::k) split across the thread pool. It implements every op; its memory is the host's (arenas and
// weights on the heap or mapped), so the memory methods are copies or asserts. Each op's body lives in the .cpp of
// its family (ops.cpp, ops_linear_attn.cpp, ops_vision.cpp, ops_patch.cpp, ops_audio.cpp, ops_encoder.cpp).
// its family (ops.cpp, ops_linear_attn.cpp, ops_vision.cpp, ops_patch.cpp, ops_audio.cpp, ops_moe.cpp,
// ops_decoder.cpp).
#pragma once

#include "backends/cpu/kernels.h"
#include "backends/device.h"

namespace pipit {

class CpuDevice final : public Device {
 public:
  std::string name() const override { return "cpu"; }
  std::shared_ptr<DeviceStorage> alloc(size_t bytes) override;
  void write(const Tensor& dst, const void* src, size_t bytes) override;
  void read(const Tensor& src, void* dst, size_t bytes) override;
  Result<Tensor> upload_weight(const Tensor& host) override { return host; }

  bool supports(Op) const override { return true; }
  Tensor to_f32(Ctx& ctx, const Tensor& x) override;
  void linear_multi(Ctx& ctx, const Tensor& x, std::span<const Tensor* const> ws,
                            std::span<const Tensor* const> biases, std::span<Tensor* const> ys) override;
  Tensor linear_gated(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& up, GateAct act) override;
  Tensor embedding(Ctx& ctx, const Tensor& table, std::span<const int32_t> ids) override;
  Tensor rms_norm(Ctx& ctx, const Tensor& x, const Tensor& w, float eps, float w_offset) override;
  void rms_norm_heads_(Ctx& ctx, Tensor& x, const Tensor& w, float eps, float w_offset) override;
  Tensor gated(Ctx& ctx, const Tensor& gate, const Tensor& up, GateAct act) override;
  void add_(Ctx& ctx, Tensor& x, const Tensor& y) override;
  void scale_(Ctx& ctx, Tensor& x, float s) override;
  void softmax_(Ctx& ctx, Tensor& x) override;
  Tensor gather_rows(Ctx& ctx, const Tensor& x, std::span<const int64_t> rows) override;
  void copy_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) override;
  void rope_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const float> inv_freq,
                     float mscale) override;
  void rope_multi_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const uint8_t> stream,
                           std::span<const float> inv_freq) override;
  void store_kv(Ctx& ctx, const Tensor& src, Tensor& dst, std::span<const int32_t> pos, bool ring) override;
  void attention(Ctx& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         std::span<const int32_t> pos, const AttnParams& p, Tensor& out) override;
  // linear attention (backends/cpu/ops_linear_attn.cpp)
  void causal_conv1d_silu(Ctx& ctx, const Tensor& x, Tensor& state, const Tensor& w, Tensor& y) override;
  void l2_norm_groups_(Ctx& ctx, Tensor& x, int64_t group, float eps, float scale) override;
  void delta_gates_(Ctx& ctx, Tensor& a, Tensor& b, const Tensor& A_log, const Tensor& dt_bias) override;
  void gated_delta_rule(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t dk, int64_t dv,
                                const Tensor& g, const Tensor& beta, std::span<const DeltaSeq> seqs, Tensor& out) override;
  Tensor rms_norm_gated(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& z, float eps) override;
  // encoders (backends/cpu/ops_vision.cpp, ops_patch.cpp, ops_audio.cpp)
  Tensor layer_norm(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& b, float eps) override;
  void activation_(Ctx& ctx, Tensor& x, Act act) override;
  void attention_segments(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                                  std::span<const int32_t> cu, float scale, Tensor& out) override;
  void clamp_(Ctx& ctx, Tensor& x, float lo, float hi) override;
  void shift_scale_(Ctx& ctx, Tensor& x, float shift, float scale) override;
  void rope_parts_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, int n_part,
                           std::span<const float> inv_freq) override;
  Tensor pool_grid(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t k) override;
  Tensor glu(Ctx& ctx, const Tensor& x) override;
  Tensor depthwise_conv1d_causal(Ctx& ctx, const Tensor& x, const Tensor& w) override;
  Tensor conv2d_3x3_s2(Ctx& ctx, const Tensor& x, const Tensor& w) override;
  Tensor local_rel_attention(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& rel_k, int window, float softcap) override;
  // encoder layout and convolution ops (backends/cpu/ops_encoder.cpp)
  void copy_(Ctx& ctx, Tensor& dst, const Tensor& src) override;
  void fill_(Ctx& ctx, Tensor& x, float value) override;
  void scale_channels_(Ctx& ctx, Tensor& x, const Tensor& w) override;
  Tensor conv2d(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, int64_t kernel, int64_t stride,
                int64_t padding) override;
  Tensor window_partition(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t win) override;
  Tensor window_unpartition(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t win) override;
  Tensor rel_pos_attention(Ctx& ctx, const Tensor& qkv, int64_t n_win, int64_t win_h, int64_t win_w, int64_t n_head,
                           const Tensor& rel_h, const Tensor& rel_w) override;
  Tensor resize_bicubic_aa(Ctx& ctx, const Tensor& x, int64_t out_h, int64_t out_w) override;
  Tensor resize_bilinear_aligned(Ctx& ctx, const Tensor& x, int64_t out_h, int64_t out_w) override;
  // decoder ops (backends/cpu/ops_moe.cpp, ops_decoder.cpp)
  MoeRoutes moe_route(Ctx& ctx, const Tensor& logits, const MoeRouteParams& p) override;
  void add_rows_scaled_(Ctx& ctx, Tensor& out, std::span<const int64_t> rows, std::span<const float> w,
                        const Tensor& y) override;
  Tensor swiglu_clamped(Ctx& ctx, const Tensor& gu, float alpha, float limit) override;
  void sigmoid_mul_(Ctx& ctx, Tensor& x, const Tensor& gate) override;
  void softcap_(Ctx& ctx, Tensor& x, float cap) override;
  void add_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) override;
};

// x * sigmoid(x) over f32 rows in place, the audio tower's plain loop (ops_audio.cpp; activation_ kSilu).
void silu_rows_(Ctx& ctx, Tensor& x);

}  // namespace pipit
