// Opening a device by name, listing devices, capability checks, and the default (lacking) body of every op.
#include "backends/device.h"

#include <charconv>
#include <cstdlib>

#include "backends/opencl/opencl.h"

namespace pipit {

Tensor Device::empty(DType dtype, const std::vector<int64_t>& shape) {
  Tensor probe = Tensor::from_data(dtype, shape, reinterpret_cast<void*>(kAlign), nullptr);  // for nbytes()
  std::shared_ptr<DeviceStorage> s = alloc(probe.nbytes());
  return Tensor::from_data(dtype, shape, s->data(), s);
}

Arena::ChunkAlloc device_chunk_alloc(Device* dev) {
  if (!dev) return nullptr;
  return [dev](size_t bytes) -> std::shared_ptr<Storage> { return dev->alloc(bytes); };
}

Status logits_to_host(Ctx& ctx, Tensor* logits) {
  if (!ctx.dev) return Status::ok();
  PIPIT_TRY(ctx.dev->take_error());
  *logits = to_host(ctx, *logits);
  return ctx.dev->take_error();
}

Result<std::shared_ptr<Device>> open_device(const std::string& spec) {
  if (spec.empty() || spec == "cpu") return std::shared_ptr<Device>();
  const std::string kOpencl = "opencl";
  if (spec.rfind(kOpencl, 0) == 0) {
    int index = 0;
    if (spec.size() > kOpencl.size()) {
      const char* b = spec.data() + kOpencl.size() + 1;
      const char* e = spec.data() + spec.size();
      auto r = std::from_chars(b, e, index);
      if (spec[kOpencl.size()] != ':' || b == e || r.ec != std::errc() || r.ptr != e || index < 0)
        return Error::invalid_argument("--device {}: expected cpu, opencl or opencl:N (N a device index)", spec);
    }
    return open_opencl_device(index);
  }
  return Error::invalid_argument("--device {}: unknown device (cpu, opencl or opencl:N)", spec);
}

std::vector<std::string> list_devices() {
  std::vector<std::string> out = {"cpu: this machine's CPU (the default)"};
  for (auto& l : list_opencl_devices()) out.push_back(l);
  return out;
}

Op first_missing_op(const Device& dev, const OpSet& needed) {
  for (size_t i = 0; i < size_t(Op::kCount); ++i)
    if (needed.test(i) && !dev.supports(Op(i))) return Op(i);
  return Op::kCount;
}

void Device::lacks(Op op) const {
  PIPIT_ASSERT(false, "op {} is not implemented on {}: the loader should have refused the model (first_missing_op)",
               op_name(op), name());
  std::abort();
}

// The default body of every op: the device lacks it (see Device::supports).
Tensor Device::to_f32(Ctx&, const Tensor&) { lacks(Op::kToF32); }
void Device::linear_multi(Ctx&, const Tensor&, std::span<const Tensor* const>, std::span<const Tensor* const>,
                          std::span<Tensor* const>) {
  lacks(Op::kLinear);
}
Tensor Device::linear_gated(Ctx&, const Tensor&, const Tensor&, const Tensor&, GateAct) { lacks(Op::kLinearGated); }
Tensor Device::embedding(Ctx&, const Tensor&, std::span<const int32_t>) { lacks(Op::kEmbedding); }
Tensor Device::rms_norm(Ctx&, const Tensor&, const Tensor&, float, float) { lacks(Op::kRmsNorm); }
void Device::rms_norm_heads_(Ctx&, Tensor&, const Tensor&, float, float) { lacks(Op::kRmsNormHeads); }
Tensor Device::gated(Ctx&, const Tensor&, const Tensor&, GateAct) { lacks(Op::kGated); }
void Device::add_(Ctx&, Tensor&, const Tensor&) { lacks(Op::kAdd); }
void Device::scale_(Ctx&, Tensor&, float) { lacks(Op::kScale); }
void Device::softmax_(Ctx&, Tensor&) { lacks(Op::kSoftmax); }
Tensor Device::gather_rows(Ctx&, const Tensor&, std::span<const int64_t>) { lacks(Op::kGatherRows); }
void Device::copy_rows_(Ctx&, Tensor&, std::span<const int32_t>, const Tensor&) { lacks(Op::kCopyRows); }
void Device::rope_(Ctx&, Tensor&, std::span<const int32_t>, std::span<const float>, float) { lacks(Op::kRope); }
void Device::rope_multi_(Ctx&, Tensor&, std::span<const int32_t>, std::span<const uint8_t>, std::span<const float>) {
  lacks(Op::kRopeMulti);
}
void Device::store_kv(Ctx&, const Tensor&, Tensor&, std::span<const int32_t>, bool) { lacks(Op::kStoreKv); }
void Device::attention(Ctx&, const Tensor&, const Tensor&, const Tensor&, std::span<const int32_t>, const AttnParams&,
                       Tensor&) {
  lacks(Op::kAttention);
}
void Device::causal_conv1d_silu(Ctx&, const Tensor&, Tensor&, const Tensor&, Tensor&) { lacks(Op::kCausalConv1dSilu); }
void Device::l2_norm_groups_(Ctx&, Tensor&, int64_t, float, float) { lacks(Op::kL2NormGroups); }
void Device::delta_gates_(Ctx&, Tensor&, Tensor&, const Tensor&, const Tensor&) { lacks(Op::kDeltaGates); }
void Device::gated_delta_rule(Ctx&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, const Tensor&,
                              const Tensor&, std::span<const DeltaSeq>, Tensor&) {
  lacks(Op::kGatedDeltaRule);
}
Tensor Device::rms_norm_gated(Ctx&, const Tensor&, const Tensor&, const Tensor&, float) { lacks(Op::kRmsNormGated); }
Tensor Device::layer_norm(Ctx&, const Tensor&, const Tensor&, const Tensor&, float) { lacks(Op::kLayerNorm); }
void Device::activation_(Ctx&, Tensor&, Act) { lacks(Op::kActivation); }
void Device::attention_segments(Ctx&, const Tensor&, const Tensor&, const Tensor&, std::span<const int32_t>, float,
                                Tensor&) {
  lacks(Op::kAttentionSegments);
}
void Device::clamp_(Ctx&, Tensor&, float, float) { lacks(Op::kClamp); }
void Device::shift_scale_(Ctx&, Tensor&, float, float) { lacks(Op::kShiftScale); }
void Device::rope_parts_(Ctx&, Tensor&, std::span<const int32_t>, int, std::span<const float>) {
  lacks(Op::kRopeParts);
}
Tensor Device::pool_grid(Ctx&, const Tensor&, int64_t, int64_t, int64_t) { lacks(Op::kPoolGrid); }
Tensor Device::glu(Ctx&, const Tensor&) { lacks(Op::kGlu); }
Tensor Device::depthwise_conv1d_causal(Ctx&, const Tensor&, const Tensor&) { lacks(Op::kDepthwiseConv1dCausal); }
Tensor Device::conv2d_3x3_s2(Ctx&, const Tensor&, const Tensor&) { lacks(Op::kConv2d3x3S2); }
Tensor Device::local_rel_attention(Ctx&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int, float) {
  lacks(Op::kLocalRelAttention);
}
void Device::copy_(Ctx&, Tensor&, const Tensor&) { lacks(Op::kCopy); }
void Device::fill_(Ctx&, Tensor&, float) { lacks(Op::kFill); }
void Device::scale_channels_(Ctx&, Tensor&, const Tensor&) { lacks(Op::kScaleChannels); }
Tensor Device::conv2d(Ctx&, const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, int64_t) {
  lacks(Op::kConv2d);
}
Tensor Device::window_partition(Ctx&, const Tensor&, int64_t, int64_t, int64_t) { lacks(Op::kWindowPartition); }
Tensor Device::window_unpartition(Ctx&, const Tensor&, int64_t, int64_t, int64_t) { lacks(Op::kWindowUnpartition); }
Tensor Device::rel_pos_attention(Ctx&, const Tensor&, int64_t, int64_t, int64_t, int64_t, const Tensor&,
                                 const Tensor&) {
  lacks(Op::kRelPosAttention);
}
Tensor Device::resize_bicubic_aa(Ctx&, const Tensor&, int64_t, int64_t) { lacks(Op::kResizeBicubicAa); }
Tensor Device::resize_bilinear_aligned(Ctx&, const Tensor&, int64_t, int64_t) { lacks(Op::kResizeBilinearAligned); }
MoeRoutes Device::moe_route(Ctx&, const Tensor&, const MoeRouteParams&) { lacks(Op::kMoeRoute); }
void Device::add_rows_scaled_(Ctx&, Tensor&, std::span<const int64_t>, std::span<const float>, const Tensor&) {
  lacks(Op::kAddRowsScaled);
}
Tensor Device::swiglu_clamped(Ctx&, const Tensor&, float, float) { lacks(Op::kSwigluClamped); }
void Device::sigmoid_mul_(Ctx&, Tensor&, const Tensor&) { lacks(Op::kSigmoidMul); }
void Device::softcap_(Ctx&, Tensor&, float) { lacks(Op::kSoftcap); }
void Device::add_rows_(Ctx&, Tensor&, std::span<const int32_t>, const Tensor&) { lacks(Op::kAddRows); }

}  // namespace pipit
