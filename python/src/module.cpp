// The _pipit extension module: numpy <-> Tensor conversion shared by the bindings, pipit.Error, and the module
// definition. The user-facing package is python/pipit/__init__.py, which wraps what is defined here.
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/ops.h"
#include "python/src/py_common.h"

namespace pipit::python {

F32Arg f32_arg(const py::handle& obj, const char* what) {
  if (py::isinstance<PyTensor>(obj)) {  // a pipit.Tensor where floats are wanted: widen / dequantize it
    const Tensor& t = obj.cast<const PyTensor&>().t;
    return f32_arg(to_numpy(t), what);
  }
  F32Arg a;
  try {
    a.keep = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(obj);
  } catch (const py::error_already_set&) {
    a.keep = {};
  }
  if (!a.keep) bad_arg("{} must be a float array (numpy) or a pipit.Tensor", what);
  if (a.keep.ndim() > kMaxDims) bad_arg("{} has {} dimensions; at most {}", what, a.keep.ndim(), kMaxDims);
  std::vector<int64_t> shape(a.keep.shape(), a.keep.shape() + a.keep.ndim());
  a.t = Tensor::from_data(DType::F32, shape, const_cast<float*>(a.keep.data()), nullptr);
  return a;
}

WeightArg weight_arg(const py::handle& obj, const char* what) {
  if (py::isinstance<PyTensor>(obj)) {
    WeightArg w{py::reinterpret_borrow<py::object>(obj), obj.cast<const PyTensor&>().t};
    if (!w.t.rows_contiguous()) bad_arg("{} {} has strided rows", what, w.t.describe());
    return w;
  }
  F32Arg a = f32_arg(obj, what);
  return WeightArg{a.keep, a.t};
}

py::array_t<float> to_numpy(const Tensor& t) {
  std::vector<py::ssize_t> shape(size_t(t.ndim()));
  for (int i = 0; i < t.ndim(); ++i) shape[size_t(i)] = t.dim(i);
  py::array_t<float> a(shape);
  if (t.numel() == 0) return a;
  const int64_t n = t.dim(-1);
  float* dst = a.mutable_data();
  if (dtype_is_panel(t.dtype())) {  // rows interleaved in panels: the op knows the layout
    Arena arena(size_t(t.numel()) * 4 + 4096);
    ThreadPool pool(1);
    Ctx ctx{&arena, &pool, &kernels(), {}};
    Tensor y = to_f32(ctx, t);
    std::memcpy(dst, y.data(), size_t(t.numel()) * 4);
    return a;
  }
  auto conv = kernels().to_f32[int(t.dtype())];
  if (!conv || !t.rows_contiguous()) bad_arg("cannot convert {} to float32", t.describe());
  const int64_t rows = t.rows();
  if (t.ndim() > 1 && rows > 1 && !t.is_contiguous()) {  // strided rows: walk them through a contiguous copy
    for (int64_t r = 0; r < rows; ++r) {
      int64_t rem = r;  // row r's address from its multi-index
      const uint8_t* p = t.data();
      for (int d = t.ndim() - 2; d >= 0; --d) {
        p += (rem % t.dim(d)) * t.stride(d);
        rem /= t.dim(d);
      }
      conv(p, dst + r * n, n);
    }
    return a;
  }
  for (int64_t r = 0; r < rows; ++r) conv(t.row_ptr(r), dst + r * n, n);
  return a;
}

std::vector<int32_t> to_ids(const py::handle& obj, const char* what) {
  py::array raw;
  try {
    raw = py::array::ensure(obj);
  } catch (const py::error_already_set&) {
    raw = {};
  }
  // integers only: a float position or id is a bug upstream, not something to round
  if (!raw || raw.ndim() > 1 || (raw.size() > 0 && raw.dtype().kind() != 'i' && raw.dtype().kind() != 'u'))
    bad_arg("{} must be a 1-D sequence of integers", what);
  auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(raw);
  std::vector<int32_t> ids(size_t(a.size()));
  for (py::ssize_t i = 0; i < a.size(); ++i) {
    const int64_t v = a.data()[i];
    if (v < INT32_MIN || v > INT32_MAX) bad_arg("{}[{}] = {} does not fit int32", what, i, v);
    ids[size_t(i)] = int32_t(v);
  }
  return ids;
}

}  // namespace pipit::python

PYBIND11_MODULE(_pipit, m) {
  using namespace pipit::python;
  m.doc() = "pipit: LLM / VLM inference (C++ engine) - the compiled part of the pipit package";
  static py::exception<PipitError> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const PipitError& e) {
      error(e.what());
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError, "out of memory");
    }
  });
  m.attr("__version__") = PIPIT_VERSION;
  bind_ops(m);
  bind_model(m);
}
