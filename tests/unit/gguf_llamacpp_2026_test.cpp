// llama.cpp's own GGUF files of the 2026 models (issue 37 item 3): Qwen3.5 (text + MTP, arch qwen35; and its
// qwen3vl_merger mmproj) and GPT-OSS (arch gpt-oss, MXFP4 experts as stored), written by llama.cpp's
// convert_hf_to_gguf.py from the tiny test checkpoints (tests/data/llamacpp_gguf/make_qwen35_gpt_oss_gguf.py). They
// import to the same tensors as the HF checkpoints (BF16: the same values; Q8_0: within the quantizer's half step)
// and run to the goldens: text logits, the MTP head's logits, an image's vision embeddings and prefill logits through
// `load_model(..., {.mmproj})`, GPT-OSS logits bit for bit. A file missing a tensor names it. Also Gemma 4 (text +
// its mmproj's vision tower) and Qwen3-VL (text + DeepStack mmproj): make_gemma4_qwen3vl_gguf.py.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "backends/cpu/kernels.h"
#include "backends/cpu/ref/ref.h"
#include "convert/checkpoint.h"
#include "convert/gguf_import.h"
#include "format/safetensors.h"
#include "models/mtp.h"
#include "runtime/audio_input.h"
#include "runtime/multimodal.h"
#include "runtime/multimodal_video.h"
#ifdef PIPIT_WITH_TOKENIZER
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#endif
#include "tests/unit/convert_test_util.h"
#include "tests/unit/gguf_test_writer.h"

namespace pipit {
namespace {

constexpr double kTol = 1e-3;  // the f32 path's bound against the PyTorch goldens

std::string data(const std::string& f) { return std::string(PIPIT_SOURCE_DIR) + "/tests/data/llamacpp_gguf/" + f; }

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  const int64_t n = t.dim(-1);
  for (int64_t r = 0; r < t.rows(); ++r) ref_kernels().to_f32[int(t.dtype())](t.row_ptr(r), v.data() + r * n, n);
  return v;
}

SafetensorsFile golden(const std::string& model) {
  auto g = SafetensorsFile::open(test::model_dir(model) + "/golden.safetensors");
  EXPECT_TRUE(g.is_ok());
  return std::move(g).value();
}

std::vector<int32_t> ids_of(const Tensor& t) { return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()}; }

// The Hub checkpoint's tensor names as the import gives them (text under model., the tower under visual.).
std::string import_name(const std::string& hf) {
  using P = std::pair<const char*, const char*>;
  for (auto [from, to] : {P{"model.language_model.", "model."}, P{"model.visual.", "visual."}})
    if (hf.rfind(from, 0) == 0) return to + hf.substr(std::string(from).size());
  return hf;
}

// Every tensor of the HF checkpoint is in the GGUF import under its name and shape. Unquantized: the same values
// up to what the converter computes in f32 (norms stored as 1 + w: a w under 2^-16 loses bits below 2^-24;
// A_log through -exp then log: an ulp). Q8_0: within 0.57 of a step of the tensor's largest block (half a step
// plus the f16 rounding of the scale, 127 * 2^-11 of a step).
bool is_tower(const std::string& name) {
  for (const char* p : {"model.visual.", "model.vision_tower.", "model.audio_tower.", "model.embed_vision.",
                        "model.embed_audio."})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

void expect_same_tensors(const Checkpoint& hf, const Checkpoint& gg, bool with_tower) {
  size_t n = 0, exact = 0, quantized = 0;
  for (const auto& [name, t] : hf.tensors) {
    if (!with_tower && is_tower(name)) continue;
    const std::string g = import_name(name);
    auto it = gg.tensors.find(g);
    ASSERT_NE(it, gg.tensors.end()) << g;
    ASSERT_EQ(it->second.shape(), t.shape()) << g;
    const auto a = values(t), b = values(it->second);
    double diff = 0, amax = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
      amax = std::max(amax, std::fabs(double(a[i])));
    }
    const bool q = dtype_is_quantized(it->second.dtype());
    const double bound = q ? 0.57 * amax / 127 : name.ends_with("A_log") ? 1e-6 * amax : 6e-8;
    EXPECT_LE(diff, bound) << g << " " << it->second.describe();
    ++n, exact += diff == 0, quantized += q;
  }
  EXPECT_EQ(n, gg.tensors.size()) << "the import has tensors the checkpoint has not";
  std::printf("[ measure  ] %zu tensors: %zu bit-identical, %zu quantized\n", n, exact, quantized);
}

TEST(LlamaCppGguf2026, Qwen35TensorsAreTheCheckpoints) {
  auto hf = open_checkpoint(test::model_dir("qwen3_5_vl"));
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  auto gg = open_gguf_checkpoint(data("qwen3_5_vl-BF16.gguf"), data("mmproj-qwen3_5_vl-BF16.gguf"));
  ASSERT_TRUE(gg.is_ok()) << gg.status().message();
  expect_same_tensors(*hf, *gg, true);
  auto q8 = open_gguf_checkpoint(data("qwen3_5_vl-Q8_0.gguf"));
  ASSERT_TRUE(q8.is_ok()) << q8.status().message();
  expect_same_tensors(*hf, *q8, false);
  // the config the model reads: the decoder's sizes, hybrid layout, partial interleaved M-RoPE, MTP layer
  const auto& tc = gg->config["text_config"];
  EXPECT_EQ(gg->config["model_type"], "qwen3_5");
  EXPECT_EQ(tc["layer_types"], (nlohmann::json{"linear_attention", "linear_attention", "linear_attention",
                                               "full_attention"}));
  EXPECT_EQ(tc["rope_parameters"]["mrope_section"], (nlohmann::json{3, 3, 2}));
  EXPECT_EQ(tc["rope_parameters"]["partial_rotary_factor"].get<double>(), 0.25);
  EXPECT_EQ(tc["mtp_num_hidden_layers"].get<int64_t>(), 1);
  EXPECT_EQ(tc["linear_num_value_heads"].get<int64_t>(), 4);
  EXPECT_EQ(gg->config["image_token_id"].get<int64_t>(), 492);
}

