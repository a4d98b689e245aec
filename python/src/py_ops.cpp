// pipit.ops: the eager op API over numpy arrays — tensors in, tensors out — calling the same ops (and so the same
// dispatched kernels) the C++ models call, so a new model can be prototyped in Python and moved to C++ op for op.
// Each call checks its arguments (ValueError), runs in a scratch arena that is rewound at the next call, and copies
// the result into a new numpy array. pipit.Tensor holds weights in any dtype (q4_0, q4_k, bf16, ...) for matmul.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "backends/cpu/kernels.h"
#include "backends/ops.h"
#include "core/threads.h"
#include "format/safetensors.h"
#include "models/hf_config.h"
#include "models/rope.h"
#include "python/src/py_common.h"

namespace pipit::python {

namespace {

// The context eager ops run in: one arena (rewound at each op: results are copied out), one thread pool.
struct Eager {
  Arena arena{size_t(1) << 20};
  std::shared_ptr<ThreadPool> pool;
  Ctx ctx{};
  explicit Eager(int n_threads)
      : pool(std::make_shared<ThreadPool>(n_threads > 0 ? n_threads : ThreadPool::default_threads())) {
    ctx.arena = &arena;
    ctx.pool = pool.get();
    ctx.k = &kernels();
  }
};
std::unique_ptr<Eager> g_eager;

// A fresh context for one op: the previous op's scratch is given back, and the RoPE table cache is dropped (it is
// keyed by the inv_freq pointer, and numpy may hand a new array the address of a freed one).
Ctx& begin_op() {
  if (!g_eager) g_eager = std::make_unique<Eager>(0);
  g_eager->arena.reset();
  g_eager->ctx.rope_table = {};
  return g_eager->ctx;
}

py::array_t<float> new_array(const std::vector<int64_t>& shape) {
  return py::array_t<float>(std::vector<py::ssize_t>(shape.begin(), shape.end()));
}

// A writable f32 numpy array and a Tensor view of its bytes, for ops that write their output in place.
struct Out {
  py::array_t<float> a;
  Tensor t;
};
Out new_out(const std::vector<int64_t>& shape) {
  Out o{new_array(shape), {}};
  o.t = Tensor::from_data(DType::F32, shape, o.a.mutable_data(), nullptr);
  return o;
}

py::array_t<float> copy_out(const Tensor& t) { return to_numpy(t); }

void need_ndim(const Tensor& t, int lo, int hi, const char* op, const char* what) {
  if (t.ndim() < lo || t.ndim() > hi)
    bad_arg("[{}] {} must have {} dimensions, got {}", op, what,
            lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi), t.shape_str());
}

// The float dtypes a norm / bias / table weight may have (ops widen them to f32).
bool float_weight(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

Tensor as_2d(const Tensor& x) { return x.reshape({x.rows(), x.dim(-1)}); }

std::vector<int64_t> with_last(std::vector<int64_t> s, int64_t n) {
  s.back() = n;
  return s;
}

// ---- matmul ----
bool ctx_matmul_supported(DType d) { return kernels().matmul[int(d)] != nullptr; }

py::array_t<float> op_matmul(const py::handle& x_obj, const py::handle& w_obj, const py::handle& b_obj) {
  F32Arg x = f32_arg(x_obj, "x");
  WeightArg w = weight_arg(w_obj, "w");
  need_ndim(x.t, 1, kMaxDims, "matmul", "x");
  need_ndim(w.t, 2, 2, "matmul", "w");
  const int64_t K = w.t.dim(1), N = w.t.dim(0);
  if (x.t.dim(-1) != K) bad_arg("[matmul] x {} and w {}: x's last dimension must be {}", x.t.shape_str(),
                                w.t.describe(), K);
  if (dtype_is_panel(w.t.dtype()) && N % kPanelRows != 0) bad_arg("[matmul] w {} is not whole panels", w.t.describe());
  if (!ctx_matmul_supported(w.t.dtype())) bad_arg("[matmul] no matmul kernel for w of dtype {}", dtype_name(w.t.dtype()));
  WeightArg b;
  if (!b_obj.is_none()) {
    b = weight_arg(b_obj, "bias");
    if (!float_weight(b.t.dtype()) || b.t.numel() != N)
      bad_arg("[matmul] bias {} for {} outputs: expected a float vector of {}", b.t.describe(), N, N);
  }
  Ctx& ctx = begin_op();
  if (x.t.numel() == 0) return new_array(with_last(x.t.shape(), N));
  Tensor y = linear(ctx, as_2d(x.t), w.t, b.t);
  return copy_out(y.reshape(with_last(x.t.shape(), N)));
}

// ---- embedding ----
py::array_t<float> op_embedding(const py::handle& table_obj, const py::handle& ids_obj) {
  WeightArg table = weight_arg(table_obj, "table");
  need_ndim(table.t, 2, 2, "embedding", "table");
  std::vector<int32_t> ids = to_ids(ids_obj, "ids");
  for (int32_t id : ids)
    if (id < 0 || id >= table.t.dim(0))
      bad_arg("[embedding] id {} outside the table's {} rows", id, table.t.dim(0));
  if (!kernels().to_f32[int(table.t.dtype())] && !dtype_is_panel(table.t.dtype()))
    bad_arg("[embedding] no conversion from {}", dtype_name(table.t.dtype()));
  Ctx& ctx = begin_op();
  return copy_out(embedding(ctx, table.t, ids));
}

// ---- norms ----
Tensor norm_weight(const WeightArg& w, int64_t n, const char* op, const char* what) {
  if (!float_weight(w.t.dtype()) || w.t.numel() != n)
    bad_arg("[{}] {} {} for rows of {}: expected a float vector of {}", op, what, w.t.describe(), n, n);
  return w.t.is_contiguous() ? w.t.reshape({n}) : w.t;
}

py::array_t<float> op_rms_norm(const py::handle& x_obj, const py::handle& w_obj, float eps, float offset) {
  F32Arg x = f32_arg(x_obj, "x");
  need_ndim(x.t, 1, kMaxDims, "rms_norm", "x");
  WeightArg w = weight_arg(w_obj, "w");
  Tensor wt = norm_weight(w, x.t.dim(-1), "rms_norm", "w");
  if (!(eps >= 0.0f)) bad_arg("[rms_norm] eps must be >= 0, got {}", eps);
  Ctx& ctx = begin_op();
  return copy_out(rms_norm(ctx, x.t, wt, eps, offset));
}

py::array_t<float> op_layer_norm(const py::handle& x_obj, const py::handle& w_obj, const py::handle& b_obj,
                                 float eps) {
  F32Arg x = f32_arg(x_obj, "x");
  need_ndim(x.t, 1, kMaxDims, "layer_norm", "x");
  WeightArg w = weight_arg(w_obj, "w"), b = weight_arg(b_obj, "b");
  Tensor wt = norm_weight(w, x.t.dim(-1), "layer_norm", "w"), bt = norm_weight(b, x.t.dim(-1), "layer_norm", "b");
  if (!(eps >= 0.0f)) bad_arg("[layer_norm] eps must be >= 0, got {}", eps);
  Ctx& ctx = begin_op();
  return copy_out(layer_norm(ctx, as_2d(x.t), wt, bt, eps).reshape(x.t.shape()));
}

// ---- activations ----
py::array_t<float> op_gated(const py::handle& g_obj, const py::handle& u_obj, GateAct act) {
  F32Arg g = f32_arg(g_obj, "gate"), u = f32_arg(u_obj, "up");
  need_ndim(g.t, 1, kMaxDims, "gated", "gate");
  if (g.t.shape() != u.t.shape()) bad_arg("[gated] gate {} and up {} differ in shape", g.t.shape_str(), u.t.shape_str());
  Ctx& ctx = begin_op();
  return copy_out(act == GateAct::kSilu ? swiglu(ctx, g.t, u.t) : geglu(ctx, g.t, u.t));
}

// silu / gelu_tanh alone: the gated kernels with up = 1 (x * 1 is exact), so they are the very kernels the MLPs use.
py::array_t<float> op_gate_only(const py::handle& x_obj, GateAct act) {
  F32Arg x = f32_arg(x_obj, "x");
  need_ndim(x.t, 1, kMaxDims, "activation", "x");
  Ctx& ctx = begin_op();
  Tensor ones = ctx.alloc(DType::F32, x.t.shape());
  std::fill(ones.ptr<float>(), ones.ptr<float>() + ones.numel(), 1.0f);
  return copy_out(act == GateAct::kSilu ? swiglu(ctx, x.t, ones) : geglu(ctx, x.t, ones));
}

py::array_t<float> op_unary(const py::handle& x_obj, void (*fn)(Ctx&, Tensor&)) {
  F32Arg x = f32_arg(x_obj, "x");
  need_ndim(x.t, 1, kMaxDims, "activation", "x");
  Out o = new_out(x.t.shape());
  std::memcpy(o.t.data(), x.t.data(), x.t.nbytes());
  Ctx& ctx = begin_op();
  fn(ctx, o.t);
  return o.a;
}

py::array_t<float> op_softmax(const py::handle& x_obj) {
  F32Arg x = f32_arg(x_obj, "x");
  need_ndim(x.t, 1, kMaxDims, "softmax", "x");
  Out o = new_out(x.t.shape());
  std::memcpy(o.t.data(), x.t.data(), x.t.nbytes());
  Ctx& ctx = begin_op();
  const int64_t n = x.t.dim(-1);
  if (n == 0) return o.a;
  float* p = o.t.ptr<float>();
  ctx.pool->parallel_for(o.t.rows(), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) ctx.k->softmax(p + r * n, n);
  }, 16);
  return o.a;
}

