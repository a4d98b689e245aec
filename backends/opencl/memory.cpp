// Device memory: buffers (zero-filled), copies at the edges, and weights uploaded once in the layout the kernels
// read (kernels/common.cl): q8_0 / q4_0 blocks split into a quant array and a scale array, bf16 and 1-D vectors
// (norm weights, biases) widened to f32, f32 / f16 matrices as they are.
#include <cstring>
#include <new>

#include "backends/cpu/kernels.h"
#include "backends/opencl/cl_device.h"
#include "core/panels.h"

namespace pipit::opencl {

ClBuffer::~ClBuffer() {
  if (mem_) cl_api().clReleaseMemObject(mem_);
}

bool ClBuffer::read_back(size_t offset, void* dst, size_t bytes) const {
  return offset + bytes <= size() && cl_api().clEnqueueReadBuffer(ctx_->queue, mem_, CL_TRUE, offset, bytes, dst, 0,
                                                                   nullptr, nullptr) == CL_SUCCESS;
}

BufArg buf(const Tensor& t) {
  const auto* b = dynamic_cast<const ClBuffer*>(t.storage().get());
  PIPIT_ASSERT(b, "{} is not in OpenCL device memory", t.describe());
  return {b->mem(), cl_ulong(b->offset_of(t.data()))};
}

int weight_code(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q8_0: return 2;
    case DType::Q4_0: return 3;
    default: return -1;
  }
}

std::shared_ptr<DeviceStorage> OpenclDevice::alloc(size_t bytes) {
  const size_t size = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  cl_int err = CL_SUCCESS;
  cl_mem m = cl_api().clCreateBuffer(cl_->context, CL_MEM_READ_WRITE, size, nullptr, &err);
  if (!m) throw std::bad_alloc();
  auto b = std::make_shared<ClBuffer>(cl_, m, size);
  const cl_uint zero = 0;
  err = cl_api().clEnqueueFillBuffer(cl_->queue, m, &zero, sizeof zero, 0, size, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) fail("zeroing a buffer", err);
  return b;
}

void OpenclDevice::write(const Tensor& dst, const void* src, size_t bytes) {
  const BufArg b = buf(dst);
  cl_int err = cl_api().clEnqueueWriteBuffer(cl_->queue, b.mem, CL_TRUE, b.offset, bytes, src, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) fail("writing to the device", err);
}

void OpenclDevice::read(const Tensor& src, void* dst, size_t bytes) {
  const BufArg b = buf(src);
  cl_int err = cl_api().clEnqueueReadBuffer(cl_->queue, b.mem, CL_TRUE, b.offset, bytes, dst, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) fail("reading from the device", err);
}

Tensor OpenclDevice::upload_i32(Ctx& ctx, std::span<const int32_t> v) {
  Tensor t = ctx.alloc(DType::I32, {int64_t(std::max<size_t>(v.size(), 1))});
  if (!v.empty()) write(t, v.data(), v.size() * 4);
  return t;
}

Tensor OpenclDevice::upload_f32(Ctx& ctx, std::span<const float> v) {
  Tensor t = ctx.alloc(DType::F32, {int64_t(std::max<size_t>(v.size(), 1))});
  if (!v.empty()) write(t, v.data(), v.size() * 4);
  return t;
}

Result<Tensor> OpenclDevice::upload_weight(const Tensor& host) {
  PIPIT_ASSERT(host.is_contiguous(), "weights are contiguous: {}", host.describe());
  const DType dt = host.dtype();
  if (dtype_is_panel(dt)) {
    // A .pipit converted for a CPU target stores q4_0 / q8_0 (and K-quant) matrices as 16-row panels: the same
    // blocks, interleaved. The device kernels read plain rows, so they are unpacked (exact) and uploaded as such.
    Tensor plain = Tensor::empty(dtype_unpanel(dt), host.shape());
    unpack_panel_rows(dt, host.data(), host.dim(-1), 0, host.rows(), plain.data());
    return upload_weight(plain);
  }
  const bool keep = host.ndim() == 2 && (dt == DType::F32 || dt == DType::F16 || dt == DType::Q8_0 ||
                                         dt == DType::Q4_0);
  if (!keep) {  // widened to f32 (exact for bf16 / f16; other block formats are dequantized)
    auto conv = kernels().to_f32[int(dt)];
    if (!conv)
      return Error::unsupported("[opencl] weights of dtype {} cannot be uploaded (re-convert to f16, q8 or q4)",
                                dtype_name(dt));
    Tensor f = Tensor::empty(DType::F32, host.shape());
    const int64_t n = host.dim(-1);
    for (int64_t r = 0; r < host.rows(); ++r) conv(host.row_ptr(r), f.ptr<float>() + r * n, n);
    Tensor d = empty(DType::F32, host.shape());
    write(d, f.data(), f.nbytes());
    return d;
  }
  Tensor d = empty(dt, host.shape());
  if (dt == DType::F32 || dt == DType::F16) {
    write(d, host.data(), host.nbytes());
    return d;
  }
  // q8_0 / q4_0: the quants of every block back to back, then every block's f16 scale
  const int64_t N = host.dim(0), K = host.dim(1), nb = K / kQBlock;
  const size_t qbytes = dt == DType::Q8_0 ? size_t(kQBlock) : size_t(kQBlock / 2);
  std::vector<uint8_t> soa(size_t(N * nb) * (qbytes + 2));
  uint8_t* q = soa.data();
  uint8_t* s = soa.data() + size_t(N * nb) * qbytes;
  for (int64_t n = 0; n < N; ++n) {
    const uint8_t* row = host.row_ptr(n);
    for (int64_t b = 0; b < nb; ++b) {
      if (dt == DType::Q8_0) {
        const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
        std::memcpy(q + size_t(n * nb + b) * qbytes, blk.qs, qbytes);
        std::memcpy(s + size_t(n * nb + b) * 2, &blk.d, 2);
      } else {
        const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
        std::memcpy(q + size_t(n * nb + b) * qbytes, blk.qs, qbytes);
        std::memcpy(s + size_t(n * nb + b) * 2, &blk.d, 2);
      }
    }
  }
  PIPIT_ASSERT(soa.size() == d.nbytes());
  write(d, soa.data(), soa.size());
  return d;
}

}  // namespace pipit::opencl