// Text: the GGUF's logits on the golden text prompt are the goldens' and the HF checkpoint's; the Q8_0 file's are
// within the bound pipit's own q8 file of this checkpoint is held to (tests/models/qwen3_5_vl_test.cpp: relative RMS
// 0.12 of the logits; a random model with logits under 1 and top-2 margins down to 4e-4 moves far under 8-bit
// weights) and keep the last position's argmax.
TEST(LlamaCppGguf2026, Qwen35TextLogits) {
  auto g = golden("qwen3_5_vl");
  const auto ids = ids_of(*g.get("text.input_ids"));
  const Tensor want = *g.get("text.logits");
  LoadedModel hf = test::load_or_fail(test::model_dir("qwen3_5_vl"));
  const auto ref = test::all_logits(*hf.model, ids);
  const int64_t V = hf.model->info().n_vocab, T = int64_t(ids.size());
  LoadedModel bf = test::load_or_fail(data("qwen3_5_vl-BF16.gguf"));
  ASSERT_TRUE(bf.model);
  EXPECT_EQ(bf.config.model_type(), "qwen3_5_text");
  const auto got = test::all_logits(*bf.model, ids);
  ASSERT_EQ(int64_t(got.size()), want.numel());
  const double vs_golden = test::max_abs_diff(got.data(), want.ptr<float>(), want.numel()).max_abs;
  const double vs_hf = test::max_abs_diff(got.data(), ref.data(), int64_t(ref.size())).max_abs;
  EXPECT_LE(vs_golden, kTol);
  EXPECT_LE(vs_hf, 1e-5);  // the same weights but A_log's ulp
  LoadedModel q8 = test::load_or_fail(data("qwen3_5_vl-Q8_0.gguf"));
  const auto gq = test::all_logits(*q8.model, ids);
  ASSERT_EQ(gq.size(), ref.size());
  const std::vector<float> golden_logits(want.ptr<float>(), want.ptr<float>() + want.numel());
  const double q_rel = test::rel_rms(gq, golden_logits);
  auto last_argmax = [&](const std::vector<float>& l) {
    return std::max_element(l.end() - V, l.end()) - (l.end() - V);
  };
  EXPECT_LE(q_rel, 0.12);
  EXPECT_EQ(last_argmax(gq), last_argmax(golden_logits));
  // for scale: pipit's own q8 file of the same checkpoint
  test::ScratchDir d("gguf2026_q8");
  test::convert_or_fail(test::model_dir("qwen3_5_vl"), d.path("q8.pipit"), "q8");
  LoadedModel own = test::load_or_fail(d.path("q8.pipit"));
  const double own_rel = test::rel_rms(test::all_logits(*own.model, ids), golden_logits);
  std::printf("[ measure  ] qwen35 BF16 gguf: |logits - golden| %.3g, - HF %.3g; Q8_0 gguf relative RMS %.4f (pipit "
              "q8 %.4f), T %lld\n", vs_golden, vs_hf, q_rel, own_rel, (long long)T);
}

// The MTP layer (NextN block 4 of the file) is the model's head: its logits on the golden pairs of the text case.
TEST(LlamaCppGguf2026, Qwen35MtpHead) {
  auto g = golden("qwen3_5_vl");
  LoadedModel lm = test::load_or_fail(data("qwen3_5_vl-BF16.gguf"));
  auto head = mtp_of(*lm.model);
  ASSERT_TRUE(head.is_ok()) << head.status().message();
  const auto in_ids = ids_of(*g.get("text.mtp.input_ids")), pos = ids_of(*g.get("text.mtp.position_ids"));
  const int64_t L = int64_t(in_ids.size()), E = lm.model->info().n_embd;
  Tensor embeds = *g.get("text.mtp.inputs_embeds"), hidden = *g.get("text.mtp.hidden_in");
  Batch b = Batch::single(in_ids, 0, 0, /*all_logits=*/true);
  b.media.embd = embeds.reshape({L, E});
  for (int64_t i = 0; i < L; ++i) b.media.row.push_back(int32_t(i));
  b.pos_streams.pos = pos;
  KvCache kv((*head)->mtp_kv_spec(), 1, 256, DType::F32);
  Arena arena;
  ThreadPool pool(2);
  Ctx ctx{&arena, &pool, &kernels()};
  Tensor logits;
  ASSERT_TRUE((*head)->forward_mtp(ctx, b, hidden.reshape({L, E}), kv, &logits, nullptr).is_ok());
  const Tensor want = *g.get("text.mtp.logits");
  ASSERT_EQ(logits.numel(), want.numel());
  const double d = test::max_abs_diff(logits.ptr<float>(), want.ptr<float>(), want.numel()).max_abs;
  EXPECT_LE(d, kTol);
  std::printf("[ measure  ] qwen35 gguf MTP logits - golden %.3g\n", d);
}