// ---- RoPE ----
py::array_t<float> op_rope(const py::handle& x_obj, const py::handle& pos_obj, const py::handle& f_obj, float scale) {
  F32Arg x = f32_arg(x_obj, "x"), f = f32_arg(f_obj, "inv_freq");
  need_ndim(x.t, 3, 3, "rope", "x [n_tokens, n_head, head_dim]");
  need_ndim(f.t, 1, 1, "rope", "inv_freq");
  std::vector<int32_t> pos = to_ids(pos_obj, "pos");
  if (int64_t(pos.size()) != x.t.dim(0)) bad_arg("[rope] {} positions for {} tokens", pos.size(), x.t.dim(0));
  if (2 * f.t.dim(0) > x.t.dim(2)) bad_arg("[rope] {} frequencies rotate more than head_dim {}", f.t.dim(0), x.t.dim(2));
  Out o = new_out(x.t.shape());
  std::memcpy(o.t.data(), x.t.data(), x.t.nbytes());
  Ctx& ctx = begin_op();
  rope_(ctx, o.t, pos, std::span<const float>(f.t.ptr<float>(), size_t(f.t.dim(0))), scale);
  return o.a;
}

// inv_freq and the cos/sin factor a config's RoPE settings give (rope_theta, rope_scaling: llama3, yarn, linear,
// dynamic, longrope ...), computed by the same code the C++ models use.
py::tuple op_rope_freqs(const std::string& config_json, int64_t rot_dim) {
  if (rot_dim <= 0 || rot_dim % 2 != 0) bad_arg("[rope_freqs] rot_dim must be even and > 0, got {}", rot_dim);
  auto j = nlohmann::json::parse(config_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) bad_arg("[rope_freqs] config must be a dict");
  RopeSpec r = unwrap(rope_from_config(HfConfig(j), rot_dim));
  py::array_t<float> f(py::ssize_t(r.inv_freq.size()));
  std::copy(r.inv_freq.begin(), r.inv_freq.end(), f.mutable_data());
  return py::make_tuple(f, r.attention_factor);
}

