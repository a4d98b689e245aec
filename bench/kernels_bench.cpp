// Kernel micro-benchmarks: every ISA level this CPU runs, and ref, on one thread.
//   GEMV (decode, M = 1) for f32 / f16 / bf16 / q8_0 / q4_0 weights (and the K-quant panels q4_k/q5_k/q6_kx16) at K = N = 1024, 2048, 4096: GB/s of weights.
//   Small GEMM (prefill, M = 32) at K = N = 1024, 2048: GFLOP/s (2 M N K per call); the Qwen3-0.6B FFN shapes at
//   M = 512 (with bf16dot where the CPU has bf16 dot products: `--precision fast`); the panel dtypes also at Qwen3-4B's
//   FFN shapes (K = 2560 / N = 9728 and K = 9728 / N = 2560: rows too long for L1, x too big for L2).
//   Row kernels (rms_norm, swiglu, softmax, quantize_act at n = 4096) and attn_row (head_dim 128, 1024 keys);
//   attn_decode: a decode step's attention in Qwen3-0.6B's cache layout, its K/V from DRAM or from L2 (GB/s).
//   pack: repacking a GGUF's blocks into panels at load, per type (GB/s of the file's bytes).
// Quantized matmuls take pre-quantized activations (quantize_act has its own case).
// Run: build/kernels_bench --benchmark_filter=gemv   (names: <op>/<isa>/<dtype>/K=N=<n>[/M=<m>])
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/cpu.h"
#include "core/panels.h"
#include "core/storage.h"