// The mmproj: `pipit run -m qwen3_5_vl-BF16.gguf --mmproj mmproj-qwen3_5_vl-BF16.gguf` loads Qwen3.5 with its tower;
// the golden image case (200x130: within llama.cpp's pixel bounds for this projector, so resized as HF resizes it)
// gives the golden vision embeddings, prompt length and prefill logits.
TEST(LlamaCppGguf2026, Qwen35MmprojImage) {
  auto lm = load_model(data("qwen3_5_vl-BF16.gguf"), LoadOptions{.mmproj = data("mmproj-qwen3_5_vl-BF16.gguf")});
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  ASSERT_NE(lm->model->vision(), nullptr);
  EXPECT_EQ(lm->model->info().arch, "qwen3_5");
  // llama.cpp's bounds for qwen3vl_merger: 8 to 4096 merged tokens of 32 x 32 pixels
  EXPECT_EQ(lm->preprocessor_config["min_pixels"].get<int64_t>(), 8 * 32 * 32);
  EXPECT_EQ(lm->preprocessor_config["max_pixels"].get<int64_t>(), 4096 * 32 * 32);
  auto g = golden("qwen3_5_vl");
  const std::string c = "img_200x130";
  ThreadPool pool(2);
  const auto ids = ids_of(*g.get(c + ".input_ids_unexpanded"));
  auto p = prepare_multimodal_prompt(*lm, ids, {test::model_dir("qwen3_5_vl") + "/img_200x130.png"}, {}, pool);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  ASSERT_EQ(int64_t(p->tokens.size()), g.get(c + ".input_ids")->numel());
  const Tensor ve = *g.get(c + ".vision_embeds");
  ASSERT_EQ(p->embd.numel(), ve.numel());
  const double d_vis = test::max_abs_diff(p->embd.ptr<float>(), ve.ptr<float>(), ve.numel()).max_abs;
  EXPECT_LE(d_vis, kTol);
  Session s(*lm->model, SessionOptions{.n_ctx = int(p->tokens.size()) + 8, .n_threads = 2});
  auto r = s.eval(*p, /*all_logits=*/true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const Tensor want = *g.get(c + ".logits");
  ASSERT_EQ(r->numel(), want.numel());
  const double d_log = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs;
  EXPECT_LE(d_log, kTol);
  std::printf("[ measure  ] qwen35 gguf + mmproj %s: vision_embeds %.3g, logits %.3g\n", c.c_str(), d_vis, d_log);
}

// The golden video case through the mmproj's tower. An mmproj holds no video settings (a GGUF model takes HF's
// Qwen3-VL video defaults); this checkpoint lowers them, so its video_preprocessor_config.json is given here.
TEST(LlamaCppGguf2026, Qwen35MmprojVideo) {
  auto lm = load_model(data("qwen3_5_vl-BF16.gguf"), LoadOptions{.mmproj = data("mmproj-qwen3_5_vl-BF16.gguf")});
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  const std::string dir = test::model_dir("qwen3_5_vl");
  const auto vpp = nlohmann::json::parse(test::read_bytes(dir + "/video_preprocessor_config.json"));
  auto vc = video_processor_for(*lm->model, vpp);
  ASSERT_TRUE(vc.is_ok()) << vc.status().message();
  std::vector<std::string> frames;
  for (int i = 0; i < 8; ++i) frames.push_back(dir + "/video_frame0" + std::to_string(i) + ".png");
  auto g = golden("qwen3_5_vl");
  ThreadPool pool(2);
  auto ev = encode_video_files(*lm->model, *vc, frames, double(g.get("video.video_fps")->ptr<float>()[0]), pool);
  ASSERT_TRUE(ev.is_ok()) << ev.status().message();
  const Tensor want = *g.get("video.video_embeds");
  ASSERT_EQ(ev->features.numel(), want.numel());
  const double d = test::max_abs_diff(ev->features.ptr<float>(), want.ptr<float>(), want.numel()).max_abs;
  EXPECT_LE(d, kTol);
  std::printf("[ measure  ] qwen35 gguf + mmproj video_embeds - golden %.3g\n", d);
}

// A Q4_K out_proj whose 64-wide value heads split its 256-element blocks (Qwen3.5-9B's 128-wide heads in a K-quant
// file): its columns come back in HF's head order as f16 (the dequantized values to 2^-11); the rows of the other
// tensors move whole, in their own type. A synthetic one-layer qwen35 file, 2 key heads and 4 value heads.
TEST(LlamaCppGguf2026, Qwen35KQuantValueHeadsRegrouped) {
  const int64_t H = 256, nk = 2, nv = 4, d = 64, conv = 2 * nk * d + nv * d;
  test::GgufWriter g;
  g.str("general.architecture", "qwen35");
  for (auto [k, v] : std::vector<std::pair<const char*, uint32_t>>{
           {"embedding_length", H}, {"block_count", 1}, {"feed_forward_length", 32}, {"attention.head_count", 2},
           {"attention.head_count_kv", 1}, {"attention.key_length", 64}, {"rope.dimension_count", 16},
           {"ssm.conv_kernel", 4}, {"ssm.state_size", d}, {"ssm.group_count", nk}, {"ssm.time_step_rank", nv},
           {"ssm.inner_size", nv * d}})
    g.u32(std::string("qwen35.") + k, v);
  auto f32 = [&](const std::string& name, std::vector<uint64_t> ne, float v) {
    uint64_t n = 1;
    for (auto x : ne) n *= x;
    std::vector<float> a(n, v);
    g.tensor(name, 0, ne, std::string(reinterpret_cast<const char*>(a.data()), a.size() * 4));
  };
  f32("token_embd.weight", {H, 8}, 0.1f);
  f32("output_norm.weight", {H}, 1.0f);
  for (const char* n : {"attn_norm", "post_attention_norm"}) f32(std::string("blk.0.") + n + ".weight", {H}, 1.0f);
  f32("blk.0.attn_qkv.weight", {H, conv}, 0.01f);
  f32("blk.0.attn_gate.weight", {H, nv * d}, 0.01f);
  f32("blk.0.ssm_beta.weight", {H, nv}, 0.01f);
  f32("blk.0.ssm_alpha.weight", {H, nv}, 0.01f);
  f32("blk.0.ssm_a", {nv}, -0.5f);
  f32("blk.0.ssm_dt.bias", {nv}, 0.0f);
  f32("blk.0.ssm_conv1d.weight", {4, conv}, 0.1f);
  f32("blk.0.ssm_norm.weight", {d}, 1.0f);
  f32("blk.0.ffn_gate.weight", {H, 32}, 0.01f);
  f32("blk.0.ffn_up.weight", {H, 32}, 0.01f);
  f32("blk.0.ffn_down.weight", {32, H}, 0.01f);
  // ssm_out [H rows, nv * d columns], column c of row r = r + c / 1000 (so every head's columns differ), as Q4_K
  std::vector<float> w(size_t(H * nv * d));
  for (int64_t r = 0; r < H; ++r)
    for (int64_t c = 0; c < nv * d; ++c) w[size_t(r * nv * d + c)] = float(r % 7) - 3.0f + float(c) / 100.0f;
  std::string q(size_t(dtype_row_bytes(DType::Q4_K, nv * d) * H), '\0');
  ref::q4_k_from_f32(w.data(), q.data(), int64_t(w.size()));
  g.tensor("blk.0.ssm_out.weight", 12, {uint64_t(nv * d), uint64_t(H)}, q);
  test::ScratchDir dir("gguf2026_kq");
  g.write(dir.path("kq.gguf"));
  auto c = open_gguf_checkpoint(dir.path("kq.gguf"));
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const Tensor out = c->tensors.at("model.layers.0.linear_attn.out_proj.weight");
  ASSERT_EQ(out.dtype(), DType::F16);
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{H, nv * d}));
  // the file's values, dequantized, with HF's head h = k * 2 + r taken from the file's head r * nk + k
  Tensor src = Tensor::from_data(DType::Q4_K, {H, nv * d}, q.data(), nullptr);
  const std::vector<float> deq = values(src), got = values(out);
  double worst = 0;
  for (int64_t r = 0; r < H; ++r)
    for (int64_t k = 0; k < nk; ++k)
      for (int64_t rep = 0; rep < nv / nk; ++rep)
        for (int64_t i = 0; i < d; ++i) {
          const float want = deq[size_t(r * nv * d + (rep * nk + k) * d + i)];
          const float have = got[size_t(r * nv * d + (k * (nv / nk) + rep) * d + i)];
          worst = std::max(worst, std::fabs(double(have) - double(want)) / std::max(1.0, std::fabs(double(want))));
        }
  EXPECT_LE(worst, std::ldexp(1.0, -11));
  // rows move whole: in_proj_z keeps the file's f32, its head blocks regrouped (all equal here: the shape)
  EXPECT_EQ(c->tensors.at("model.layers.0.linear_attn.in_proj_z.weight").dtype(), DType::F32);
  EXPECT_EQ(c->tensors.at("model.layers.0.linear_attn.conv1d.weight").shape(), (std::vector<int64_t>{conv, 1, 4}));
}

// GPT-OSS: the converter's MXFP4 blocks are the bytes pipit rebuilds from the Hub's (no requantization), so the
// GGUF's logits are the HF checkpoint's bit for bit.
TEST(LlamaCppGguf2026, GptOssMxfp4AsStored) {
  auto hf = open_checkpoint(test::model_dir("gpt_oss_mxfp4"));
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  auto gg = open_gguf_checkpoint(data("gpt_oss_mxfp4.gguf"));
  ASSERT_TRUE(gg.is_ok()) << gg.status().message();
  EXPECT_EQ(gg->tensors.size(), hf->tensors.size());
  for (const auto& [name, t] : hf->tensors) {
    auto it = gg->tensors.find(name);
    ASSERT_NE(it, gg->tensors.end()) << name;
    ASSERT_EQ(it->second.shape(), t.shape()) << name;
    if (t.dtype() == DType::MXFP4) {  // the experts: the same bytes
      ASSERT_EQ(it->second.dtype(), t.dtype()) << name;
      EXPECT_EQ(std::memcmp(it->second.data(), t.data(), t.nbytes()), 0) << name;
    } else {  // bf16, or the f32 the converter writes norms and biases in: the same values
      EXPECT_EQ(values(it->second), values(t)) << name;
    }
  }
  const auto ids = test::golden_ids("gpt_oss_mxfp4");
  LoadedModel a = test::load_or_fail(test::model_dir("gpt_oss_mxfp4"));
  LoadedModel b = test::load_or_fail(data("gpt_oss_mxfp4.gguf"));
  EXPECT_EQ(b.config.model_type(), "gpt_oss");
  const auto la = test::all_logits(*a.model, ids), lb = test::all_logits(*b.model, ids);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(test::max_abs_diff(la.data(), lb.data(), int64_t(la.size())).max_abs, 0.0);
}

