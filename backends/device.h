// The device seam: every op of backends/ops.h runs on a Device. The CPU is one (backends/cpu/cpu_device.h, what a
// context without ctx.dev uses); another device (OpenCL today; CUDA or Vulkan next) holds the model's weights, the
// KV cache and the activations in its own memory and runs the ops it implements there. Models do not change per
// device: backends/ops.cpp sends every op to ctx.device(). docs/devices.md describes the whole seam (memory, weight
// layouts, errors) and how a new backend plugs in.
//
// Goals: tensors stay on the device for a whole forward pass (host <-> device copies only at the edges: token ids,
// positions and image features in, logits out); weights are uploaded once at load, in a layout the device prefers.
// Non-goals: automatic placement op by op, or running an op the device lacks on the CPU behind the model's back
// (a model is refused at load naming the first op it needs that the device lacks: Model::ops_used against
// Device::supports, see first_missing_op()).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/ops.h"
#include "core/status.h"
#include "core/tensor.h"

namespace pipit {

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "opencl:0 (Portable Computing Language: cpu-haswell-...)"

  // ---- memory ----
  // Zero-filled device bytes (throws std::bad_alloc when the device has no room, like HeapStorage::make).
  virtual std::shared_ptr<DeviceStorage> alloc(size_t bytes) = 0;
  // A contiguous device tensor of the given dtype and shape (KV cache rows, tests).
  Tensor empty(DType dtype, const std::vector<int64_t>& shape);
  // Host -> device and device -> host copies of a contiguous device tensor's bytes.
  virtual void write(const Tensor& dst, const void* src, size_t bytes) = 0;
  virtual void read(const Tensor& src, void* dst, size_t bytes) = 0;
  // A weight as this device keeps it: same dtype and shape, bytes in the device's layout (OpenCL: q8_0 / q4_0
  // split into a quant array and a scale array; bf16 widened to f32; 1-D vectors as f32). Errors for dtypes it
  // cannot hold.
  virtual Result<Tensor> upload_weight(const Tensor& host) = 0;

  // ---- errors ----
  // Ops return tensors, not Status: a failure inside one (out of device memory, a lost device) is kept here and
  // the runtime checks it after each forward pass (Session / Engine), like CUDA's sticky errors.
  Status take_error() {
    Status s = std::move(error_);
    error_ = Status::ok();
    return s;
  }

  // ---- the ops of backends/ops.h, same contracts; tensors in this device's memory in and out ----
  // Whether this device implements `op`. The ones it does not keep their default body below, which is never reached
  // in a working build: the loader refuses a model that needs them (first_missing_op).
  virtual bool supports(Op op) const = 0;