namespace pipit {
namespace {

std::vector<std::pair<std::string, const Kernels*>> tables() {
  static std::vector<Kernels> store;
  std::vector<std::string> isas = {"scalar"};
#if defined(__x86_64__)
  if (cpu_features_capped("avx2").x86_avx2()) isas.push_back("avx2");
  if (cpu_features_capped("avxvnni").x86_avxvnni()) isas.push_back("avxvnni");
  if (cpu_features_capped("avx512").x86_avx512()) isas.push_back("avx512");
#elif defined(__aarch64__)
  isas.push_back("neon");
  if (cpu_features_capped("dotprod").dotprod) isas.push_back("dotprod");
  if (cpu_features_capped("i8mm").i8mm) isas.push_back("i8mm");
#endif
  store.reserve(isas.size());
  std::vector<std::pair<std::string, const Kernels*>> out;
  for (const auto& isa : isas) {
    store.push_back(isa == "scalar" ? ref_kernels() : make_kernels(cpu_features_capped(isa)));
    out.emplace_back(isa == "scalar" ? "ref" : isa, &store.back());
  }
  return out;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// N x K random weights of dtype t. The last set is kept: Google Benchmark calls a case several times (growing its
// iteration count), and making a 151936 x 1024 head (random floats, the reference K-quant quantizer) took far longer
// than timing it.
const std::vector<uint8_t>& weights(DType t, int64_t K, int64_t N) {
  static DType last_t = DType::kCount;
  static int64_t last_k = 0, last_n = 0;
  static std::vector<uint8_t> w;
  if (t == last_t && K == last_k && N == last_n) return w;
  const int64_t row = dtype_row_bytes(t, K);
  w.assign(size_t(row * N), 0);
  // panels: quantize plain rows, then pack them
  const DType plain = t == DType::BF16DOT ? DType::BF16 : dtype_unpanel(t);
  const int64_t prow = dtype_row_bytes(plain, K);
  std::vector<uint8_t> pw(size_t(prow * N));
  if (plain == DType::IQ4_NL) {  // no quantizer for it here: random nibbles, scale 0.01 (timing needs no more)
    std::mt19937 g(1);
    for (auto& b : pw) b = uint8_t(g());
    const f16_t d = f32_to_f16(0.01f);
    for (size_t off = 0; off < pw.size(); off += sizeof(BlockIQ4_NL)) std::memcpy(&pw[off], &d, 2);
  } else {
    auto wf = random_floats(size_t(K * N), 1);
    for (int64_t n = 0; n < N; ++n) ref_kernels().from_f32[int(plain)](&wf[size_t(n * K)], &pw[size_t(n * prow)], K);
  }
  if (plain == t) {
    w.swap(pw);
  } else {
    std::vector<uint8_t> packed(w.size());
    pack_panels(plain, pw.data(), prow, N, K, packed.data());
    w.swap(packed);
  }
  last_t = t, last_k = K, last_n = N;
  return w;
}

// y = x W^T with N x K weights of dtype t, M rows of x.
void bm_matmul(benchmark::State& st, const Kernels* k, DType t, int64_t M, int64_t K, int64_t N) {
  const int64_t row = dtype_row_bytes(t, K);
  const std::vector<uint8_t>& w = weights(t, K, N);
  auto xf = random_floats(size_t(M * K), 2);
  std::vector<BlockQ8Act> xq;
  std::vector<bf16_t> xb;
  MatmulArgs a{xf.data(), K * 4, w.data(), row, nullptr, N * 4, M, K};
  if (t == DType::BF16DOT) {  // x as bf16 rows (ops rounds it once per matmul)
    for (float v : xf) xb.push_back(f32_to_bf16(v));
    a.x = xb.data();
    a.x_stride = K * 2;
  }
  if (dtype_is_quantized(t)) {
    xq.resize(size_t(M * K / kQBlock));
    k->quantize_act(xf.data(), K * 4, xq.data(), M, K);
    a.x = xq.data();
    a.x_stride = K / kQBlock * int64_t(sizeof(BlockQ8Act));
  }
  std::vector<float> y(size_t(M * N));
  a.y = y.data();
  for (auto _ : st) {
    k->matmul[int(t)](a, 0, N);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.counters["GB/s"] = benchmark::Counter(double(row * N), benchmark::Counter::kIsIterationInvariantRate,
                                           benchmark::Counter::kIs1000);
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_rows(benchmark::State& st, const Kernels* k, const std::string& op) {
  const int64_t n = 4096;
  auto a = random_floats(size_t(n), 3), b = random_floats(size_t(n), 4);
  std::vector<float> y(static_cast<size_t>(n));
  std::vector<BlockQ8Act> q(size_t(n / kQBlock));
  for (auto _ : st) {
    if (op == "rms_norm") k->rms_norm(a.data(), b.data(), y.data(), n, 1e-6f, 0.0f);
    if (op == "swiglu") k->swiglu(a.data(), b.data(), y.data(), n);
    if (op == "softmax") {
      y = a;
      k->softmax(y.data(), n);
    }
    if (op == "quantize_act") k->quantize_act(a.data(), n * 4, q.data(), 1, n);
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(q.data());
  }
  st.counters["elem/s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_attn(benchmark::State& st, const Kernels* k, DType kv) {
  const int64_t hd = 128, n = 1024, esz = kv == DType::F32 ? 4 : 2;
  std::vector<uint8_t> kb(size_t(n * hd * esz)), vb(size_t(n * hd * esz));
  auto kf = random_floats(size_t(n * hd), 5), vf = random_floats(size_t(n * hd), 6), q = random_floats(size_t(hd), 7);
  ref_kernels().from_f32[int(kv)](kf.data(), kb.data(), n * hd);
  ref_kernels().from_f32[int(kv)](vf.data(), vb.data(), n * hd);
  std::vector<float> out(static_cast<size_t>(hd)), scratch(static_cast<size_t>(attn_scratch_floats(1, n, hd)));
  AttnRowArgs a{q.data(), kb.data(), vb.data(), hd * esz, out.data(), scratch.data(), hd, 0, n, 0.088f, 0.0f};
  for (auto _ : st) {
    k->attn_row[int(kv)](a);
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["GB/s"] = benchmark::Counter(double(2 * n * hd * esz), benchmark::Counter::kIsIterationInvariantRate,
                                           benchmark::Counter::kIs1000);
}

// A decode step's attention as a model runs it: Qwen3-0.6B's layout (8 kv heads of 128 in one cache row, a GQA pair
// of query heads per kv head), f16 or q8_0 K/V, `keys` positions, one layer after another over enough layers
// (>= 96 MiB of K/V) that each layer's cache comes from DRAM, as it does between the weight streams of a real step;
// `warm`: one layer, over and over, from L2 (the kernel's own speed). One thread. GB/s: K/V bytes read.
void bm_attn_decode(benchmark::State& st, const Kernels* k, DType t, int64_t keys, bool warm) {
  const int64_t hd = 128, n_kv = 8, head_bytes = dtype_row_bytes(t, hd), row = n_kv * head_bytes;
  const int64_t layers = warm ? 1 : std::max<int64_t>(2, (int64_t(96) << 20) / (2 * keys * row));
  const int64_t n = 2 * layers * keys * n_kv * hd;
  auto kv = HeapStorage::make(size_t(2 * layers * keys * row));  // as the session allocates its cache: 2 MiB
  auto f = random_floats(size_t(n), 5);                            // aligned, huge pages
  ref_kernels().from_f32[int(t)](f.data(), kv->data(), n);
  auto q = random_floats(size_t(2 * hd), 7);
  std::vector<float> out(size_t(2 * hd)), scratch(size_t(attn_scratch_floats(2, kAttnChunk, hd)));
  int64_t layer = 0;
  for (auto _ : st) {
    const uint8_t* kl = kv->data() + layer * 2 * keys * row;
    for (int64_t h = 0; h < n_kv; ++h) {
      AttnRowsArgs a;
      a.n_q = 2;
      for (int r = 0; r < 2; ++r) a.q[r] = q.data() + r * hd, a.out[r] = out.data() + r * hd, a.k1[r] = keys;
      a.k = kl + h * head_bytes;
      a.v = kl + keys * row + h * head_bytes;
      a.kv_stride = row;
      a.scratch = scratch.data();
      a.head_dim = hd;
      a.k0 = 0;
      a.scale = 0.088f;
      a.softcap = 0.0f;
      k->attn_rows[int(t)](a);
    }
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % layers;
  }
  st.counters["GB/s"] = benchmark::Counter(double(2 * keys * row), benchmark::Counter::kIsIterationInvariantRate,
                                           benchmark::Counter::kIs1000);
}

// Repacking at load (core/panels.h): a GGUF's rows of each type into the kernels' 16-row panels, GB/s of the file's
// bytes. Pure C++ (no ISA level); the buffers are touched before timing, so this is the rewrite alone, without the
// first touches of fresh memory that a load also pays. 12288 rows (Qwen3-0.6B's gate + up) of 1024 weights.
void bm_pack(benchmark::State& st, DType plain) {
  const int64_t K = 1024, N = 12288, row = dtype_row_bytes(plain, K);
  std::vector<uint8_t> src(size_t(row * N)), dst(size_t(dtype_row_bytes(panel_dtype_for(plain), K) * N));
  std::mt19937 g(5);
  for (auto& b : src) b = uint8_t(g());  // a permutation of bytes (and scale unpacking): any bytes time the same
  for (auto _ : st) {
    pack_panels(plain, src.data(), row, N, K, dst.data());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  st.counters["GB/s"] = benchmark::Counter(double(src.size()), benchmark::Counter::kIsIterationInvariantRate,
                                           benchmark::Counter::kIs1000);
}

void register_all() {
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q2_K,
                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS})
    benchmark::RegisterBenchmark(("pack/" + std::string(dtype_name(t)) + "/K=1024/N=12288").c_str(), bm_pack, t)
        ->Unit(benchmark::kMillisecond);
  const DType dts[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q8_0X16, DType::Q4_0X16};
  for (auto& [isa, k] : tables()) {
    std::vector<DType> dts_prefill(std::begin(dts), std::end(dts));
    for (DType t : dts)
      for (int64_t n : {1024, 2048, 4096}) {
        const std::string name = "gemv/" + isa + "/" + std::string(dtype_name(t)) + "/K=N=" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, k, t, int64_t(1), n, n)->Unit(benchmark::kMicrosecond);
      }
    for (DType t : dts)
      for (int64_t n : {1024, 2048}) {
        const std::string name = "gemm/" + isa + "/" + std::string(dtype_name(t)) + "/K=N=" + std::to_string(n) + "/M=32";
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, k, t, int64_t(32), n, n)->Unit(benchmark::kMillisecond);
      }
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q8_0X16, DType::Q4_0X16, DType::F16, DType::Q4_KX16,
                    DType::Q5_KX16, DType::Q6_KX16})  // from DRAM: lm_head
      benchmark::RegisterBenchmark(("gemv/" + isa + "/" + std::string(dtype_name(t)) + "/K=1024/N=151936").c_str(),
                                   bm_matmul, k, t, int64_t(1), int64_t(1024), int64_t(151936))
          ->Unit(benchmark::kMillisecond);
    for (DType t : {DType::Q4_KX16, DType::Q5_KX16, DType::Q6_KX16})  // K-quant panels, decode: GEMV, K = 1024..4096
      for (int64_t n : {1024, 4096}) {
        const std::string name = "gemv/" + isa + "/" + std::string(dtype_name(t)) + "/K=N=" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, k, t, int64_t(1), n, n)->Unit(benchmark::kMicrosecond);
      }
    for (DType t : {DType::Q4_KX16, DType::Q5_KX16, DType::Q6_KX16})  // K-quant panels, prefill: ffn_up shape
      benchmark::RegisterBenchmark(("gemm/" + isa + "/" + std::string(dtype_name(t)) + "/K=1024/N=3072/M=512").c_str(),
                                   bm_matmul, k, t, int64_t(512), int64_t(1024), int64_t(3072))
          ->Unit(benchmark::kMillisecond);
    if (k->bf16_dot) dts_prefill.push_back(DType::BF16DOT);
    for (DType t : dts_prefill)  // prefill shapes of Qwen3-0.6B: one 512-token chunk through ffn_up and ffn_down
      for (auto [K, N] : {std::pair<int64_t, int64_t>{1024, 3072}, {3072, 1024}}) {
        const std::string name = "gemm/" + isa + "/" + std::string(dtype_name(t)) + "/K=" + std::to_string(K) +
                                 "/N=" + std::to_string(N) + "/M=512";
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, k, t, int64_t(512), K, N)->Unit(benchmark::kMillisecond);
      }
    for (DType t : {DType::Q4_0X16, DType::Q8_0X16, DType::Q4_KX16, DType::Q6_KX16})  // Qwen3-4B FFN: K up to 9728
      for (auto [K, N] : {std::pair<int64_t, int64_t>{2560, 9728}, {9728, 2560}}) {
        const std::string name = "gemm/" + isa + "/" + std::string(dtype_name(t)) + "/K=" + std::to_string(K) +
                                 "/N=" + std::to_string(N) + "/M=512";
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, k, t, int64_t(512), K, N)->Unit(benchmark::kMillisecond);
      }
    // the formats llama-quantize falls back to for rows that are not a multiple of 256 (and some downloads): plain
    // (ref's scalar loops) against their panels
    for (DType t : {DType::IQ4_NL, DType::IQ4_NLX16, DType::Q5_0, DType::Q5_0X16, DType::Q4_1, DType::Q4_1X16,
                    DType::Q5_1, DType::Q5_1X16})
      for (int64_t M : {1, 512}) {
        const std::string name =
            "lowbit/" + isa + "/" + std::string(dtype_name(t)) + "/K=1024/N=3072/M=" + std::to_string(M);
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, k, t, M, int64_t(1024), int64_t(3072))
            ->Unit(benchmark::kMicrosecond);
      }
    // batched decode (the server's continuous batching: M sequences, one token each): weights from DRAM as in a
    // real step (N = a vocabulary: the whole matrix is far larger than the caches); M rows should cost little more
    // than one while the step stays memory-bound
    // (q6_kx16: the output head of most GGUFs, llama-quantize keeps it at Q6_K)
    for (DType t : {DType::Q4_0X16, DType::Q8_0X16, DType::Q4_KX16, DType::Q6_KX16, DType::Q5_0X16, DType::Q5_1X16,
                    DType::Q4_1X16})
      for (int64_t M : {1, 2, 4, 8, 12, 16, 24}) {
        const std::string name =
            "batch/" + isa + "/" + std::string(dtype_name(t)) + "/K=1024/N=151936/M=" + std::to_string(M);
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, k, t, M, int64_t(1024), int64_t(151936))
            ->Unit(benchmark::kMillisecond);
      }
    for (DType t : {DType::MXFP4, DType::MXFP4X16})  // a GPT-OSS-20B expert's gate_up: decode, a prefill share
      for (int64_t M : {1, 32}) {
        const std::string name =
            "gemm/" + isa + "/" + std::string(dtype_name(t)) + "/K=2880/N=5760/M=" + std::to_string(M);
        benchmark::RegisterBenchmark(name.c_str(), bm_matmul, k, t, M, int64_t(2880), int64_t(5760))
            ->Unit(benchmark::kMicrosecond);
      }
    for (const char* op : {"rms_norm", "swiglu", "softmax", "quantize_act"})
      benchmark::RegisterBenchmark(("row/" + isa + "/" + op + "/n=4096").c_str(), bm_rows, k, std::string(op))
          ->Unit(benchmark::kMicrosecond);
    for (DType kv : {DType::F32, DType::F16})
      benchmark::RegisterBenchmark(("attn_row/" + isa + "/" + std::string(dtype_name(kv)) + "/hd=128/keys=1024").c_str(),
                                   bm_attn, k, kv)
          ->Unit(benchmark::kMicrosecond);
    for (DType t : {DType::F16, DType::Q8_0})
      if (k->attn_rows[int(t)])
        for (int64_t keys : {64, 256, 1024})
          for (bool warm : {false, true})
            benchmark::RegisterBenchmark(("attn_decode/" + isa + "/" + std::string(dtype_name(t)) +
                                          "/qwen3-0.6b/keys=" + std::to_string(keys) + (warm ? "/l2" : "/dram"))
                                             .c_str(),
                                         bm_attn_decode, k, t, keys, warm)
                ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace pipit

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  pipit::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