// ---- attention ----
void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const char* op) {
  need_ndim(q, 3, 3, op, "q [n, n_head, head_dim]");
  need_ndim(k, 3, 3, op, "k [n_kv, n_head_kv, head_dim]");
  if (k.shape() != v.shape()) bad_arg("[{}] k {} and v {} differ in shape", op, k.shape_str(), v.shape_str());
  if (k.dim(2) != q.dim(2)) bad_arg("[{}] q head_dim {} but k head_dim {}", op, q.dim(2), k.dim(2));
  if (k.dim(1) == 0 || q.dim(1) % k.dim(1) != 0)
    bad_arg("[{}] {} query heads is not a multiple of {} key/value heads", op, q.dim(1), k.dim(1));
}

py::array_t<float> op_attention(const py::handle& q_obj, const py::handle& k_obj, const py::handle& v_obj,
                                const py::handle& pos_obj, const py::handle& scale_obj, int window, float softcap) {
  F32Arg q = f32_arg(q_obj, "q"), k = f32_arg(k_obj, "k"), v = f32_arg(v_obj, "v");
  check_qkv(q.t, k.t, v.t, "attention");
  const int64_t n = q.t.dim(0), n_kv = k.t.dim(0);
  std::vector<int32_t> pos;
  if (pos_obj.is_none()) {  // the queries are the last n of the n_kv positions
    if (n > n_kv) bad_arg("[attention] {} queries but {} keys: pass pos", n, n_kv);
    for (int64_t i = 0; i < n; ++i) pos.push_back(int32_t(n_kv - n + i));
  } else {
    pos = to_ids(pos_obj, "pos");
    if (int64_t(pos.size()) != n) bad_arg("[attention] {} positions for {} queries", pos.size(), n);
    for (int32_t p : pos)
      if (p < 0 || p >= n_kv) bad_arg("[attention] position {} outside the {} keys", p, n_kv);
  }
  if (window < 0) bad_arg("[attention] window must be >= 0, got {}", window);
  const float scale = scale_obj.is_none() ? 1.0f / std::sqrt(float(q.t.dim(2))) : scale_obj.cast<float>();
  Out o = new_out(q.t.shape());
  if (n == 0) return o.a;
  Ctx& ctx = begin_op();
  attention(ctx, q.t, k.t, v.t, pos, AttnParams{scale, softcap, window, false}, o.t);
  return o.a;
}