#ifdef PIPIT_WITH_TOKENIZER
// A byte-level vocabulary with tokenizer.ggml.pre `pre`, back as a tokenizer: the bytes of Devanagari "की" (ka
// E0 A4 95, vowel sign ii E0 A5 80, a combining mark) in GPT-2's byte alphabet and merges up to the whole syllable.
std::shared_ptr<Tokenizer> ki_vocab_with_pre(const std::string& pre) {
  test::GgufWriter g;
  g.str("tokenizer.ggml.model", "gpt2");
  g.str("tokenizer.ggml.pre", pre);
  // à = E0, ¤ = A4, ¥ = A5, ķ = 95, Ģ = 80 (GPT-2's byte-to-unicode)
  g.strs("tokenizer.ggml.tokens", {"\u00e0", "\u00a4", "\u0137", "\u00a5", "\u0122", "\u00e0\u00a4",
                                   "\u00e0\u00a4\u0137", "\u00e0\u00a5", "\u00e0\u00a5\u0122",
                                   "\u00e0\u00a4\u0137\u00e0\u00a5\u0122"});
  g.i32s("tokenizer.ggml.token_type", std::vector<int32_t>(10, 1));
  g.strs("tokenizer.ggml.merges", {"\u00e0 \u00a4", "\u00e0\u00a4 \u0137", "\u00e0 \u00a5", "\u00e0\u00a5 \u0122",
                                   "\u00e0\u00a4\u0137 \u00e0\u00a5\u0122"});
  const std::string bytes = g.bytes();
  auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, "ki vocab");
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  auto texts = gguf_tokenizer_to_hf(*f);
  EXPECT_TRUE(texts.is_ok()) << texts.status().message();
  if (!texts.is_ok()) return nullptr;
  auto tok = Tokenizer::load(texts->tokenizer_json, texts->tokenizer_config_json);
  EXPECT_TRUE(tok.is_ok()) << tok.status().message();
  return tok.is_ok() ? std::move(tok).value() : nullptr;
}

// Real Qwen3.5 GGUFs say tokenizer.ggml.pre "qwen35" (llama.cpp's converter, from the Hub tokenizer's hash): Qwen2's
// pre-tokenizer with combining marks kept inside words, so a vocabulary trained with it can merge a letter with its
// vowel sign, which Qwen2's split keeps apart.
TEST(LlamaCppGguf2026, Qwen35PreTokenizer) {
  auto q2 = ki_vocab_with_pre("qwen2"), q35 = ki_vocab_with_pre("qwen35");
  ASSERT_TRUE(q2 && q35);
  const std::string ki = "\xe0\xa4\x95\xe0\xa5\x80";
  auto a = q2->encode(ki, false), b = q35->encode(ki, false);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(*a, (std::vector<int32_t>{6, 8}));
  EXPECT_EQ(*b, (std::vector<int32_t>{9}));
  EXPECT_EQ(q35->decode(*b, false), ki);
}

// ---- Gemma 4's vocabulary (tokenizer.ggml.model "gemma4"): gemma4_bpe-Q8_0.gguf is the tiny checkpoint with the
// Gemma-4-shaped tokenizer of tests/data/gemma4_bpe_tokenizer, its vocabulary written by llama.cpp's own
// Gemma4Model.set_vocab (make_gemma4_vocab_gguf.py): BPE with merges, "▁" for spaces, byte fallback, Gemma 4's special
// tokens (<|channel> and the tool tokens user-defined, as the converter marks them).
std::string g4_tokenizer_dir() { return std::string(PIPIT_SOURCE_DIR) + "/tests/data/gemma4_bpe_tokenizer"; }

// The GGUF's vocabulary encodes every text as the same tokenizer.json read from the HF folder and decodes back to
// it: spaces and runs of them, newlines, tabs, unicode in the vocabulary, characters only byte fallback covers,
// special tokens in the text (whole, and cut short). The ids are checked against the pieces too, so the two cannot
// agree on a wrong tokenization (a missing normalizer would give "hello" "w" "orld" ...).
TEST(LlamaCppGguf2026, Gemma4VocabEncodesAsTheHfTokenizer) {
  auto gg = load_tokenizer(data("gemma4_bpe-Q8_0.gguf"));
  ASSERT_TRUE(gg.is_ok()) << gg.status().message();
  auto hf = Tokenizer::load_dir(g4_tokenizer_dir());
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  const Tokenizer &g = **gg, &h = **hf;
  EXPECT_EQ(g.vocab_size(), 512);
  EXPECT_EQ(h.vocab_size(), 512);
  const std::vector<std::string> texts = {
      "hello world", "Hello, world!", " hello", "hello ", "  two  spaces  ", "a    b        c", " ", "",
      "\n", "\n\n\n", "\n\n\n\n\n", "line one\nline two\n\n\nthe end\n", "tab\there\t\t\tx", "\r\n",
      "caf\xc3\xa9 \xe2\x80\x94 \xe4\xb8\xad\xe6\x96\x87", "\xe2\x80\x9cquoted\xe2\x80\x9d",
      "\xf0\x9f\x98\x8a smile", "stra\xc3\x9f\xd0\xb5 \x01\x7f ~`@$%^[]{}\\",
      "<|turn>user\nhello<turn|>\n<|turn>model\n", "<bos>hello<eos>", "<|turn", "<|turn|>", "turn|>",
      "<|\"|>quoted<|\"|>", "<|image|><|audio|><|video|> <|image>x<image|>", "<|channel>thought\n<channel|>the answer",
      "<|tool_call>call:f{a:1}<tool_call|><|tool_response>", "<unused3> <mask> <pad>", "the  user  is  in  the  model"};
  for (const std::string& t : texts) {
    SCOPED_TRACE("text '" + t + "'");
    auto a = g.encode(t, false), b = h.encode(t, false);
    ASSERT_TRUE(a.is_ok()) << a.status().message();
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    EXPECT_EQ(*a, *b);
    EXPECT_EQ(g.decode(*a, false), h.decode(*b, false));
    EXPECT_EQ(g.decode(*a, false), t);
  }
  auto id = [&](const char* piece) { return h.token_to_id(piece).value_or(-1); };
  auto enc = [&](const std::string& t) {
    auto r = g.encode(t, false);
    return r.is_ok() ? *r : std::vector<int32_t>{};
  };
  using V = std::vector<int32_t>;
  EXPECT_EQ(enc("hello world"), (V{id("hello"), id("\u2581world")}));
  EXPECT_EQ(enc("a    b"), (V{id("a"), id("\u2581\u2581\u2581\u2581"), id("b")}));
  EXPECT_EQ(enc("\n\n\n"), (V{id("\n\n\n")}));
  EXPECT_EQ(enc("\xf0\x9f\x98\x8a"), (V{238 + 0xf0, 238 + 0x9f, 238 + 0x98, 238 + 0x8a}));  // <0xF0> ... bytes
  EXPECT_EQ(enc("<|turn>user\nhi<turn|>"), (V{105, id("user"), id("\n"), id("h"), id("i"), 106}));
  EXPECT_EQ(enc("<|turn"), (V{id("<|"), id("t"), id("u"), id("r"), id("n")}));
  EXPECT_EQ(id("\u2581world"), 35);  // the generator's layout, so a changed file is noticed
  // BOS: llama.cpp adds it for a gemma4 vocabulary whatever the file says; HF's Gemma 4 tokenizer adds none
  EXPECT_EQ(*g.encode("hello", true), (V{2, id("hello")}));
  EXPECT_EQ(*h.encode("hello", true), (V{id("hello")}));
  // skip_special_tokens: control tokens go; the user-defined <|channel> / tool tokens stay, as llama.cpp renders
  // them (its converter marks them so the chat parser can read them), where HF's tokenizer (all special) drops them
  const V answer = {105, 100, id("hello"), 101, 48, 106};
  EXPECT_EQ(g.decode(answer, true), "<|channel>hello<channel|><|tool_call>");
  EXPECT_EQ(h.decode(answer, true), "hello");
}

