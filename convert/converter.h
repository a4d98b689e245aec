// The streaming converter: any checkpoint pipit reads (HF safetensors / PyTorch, GGUF, .pipit) -> one .pipit file.
// Tensors are planned by the recipe, then converted one at a time in name order, a block of rows at a time, and
// appended to the output, so memory stays at a few MB beyond the mapped input. Quantization uses the scalar
// reference quantizers (backends/cpu/ref, llama.cpp's rounding), so the same input gives a byte-identical file on
// every machine. The default target, cpu (x86 and arm are its old names, the same bytes), stores q4_0 / q8_0
// matrices as 16-row panels (q4_0x16, q8_0x16: the layout of the integer kernels, core/dtype.h; header "layout":
// "panel16"), which every CPU kernel level reads in place and the OpenCL device unpacks at upload; generic keeps
// plain blocks (GGUF's bytes), which a SIMD CPU packs into panels at load (a copy of those weights in memory).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "convert/checkpoint.h"
#include "convert/recipe.h"
#include "core/status.h"

namespace pipit {

struct ConvertOptions {
  std::string output;
  std::string quant = "auto";   // auto f32 f16 bf16 q8 q4
  std::string recipe_path;      // optional JSON recipe
  std::string target = "cpu";   // cpu (= x86 = arm: 16-row panels) or generic (plain blocks)
  int n_threads = 0;            // 0: physical cores
  bool progress = true;         // progress bar / lines on stderr
};

struct ConvertReport {
  int64_t n_tensors = 0, n_params = 0;
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor bytes before / after
  uint64_t file_bytes = 0;
  double seconds = 0;
  std::vector<TensorPlan> plans;
  std::vector<std::string> notes;
  std::string summary() const;  // "123 tensors, 1.19 GB (16.00 bits/weight) -> 0.34 GB (4.56 bits/weight) in 3.2 s"
};

Result<ConvertReport> convert_checkpoint(const Checkpoint& c, const ConvertOptions& opt);
Result<ConvertReport> convert_file(const std::string& input, const ConvertOptions& opt);

}  // namespace pipit