py::array_t<float> op_attention_segments(const py::handle& q_obj, const py::handle& k_obj, const py::handle& v_obj,
                                         const py::handle& seg_obj, const py::handle& scale_obj) {
  F32Arg q = f32_arg(q_obj, "q"), k = f32_arg(k_obj, "k"), v = f32_arg(v_obj, "v");
  check_qkv(q.t, k.t, v.t, "attention_segments");
  const int64_t n = q.t.dim(0);
  if (k.t.dim(0) != n) bad_arg("[attention_segments] {} queries but {} keys", n, k.t.dim(0));
  std::vector<int32_t> cu = seg_obj.is_none() ? std::vector<int32_t>{0, int32_t(n)} : to_ids(seg_obj, "segments");
  if (cu.size() < 2 || cu.front() != 0 || cu.back() != n)
    bad_arg("[attention_segments] segments must run from 0 to {} (the number of rows)", n);
  for (size_t i = 0; i + 1 < cu.size(); ++i)
    if (cu[i] > cu[i + 1]) bad_arg("[attention_segments] segment bounds must not decrease");
  const float scale = scale_obj.is_none() ? 1.0f / std::sqrt(float(q.t.dim(2))) : scale_obj.cast<float>();
  Out o = new_out(q.t.shape());
  if (n == 0) return o.a;
  Ctx& ctx = begin_op();
  attention_segments(ctx, q.t, k.t, v.t, cu, scale, o.t);
  return o.a;
}

// ---- pipit.Tensor ----
PyTensor tensor_from(const py::handle& obj, const std::string& dtype_s) {
  DType dt;
  if (!dtype_from_name(dtype_s, &dt)) bad_arg("unknown dtype '{}'", dtype_s);
  if (dtype_is_panel(dt)) bad_arg("{} is a layout the loader makes; quantize to {}", dtype_s, dtype_name(dtype_unpanel(dt)));
  F32Arg x = f32_arg(obj, "array");
  need_ndim(x.t, 1, kMaxDims, "Tensor", "array");
  auto from = kernels().from_f32[int(dt)];
  if (!from) bad_arg("no quantizer to {} (quantizers: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k q8_k)",
                     dtype_s);
  const int64_t n = x.t.dim(-1), be = dtype_info(dt).block_elems;
  if (n % be != 0) bad_arg("{} rows of {} elements: {} needs a multiple of {}", x.t.shape_str(), n, dtype_s, be);
  Tensor t = Tensor::empty(dt, x.t.shape());
  for (int64_t r = 0; r < x.t.rows(); ++r) from(x.t.ptr<float>() + r * n, t.row_ptr(r), n);
  return PyTensor{t};
}

py::dict load_safetensors(const std::string& path) {
  SafetensorsFile f = unwrap(SafetensorsFile::open(path));
  py::dict d;
  for (const auto& [name, t] : f.tensors()) d[py::str(name)] = PyTensor{t};  // views share the mapping
  return d;
}

}  // namespace