// The chat template travels in the GGUF: the same prompt text and ids as the HF folder's (one <bos>, from the
// template, since the chat path encodes without special tokens); the model stops at llama.cpp's end-of-generation
// tokens of Gemma 4 (<eos>, <turn|>, <|tool_response>), the eos ids of HF's instruction-tuned generation_config.
TEST(LlamaCppGguf2026, Gemma4VocabChatTemplateAndStops) {
  LoadedModel lm = test::load_or_fail(data("gemma4_bpe-Q8_0.gguf"));
  ASSERT_TRUE(lm.tokenizer);
  auto hf = Tokenizer::load_dir(g4_tokenizer_dir());
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  const nlohmann::json msgs = {{{"role", "system"}, {"content", "Be brief."}},
                               {{"role", "user"}, {"content", "hello  world"}},
                               {{"role", "assistant"}, {"content", "Hello!"}},
                               {{"role", "user"}, {"content", "caf\xc3\xa9 \xf0\x9f\x98\x8a"}}};
  auto a = apply_chat_template(*lm.tokenizer, msgs, true), b = apply_chat_template(**hf, msgs, true);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(a->rfind("<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\n", 0), 0u) << *a;
  auto ia = lm.tokenizer->encode(*a, false), ib = (*hf)->encode(*b, false);
  ASSERT_TRUE(ia.is_ok() && ib.is_ok());
  EXPECT_EQ(*ia, *ib);
  EXPECT_EQ(std::count(ia->begin(), ia->end(), 2), 1);
  EXPECT_EQ(ia->front(), 2);
  const auto& eos = lm.model->info().eos_ids;
  for (int32_t want : {1, 106, 50}) EXPECT_NE(std::find(eos.begin(), eos.end(), want), eos.end()) << want;
  EXPECT_EQ(std::find(eos.begin(), eos.end(), 105), eos.end());  // <|turn> starts a turn
}

// A gemma4 vocabulary without merges (llama.cpp refuses it too) or with a merge of unknown pieces is an error, no
// tokenizer; the model still loads for ids. (The toy gemma4-BF16.gguf has no merges.)
TEST(LlamaCppGguf2026, Gemma4VocabBadFiles) {
  auto vocab = [](bool merges, const std::string& merge) {
    test::GgufWriter g;
    g.str("tokenizer.ggml.model", "gemma4");
    g.strs("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "a", "b", "ab"});
    g.i32s("tokenizer.ggml.token_type", {3, 3, 3, 1, 1, 1});
    if (merges) g.strs("tokenizer.ggml.merges", {merge});
    g.u32("tokenizer.ggml.bos_token_id", 2);
    return g.bytes();
  };
  for (auto [merges, merge, part] : {std::tuple{false, "", "tokenizer.ggml.merges"},
                                     std::tuple{true, "a c", "'c' is not in the vocab"}}) {
    const std::string bytes = vocab(merges, merge);
    auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, "bad vocab");
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    auto texts = gguf_tokenizer_to_hf(*f);
    Status st = texts.status();
    if (texts.is_ok()) st = Tokenizer::load(texts->tokenizer_json, texts->tokenizer_config_json).status();
    ASSERT_FALSE(st.is_ok()) << part;
    EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  }
  const std::string good = vocab(true, "a b");
  auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(good.data()), good.size(), nullptr, "good vocab");
  ASSERT_TRUE(f.is_ok());
  auto texts = gguf_tokenizer_to_hf(*f);
  ASSERT_TRUE(texts.is_ok()) << texts.status().message();
  auto tok = Tokenizer::load(texts->tokenizer_json, texts->tokenizer_config_json);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  EXPECT_EQ(*(*tok)->encode("abba", true), (std::vector<int32_t>{2, 5, 4, 3}));
  EXPECT_EQ((*tok)->decode(std::vector<int32_t>{5, 4, 3}, false), "abba");
  auto toy = open_gguf_checkpoint(data("gemma4-BF16.gguf"));
  ASSERT_TRUE(toy.is_ok()) << toy.status().message();
  EXPECT_NE(toy->tokenizer_error.find("tokenizer.ggml.merges"), std::string::npos) << toy->tokenizer_error;
}
#endif

void expect_error(const Status& st, const std::string& part) {
  ASSERT_FALSE(st.is_ok()) << "expected an error containing '" << part << "'";
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

// A copy of a file with one tensor name changed (same length: the header stays valid).
std::string renamed(const test::ScratchDir& d, const std::string& file, const std::string& from,
                    const std::string& to) {
  std::string bytes = test::read_bytes(data(file));
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos);
  bytes.replace(at, from.size(), to);
  const std::string out = d.path("renamed_" + file);
  test::write_bytes(out, bytes);
  return out;
}

TEST(LlamaCppGguf2026, BadFilesGiveOneClearError) {
  test::ScratchDir d("gguf2026");
  expect_error(load_model(renamed(d, "qwen3_5_vl-BF16.gguf", "blk.1.attn_qkv.weight", "blk.1.attn_qkx.weight"))
                   .status(), "missing tensor 'blk.1.attn_qkv.weight'");
  expect_error(load_model(renamed(d, "gpt_oss_mxfp4.gguf", "blk.2.ffn_up_exps.weight", "blk.2.ffn_up_exps.weighx"))
                   .status(), "missing tensor 'blk.2.ffn_up_exps.weight'");
  expect_error(load_model(data("qwen3_5_vl-BF16.gguf"),
                          LoadOptions{.mmproj = renamed(d, "mmproj-qwen3_5_vl-BF16.gguf", "v.blk.2.attn_qkv.bias",
                                                        "v.blk.2.attn_qkx.bias")})
                   .status(), "missing tensor 'v.blk.2.attn_qkv.bias'");
  // a Qwen3.5 tower with another language model
  expect_error(load_model(data("gpt_oss_mxfp4.gguf"), LoadOptions{.mmproj = data("mmproj-qwen3_5_vl-BF16.gguf")})
                   .status(), "needs a qwen35 (Qwen3.5) or qwen3vl (Qwen3-VL) language model");
  // a truncated file
  const std::string whole = test::read_bytes(data("qwen3_5_vl-Q8_0.gguf"));
  test::write_bytes(d.path("cut.gguf"), whole.substr(0, whole.size() / 2));
  EXPECT_FALSE(load_model(d.path("cut.gguf")).is_ok());
}

