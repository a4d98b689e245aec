// Opening a device by name, listing devices, and which decoders run on one.
#include "backends/device.h"

#include <charconv>

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

bool device_supports_arch(const std::string& arch) {
  // decoders built only from the ops in Device: models/llama.cpp's graph without MoE layers (Llama, Qwen2, Qwen3,
  // SmolLM3, MiniCPM) and the Qwen2-VL / Qwen2.5-VL decoders (their vision towers stay on the CPU)
  for (const char* a : {"llama", "qwen2", "qwen3", "smollm3", "minicpm", "qwen2_vl", "qwen2_5_vl"})
    if (arch == a) return true;
  return false;
}

}  // namespace pipit
