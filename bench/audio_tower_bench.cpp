// Gemma 4 audio tower speed at the E2B shape (audio_config of google/gemma-4-E2B-it: hidden 1024, 12 conformer
// layers, 8 heads, subsampling channels [128, 32], conv kernel 5, output_proj 1536 into a 1536-wide decoder) with
// random bf16 weights (the checkpoint's dtype) built in memory: log-mel features + tower + projector for a 10 s and
// a 30 s clip (the longest Gemma 4 takes). Reports ms per clip and the real-time factor.
// Run: build/audio_tower_bench [--threads=N] [--benchmark_* flags]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "runtime/audio_input.h"
#include "runtime/loader.h"

namespace {

using namespace pipit;

Tensor random_bf16(std::mt19937& rng, const std::vector<int64_t>& shape, float scale) {
  Tensor f = Tensor::empty(DType::F32, shape);
  std::normal_distribution<float> nd(0.0f, scale);
  for (int64_t i = 0; i < f.numel(); ++i) f.ptr<float>()[i] = nd(rng);
  Tensor b = Tensor::empty(DType::BF16, shape);
  for (int64_t i = 0; i < f.numel(); ++i) {  // round to nearest even
    uint32_t u;
    std::memcpy(&u, f.ptr<float>() + i, 4);
    u += 0x7FFF + ((u >> 16) & 1);
    b.ptr<uint16_t>()[i] = uint16_t(u >> 16);
  }
  return b;
}

std::unique_ptr<AudioEncoder> e2b_tower() {
  const int64_t H = 1024, L = 12, C0 = 128, C1 = 32, K = 5, OUT = 1536, E = 1536, hd = H / 8;
  nlohmann::json cfg = {{"model_type", "gemma4"}, {"audio_token_id", 258881}, {"boa_token_id", 256000},
                        {"eoa_token_id", 258883}, {"text_config", {{"hidden_size", E}}},
                        {"audio_config", {{"hidden_size", H}, {"num_hidden_layers", L}, {"num_attention_heads", 8},
                                          {"subsampling_conv_channels", {C0, C1}}, {"conv_kernel_size", K},
                                          {"output_proj_dims", OUT}}}};
  std::mt19937 rng(5);
  std::map<std::string, Tensor> w;
  const std::string P = "model.audio_tower.", S = P + "subsample_conv_projection.";
  w[S + "layer0.conv.weight"] = random_bf16(rng, {C0, 1, 3, 3}, 0.3f);
  w[S + "layer1.conv.weight"] = random_bf16(rng, {C1, C0, 3, 3}, 0.05f);
  w[S + "layer0.norm.weight"] = random_bf16(rng, {C0}, 1.0f);
  w[S + "layer1.norm.weight"] = random_bf16(rng, {C1}, 1.0f);
  w[S + "input_proj_linear.weight"] = random_bf16(rng, {H, 32 * C1}, 0.03f);
  auto lin = [&](const std::string& p, int64_t n, int64_t k) {
    w[p + ".linear.weight"] = random_bf16(rng, {n, k}, 1.0f / std::sqrt(float(k)));
  };
  for (int64_t il = 0; il < L; ++il) {
    const std::string p = P + "layers." + std::to_string(il) + ".";
    for (const char* ff : {"feed_forward1.", "feed_forward2."}) {
      w[p + ff + "pre_layer_norm.weight"] = random_bf16(rng, {H}, 1.0f);
      w[p + ff + "post_layer_norm.weight"] = random_bf16(rng, {H}, 1.0f);
      lin(p + ff + "ffw_layer_1", 4 * H, H);
      lin(p + ff + "ffw_layer_2", H, 4 * H);
    }
    for (const char* n : {"norm_pre_attn", "norm_post_attn", "norm_out", "lconv1d.pre_layer_norm",
                          "lconv1d.conv_norm"})
      w[p + n + ".weight"] = random_bf16(rng, {H}, 1.0f);
    for (const char* n : {"q_proj", "k_proj", "v_proj", "post"}) lin(p + "self_attn." + n, H, H);
    w[p + "self_attn.relative_k_proj.weight"] = random_bf16(rng, {H, H}, 0.03f);
    w[p + "self_attn.per_dim_scale"] = random_bf16(rng, {hd}, 0.5f);
    lin(p + "lconv1d.linear_start", 2 * H, H);
    lin(p + "lconv1d.linear_end", H, H);
    w[p + "lconv1d.depthwise_conv1d.weight"] = random_bf16(rng, {H, 1, K}, 0.3f);
  }
  w[P + "output_proj.weight"] = random_bf16(rng, {OUT, H}, 0.03f);
  w[P + "output_proj.bias"] = random_bf16(rng, {OUT}, 0.05f);
  w["model.embed_audio.embedding_projection.weight"] = random_bf16(rng, {E, OUT}, 0.03f);
  static MapWeightSource* src = nullptr;  // the tower's tensors point into it: kept for the process
  src = new MapWeightSource(std::move(w));
  auto enc = make_audio_encoder(HfConfig(cfg), *src, nlohmann::json());
  if (!enc.is_ok()) {
    std::fprintf(stderr, "%s\n", enc.status().message().c_str());
    std::abort();
  }
  return std::move(enc).value();
}

void encode(benchmark::State& state, double seconds) {
  static std::unique_ptr<AudioEncoder> tower = e2b_tower();
  const int threads = int(state.range(0));
  ThreadPool pool(threads);
  std::vector<float> clip(size_t(seconds * 16000));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.01f);
  for (size_t i = 0; i < clip.size(); ++i) clip[i] = 0.3f * std::sin(float(i) * 0.05f) + nd(rng);
  int64_t n_tok = 0;
  for (auto _ : state) {
    auto r = encode_audio(*tower, clip, pool);
    if (!r.is_ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    n_tok = r->dim(0);
  }
  state.counters["soft_tokens"] = double(n_tok);
  state.counters["x_realtime"] =
      benchmark::Counter(seconds * double(state.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK_CAPTURE(encode, clip_10s, 10.0)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK_CAPTURE(encode, clip_30s, 30.0)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK_MAIN();