// ---- Gemma 4 (arch gemma4) and Qwen3-VL (arch qwen3vl + its DeepStack mmproj), issue 32 item 5: files of
// tests/data/llamacpp_gguf/make_gemma4_qwen3vl_gguf.py (llama.cpp's converter on the shared test checkpoints).

// Gemma 4's language model: every text tensor of the checkpoint under its name (BF16: the same values; Q8_0 within
// the quantizer's step), the per-layer sizes, kinds and proportional RoPE back in the config.
TEST(LlamaCppGguf2026, Gemma4TensorsAreTheCheckpoints) {
  auto hf = open_checkpoint(test::model_dir("gemma4"));
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  auto gg = open_gguf_checkpoint(data("gemma4-BF16.gguf"));
  ASSERT_TRUE(gg.is_ok()) << gg.status().message();
  expect_same_tensors(*hf, *gg, false);
  auto q8 = open_gguf_checkpoint(data("gemma4-Q8_0.gguf"));
  ASSERT_TRUE(q8.is_ok()) << q8.status().message();
  expect_same_tensors(*hf, *q8, false);
  const auto& c = gg->config;
  EXPECT_EQ(c["model_type"], "gemma4_text");
  EXPECT_EQ(c["head_dim"].get<int64_t>(), 16);
  EXPECT_EQ(c["global_head_dim"].get<int64_t>(), 32);
  EXPECT_EQ(c["intermediate_size"].get<int64_t>(), 128);
  EXPECT_TRUE(c["use_double_wide_mlp"].get<bool>());
  EXPECT_EQ(c["num_kv_shared_layers"].get<int64_t>(), 5);
  EXPECT_EQ(c["layer_types"][4], "full_attention");
  EXPECT_EQ(c["layer_types"][5], "sliding_attention");
  EXPECT_EQ(c["rope_parameters"]["full_attention"]["rope_type"], "proportional");
  EXPECT_EQ(c["rope_parameters"]["full_attention"]["partial_rotary_factor"].get<double>(), 0.25);
  EXPECT_EQ(c["rope_parameters"]["sliding_attention"]["rope_theta"].get<double>(), 10000.0);
  EXPECT_EQ(c["vocab_size_per_layer_input"].get<int64_t>(), 512);
  EXPECT_EQ(c["final_logit_softcapping"].get<double>(), 30.0);
}

// Gemma 4 text: the BF16 GGUF's logits are the goldens' (f32 path bound) and the HF checkpoint's; the Q8_0 file's
// relative RMS against the goldens within 0.06 (pipit's own q8 file of the checkpoint, printed beside it, measures
// the same 0.043), same last argmax.
TEST(LlamaCppGguf2026, Gemma4TextLogits) {
  auto g = golden("gemma4");
  const auto ids = ids_of(*g.get("text.input_ids"));
  const Tensor want = *g.get("text.logits");
  LoadedModel hf = test::load_or_fail(test::model_dir("gemma4"));
  const auto ref = test::all_logits(*hf.model, ids);
  const int64_t V = hf.model->info().n_vocab;
  LoadedModel bf = test::load_or_fail(data("gemma4-BF16.gguf"));
  ASSERT_TRUE(bf.model);
  EXPECT_EQ(bf.config.model_type(), "gemma4_text");
  const auto got = test::all_logits(*bf.model, ids);
  ASSERT_EQ(int64_t(got.size()), want.numel());
  ASSERT_EQ(got.size(), ref.size());
  const double vs_golden = test::max_abs_diff(got.data(), want.ptr<float>(), want.numel()).max_abs;
  const double vs_hf = test::max_abs_diff(got.data(), ref.data(), int64_t(ref.size())).max_abs;
  EXPECT_LE(vs_golden, kTol);
  EXPECT_EQ(vs_hf, 0.0);  // the same values under the same names: the same model
  LoadedModel q8 = test::load_or_fail(data("gemma4-Q8_0.gguf"));
  const auto gq = test::all_logits(*q8.model, ids);
  ASSERT_EQ(gq.size(), ref.size());
  const std::vector<float> golden_logits(want.ptr<float>(), want.ptr<float>() + want.numel());
  const double q_rel = test::rel_rms(gq, golden_logits);
  auto last_argmax = [&](const std::vector<float>& l) {
    return std::max_element(l.end() - V, l.end()) - (l.end() - V);
  };
  test::ScratchDir d("gguf2026_g4q8");
  test::convert_or_fail(test::model_dir("gemma4"), d.path("q8.pipit"), "q8");
  LoadedModel own = test::load_or_fail(d.path("q8.pipit"));
  const double own_rel = test::rel_rms(test::all_logits(*own.model, ids), golden_logits);
  EXPECT_LE(q_rel, 0.06);  // measured 0.0432, pipit's own q8 of the checkpoint the same
  EXPECT_EQ(last_argmax(gq), last_argmax(golden_logits));
  std::printf("[ measure  ] gemma4 BF16 gguf: |logits - golden| %.3g, - HF %.3g; Q8_0 gguf relative RMS %.4f (pipit "
              "q8 %.4f)\n", vs_golden, vs_hf, q_rel, own_rel);
}

// Qwen3-VL: the language model and the mmproj's tower with its DeepStack mergers are the checkpoint's tensors.
TEST(LlamaCppGguf2026, Qwen3VLTensorsAreTheCheckpoints) {
  auto hf = open_checkpoint(test::model_dir("qwen3_vl"));
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  auto gg = open_gguf_checkpoint(data("qwen3_vl-BF16.gguf"), data("mmproj-qwen3_vl-BF16.gguf"));
  ASSERT_TRUE(gg.is_ok()) << gg.status().message();
  expect_same_tensors(*hf, *gg, true);
  auto q8 = open_gguf_checkpoint(data("qwen3_vl-Q8_0.gguf"));
  ASSERT_TRUE(q8.is_ok()) << q8.status().message();
  expect_same_tensors(*hf, *q8, false);
  EXPECT_EQ(q8->config["model_type"], "qwen3");  // text only: a Qwen3
  EXPECT_EQ(gg->config["model_type"], "qwen3_vl");
  EXPECT_EQ(gg->config["vision_config"]["deepstack_visual_indexes"], (nlohmann::json{0, 2}));
  EXPECT_EQ(gg->config["text_config"]["rope_scaling"]["mrope_section"], (nlohmann::json{6, 5, 5}));
  EXPECT_EQ(gg->config["image_token_id"].get<int64_t>(), 1012);
  EXPECT_EQ(gg->config["vision_start_token_id"].get<int64_t>(), 1009);
}