void bind_ops(py::module_& m) {
  py::class_<PyTensor>(m, "Tensor", "A tensor in any pipit dtype (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, ...).")
      .def(py::init(&tensor_from), py::arg("array"), py::arg("dtype") = "f32",
           "Converts / quantizes a float array (the last dimension is the one blocks run along).")
      .def_property_readonly("dtype", [](const PyTensor& t) { return std::string(dtype_name(t.t.dtype())); })
      .def_property_readonly("shape", [](const PyTensor& t) {
        py::tuple s(t.t.ndim());
        for (int i = 0; i < t.t.ndim(); ++i) s[i] = t.t.dim(i);
        return s;
      })
      .def_property_readonly("nbytes", [](const PyTensor& t) { return t.t.nbytes(); })
      .def("numpy", [](const PyTensor& t) -> py::array {
        if (t.t.dtype() == DType::I32 && t.t.is_contiguous()) {  // ids (goldens' input_ids): exact, as int32
          const std::vector<int64_t> shape = t.t.shape();
          py::array_t<int32_t> a(std::vector<py::ssize_t>(shape.begin(), shape.end()));
          std::memcpy(a.mutable_data(), t.t.data(), t.t.nbytes());
          return a;
        }
        return to_numpy(t.t);
      }, "A copy as numpy: float32 (dequantized / widened), int32 for i32 tensors.")
      .def("__repr__", [](const PyTensor& t) { return "pipit.Tensor(" + t.t.describe() + ")"; });

  py::module_ ops = m.def_submodule("ops", "Eager ops over numpy arrays, running pipit's kernels.");
  ops.def("set_num_threads", [](int n) {
    if (n < 0 || n > 1024) bad_arg("n_threads must be in [0, 1024], got {}", n);
    g_eager = std::make_unique<Eager>(n);
  }, py::arg("n"), "Threads of the eager ops' pool (0: physical cores).");
  ops.def("matmul", &op_matmul, py::arg("x"), py::arg("w"), py::arg("bias") = py::none(),
          "x @ w.T (+ bias). x: [..., K] float; w: [N, K] numpy or pipit.Tensor in any dtype (quantized weights "
          "quantize x to int8 blocks on the fly, as the models do).");
  ops.def("embedding", &op_embedding, py::arg("table"), py::arg("ids"), "Rows of table [n_vocab, n_embd] for ids.");
  ops.def("rms_norm", &op_rms_norm, py::arg("x"), py::arg("w"), py::arg("eps") = 1e-6f, py::arg("offset") = 0.0f,
          "RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * (offset + w) (Gemma: offset 1).");
  ops.def("layer_norm", &op_layer_norm, py::arg("x"), py::arg("w"), py::arg("b"), py::arg("eps") = 1e-5f,
          "LayerNorm over the last dimension (biased variance, as torch).");
  ops.def("silu", [](const py::handle& x) { return op_gate_only(x, GateAct::kSilu); }, py::arg("x"));
  ops.def("gelu_tanh", [](const py::handle& x) { return op_gate_only(x, GateAct::kGeluTanh); }, py::arg("x"),
          "GELU, tanh approximation (gelu_pytorch_tanh).");
  ops.def("gelu", [](const py::handle& x) { return op_unary(x, gelu_); }, py::arg("x"), "GELU (exact, erf).");
  ops.def("quick_gelu", [](const py::handle& x) { return op_unary(x, quick_gelu_); }, py::arg("x"),
          "x * sigmoid(1.702 x).");
  ops.def("swiglu", [](const py::handle& g, const py::handle& u) { return op_gated(g, u, GateAct::kSilu); },
          py::arg("gate"), py::arg("up"), "silu(gate) * up.");
  ops.def("geglu", [](const py::handle& g, const py::handle& u) { return op_gated(g, u, GateAct::kGeluTanh); },
          py::arg("gate"), py::arg("up"), "gelu_tanh(gate) * up.");
  ops.def("softmax", &op_softmax, py::arg("x"), "Softmax over the last dimension.");
  ops.def("rope", &op_rope, py::arg("x"), py::arg("pos"), py::arg("inv_freq"), py::arg("scale") = 1.0f,
          "RoPE, HF rotate_half convention, on x [n_tokens, n_head, head_dim]: frequency i of token t turns by "
          "pos[t] * inv_freq[i]; cos and sin are multiplied by scale. len(inv_freq) * 2 <= head_dim (partial "
          "rotary leaves the tail).");
  ops.def("_rope_freqs", &op_rope_freqs, py::arg("config_json"), py::arg("rot_dim"));
  ops.def("attention", &op_attention, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("pos") = py::none(),
          py::arg("scale") = py::none(), py::arg("window") = 0, py::arg("softcap") = 0.0f,
          "Causal attention. q: [n, n_head, head_dim]; k, v: [n_kv, n_head_kv, head_dim] (GQA: head h reads kv "
          "head h // (n_head // n_head_kv)). Query i sees keys [pos[i] - window + 1, pos[i]] (window 0: all up to "
          "pos[i]); pos defaults to the last n positions. scale defaults to head_dim ** -0.5.");
  ops.def("attention_segments", &op_attention_segments, py::arg("q"), py::arg("k"), py::arg("v"),
          py::arg("segments") = py::none(), py::arg("scale") = py::none(),
          "Bidirectional attention inside segments [segments[s], segments[s+1]) of the rows (vision towers).");
  m.def("load_safetensors", &load_safetensors, py::arg("path"),
        "Tensors of a .safetensors file by name, as pipit.Tensor views of the mapped file (no copy).");
}

}  // namespace pipit::python
