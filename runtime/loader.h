// Opens what a user points `-m` at and returns a runnable model: an HF checkpoint directory (config.json +
// safetensors or pytorch_model.bin, tokenizer files optional), a .pipit file or a .gguf file (read in place), or an
// "org/name" Hub id found in the Hugging Face cache (runtime/hf_cache.h).
// Weights stay memory-mapped; nothing is copied (except llama-arch GGUF q/k rows, which are un-permuted).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/model.h"

namespace pipit {

class Tokenizer;

struct LoadedModel {
  std::shared_ptr<WeightSource> weights;  // owns the mappings the model's tensors point into
  std::unique_ptr<Model> model;
  std::shared_ptr<Tokenizer> tokenizer;   // null when the checkpoint has no tokenizer files
  HfConfig config;
  nlohmann::json generation_config = nlohmann::json::object();
  nlohmann::json preprocessor_config;     // preprocessor_config.json of a vision-language model (null when absent)
  std::string path;
};

struct LoadOptions {
  bool need_tokenizer = false;  // error when the checkpoint has no tokenizer
  // Pack q4_0 / q8_0 matrices into 16-row panels (q4_0x16, q8_0x16) when this CPU's kernels prefer them
  // (Kernels::pack_quant), and q4_K / q5_K / q6_K ones (q4_kx16, ...) where Kernels::pack_kquant: one copy at
  // load, after which the file's pages are released. Files written by `pipit convert --target` hold q4_0 / q8_0
  // panels already and load without a copy. PIPIT_PACK=0 turns it off.
  bool pack_weights = true;
  // Copy the matrices the CPU reads as stored (a `--target cpu` file's panels, f16 / f32 ones) out of the file
  // mapping into 2 MiB pages (rehome_weights in loader.cpp: decode then reads them with few TLB misses). False
  // (`--mmap`): they stay in the page cache, used in place: a faster start and less memory, a slower decode
  // (measured here: Qwen3-0.6B q4 -7%, Qwen3-4B q4 -11..15% tokens/s at 2 threads; start 0.78 -> 0.49 s for the
  // 4B). Matrices that are repacked (a GGUF's plain blocks into panels) are written to memory either way.
  bool copy_weights = true;
  // `--precision fast`: where the CPU has bf16 dot products (Kernels::bf16_dot, AVX512-BF16), f16 / bf16 matrices
  // become bf16dot (core/dtype.h): every matmul with them rounds x to bf16, and f16 weights are rounded to bf16 once
  // here, for twice the f32 FMA rate in prefill. The error bound is measured in tests/models (GoldenText.
  // PrecisionFast...). Off (exact, the default): f32 x against the weights as stored, accumulated in f32. Ignored
  // with a device, and on CPUs without bf16 dot products (the exact path runs).
  bool precision_fast = false;
  // llama.cpp's mmproj file (the vision tower of a multimodal GGUF model, convert/gguf_import.h); empty: none.
  std::string mmproj;
  // Run the decoder on this device (backends/device.h): its weights are uploaded once here, in the device's
  // layout; a vision tower's weights stay on the host and it runs on the CPU. Null: the CPU. A model type whose
  // decoder needs ops the device lacks is an error naming it.
  std::shared_ptr<Device> device;
};

Result<LoadedModel> load_model(const std::string& path, const LoadOptions& opt = {});
// Only the tokenizer (with its chat template) of what -m points at: an HF directory, a .pipit or a .gguf file; no
// model is built (`pipit tokenize`, `pipit template`). An error when the file has none.
Result<std::shared_ptr<Tokenizer>> load_tokenizer(const std::string& path);

// A WeightSource over an in-memory map of tensors (safetensors set, tests).
class MapWeightSource : public WeightSource {
 public:
  explicit MapWeightSource(std::map<std::string, Tensor> t) : tensors_(std::move(t)) {}
  bool has(const std::string& name) const override { return tensors_.count(name) != 0; }
  Result<Tensor> find(const std::string& name) const override;
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }

 private:
  std::map<std::string, Tensor> tensors_;
};

}  // namespace pipit