// Qwen3-VL text alone (no text case in its goldens): the GGUF's logits are the HF checkpoint's on text ids; Q8_0
// within a relative RMS bound, same last argmax.
TEST(LlamaCppGguf2026, Qwen3VLTextLogits) {
  std::vector<int32_t> ids = {1000, 1001};
  for (int i = 0; i < 30; ++i) ids.push_back(int32_t(10 + (i * 97 + 13) % 990));
  LoadedModel hf = test::load_or_fail(test::model_dir("qwen3_vl"));
  const auto ref = test::all_logits(*hf.model, ids);
  LoadedModel bf = test::load_or_fail(data("qwen3_vl-BF16.gguf"));
  const auto got = test::all_logits(*bf.model, ids);
  ASSERT_EQ(got.size(), ref.size());
  const double vs_hf = test::max_abs_diff(got.data(), ref.data(), int64_t(ref.size())).max_abs;
  EXPECT_LE(vs_hf, 1e-5);
  LoadedModel q8 = test::load_or_fail(data("qwen3_vl-Q8_0.gguf"));
  const auto gq = test::all_logits(*q8.model, ids);
  ASSERT_EQ(gq.size(), ref.size());
  const double q_rel = test::rel_rms(gq, ref);
  const int64_t V = hf.model->info().n_vocab;
  auto last_argmax = [&](const std::vector<float>& l) {
    return std::max_element(l.end() - V, l.end()) - (l.end() - V);
  };
  EXPECT_LE(q_rel, 0.05);  // measured 0.0298
  EXPECT_EQ(last_argmax(gq), last_argmax(ref));
  std::printf("[ measure  ] qwen3vl BF16 gguf |logits - HF| %.3g; Q8_0 gguf relative RMS vs HF %.4f\n", vs_hf, q_rel);
}

// `pipit run -m qwen3_vl-BF16.gguf --mmproj mmproj-qwen3_vl-BF16.gguf`: Qwen3-VL with its DeepStack tower; both
// golden images (within llama.cpp's pixel bounds and the checkpoint's, so resized alike) give the golden vision
// embeddings, prompt length and prefill logits (DeepStack features added in the first decoder layers).
TEST(LlamaCppGguf2026, Qwen3VLMmprojImages) {
  auto lm = load_model(data("qwen3_vl-BF16.gguf"), LoadOptions{.mmproj = data("mmproj-qwen3_vl-BF16.gguf")});
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  ASSERT_NE(lm->model->vision(), nullptr);
  EXPECT_EQ(lm->model->info().arch, "qwen3_vl");
  auto g = golden("qwen3_vl");
  ThreadPool pool(2);
  for (const std::string c : {"img_150x90", "img_256x160"}) {
    const auto ids = ids_of(*g.get(c + ".input_ids_unexpanded"));
    auto p = prepare_multimodal_prompt(*lm, ids, {test::model_dir("qwen3_vl") + "/" + c + ".png"}, {}, pool);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    ASSERT_EQ(int64_t(p->tokens.size()), g.get(c + ".input_ids")->numel());
    const Tensor ve = *g.get(c + ".vision_embeds");
    ASSERT_GE(p->embd.numel(), ve.numel());
    const double d_vis = test::max_abs_diff(p->embd.ptr<float>(), ve.ptr<float>(), ve.numel()).max_abs;
    EXPECT_LE(d_vis, kTol);
    Session s(*lm->model, SessionOptions{.n_ctx = int(p->tokens.size()) + 8, .n_threads = 2});
    auto r = s.eval(*p, /*all_logits=*/true);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    const Tensor want = *g.get(c + ".logits");
    ASSERT_EQ(r->numel(), want.numel());
    const double d_log = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs;
    EXPECT_LE(d_log, kTol);
    std::printf("[ measure  ] qwen3vl gguf + mmproj %s: vision_embeds %.3g, logits %.3g\n", c.c_str(), d_vis, d_log);
  }
}

// Gemma 4's mmproj (vision gemma4v + audio gemma4a in one file): the vision tower's tensors are the
// checkpoint's (the patch embedder's conv kernel back to HF's linear layout: the same values), and the golden image
// case gives the golden prompt, vision embeddings and prefill logits. The file holds no soft-token budget (HF's
// default 280 applies); this checkpoint lowers it to 70, so its processor setting is given here.
TEST(LlamaCppGguf2026, Gemma4MmprojImage) {
  auto hf = open_checkpoint(test::model_dir("gemma4"));
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  auto gg = open_gguf_checkpoint(data("gemma4-BF16.gguf"), data("mmproj-gemma4-BF16.gguf"));
  ASSERT_TRUE(gg.is_ok()) << gg.status().message();
  size_t n = 0;
  for (const auto& [name, t] : hf->tensors) {
    if (name.rfind("model.vision_tower.", 0) != 0 && name.rfind("model.embed_vision.", 0) != 0) continue;
    auto it = gg->tensors.find(name);
    ASSERT_NE(it, gg->tensors.end()) << name;
    ASSERT_EQ(it->second.numel(), t.numel()) << name;  // clip bounds: HF's 0-d, the file's [1]
    EXPECT_EQ(values(it->second), values(t)) << name;
    ++n;
  }
  EXPECT_EQ(n, 85u);
  EXPECT_EQ(gg->config["model_type"], "gemma4");
  EXPECT_EQ(gg->config["image_token_id"].get<int64_t>(), 502);
  EXPECT_EQ(gg->config["boi_token_id"].get<int64_t>(), 500);
  EXPECT_EQ(gg->config["eoi_token_id"].get<int64_t>(), 504);

  auto lm = load_model(data("gemma4-BF16.gguf"), LoadOptions{.mmproj = data("mmproj-gemma4-BF16.gguf")});
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  ASSERT_NE(lm->model->vision(), nullptr);
  EXPECT_EQ(lm->preprocessor_config["max_soft_tokens"].get<int64_t>(), 280);
  lm->preprocessor_config["max_soft_tokens"] = 70;  // the checkpoint's processor
  std::ifstream in(test::model_dir("gemma4") + "/prompts.json");
  const auto ids = nlohmann::json::parse(in)["image"]["input_ids_unexpanded"].get<std::vector<int32_t>>();
  auto g = golden("gemma4");
  ThreadPool pool(2);
  auto p = prepare_multimodal_prompt(*lm, ids, {test::model_dir("gemma4") + "/img_200x150.png"}, {}, pool);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->tokens, ids_of(*g.get("image.input_ids")));
  const Tensor ve = *g.get("image.vision_embeds");
  ASSERT_EQ(p->embd.numel(), ve.numel());
  const double d_vis = test::max_abs_diff(p->embd.ptr<float>(), ve.ptr<float>(), ve.numel()).max_abs;
  EXPECT_LE(d_vis, kTol);
  Session s(*lm->model, SessionOptions{.n_ctx = int(p->tokens.size()) + 8, .n_threads = 2, .kv_dtype = DType::F32});
  auto r = s.eval(*p, /*all_logits=*/true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const Tensor want = *g.get("image.logits");
  ASSERT_EQ(r->numel(), want.numel());
  const double d_log = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs;
  EXPECT_LE(d_log, kTol);
  std::printf("[ measure  ] gemma4 gguf + mmproj image: %zu tower tensors equal, vision_embeds %.3g, logits %.3g\n",
              n, d_vis, d_log);
}