  virtual Tensor to_f32(Ctx& ctx, const Tensor& x);
  virtual void linear_multi(Ctx& ctx, const Tensor& x, std::span<const Tensor* const> ws,
                            std::span<const Tensor* const> biases, std::span<Tensor* const> ys);
  virtual Tensor linear_gated(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& up, GateAct act);
  virtual Tensor embedding(Ctx& ctx, const Tensor& table, std::span<const int32_t> ids);
  virtual Tensor rms_norm(Ctx& ctx, const Tensor& x, const Tensor& w, float eps, float w_offset);
  virtual void rms_norm_heads_(Ctx& ctx, Tensor& x, const Tensor& w, float eps, float w_offset);
  virtual Tensor gated(Ctx& ctx, const Tensor& gate, const Tensor& up, GateAct act);
  virtual void add_(Ctx& ctx, Tensor& x, const Tensor& y);
  virtual void scale_(Ctx& ctx, Tensor& x, float s);
  virtual void softmax_(Ctx& ctx, Tensor& x);
  virtual Tensor gather_rows(Ctx& ctx, const Tensor& x, std::span<const int64_t> rows);
  virtual void copy_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src);
  virtual void rope_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const float> inv_freq,
                     float mscale);
  virtual void rope_multi_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const uint8_t> stream,
                           std::span<const float> inv_freq);
  virtual void store_kv(Ctx& ctx, const Tensor& src, Tensor& dst, std::span<const int32_t> pos, bool ring);
  virtual void attention(Ctx& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         std::span<const int32_t> pos, const AttnParams& p, Tensor& out);
  // linear attention
  virtual void causal_conv1d_silu(Ctx& ctx, const Tensor& x, Tensor& state, const Tensor& w, Tensor& y);
  virtual void l2_norm_groups_(Ctx& ctx, Tensor& x, int64_t group, float eps, float scale);
  virtual void delta_gates_(Ctx& ctx, Tensor& a, Tensor& b, const Tensor& A_log, const Tensor& dt_bias);
  virtual void gated_delta_rule(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t dk, int64_t dv,
                                const Tensor& g, const Tensor& beta, std::span<const DeltaSeq> seqs, Tensor& out);
  virtual Tensor rms_norm_gated(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& z, float eps);
  // encoders (vision, audio)
  virtual Tensor layer_norm(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& b, float eps);
  virtual void activation_(Ctx& ctx, Tensor& x, Act act);
  virtual void attention_segments(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                                  std::span<const int32_t> cu, float scale, Tensor& out);
  virtual void clamp_(Ctx& ctx, Tensor& x, float lo, float hi);
  virtual void shift_scale_(Ctx& ctx, Tensor& x, float shift, float scale);
  virtual void rope_parts_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, int n_part,
                           std::span<const float> inv_freq);
  virtual Tensor pool_grid(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t k);
  virtual Tensor glu(Ctx& ctx, const Tensor& x);
  virtual Tensor depthwise_conv1d_causal(Ctx& ctx, const Tensor& x, const Tensor& w);
  virtual Tensor conv2d_3x3_s2(Ctx& ctx, const Tensor& x, const Tensor& w);
  virtual Tensor local_rel_attention(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& rel_k, int window, float softcap);
  // encoder layout and convolution ops
  virtual void copy_(Ctx& ctx, Tensor& dst, const Tensor& src);
  virtual void fill_(Ctx& ctx, Tensor& x, float value);
  virtual void scale_channels_(Ctx& ctx, Tensor& x, const Tensor& w);
  virtual Tensor conv2d(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, int64_t kernel, int64_t stride,
                        int64_t padding);
  virtual Tensor window_partition(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t win);
  virtual Tensor window_unpartition(Ctx& ctx, const Tensor& x, int64_t grid_h, int64_t grid_w, int64_t win);
  virtual Tensor rel_pos_attention(Ctx& ctx, const Tensor& qkv, int64_t n_win, int64_t win_h, int64_t win_w,
                                   int64_t n_head, const Tensor& rel_h, const Tensor& rel_w);
  virtual Tensor resize_bicubic_aa(Ctx& ctx, const Tensor& x, int64_t out_h, int64_t out_w);
  virtual Tensor resize_bilinear_aligned(Ctx& ctx, const Tensor& x, int64_t out_h, int64_t out_w);
  // decoder ops (MoE routing and combining, gates, soft-cap, row adds)
  virtual MoeRoutes moe_route(Ctx& ctx, const Tensor& logits, const MoeRouteParams& p);
  virtual void add_rows_scaled_(Ctx& ctx, Tensor& out, std::span<const int64_t> rows, std::span<const float> w,
                                const Tensor& y);
  virtual Tensor swiglu_clamped(Ctx& ctx, const Tensor& gu, float alpha, float limit);
  virtual void sigmoid_mul_(Ctx& ctx, Tensor& x, const Tensor& gate);
  virtual void softcap_(Ctx& ctx, Tensor& x, float cap);
  virtual void add_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src);

 protected:
  // The body of every op this device does not override: a bug report naming the op and the device.
  [[noreturn]] void lacks(Op op) const;
  void set_error(Status s) {
    if (error_.is_ok()) error_ = std::move(s);
  }

 private:
  Status error_ = Status::ok();
};

// Arena chunks in dev's memory (null dev: the heap), for activations that stay on the device.
Arena::ChunkAlloc device_chunk_alloc(Device* dev);
// After a forward pass on ctx.dev: the logits read back to the host, or the error an op met on the way.
Status logits_to_host(Ctx& ctx, Tensor* logits);

// ---- opening devices ----
// "cpu" -> null (the CPU path); "opencl" or "opencl:N" -> the N-th OpenCL device over all platforms (default 0).
// Errors name what exists: no OpenCL runtime or device ("install an ICD, e.g. pocl-opencl-icd"), an index past
// the last device, a build without OpenCL, a kernel build failure.
Result<std::shared_ptr<Device>> open_device(const std::string& spec);
// One line per device this machine offers (for `pipit inspect --devices`), or the reason there is none.
std::vector<std::string> list_devices();
// The first op of `needed` that `dev` does not implement (Op::kCount: none). The loader refuses a model on a device
// with the op's name.
Op first_missing_op(const Device& dev, const OpSet& needed);

}  // namespace pipit
