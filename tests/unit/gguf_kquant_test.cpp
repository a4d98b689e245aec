// GGUF files with llama-quantize's default K-quant mixes (written by the test suite's GGUF writer, whose
// kmix_type is an independent description of llama_tensor_get_type) run in place and match their dequantize-then-f32
// reference: the same GGUF with every quantized tensor replaced by its dequantized values in F32, run by the f32
// kernels. The only difference left is pipit's int8 quantization of the activations (one scale per 32), so:
//   relative RMS of all logits <= 0.03, and the greedy (argmax) token identical at every position,
// on stories260k (no row of 256: every tensor takes llama.cpp's fallback types, Q5_0 / Q8_0 / F16) and on a
// random Qwen3-shaped model of hidden size 256 (Q4_K / Q5_K / Q6_K in use, Q6_K tied output, Q6_K attn_v and
// ffn_down on the layers use_more_bits picks). `pipit convert --quant q4_k_m` of the same checkpoint gives every
// tensor the same type and the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "convert/gguf_import.h"
#include "format/pipit_format.h"
#include "format/safetensors.h"
#include "tests/unit/convert_test_util.h"
#include "tests/unit/gguf_test_writer.h"

namespace pipit {
namespace {

// A random Qwen3-shaped checkpoint: hidden 256, 4 layers, 4 query / 2 kv heads of 64, ffn 512, vocab 512, tied.
void write_qwen3_shaped(const std::string& dir) {
  const int64_t H = 256, F = 512, L = 4, V = 512, hd = 64, nq = 4, nkv = 2;
  nlohmann::json cfg = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"hidden_size", H},
                        {"intermediate_size", F}, {"num_hidden_layers", L}, {"num_attention_heads", nq},
                        {"num_key_value_heads", nkv}, {"head_dim", hd}, {"vocab_size", V}, {"rms_norm_eps", 1e-6},
                        {"rope_theta", 1000000.0}, {"max_position_embeddings", 4096}, {"tie_word_embeddings", true},
                        {"hidden_act", "silu"}, {"bos_token_id", 1}, {"eos_token_id", 2}};
  test::write_bytes(dir + "/config.json", cfg.dump());
  std::mt19937 gen(1234);
  std::vector<std::pair<std::string, Tensor>> ts;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float sigma, float mean = 0) {
    Tensor t = Tensor::empty(DType::F32, shape);
    std::normal_distribution<float> d(mean, sigma);
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = d(gen);
    ts.emplace_back(name, t);
  };
  add("model.embed_tokens.weight", {V, H}, 1.0f);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {H}, 0.05f, 1.0f);
    add(p + "post_attention_layernorm.weight", {H}, 0.05f, 1.0f);
    add(p + "self_attn.q_norm.weight", {hd}, 0.05f, 1.0f);
    add(p + "self_attn.k_norm.weight", {hd}, 0.05f, 1.0f);
    add(p + "self_attn.q_proj.weight", {nq * hd, H}, 1.0f / 16);
    add(p + "self_attn.k_proj.weight", {nkv * hd, H}, 1.0f / 16);
    add(p + "self_attn.v_proj.weight", {nkv * hd, H}, 1.0f / 16);
    add(p + "self_attn.o_proj.weight", {H, nq * hd}, 1.0f / 16);
    add(p + "mlp.gate_proj.weight", {F, H}, 1.0f / 16);
    add(p + "mlp.up_proj.weight", {F, H}, 1.0f / 16);
    add(p + "mlp.down_proj.weight", {H, F}, 1.0f / 22);
  }
  add("model.norm.weight", {H}, 0.05f, 1.0f);
  ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", ts).is_ok());
}

// The greedy next token at every position of a teacher-forced pass (logits [n, V]).
std::vector<int32_t> argmax_rows(const std::vector<float>& logits, int64_t V) {
  std::vector<int32_t> out;
  for (size_t r = 0; r + size_t(V) <= logits.size(); r += size_t(V))
    out.push_back(int32_t(std::max_element(logits.begin() + long(r), logits.begin() + long(r + size_t(V))) -
                          (logits.begin() + long(r))));
  return out;
}

