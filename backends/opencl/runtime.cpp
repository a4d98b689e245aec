// OpenCL platforms and devices: listing them, opening one (context, in-order queue) and building every program
// from the sources embedded in the binary, through an on-disk cache of program binaries (PoCL spends seconds in
// LLVM per program; a phone's driver about as long), so a second start loads binaries instead of compiling.
// The OpenCL library itself is loaded here at first use (cl_api.h).
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "backends/opencl/cl_device.h"
#include "backends/opencl/opencl.h"
#include "backends/opencl/programs.h"

namespace pipit {
namespace opencl {

std::string cl_error_name(cl_int err) {
  switch (err) {
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_BUILD_OPTIONS: return "CL_INVALID_BUILD_OPTIONS";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "OpenCL error " + std::to_string(err);
  }
}

ClContext::~ClContext() {
  for (cl_program p : programs) cl_api().clReleaseProgram(p);
  if (queue) cl_api().clReleaseCommandQueue(queue);
  if (context) cl_api().clReleaseContext(context);
}

namespace {

std::string device_str(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (cl_api().clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
  std::string s(n, '\0');
  cl_api().clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string platform_str(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (cl_api().clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
  std::string s(n, '\0');
  cl_api().clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

struct DeviceEntry {
  cl_platform_id platform;
  cl_device_id device;
};

// Every device of every platform, in order; an error when there is no OpenCL library or runtime at all.
Result<std::vector<DeviceEntry>> all_devices() {
  PIPIT_TRY(load_cl_api());  // no libOpenCL.so.1: one line naming the package
  cl_uint n_plat = 0;
  cl_int err = cl_api().clGetPlatformIDs(0, nullptr, &n_plat);
  if (err == -1001 || (err == CL_SUCCESS && n_plat == 0))
    return Error::not_found("[opencl] no OpenCL platform: no ICD is installed (e.g. apt install pocl-opencl-icd "
                            "for the CPU, or the GPU vendor's driver); use --device cpu");
  if (err != CL_SUCCESS) return Error::unavailable("[opencl] clGetPlatformIDs failed: {}", cl_error_name(err));
  std::vector<cl_platform_id> plats(n_plat);
  cl_api().clGetPlatformIDs(n_plat, plats.data(), nullptr);
  std::vector<DeviceEntry> out;
  for (cl_platform_id p : plats) {
    cl_uint n_dev = 0;
    if (cl_api().clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n_dev) != CL_SUCCESS || n_dev == 0) continue;
    std::vector<cl_device_id> devs(n_dev);
    cl_api().clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n_dev, devs.data(), nullptr);
    for (cl_device_id d : devs) out.push_back({p, d});
  }
  if (out.empty())
    return Error::not_found("[opencl] {} OpenCL platform(s) but no device; use --device cpu", n_plat);
  return out;
}

std::string describe(int index, const DeviceEntry& e) {
  cl_device_type type = 0;
  cl_ulong mem = 0;
  cl_api().clGetDeviceInfo(e.device, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
  cl_api().clGetDeviceInfo(e.device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
  const char* t = (type & CL_DEVICE_TYPE_GPU) ? "gpu" : (type & CL_DEVICE_TYPE_CPU) ? "cpu" : "accelerator";
  return "opencl:" + std::to_string(index) + ": " + platform_str(e.platform, CL_PLATFORM_NAME) + " / " +
         device_str(e.device, CL_DEVICE_NAME) + " (" + t + ", " + std::to_string(mem >> 20) + " MiB, " +
         device_str(e.device, CL_DEVICE_OPENCL_C_VERSION) + ", driver " +
         device_str(e.device, CL_DRIVER_VERSION) + ")";
}

// ---- the program binary cache ----
uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::filesystem::path cache_dir() {
  if (const char* e = std::getenv("PIPIT_OPENCL_CACHE")) return std::string(e) == "off" ? "" : e;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "pipit" / "opencl";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".cache" / "pipit" / "opencl";
  return "";
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return f ? std::string(std::istreambuf_iterator<char>(f), {}) : std::string();
}

// What one program is built as: a source file of kernels/ and its defines; kernels get `suffix` in their name.
struct Build {
  const char* source;
  const char* defines;
  const char* suffix;
};
const Build kBuilds[] = {
    {"matmul", "-DWT=0", ".f32"},         {"matmul", "-DWT=1", ".f16"},     {"matmul", "-DWT=2", ".q8_0"},
    {"matmul", "-DWT=3", ".q4_0"},        {"attention", "-DKV_F16=0", ".f32"}, {"attention", "-DKV_F16=1", ".f16"},
    {"norm", "", ""},                     {"rope", "", ""},                 {"elementwise", "", ""},
    {"decoder", "", ""},                  {"linear_attn", "", ""},
};

const char* source_text(const char* name) {
  for (const ProgramSource* s = kOpenclSources; s->name; ++s)
    if (std::string(s->name) == name) return s->text;
  return nullptr;
}

}  // namespace

bool OpenclDevice::supports(Op op) const {
  static const OpSet kOps = op_set({Op::kToF32, Op::kLinear, Op::kLinearGated, Op::kEmbedding, Op::kRmsNorm,
                                    Op::kRmsNormHeads, Op::kGated, Op::kAdd, Op::kScale, Op::kSoftmax,
                                    Op::kGatherRows, Op::kCopyRows, Op::kRope, Op::kRopeMulti, Op::kStoreKv,
                                    Op::kAttention, Op::kAttentionSoftcap, Op::kAttentionSinks, Op::kMoeRoute,
                                    Op::kAddRowsScaled, Op::kSwigluClamped, Op::kSigmoidMul, Op::kSoftcap,
                                    Op::kAddRows, Op::kFill, Op::kClamp, Op::kCausalConv1dSilu,
                                    Op::kL2NormGroups, Op::kDeltaGates, Op::kGatedDeltaRule,
                                    Op::kRmsNormGated});
  return kOps.test(size_t(op)) && !without_.test(size_t(op));
}

OpenclDevice::~OpenclDevice() {
  if (cl_ && cl_->queue) cl_api().clFinish(cl_->queue);
  for (auto& [name, k] : kernels_) cl_api().clReleaseKernel(k);
}

cl_int OpenclDevice::set_arg(cl_kernel k, cl_uint& i, const BufArg& b) {
  cl_int err = cl_api().clSetKernelArg(k, i++, sizeof(cl_mem), &b.mem);
  if (err != CL_SUCCESS) return err;
  return cl_api().clSetKernelArg(k, i++, sizeof(cl_ulong), &b.offset);
}

cl_int OpenclDevice::enqueue(cl_kernel k, size_t g0, size_t g1, size_t l0, size_t l1) {
  if (g0 == 0 || g1 == 0) return CL_SUCCESS;  // nothing to do (an empty batch part)
  size_t global[2] = {g0, g1}, local[2] = {l0, l1};
  if (l0) {
    global[0] = (g0 + l0 - 1) / l0 * l0;
    global[1] = (g1 + l1 - 1) / l1 * l1;
  }
  return cl_api().clEnqueueNDRangeKernel(cl_->queue, k, 2, nullptr, global, l0 ? local : nullptr, 0, nullptr, nullptr);
}

void OpenclDevice::fail(const char* what, cl_int err) {
  set_error(Error::unavailable("[opencl] {} on {}: {}", what, name_, cl_error_name(err)));
}

cl_kernel OpenclDevice::kernel(const std::string& name) const {
  auto it = kernels_.find(name);
  PIPIT_ASSERT(it != kernels_.end(), "no OpenCL kernel '{}'", name);
  return it->second;
}

Status OpenclDevice::build_programs() {
  const std::filesystem::path dir = cache_dir();
  const char* extra = std::getenv("PIPIT_OPENCL_OPTIONS");  // appended to every build (tests: a bad option)
  const std::string common = source_text("common") ? source_text("common") : "";
  const std::string ident = name_ + "|" + device_str(device_, CL_DRIVER_VERSION) + "|" +
                            device_str(device_, CL_DEVICE_VERSION);
  for (const Build& b : kBuilds) {
    const char* text = source_text(b.source);
    PIPIT_ASSERT(text, "OpenCL program {} is not embedded", b.source);
    const std::string src = common + "\n" + text;
    std::string options = std::string("-cl-std=CL1.2 ") + b.defines;
    if (extra && *extra) options += std::string(" ") + extra;
    const std::filesystem::path file =
        dir.empty() ? std::filesystem::path()
                    : dir / (std::to_string(fnv1a(ident + "|" + options + "|" + src)) + ".bin");
    cl_program prog = nullptr;
    cl_int err = CL_SUCCESS;
    if (!file.empty()) {  // a cached binary, when its build still succeeds
      const std::string bin = read_all(file);
      if (!bin.empty()) {
        const unsigned char* p = reinterpret_cast<const unsigned char*>(bin.data());
        const size_t n = bin.size();
        cl_int status = CL_SUCCESS;
        prog = cl_api().clCreateProgramWithBinary(cl_->context, 1, &device_, &n, &p, &status, &err);
        if (prog && (err != CL_SUCCESS || status != CL_SUCCESS ||
                     cl_api().clBuildProgram(prog, 1, &device_, options.c_str(), nullptr, nullptr) != CL_SUCCESS)) {
          cl_api().clReleaseProgram(prog);
          prog = nullptr;
        }
      }
    }
    if (!prog) {
      const char* s = src.c_str();
      prog = cl_api().clCreateProgramWithSource(cl_->context, 1, &s, nullptr, &err);
      if (!prog) return Error::unavailable("[opencl] creating program {}: {}", b.source, cl_error_name(err));
      err = cl_api().clBuildProgram(prog, 1, &device_, options.c_str(), nullptr, nullptr);
      if (err != CL_SUCCESS) {
        size_t n = 0;
        cl_api().clGetProgramBuildInfo(prog, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
        std::string log(n, '\0');
        cl_api().clGetProgramBuildInfo(prog, device_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
        cl_api().clReleaseProgram(prog);
        while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
        if (log.size() > 400) log = log.substr(0, 400) + "...";
        for (char& c : log)
          if (c == '\n') c = ' ';
        return Error::unavailable("[opencl] building kernels/{}.cl with options '{}' for {} failed ({}){}{}",
                                  b.source, options, name_, cl_error_name(err), log.empty() ? "" : ": ", log);
      }
      if (!file.empty()) {  // cache the binary; a read-only home only costs the next start a compile
        size_t n = 0;
        cl_api().clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, nullptr);
        std::string bin(n, '\0');
        unsigned char* p = reinterpret_cast<unsigned char*>(bin.data());
        if (n && cl_api().clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof p, &p, nullptr) == CL_SUCCESS) {
          std::error_code ec;
          std::filesystem::create_directories(dir, ec);
          const auto tmp = file.string() + ".tmp" + std::to_string(::getpid());
          if (std::ofstream(tmp, std::ios::binary).write(bin.data(), std::streamsize(n))) {
            std::filesystem::rename(tmp, file, ec);
          }
          std::filesystem::remove(tmp, ec);
        }
      }
    }
    cl_->programs.push_back(prog);
    cl_uint n_k = 0;
    cl_api().clCreateKernelsInProgram(prog, 0, nullptr, &n_k);
    std::vector<cl_kernel> ks(n_k);
    cl_api().clCreateKernelsInProgram(prog, n_k, ks.data(), nullptr);
    for (cl_kernel k : ks) {
      char kname[128] = {};
      cl_api().clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof kname - 1, kname, nullptr);
      kernels_[std::string(kname) + b.suffix] = k;
    }
  }
  return Status::ok();
}

Result<std::shared_ptr<OpenclDevice>> OpenclDevice::open(int index) {
  PIPIT_ASSIGN_OR_RETURN(auto devs, all_devices());
  if (index < 0 || size_t(index) >= devs.size())
    return Error::invalid_argument("[opencl] no device opencl:{}: this machine has {} OpenCL device(s), "
                                   "opencl:0..opencl:{} (pipit inspect --devices lists them)",
                                   index, devs.size(), devs.size() - 1);
  auto d = std::make_shared<OpenclDevice>();
  d->device_ = devs[size_t(index)].device;
  d->name_ = "opencl:" + std::to_string(index) + " (" + device_str(d->device_, CL_DEVICE_NAME) + ")";
  d->cl_ = std::make_shared<ClContext>();
  cl_int err = CL_SUCCESS;
  d->cl_->context = cl_api().clCreateContext(nullptr, 1, &d->device_, nullptr, nullptr, &err);
  if (!d->cl_->context)
    return Error::unavailable("[opencl] creating a context on {}: {}", d->name_, cl_error_name(err));
  d->cl_->queue = cl_api().clCreateCommandQueue(d->cl_->context, d->device_, 0, &err);
  if (!d->cl_->queue) return Error::unavailable("[opencl] creating a queue on {}: {}", d->name_, cl_error_name(err));
  PIPIT_TRY(d->build_programs());
  // PIPIT_OPENCL_WITHOUT_OPS="name,name": the device answers supports() false for these ops (op_name spelling).
  // The refusal at load of a model needing an op the device lacks stays testable end to end (the CLI tests) now
  // that every decoder family's ops are here.
  if (const char* w = std::getenv("PIPIT_OPENCL_WITHOUT_OPS"); w && *w) {
    std::string list = w;
    for (size_t at = 0; at <= list.size();) {
      const size_t end = std::min(list.find(',', at), list.size());
      const std::string name = list.substr(at, end - at);
      size_t i = 0;
      while (i < size_t(Op::kCount) && name != op_name(Op(i))) ++i;
      if (i == size_t(Op::kCount))
        return Error::invalid_argument("[opencl] PIPIT_OPENCL_WITHOUT_OPS names '{}', which is no op", name);
      d->without_.set(i);
      at = end + 1;
    }
  }
  return d;
}

}  // namespace opencl

Result<std::shared_ptr<Device>> open_opencl_device(int index) {
  auto d = opencl::OpenclDevice::open(index);
  if (!d.is_ok()) return d.status();
  return std::shared_ptr<Device>(std::move(d).value());
}

std::vector<std::string> list_opencl_devices() {
  auto devs = opencl::all_devices();
  if (!devs.is_ok()) return {devs.status().message()};
  std::vector<std::string> out;
  for (size_t i = 0; i < devs->size(); ++i) out.push_back(opencl::describe(int(i), (*devs)[i]));
  return out;
}

}  // namespace pipit
