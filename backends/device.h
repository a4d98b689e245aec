// The device seam: a compute device other than this CPU (OpenCL today; CUDA or Vulkan next) holds the model's
// weights, the KV cache and the activations in its own memory and runs the ops of backends/cpu/ops.h there.
// Models do not change per device: ops.cpp sends every op to ctx.dev when it is set. docs/devices.md describes
// the whole seam (memory, weight layouts, errors) and how a new backend plugs in.
//
// Goals: tensors stay on the device for a whole forward pass (host <-> device copies only at the edges: token ids,
// positions and image features in, logits out); weights are uploaded once at load, in a layout the device prefers.
// Non-goals: automatic placement op by op, or running an op the device lacks on the CPU behind the model's back
// (a model that needs one is refused at load: device_supports_arch()).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/ops.h"
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

  // ---- the ops of backends/cpu/ops.h, same contracts; device tensors in, device tensors out ----
  virtual void linear_multi(Ctx& ctx, const Tensor& x, std::span<const Tensor* const> ws,
                            std::span<const Tensor* const> biases, std::span<Tensor* const> ys) = 0;
  virtual Tensor linear_gated(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& up, GateAct act) = 0;
  virtual Tensor embedding(Ctx& ctx, const Tensor& table, std::span<const int32_t> ids) = 0;
  virtual Tensor rms_norm(Ctx& ctx, const Tensor& x, const Tensor& w, float eps, float w_offset) = 0;
  virtual void rms_norm_heads_(Ctx& ctx, Tensor& x, const Tensor& w, float eps, float w_offset) = 0;
  virtual Tensor gated(Ctx& ctx, const Tensor& gate, const Tensor& up, GateAct act) = 0;
  virtual void add_(Ctx& ctx, Tensor& x, const Tensor& y) = 0;
  virtual void scale_(Ctx& ctx, Tensor& x, float s) = 0;
  virtual void softmax_(Ctx& ctx, Tensor& x) = 0;
  virtual void rope_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const float> inv_freq,
                     float mscale) = 0;
  virtual void rope_multi_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const uint8_t> stream,
                           std::span<const float> inv_freq) = 0;
  virtual void store_kv(Ctx& ctx, const Tensor& src, Tensor& dst, std::span<const int32_t> pos, bool ring) = 0;
  virtual void attention(Ctx& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                         std::span<const int32_t> pos, const AttnParams& p, Tensor& out) = 0;
  virtual Tensor gather_rows(Ctx& ctx, const Tensor& x, std::span<const int64_t> rows) = 0;
  virtual void copy_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) = 0;
  virtual Tensor to_f32(Ctx& ctx, const Tensor& x) = 0;

 protected:
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
// Whether the decoder of HF model_type `arch` uses only ops every device implements (the Llama family and the
// Qwen-VL decoders); others run on the CPU and are refused with a message when a device is asked for.
bool device_supports_arch(const std::string& arch);

}  // namespace pipit