TEST(GgufKQuant, DefaultMixesMatchTheirDequantizedReference) {
  test::ScratchDir d("gguf_kq");
  std::filesystem::create_directories(d.path("qwen3_256"));
  write_qwen3_shaped(d.path("qwen3_256"));
  const std::vector<int32_t> prompt = {1, 17, 300, 42, 99, 5, 260, 77, 12, 400, 31, 8};
  for (const auto& [name, dir] : {std::pair<std::string, std::string>{"stories260k", test::model_dir("stories260k")},
                                  {"qwen3_256", d.path("qwen3_256")}}) {
    for (const char* mix : {"q4_k_m", "q5_k_m", "q6_k"}) {
      SCOPED_TRACE(name + " " + mix);
      const bool llama = name == "stories260k";
      test::hf_to_gguf(dir, d.path("k.gguf"), {.with_llama2c_tokenizer = llama, .kmix = mix});
      test::hf_to_gguf(dir, d.path("r.gguf"), {.with_llama2c_tokenizer = llama, .kmix = mix, .dequantized = true});
      auto c = open_checkpoint(d.path("k.gguf"));
      ASSERT_TRUE(c.is_ok()) << c.status().message();
      const auto type_of = [&](const std::string& t) { return c->tensors.at(t).dtype(); };
      if (!llama) {  // the mix as llama-quantize writes it for 4 layers: use_more_bits picks layers 2 and 3
        const DType base = std::string(mix) == "q5_k_m" ? DType::Q5_K : std::string(mix) == "q6_k" ? DType::Q6_K
                                                                                                    : DType::Q4_K;
        EXPECT_EQ(type_of("model.embed_tokens.weight"), DType::Q6_K);
        EXPECT_EQ(type_of("model.layers.0.self_attn.q_proj.weight"), base);
        EXPECT_EQ(type_of("model.layers.1.mlp.down_proj.weight"), base);
        EXPECT_EQ(type_of("model.layers.2.mlp.down_proj.weight"), DType::Q6_K);
        EXPECT_EQ(type_of("model.layers.3.self_attn.v_proj.weight"), DType::Q6_K);
        EXPECT_EQ(type_of("model.layers.1.self_attn.v_proj.weight"), base);
      } else {  // rows of 64 and 172: llama.cpp's fallbacks
        EXPECT_EQ(type_of("model.embed_tokens.weight"), DType::Q8_0);
        EXPECT_EQ(type_of("model.layers.0.self_attn.q_proj.weight"),
                  std::string(mix) == "q5_k_m" ? DType::Q5_1 : std::string(mix) == "q6_k" ? DType::Q8_0 : DType::Q5_0);
        EXPECT_EQ(type_of("model.layers.0.mlp.down_proj.weight"), DType::F16);
      }
      LoadedModel k = test::load_or_fail(d.path("k.gguf"));
      LoadedModel r = test::load_or_fail(d.path("r.gguf"));
      const std::vector<int32_t> ids = llama ? test::golden_ids("stories260k") : prompt;
      const auto lk = test::all_logits(*k.model, ids), lr = test::all_logits(*r.model, ids);
      const double rel = test::rel_rms(lk, lr);
      EXPECT_LT(rel, 0.03);
      std::printf("[kquant] %s %s: logits rel RMS vs dequantized f32 %.5f\n", name.c_str(), mix, rel);
      const auto gk = argmax_rows(lk, 512), gr = argmax_rows(lr, 512);
      ASSERT_EQ(gk.size(), ids.size());
      EXPECT_EQ(gk, gr);
    }
  }
}

// pipit convert --quant q4_k_m / q6_k gives every tensor the type the writer's independent description gives it,
// and the same bytes (both quantize with llama.cpp's reference quantizers).
TEST(GgufKQuant, ConvertMixEqualsTheGgufMix) {
  test::ScratchDir d("gguf_kq");
  std::filesystem::create_directories(d.path("m"));
  write_qwen3_shaped(d.path("m"));
  for (const char* mix : {"q4_k_m", "q6_k"}) {
    SCOPED_TRACE(mix);
    test::hf_to_gguf(d.path("m"), d.path("k.gguf"), {.kmix = mix});
    test::convert_or_fail(d.path("m"), d.path("k.pipit"), mix);
    auto g = open_checkpoint(d.path("k.gguf"));
    auto p = PipitFile::open(d.path("k.pipit"));
    ASSERT_TRUE(g.is_ok() && p.is_ok());
    for (const auto& [name, t] : g->tensors) {
      const Tensor& q = p->tensors().at(name);
      EXPECT_EQ(q.dtype(), t.dtype()) << name;
      if (q.dtype() == t.dtype() && t.ndim() == 2) {
        EXPECT_EQ(std::memcmp(q.data(), t.data(), t.nbytes()), 0) << name;
      }
    }
  }
}

}  // namespace
}  // namespace pipit
