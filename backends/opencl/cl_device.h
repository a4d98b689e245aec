// The OpenCL device (backends/device.h's Device over one cl_device_id): context, in-order queue, the programs
// built at open, buffers, and the op methods, each defined in its own ops_<op>.cpp. Internal to backends/opencl.
#pragma once

#include "backends/opencl/cl_api.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/device.h"

namespace pipit::opencl {

std::string cl_error_name(cl_int err);

// Context + queue, shared by the device and every buffer it made (a buffer can outlive the Device object).
struct ClContext {
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::vector<cl_program> programs;
  ~ClContext();
};

// Device memory: one cl_mem; Storage's data() is a reserved inaccessible address range of the same size.
class ClBuffer : public DeviceStorage {
 public:
  ClBuffer(std::shared_ptr<ClContext> ctx, cl_mem mem, size_t size)
      : DeviceStorage(size), ctx_(std::move(ctx)), mem_(mem) {}
  ~ClBuffer() override;
  cl_mem mem() const { return mem_; }
  bool read_back(size_t offset, void* dst, size_t bytes) const override;

 private:
  std::shared_ptr<ClContext> ctx_;
  cl_mem mem_;
};

// A kernel argument that is a tensor: its buffer and the byte offset of its first element.
struct BufArg {
  cl_mem mem;
  cl_ulong offset;
};
BufArg buf(const Tensor& t);  // t must live in a ClBuffer

class OpenclDevice : public Device {
 public:
  static Result<std::shared_ptr<OpenclDevice>> open(int index);
  ~OpenclDevice() override;
  std::string name() const override { return name_; }

  std::shared_ptr<DeviceStorage> alloc(size_t bytes) override;
  void write(const Tensor& dst, const void* src, size_t bytes) override;
  void read(const Tensor& src, void* dst, size_t bytes) override;
  Result<Tensor> upload_weight(const Tensor& host) override;

