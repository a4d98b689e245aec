// What the binding files share: pipit's Status errors raised as pipit.Error, numpy <-> Tensor conversion, and the
// Python-side Tensor object. Every argument a Python caller controls is checked here before it reaches an op
// (ops assert on shapes, which would abort the interpreter), so bad input is an exception, never a crash.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace pipit::python {

namespace py = pybind11;

// A failure the library reported (file, model, tokenizer, context size): raised as pipit.Error (a RuntimeError).
struct PipitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] inline void throw_status(const Status& st) { throw PipitError(st.message()); }
inline void check(const Status& st) {
  if (!st) throw_status(st);
}
template <class T>
T unwrap(Result<T> r) {
  if (!r) throw_status(r.status());
  return std::move(r).value();
}

// A bad argument from Python (shape, dtype, range): raised as ValueError.
template <class... A>
[[noreturn]] void bad_arg(std::string_view f, const A&... a) {
  throw py::value_error(fmt(f, a...));
}

// pipit.Tensor: a pipit tensor that owns (or shares) its bytes, in any dtype — quantized weights included. Ops take
// these or numpy arrays.
struct PyTensor {
  Tensor t;
};

// An op argument as an f32 tensor: numpy input is converted (a copy only when it is not already C-contiguous f32);
// `keep` holds the array alive for the op's duration.
struct F32Arg {
  py::array_t<float, py::array::c_style | py::array::forcecast> keep;
  Tensor t;
};
F32Arg f32_arg(const py::handle& obj, const char* what);
// A weight argument: a pipit.Tensor as it is (any dtype), or a numpy array as f32.
struct WeightArg {
  py::object keep;
  Tensor t;
};
WeightArg weight_arg(const py::handle& obj, const char* what);

// A new numpy f32 array holding a copy of t (any dtype: dequantized / widened row by row).
py::array_t<float> to_numpy(const Tensor& t);
// int32 ids from a Python sequence or numpy array.
std::vector<int32_t> to_ids(const py::handle& obj, const char* what);

void bind_model(py::module_& m);
void bind_ops(py::module_& m);

}  // namespace pipit::python