// The same mmproj's audio tower (gemma4a): its tensors are the checkpoint's (per_dim_scale back from softplus:
// softplus of it within 4e-7 relative, the rest the same values), and the golden audio case (its waveform, Hub feature-extractor defaults
// as the checkpoint's) gives the golden prompt, audio embeddings and prefill logits.
TEST(LlamaCppGguf2026, Gemma4MmprojAudio) {
  auto hf = open_checkpoint(test::model_dir("gemma4"));
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  auto gg = open_gguf_checkpoint(data("gemma4-BF16.gguf"), data("mmproj-gemma4-BF16.gguf"));
  ASSERT_TRUE(gg.is_ok()) << gg.status().message();
  size_t n = 0, exact = 0;
  for (const auto& [name, t] : hf->tensors) {
    if (name.rfind("model.audio_tower.", 0) != 0 && name.rfind("model.embed_audio.", 0) != 0) continue;
    auto it = gg->tensors.find(name);
    ASSERT_NE(it, gg->tensors.end()) << name;
    ASSERT_EQ(it->second.numel(), t.numel()) << name;
    const auto a = values(t), b = values(it->second);
    // per_dim_scale: compared as the tower uses it, softplus(x) (the file's value, f32, taken back through log and
    // expm1 and rounded to f32 again: a few ulp; x itself near 0 loses relative precision through the round trip)
    const bool pds = name.ends_with("per_dim_scale");
    auto used = [&](double x) { return pds ? std::log1p(std::exp(x)) : x; };
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, std::fabs(used(a[i]) - used(b[i])) / std::max(1e-30, std::fabs(used(a[i]))));
    EXPECT_LE(worst, pds ? 4e-7 : 0.0) << name;
    ++n, exact += worst == 0;
  }
  EXPECT_GT(n, 100u);
  EXPECT_EQ(gg->config["audio_token_id"].get<int64_t>(), 503);
  EXPECT_EQ(gg->config["audio_config"]["subsampling_conv_channels"], (nlohmann::json{128, 8}));

  auto lm = load_model(data("gemma4-BF16.gguf"), LoadOptions{.mmproj = data("mmproj-gemma4-BF16.gguf")});
  ASSERT_TRUE(lm.is_ok()) << lm.status().message();
  auto g = golden("gemma4");
  const Tensor wave = *g.get("audio.audio.waveform");
  std::ifstream in(test::model_dir("gemma4") + "/prompts.json");
  MultimodalPrompt p =
      text_prompt(nlohmann::json::parse(in)["audio"]["input_ids_unexpanded"].get<std::vector<int32_t>>());
  ThreadPool pool(2);
  AudioSource src{"", {}, "", std::vector<float>(wave.ptr<float>(), wave.ptr<float>() + wave.numel()), "golden"};
  auto st = add_audio(*lm, p, {src}, pool);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(p.tokens, ids_of(*g.get("audio.input_ids")));
  auto enc = audio_encoder_of(*lm);
  ASSERT_TRUE(enc.is_ok()) << enc.status().message();
  auto emb = encode_audio(**enc, src.pcm, pool, nullptr);
  ASSERT_TRUE(emb.is_ok()) << emb.status().message();
  const Tensor ae = *g.get("audio.audio_embeds");
  ASSERT_EQ(emb->numel(), ae.numel());
  const double d_aud = test::max_abs_diff(emb->ptr<float>(), ae.ptr<float>(), ae.numel()).max_abs;
  EXPECT_LE(d_aud, kTol);
  Session s(*lm->model, SessionOptions{.n_ctx = int(p.tokens.size()) + 8, .n_threads = 2, .kv_dtype = DType::F32});
  auto r = s.eval(p, /*all_logits=*/true);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const Tensor want = *g.get("audio.logits");
  ASSERT_EQ(r->numel(), want.numel());
  const double d_log = test::max_abs_diff(r->ptr<float>(), want.ptr<float>(), want.numel()).max_abs;
  EXPECT_LE(d_log, kTol);
  std::printf("[ measure  ] gemma4 gguf + mmproj audio: %zu tower tensors (%zu bit-identical), audio_embeds %.3g, "
              "logits %.3g\n", n, exact, d_aud, d_log);
}

TEST(LlamaCppGguf2026, Gemma4Qwen3VLBadFilesGiveOneClearError) {
  test::ScratchDir d("gguf2026_g4");
  expect_error(load_model(renamed(d, "gemma4-BF16.gguf", "blk.3.inp_gate.weight", "blk.3.inp_gatx.weight")).status(),
               "missing tensor 'blk.3.inp_gate.weight'");
  expect_error(load_model(data("qwen3_vl-BF16.gguf"),
                          LoadOptions{.mmproj = renamed(d, "mmproj-qwen3_vl-BF16.gguf", "v.deepstack.2.fc1.weight",
                                                        "v.deepstack.2.fc1.weighx")})
                   .status(), "missing tensor 'v.deepstack.2.fc1.weight'");
  expect_error(load_model(data("gemma4-BF16.gguf"),
                          LoadOptions{.mmproj = renamed(d, "mmproj-gemma4-BF16.gguf", "v.blk.1.ffn_gate.input_max",
                                                        "v.blk.1.ffn_gate.input_maz")})
                   .status(), "missing tensor 'v.blk.1.ffn_gate.input_max'");
  // each tower with the other's language model
  expect_error(load_model(data("qwen3_vl-BF16.gguf"), LoadOptions{.mmproj = data("mmproj-gemma4-BF16.gguf")}).status(),
               "needs a gemma4 (Gemma 4) language model");
  expect_error(load_model(data("gemma4-BF16.gguf"),
                          LoadOptions{.mmproj = renamed(d, "mmproj-gemma4-BF16.gguf", "a.blk.1.attn_k_rel.weight",
                                                        "a.blk.1.attn_k_rex.weight")})
                   .status(), "missing tensor 'a.blk.1.attn_k_rel.weight'");
  expect_error(load_model(data("gemma4-BF16.gguf"), LoadOptions{.mmproj = data("mmproj-qwen3_vl-BF16.gguf")}).status(),
               "needs a qwen35 (Qwen3.5) or qwen3vl (Qwen3-VL) language model");
  const std::string whole = test::read_bytes(data("gemma4-Q8_0.gguf"));
  test::write_bytes(d.path("cut.gguf"), whole.substr(0, whole.size() / 3));
  EXPECT_FALSE(load_model(d.path("cut.gguf")).is_ok());
}

}  // namespace
}  // namespace pipit