  // The decoder ops of a dense Llama-style graph, attention sinks, the decoder ops of MoE (routing, expert
  // combining), GPT-OSS, Gemma (soft-cap) and DeepStack (row adds), and linear attention (Gated DeltaNet); no
  // encoder ops. A model needing more is refused at load.
  bool supports(Op op) const override;
  void linear_multi(Ctx& ctx, const Tensor& x, std::span<const Tensor* const> ws, std::span<const Tensor* const> biases,
                    std::span<Tensor* const> ys) override;
  Tensor linear_gated(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& up, GateAct act) override;
  Tensor embedding(Ctx& ctx, const Tensor& table, std::span<const int32_t> ids) override;
  Tensor rms_norm(Ctx& ctx, const Tensor& x, const Tensor& w, float eps, float w_offset) override;
  void rms_norm_heads_(Ctx& ctx, Tensor& x, const Tensor& w, float eps, float w_offset) override;
  Tensor gated(Ctx& ctx, const Tensor& gate, const Tensor& up, GateAct act) override;
  void add_(Ctx& ctx, Tensor& x, const Tensor& y) override;
  void scale_(Ctx& ctx, Tensor& x, float s) override;
  void softmax_(Ctx& ctx, Tensor& x) override;
  void rope_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const float> inv_freq,
             float mscale) override;
  void rope_multi_(Ctx& ctx, Tensor& x, std::span<const int32_t> pos, std::span<const uint8_t> stream,
                   std::span<const float> inv_freq) override;
  void store_kv(Ctx& ctx, const Tensor& src, Tensor& dst, std::span<const int32_t> pos, bool ring) override;
  void attention(Ctx& ctx, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, std::span<const int32_t> pos,
                 const AttnParams& p, Tensor& out) override;
  Tensor gather_rows(Ctx& ctx, const Tensor& x, std::span<const int64_t> rows) override;
  void copy_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) override;
  Tensor to_f32(Ctx& ctx, const Tensor& x) override;
  // decoder ops (ops_decoder.cpp)
  MoeRoutes moe_route(Ctx& ctx, const Tensor& logits, const MoeRouteParams& p) override;
  void add_rows_scaled_(Ctx& ctx, Tensor& out, std::span<const int64_t> rows, std::span<const float> w,
                        const Tensor& y) override;
  Tensor swiglu_clamped(Ctx& ctx, const Tensor& gu, float alpha, float limit) override;
  void sigmoid_mul_(Ctx& ctx, Tensor& x, const Tensor& gate) override;
  void softcap_(Ctx& ctx, Tensor& x, float cap) override;
  void add_rows_(Ctx& ctx, Tensor& dst, std::span<const int32_t> src_row, const Tensor& src) override;
  void fill_(Ctx& ctx, Tensor& x, float value) override;
  void clamp_(Ctx& ctx, Tensor& x, float lo, float hi) override;
  // linear attention (ops_linear_attn.cpp)
  void causal_conv1d_silu(Ctx& ctx, const Tensor& x, Tensor& state, const Tensor& w, Tensor& y) override;
  void l2_norm_groups_(Ctx& ctx, Tensor& x, int64_t group, float eps, float scale) override;
  void delta_gates_(Ctx& ctx, Tensor& a, Tensor& b, const Tensor& A_log, const Tensor& dt_bias) override;
  void gated_delta_rule(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t dk, int64_t dv,
                        const Tensor& g, const Tensor& beta, std::span<const DeltaSeq> seqs, Tensor& out) override;
  Tensor rms_norm_gated(Ctx& ctx, const Tensor& x, const Tensor& w, const Tensor& z, float eps) override;

  // ---- for the op files ----
  cl_kernel kernel(const std::string& name) const;  // asserts it exists (all are created at open)
  // Sets the arguments in order and enqueues `k` over global (g0, g1) (rounded up to the local size, which is
  // (l0, l1), or the runtime's choice when l0 == 0). Errors are kept (Device::take_error).
  template <class... A>
  void launch(const char* kname, size_t g0, size_t g1, size_t l0, size_t l1, const A&... args) {
    std::lock_guard<std::mutex> lock(mu_);
    cl_kernel k = kernel(kname);
    cl_uint i = 0;
    cl_int err = CL_SUCCESS;
    ((err = err == CL_SUCCESS ? set_arg(k, i, args) : err), ...);
    if (err == CL_SUCCESS) err = enqueue(k, g0, g1, l0, l1);
    if (err != CL_SUCCESS) fail(kname, err);
  }
  // Small host arrays (token ids, positions, row lists) as a device tensor from the arena (a blocking write: the
  // host array may go away right after).
  Tensor upload_i32(Ctx& ctx, std::span<const int32_t> v);
  Tensor upload_f32(Ctx& ctx, std::span<const float> v);
  void fail(const char* what, cl_int err);

 private:
  std::shared_ptr<ClContext> cl_;
  cl_device_id device_ = nullptr;
  std::string name_;
  std::map<std::string, cl_kernel> kernels_;  // "program.kernel" for the per-dtype builds, plain names otherwise
  std::mutex mu_;
  OpSet without_;  // ops supports() denies (PIPIT_OPENCL_WITHOUT_OPS, a test hook: runtime.cpp)
  // the RoPE cos/sin table of the last (positions, frequencies, scale, streams) seen: every layer of a pass reuses it
  struct RopeKey {
    std::vector<int32_t> pos;
    std::vector<float> inv_freq;
    std::vector<uint8_t> stream;
    float mscale = 0.0f;
    bool operator==(const RopeKey&) const = default;
  } rope_key_;
  Tensor rope_table_;
  std::mutex rope_mu_;  // sessions on other threads share the table: held from the key check to the launch

  Tensor rope_table(Ctx& ctx, RopeKey key, int64_t n_tokens);
  // a BufArg is two kernel arguments (buffer, byte offset); anything else one
  static cl_int set_arg(cl_kernel k, cl_uint& i, const BufArg& b);
  template <class T>
  static cl_int set_arg(cl_kernel k, cl_uint& i, const T& v) {
    static_assert(std::is_arithmetic_v<T>, "kernel arguments: BufArg or scalars");
    const cl_uint at = i++;
    return cl_api().clSetKernelArg(k, at, sizeof(T), &v);
  }
  cl_int enqueue(cl_kernel k, size_t g0, size_t g1, size_t l0, size_t l1);
  Status build_programs();
};

// Softmax in place over the score rows [n_tokens * n_head, span] of attention, each with its head's sink logit
// (sinks: [n_head] f32 on the device) joining and its probability dropped (ops_norm.cpp).
void softmax_rows_sinks(OpenclDevice& d, Tensor& scores, const Tensor& sinks, int64_t n_head);

// The weight dtype codes of kernels/common.cl (WT_*), or -1.
int weight_code(DType t);

}  // namespace pipit::opencl
