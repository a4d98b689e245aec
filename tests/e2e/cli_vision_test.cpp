// The image paths of the CLI on the tiny VLM checkpoints: `pipit vision` (with --stages) and `pipit logits --image`
// against the goldens (Qwen3-VL's DeepStack features too), and bad image input (text-only model, placeholder/image count mismatch, broken files) giving one clear
// error line and exit code 1, never a crash.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "tests/deepseek_ocr_goldens.h"
#include "tests/test_util.h"
#include "tests/unit/gguf_arch_writer.h"

namespace fs = std::filesystem;

namespace pipit {
namespace {

struct RunResult {
  int code;
  std::string out;  // stdout + stderr
};

RunResult run_cli(const std::string& args) {
  const std::string cmd = std::string(PIPIT_BINARY_DIR) + "/pipit " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out};
}

class CliVision : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipit_cli_vision_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string model(const std::string& arch) { return test::model_dir(arch); }
  static std::string image(const std::string& arch, const std::string& c) { return model(arch) + "/" + c + ".png"; }
  // A copy of a tiny VL checkpoint with the toy tokenizer of tests/data/vl_tokenizer (the Qwen2-VL special ids and a
  // Qwen chat template).
  fs::path with_toy_tokenizer(const std::string& arch) {
    const fs::path m = dir_ / arch;
    fs::copy(model(arch), m, fs::copy_options::recursive);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(std::string(PIPIT_SOURCE_DIR) + "/tests/data/vl_tokenizer/" + f, m / f);
    return m;
  }
  // The ids `pipit template` gives for one user turn of an image and "Describe this image." (empty on failure).
  nlohmann::json describe_image_prompt_ids(const fs::path& m) {
    const fs::path msgs = dir_ / "m.jsonl";
    std::ofstream(msgs) << R"({"messages": [{"role": "user", "content": [{"type": "image"}, )"
                        << R"({"type": "text", "text": "Describe this image."}]}], "add_generation_prompt": true})"
                        << "\n";
    auto t = run_cli("template -m " + m.string() + " --jsonl " + msgs.string());
    EXPECT_EQ(t.code, 0) << t.out;
    if (t.code != 0) return nlohmann::json::array();
    return nlohmann::json::parse(t.out.substr(0, t.out.find('\n')))["ids"];
  }
  static SafetensorsFile golden(const std::string& arch) {
    auto g = SafetensorsFile::open(model(arch) + "/golden.safetensors");
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    return std::move(g).value();
  }
  // input_ids for `pipit logits`: I32 [1, T]
  std::string write_ids(const std::string& name, const std::vector<int32_t>& ids) {
    std::vector<int32_t> copy = ids;
    Tensor t = Tensor::from_data(DType::I32, {1, int64_t(copy.size())}, copy.data(), nullptr);
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(write_safetensors(path, {{"input_ids", t}}).is_ok());
    return path;
  }
  static std::vector<int32_t> ids_of(const Tensor& t) { return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()}; }
  static double diff(const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.numel(), b.numel());
    if (a.numel() != b.numel()) return INFINITY;
    return test::max_abs_diff(a.ptr<float>(), b.ptr<float>(), a.numel()).max_abs;
  }
  void expect_error(const RunResult& r, const std::string& needle) {
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.out;
  }
  fs::path dir_;
};

TEST_F(CliVision, VisionCommandWritesWhatTheGoldensHold) {
  for (const std::string arch : {"qwen2_vl", "qwen2_5_vl", "llava"}) {
    SafetensorsFile g = golden(arch);
    const std::string out = (dir_ / (arch + ".safetensors")).string();
    auto r = run_cli("vision -t 2 -m " + model(arch) + " --image " + image(arch, "img_300x200") + " -o " + out);
    ASSERT_EQ(r.code, 0) << r.out;
    auto f = SafetensorsFile::open(out);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_EQ(f->get("pixel_values")->shape(), g.get("img_300x200.pixel_values")->shape()) << arch;
    EXPECT_LE(diff(*f->get("pixel_values"), *g.get("img_300x200.pixel_values")), 1e-4) << arch;
    EXPECT_EQ(f->get("vision_embeds")->shape(), g.get("img_300x200.vision_embeds")->shape()) << arch;
    EXPECT_LE(diff(*f->get("vision_embeds"), *g.get("img_300x200.vision_embeds")), 1e-3) << arch;
    if (arch != "llava") {
      EXPECT_EQ(ids_of(*f->get("image_grid_thw")), ids_of(*g.get("img_300x200.image_grid_thw")));
    }
  }
}

TEST_F(CliVision, LogitsWithImageFillsThePlaceholders) {
  for (const std::string arch : {"qwen2_vl", "qwen2_5_vl", "llava"}) {
    SafetensorsFile g = golden(arch);
    const std::string in = write_ids(arch + "_in.safetensors", ids_of(*g.get("img_100x75.input_ids_unexpanded")));
    const std::string out = (dir_ / (arch + "_out.safetensors")).string();
    auto r = run_cli("logits -t 2 --kv-type f32 -m " + model(arch) + " --input " + in + " --image " + image(arch, "img_100x75") +
                     " --output " + out);
    ASSERT_EQ(r.code, 0) << r.out;
    auto f = SafetensorsFile::open(out);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_EQ(ids_of(*f->get("input_ids")), ids_of(*g.get("img_100x75.input_ids"))) << arch;
    EXPECT_EQ(ids_of(*f->get("position_ids")), ids_of(*g.get("img_100x75.position_ids"))) << arch;
    EXPECT_EQ(f->get("position_ids")->shape(), g.get("img_100x75.position_ids")->shape()) << arch;
    EXPECT_LE(diff(*f->get("logits"), *g.get("img_100x75.logits")), 1e-3) << arch;
  }
}

TEST_F(CliVision, SeveralImagesInOnePrompt) {
  SafetensorsFile g = golden("qwen2_vl");
  std::vector<int32_t> ids = ids_of(*g.get("img_100x75.input_ids_unexpanded"));
  const auto at = std::find(ids.begin(), ids.end(), 1010) + 1;  // after <|vision_end|>: a second image
  ids.insert(at, {1009, 1012, 1010});
  const std::string in = write_ids("two.safetensors", ids), out = (dir_ / "two_out.safetensors").string();
  auto r = run_cli("logits -t 2 --kv-type f32 -m " + model("qwen2_vl") + " --input " + in + " --image " +
                   image("qwen2_vl", "img_100x75") + " --image " + image("qwen2_vl", "img_300x200") +
                   " --output " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto f = SafetensorsFile::open(out);
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->get("input_ids")->numel(), int64_t(ids.size()) - 2 + 12 + 54);
  // the same images in the other order are a different prompt
  auto r2 = run_cli("logits -t 2 --kv-type f32 -m " + model("qwen2_vl") + " --input " + in + " --image " +
                    image("qwen2_vl", "img_300x200") + " --image " + image("qwen2_vl", "img_100x75") +
                    " --output " + out);
  EXPECT_EQ(r2.code, 0) << r2.out;
}

// Qwen3-VL: `pipit vision --stages` on both case images writes every stage the goldens hold (rows of the two
// images one after the other), DeepStack features included; `pipit logits --image` gives the golden logits.
TEST_F(CliVision, Qwen3VLStagesDeepStackAndLogits) {
  SafetensorsFile g = golden("qwen3_vl");
  const std::vector<std::string> cases = {"img_150x90", "img_256x160"};
  const std::string out = (dir_ / "q3.safetensors").string();
  auto r = run_cli("vision -t 2 -m " + model("qwen3_vl") + " --image " + image("qwen3_vl", cases[0]) + " --image " +
                   image("qwen3_vl", cases[1]) + " --stages -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto f = SafetensorsFile::open(out);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  for (const std::string key : {"pixel_values", "vision.patch_embed", "vision.pos_embed", "vision.block.0",
                                "vision.block.2", "vision_embeds", "deepstack_embeds.0", "deepstack_embeds.1"}) {
    auto got = f->get(key);
    ASSERT_TRUE(got.is_ok()) << "no " << key;
    std::vector<float> want;
    for (const auto& c : cases) {
      Tensor t = *g.get(c + "." + key);
      want.insert(want.end(), t.ptr<float>(), t.ptr<float>() + t.numel());
    }
    ASSERT_EQ(got->numel(), int64_t(want.size())) << key;
    EXPECT_LE(test::max_abs_diff(got->ptr<float>(), want.data(), got->numel()).max_abs,
              key == "pixel_values" ? 1e-4 : 1e-3) << key;
  }
  EXPECT_EQ(ids_of(*f->get("image_grid_thw")), (std::vector<int32_t>{1, 6, 10, 1, 10, 16}));

  const std::string in = write_ids("q3_in.safetensors", ids_of(*g.get("img_256x160.input_ids_unexpanded")));
  const std::string lo = (dir_ / "q3_logits.safetensors").string();
  auto l = run_cli("logits -t 2 --kv-type f32 -m " + model("qwen3_vl") + " --input " + in + " --image " +
                   image("qwen3_vl", "img_256x160") + " --output " + lo);
  ASSERT_EQ(l.code, 0) << l.out;
  auto lf = SafetensorsFile::open(lo);
  ASSERT_TRUE(lf.is_ok());
  EXPECT_EQ(ids_of(*lf->get("position_ids")), ids_of(*g.get("img_256x160.position_ids")));
  EXPECT_LE(diff(*lf->get("logits"), *g.get("img_256x160.logits")), 1e-3);
}

TEST_F(CliVision, BadImageInputGivesClearErrors) {
  SafetensorsFile g = golden("qwen2_vl");
  const std::string img = image("qwen2_vl", "img_100x75");
  const std::string in = write_ids("one.safetensors", ids_of(*g.get("img_100x75.input_ids_unexpanded")));
  std::vector<int32_t> two = ids_of(*g.get("img_100x75.input_ids_unexpanded"));
  two.insert(two.begin() + 1, 1012);
  const std::string in2 = write_ids("two_marks.safetensors", two);
  const std::string out = (dir_ / "o.safetensors").string();
  const std::string qwen = "logits -m " + model("qwen2_vl") + " --output " + out;

  // an image for a text-only model
  expect_error(run_cli("logits -m " + model("qwen2") + " --input " + in + " --image " + img + " --output " + out),
               "text-only");
  expect_error(run_cli("vision -m " + model("qwen2") + " --image " + img + " -o " + out), "text-only");
  // more image tokens than images, and images without image tokens
  expect_error(run_cli(qwen + " --input " + in2 + " --image " + img), "image tokens");
  expect_error(run_cli(qwen + " --input " + in), "image tokens");
  // broken files
  const fs::path trunc = dir_ / "cut.png", text = dir_ / "notes.png";
  {
    std::ifstream src(img, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
    std::ofstream(trunc, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    std::ofstream(text) << "hello\n";
  }
  expect_error(run_cli(qwen + " --input " + in + " --image " + trunc.string()), "cut.png");
  expect_error(run_cli(qwen + " --input " + in + " --image " + text.string()), "not a PNG or JPEG");
  expect_error(run_cli(qwen + " --input " + in + " --image " + (dir_ / "missing.png").string()), "no such file");
  expect_error(run_cli(qwen + " --input " + in + " --image " + img + " --image-max-pixels 10"), "image-max-pixels");
}

// `pipit run --image` on the tiny Qwen3-VL (same special ids as the tiny Qwen2-VL, so the same toy tokenizer and
// Qwen chat template): the template's placeholder becomes the 15 image tokens of img_150x90; two images, one
// placeholder each.
TEST_F(CliVision, Qwen3VLRunWithImages) {
  const fs::path m = with_toy_tokenizer("qwen3_vl");
  const nlohmann::json ids = describe_image_prompt_ids(m);
  ASSERT_FALSE(ids.empty());
  const std::string img = " --image " + image("qwen3_vl", "img_150x90");
  auto r = run_cli("run -t 2 -m " + m.string() + img + " -p 'Describe this image.' -n 4 --temp 0 --ignore-eos");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("prompt " + std::to_string(ids.size() + 14) + " tokens"), std::string::npos) << r.out;
  auto two = run_cli("run -t 2 -m " + m.string() + img + " --image " + image("qwen3_vl", "img_256x160") +
                     " -p hi -n 2 --temp 0");
  EXPECT_EQ(two.code, 0) << two.out;
}

// `pipit run --image` on the tiny Qwen2-VL with the toy tokenizer of tests/data/vl_tokenizer: the chat template
// places <|vision_start|><|image_pad|><|vision_end|>, which becomes 12 image tokens for img_100x75.
TEST_F(CliVision, RunWithImageThroughTheChatTemplate) {
  const fs::path m = with_toy_tokenizer("qwen2_vl");
  const nlohmann::json ids = describe_image_prompt_ids(m);
  ASSERT_FALSE(ids.empty());
  ASSERT_NE(std::find(ids.begin(), ids.end(), 1012), ids.end()) << ids.dump();
  const std::string img = " --image " + image("qwen2_vl", "img_100x75");
  auto r = run_cli("run -t 2 -m " + m.string() + img + " -p 'Describe this image.' -n 4 --temp 0 --ignore-eos");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("prompt " + std::to_string(ids.size() + 11) + " tokens"), std::string::npos) << r.out;
  // raw mode: no placeholder in the prompt, so one goes first: 8 bytes + 3 marks + 11 more image tokens
  auto raw = run_cli("run -t 2 -m " + m.string() + img + " --no-template -p Describe -n 2 --temp 0");
  ASSERT_EQ(raw.code, 0) << raw.out;
  EXPECT_NE(raw.out.find("prompt 22 tokens"), std::string::npos) << raw.out;
  // two images, one placeholder each
  auto two = run_cli("run -t 2 -m " + m.string() + img + img + " -p hi -n 1 --temp 0");
  EXPECT_EQ(two.code, 0) << two.out;
}

// llama.cpp's split of a Qwen2-VL into a language-model GGUF and an mmproj file: `pipit run -m text.gguf --mmproj
// mmproj.gguf --image` gives what the HF checkpoint gives (same prompt tokens, same greedy text).
TEST_F(CliVision, GgufWithMmprojRunsLikeTheCheckpoint) {
  const fs::path m = with_toy_tokenizer("qwen2_vl");
  const std::string text = (dir_ / "text.gguf").string(), mm = (dir_ / "mmproj.gguf").string();
  test::hf_to_gguf_arch(m.string(), text, m.string());
  test::hf_to_mmproj(m.string(), mm);
  const std::string args = " --image " + image("qwen2_vl", "img_100x75") +
                           " -p 'Describe this image.' -n 6 --temp 0 --ignore-eos";
  auto want = run_cli("run -t 2 -m " + m.string() + args);
  auto got = run_cli("run -t 2 -m " + text + " --mmproj " + mm + args);
  ASSERT_EQ(want.code, 0) << want.out;
  ASSERT_EQ(got.code, 0) << got.out;
  // the generated text (before the stats line) and the prompt's token count agree; times differ
  auto text_of = [](const std::string& s) { return s.substr(0, s.find("[pipit] load ")); };
  auto prompt_of = [](const std::string& s) {
    const size_t p = s.find("| prompt ");
    return p == std::string::npos ? std::string() : s.substr(p, s.find(" tokens", p) - p);
  };
  EXPECT_EQ(text_of(got.out), text_of(want.out));
  EXPECT_EQ(prompt_of(got.out), prompt_of(want.out));
  EXPECT_FALSE(prompt_of(got.out).empty()) << got.out;
  // without --mmproj the same GGUF is a text model: an image is refused by name
  auto text_only = run_cli("run -t 2 -m " + text + args);
  EXPECT_EQ(text_only.code, 1) << text_only.out;
}

// llama.cpp's own Qwen3.5 GGUF + mmproj (tests/data/llamacpp_gguf, made by its convert_hf_to_gguf.py from the
// qwen3_5_vl checkpoint with the byte-level tokenizer beside them): `pipit run --mmproj --image` gives what the HF
// checkpoint with that tokenizer gives (same prompt tokens, same greedy text).
TEST_F(CliVision, LlamaCppQwen35GgufWithMmprojRunsLikeTheCheckpoint) {
  const std::string data = std::string(PIPIT_SOURCE_DIR) + "/tests/data/llamacpp_gguf/";
  const fs::path m = dir_ / "qwen3_5_vl";
  fs::copy(model("qwen3_5_vl"), m, fs::copy_options::recursive);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(data + "qwen35_tokenizer/" + f, m / f);
  const std::string args = " --image " + image("qwen3_5_vl", "img_200x130") +
                           " -p 'Describe this image.' -n 8 --temp 0 --ignore-eos";
  auto want = run_cli("run -t 2 -m " + m.string() + args);
  auto got = run_cli("run -t 2 -m " + data + "qwen3_5_vl-BF16.gguf --mmproj " + data + "mmproj-qwen3_5_vl-BF16.gguf" +
                     args);
  ASSERT_EQ(want.code, 0) << want.out;
  ASSERT_EQ(got.code, 0) << got.out;
  auto text_of = [](const std::string& s) { return s.substr(0, s.find("[pipit] load ")); };
  auto prompt_of = [](const std::string& s) {
    const size_t p = s.find("| prompt ");
    return p == std::string::npos ? std::string() : s.substr(p, s.find(" tokens", p) - p);
  };
  EXPECT_EQ(text_of(got.out), text_of(want.out));
  EXPECT_EQ(prompt_of(got.out), prompt_of(want.out));
  EXPECT_FALSE(prompt_of(got.out).empty()) << got.out;
}

// Qwen3-VL the same way (issue 32 item 5): llama.cpp's qwen3vl text GGUF + its mmproj with the DeepStack mergers
// (make_gemma4_qwen3vl_gguf.py) against the HF folder with the tokenizer the GGUF holds.
TEST_F(CliVision, LlamaCppQwen3VLGgufWithMmprojRunsLikeTheCheckpoint) {
  const std::string data = std::string(PIPIT_SOURCE_DIR) + "/tests/data/llamacpp_gguf/";
  const fs::path m = dir_ / "qwen3_vl";
  fs::copy(model("qwen3_vl"), m, fs::copy_options::recursive);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(data + "qwen3vl_tokenizer/" + f, m / f);
  const std::string args = " --image " + image("qwen3_vl", "img_256x160") +
                           " -p 'Describe this image.' -n 8 --temp 0 --ignore-eos";
  auto want = run_cli("run -t 2 -m " + m.string() + args);
  auto got = run_cli("run -t 2 -m " + data + "qwen3_vl-BF16.gguf --mmproj " + data + "mmproj-qwen3_vl-BF16.gguf" +
                     args);
  ASSERT_EQ(want.code, 0) << want.out;
  ASSERT_EQ(got.code, 0) << got.out;
  auto text_of = [](const std::string& s) { return s.substr(0, s.find("[pipit] load ")); };
  auto prompt_of = [](const std::string& s) {
    const size_t p = s.find("| prompt ");
    return p == std::string::npos ? std::string() : s.substr(p, s.find(" tokens", p) - p);
  };
  EXPECT_EQ(text_of(got.out), text_of(want.out));
  EXPECT_EQ(prompt_of(got.out), prompt_of(want.out));
  EXPECT_FALSE(prompt_of(got.out).empty()) << got.out;
  EXPECT_FALSE(text_of(got.out).empty()) << got.out;
}

TEST_F(CliVision, ImageMaxPixelsMeansFewerTokens) {
  const std::string out = (dir_ / "small.safetensors").string();
  auto r = run_cli("vision -m " + model("qwen2_vl") + " --image " + image("qwen2_vl", "img_300x200") +
                   " --image-max-pixels 20000 -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto f = SafetensorsFile::open(out);
  ASSERT_TRUE(f.is_ok());
  const Tensor grid = *f->get("image_grid_thw");
  EXPECT_LE(int64_t(grid.ptr<int32_t>()[1]) * grid.ptr<int32_t>()[2] * 14 * 14, 20000);
}

// `pipit bench --image`: the image test counts the tokens the tower returns (as `pipit vision` writes them), and the
// multimodal prefill covers the image's tokens, its markers and the N text tokens; a text-only model is refused.
TEST_F(CliVision, BenchWithImage) {
  for (const std::string arch : {"qwen2_vl", "qwen3_vl", "llava"}) {
    const std::string out = (dir_ / (arch + ".safetensors")).string();
    const std::string img = image(arch, arch == "qwen3_vl" ? "img_150x90" : "img_100x75");
    auto v = run_cli("vision -m " + model(arch) + " --image " + img + " -o " + out);
    ASSERT_EQ(v.code, 0) << v.out;
    auto f = SafetensorsFile::open(out);
    ASSERT_TRUE(f.is_ok());
    const int64_t n_image = f->get("vision_embeds")->dim(-2);
    auto r = run_cli("bench -m " + model(arch) + " --image " + img + " -p 8 -n 2 -r 1 -t 1 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    std::map<std::string, nlohmann::json> tests;
    for (const auto& t : j["tests"]) tests[t["test"]] = t;
    ASSERT_TRUE(tests.count("image") && tests.count("pp8+img") && tests.count("pp8") && tests.count("tg2")) << r.out;
    EXPECT_EQ(tests["image"]["n_tokens"], n_image);
    const int64_t markers = arch == "llava" ? 1 : 3;  // <image> / <|vision_start|><|image_pad|><|vision_end|>
    EXPECT_EQ(tests["pp8+img"]["n_tokens"].get<int64_t>(), n_image - 1 + markers + 8);
    EXPECT_GT(tests["pp8+img"]["avg_ts"].get<double>(), 0.0);
  }
  auto text = run_cli("bench -m " + model("qwen3") + " --image " + image("qwen2_vl", "img_100x75") + " -p 8 -n 2");
  EXPECT_EQ(text.code, 1) << text.out;
  EXPECT_NE(text.out.find("text-only"), std::string::npos) << text.out;
}

// DeepSeek-OCR through the CLI, against the reference's goldens (tests/deepseek_ocr_goldens.h): `pipit vision
// --image-mode gundam --stages` writes the global view, the tiles, the stages and the image rows; `pipit logits
// --image` (default mode: gundam) the logits; `pipit bench --image --image-mode base` counts Base's 273 tokens; an
// unknown mode is one error.
TEST_F(CliVision, DeepseekOcr) {
  const std::string d = test::deepseek_ocr_goldens();
  ASSERT_FALSE(d.empty()) << "the DeepSeek-OCR goldens could not be made (see stderr)";
  auto g = SafetensorsFile::open(d + "/golden_gundam.safetensors");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const std::string m = d + "/model", img = d + "/img_gundam_1000x700.png";
  const std::string out = (dir_ / "dsocr.safetensors").string();
  auto r = run_cli("vision -t 2 -m " + m + " --image " + img + " --image-mode gundam --stages -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto f = SafetensorsFile::open(out);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  for (const std::string key : {"pixel_values", "pixel_values_crops", "vision.sam.embed", "vision.sam.block.1",
                                "vision.sam.out", "vision.clip.block.1", "vision_embeds"}) {
    ASSERT_TRUE(f->has(key)) << key;
    EXPECT_LE(diff(*f->get(key), *g->get(key)), key.rfind("pixel", 0) == 0 ? 1e-4 : 1e-3) << key;
  }
  const std::string lg = (dir_ / "dsocr_logits.safetensors").string();
  auto l = run_cli("logits -t 2 --kv-type f32 -m " + m + " --image " + img + " --input " + d + "/golden_gundam.safetensors" +
                   " --output " + lg);
  ASSERT_EQ(l.code, 0) << l.out;
  auto lf = SafetensorsFile::open(lg);
  ASSERT_TRUE(lf.is_ok());
  EXPECT_LE(diff(*lf->get("logits"), *g->get("logits")), 1e-3);
  auto b = run_cli("bench -m " + m + " --image " + d + "/img_base_700x500.png --image-mode base -p 8 -n 2 -r 1 -t 1 "
                   "--json");
  ASSERT_EQ(b.code, 0) << b.out;
  const auto j = nlohmann::json::parse(b.out.substr(b.out.find('{')));
  std::map<std::string, nlohmann::json> tests;
  for (const auto& t : j["tests"]) tests[t["test"]] = t;
  ASSERT_TRUE(tests.count("image") && tests.count("pp8+img")) << b.out;
  EXPECT_EQ(tests["image"]["n_tokens"], 16 * 17 + 1);
  EXPECT_EQ(tests["pp8+img"]["n_tokens"].get<int64_t>(), 16 * 17 + 1 + 8);
  expect_error(run_cli("vision -m " + m + " --image " + img + " --image-mode huge -o " + out),
               "unknown DeepSeek-OCR mode 'huge'");
  // `pipit run --image`: the remote code's plain format, BOS + the image + "\nFree OCR." (10 bytes with the toy
  // tokenizer the reference writes) = 1 + 273 + 10 tokens in Base mode, whether the model's built-in plain template
  // renders "Free OCR." with the image, or the raw prompt gets its placeholder after BOS by itself (no template), or
  // it is written as <image>; all continue the same way
  const std::string text = (dir_ / "text.txt").string(), plain = (dir_ / "plain.txt").string(),
                    marked = (dir_ / "marked.txt").string();
  std::ofstream(text) << "Free OCR.";
  std::ofstream(plain) << "\nFree OCR.";
  std::ofstream(marked) << "<image>\nFree OCR.";
  std::string first;
  for (const std::string& f : {text, plain, marked}) {
    auto r = run_cli("run -t 2 -m " + m + " --image " + d + "/img_base_700x500.png --image-mode base -f " + f +
                     " -n 8 --temp 0 --ignore-eos --no-echo" + (f == text ? "" : " --no-template"));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("prompt 284 tokens"), std::string::npos) << r.out;
    const std::string text = r.out.substr(0, r.out.find('\n'));
    if (first.empty()) first = text;
    EXPECT_EQ(text, first);  // the same continuation both ways
  }
  // and it is the golden's greedy ids, decoded as the toy tokenizer does (bytes at 2..257, <unused_N> elsewhere)
  auto gb = SafetensorsFile::open(d + "/golden_base.safetensors");
  ASSERT_TRUE(gb.is_ok());
  std::string want;
  bool ascii = true;
  for (int32_t id : ids_of(*gb->get("greedy_ids"))) {
    if (id >= 2 && id <= 257) {
      ascii = ascii && id - 2 >= 0x20 && id - 2 < 0x7f;
      want += char(id - 2);
    } else {
      want += "<unused_" + std::to_string(id) + ">";
    }
  }
  if (ascii) {
    EXPECT_EQ(first, want);
  }
}

// DeepSeek-OCR's document prompt "<image>\n<|grounding|>Convert the document to markdown." as infer() builds it: the
// plain format splits at <image>, encodes the pieces without BOS (<|grounding|> is one special token) and puts BOS
// first. The reference's golden_grounding holds those ids (Base mode, 1 + 273 + 35 = 309), the last logits row and
// 8 greedy ids; pipit's tokenizer gives the same text ids, `pipit logits --image` the same row, `pipit run --image`
// the same count and continuation.
TEST_F(CliVision, DeepseekOcrGroundingPrompt) {
  const std::string d = test::deepseek_ocr_goldens();
  ASSERT_FALSE(d.empty()) << "the DeepSeek-OCR goldens could not be made (see stderr)";
  auto g = SafetensorsFile::open(d + "/golden_grounding.safetensors");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const std::string m = d + "/model", img = d + "/img_base_700x500.png";
  const std::vector<int32_t> want_ids = ids_of(*g->get("input_ids"));
  ASSERT_EQ(want_ids.size(), 309u);
  // the text after the image, through the checkpoint's tokenizer: BOS + <image> + the rest, with <|grounding|> one id
  const std::string jl = (dir_ / "grounding.jsonl").string();
  std::ofstream(jl) << R"({"text": "<image>\n<|grounding|>Convert the document to markdown."})" << "\n";
  auto t = run_cli("tokenize -m " + m + " --jsonl " + jl);
  ASSERT_EQ(t.code, 0) << t.out;
  const auto ids = nlohmann::json::parse(t.out.substr(0, t.out.find('\n')))["ids_special"].get<std::vector<int32_t>>();
  ASSERT_EQ(ids.size(), 1 + 1 + 35u) << t.out;  // BOS, <image>, "\n", <|grounding|>, 33 bytes
  EXPECT_EQ(ids[0], want_ids[0]);
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 2, ids.end()),
            std::vector<int32_t>(want_ids.end() - 35, want_ids.end()));
  // the golden ids through the model: the last row of the logits
  const std::string lg = (dir_ / "grounding_logits.safetensors").string();
  auto l = run_cli("logits -t 2 --kv-type f32 -m " + m + " --image " + img + " --image-mode base --input " + d +
                   "/golden_grounding.safetensors --output " + lg);
  ASSERT_EQ(l.code, 0) << l.out;
  auto lf = SafetensorsFile::open(lg);
  ASSERT_TRUE(lf.is_ok());
  const Tensor logits = *lf->get("logits");  // a copy: get() returns a temporary
  const Tensor want_last = *g->get("logits_last");
  ASSERT_EQ(logits.numel() % want_last.numel(), 0);
  EXPECT_LE(test::max_abs_diff(logits.ptr<float>() + logits.numel() - want_last.numel(), want_last.ptr<float>(),
                               want_last.numel()).max_abs, 1e-3);
  // and the prompt as text, raw or through the built-in plain template: same count, the golden's continuation
  std::string want;
  for (int32_t id : ids_of(*g->get("greedy_ids")))
    want += id >= 2 + 0x20 && id < 2 + 0x7f ? std::string(1, char(id - 2)) : "<unused_" + std::to_string(id) + ">";
  const std::string raw = (dir_ / "grounding.txt").string(), chat = (dir_ / "grounding_chat.txt").string();
  std::ofstream(raw) << "<image>\n<|grounding|>Convert the document to markdown.";
  std::ofstream(chat) << "<|grounding|>Convert the document to markdown.";
  for (const std::string& f : {raw, chat}) {
    auto r = run_cli("run -t 2 -m " + m + " --image " + img + " --image-mode base -f " + f +
                     " -n 8 --temp 0 --ignore-eos --no-echo" + (f == raw ? " --no-template" : ""));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("prompt 309 tokens"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')), want) << f;
  }
}

// `pipit chat --image` on DeepSeek-OCR: its tokenizer has no chat template, so the model's built-in plain format
// (models/deepseek_ocr.cpp) renders the turn "Free OCR." with the image as BOS + "<image>\nFree OCR.", the prompt of
// golden_base: 284 tokens and the golden's 8 greedy ids. A second turn is appended without separators (the plain
// format) and reuses the first turn's prompt from the cache.
TEST_F(CliVision, DeepseekOcrChatUsesThePlainFormat) {
  const std::string d = test::deepseek_ocr_goldens();
  ASSERT_FALSE(d.empty()) << "the DeepSeek-OCR goldens could not be made (see stderr)";
  auto g = SafetensorsFile::open(d + "/golden_base.safetensors");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  const std::string in = (dir_ / "chat_in.txt").string();
  std::ofstream(in) << "Free OCR.\n<|grounding|>Convert the document to markdown.\n";
  auto r = run_cli("chat -t 2 -m " + d + "/model --image " + d + "/img_base_700x500.png --image-mode base --temp 0 "
                   "-n 8 --ignore-eos -v < " + in);
  ASSERT_EQ(r.code, 0) << r.out;
  std::string want;
  for (int32_t id : ids_of(*g->get("greedy_ids")))
    want += id >= 2 + 0x20 && id < 2 + 0x7f ? std::string(1, char(id - 2)) : "<unused_" + std::to_string(id) + ">";
  EXPECT_NE(r.out.find("> " + want + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[reused 0 cached tokens | prompt 284 tokens"), std::string::npos) << r.out;
  // the second turn starts with the first one (the format appends) and keeps its prompt; the answer, unused ids of
  // the toy vocabulary written as "<unused_N>" text, tokenizes otherwise when the conversation is rendered again,
  // so it is evaluated again (a real model's answer tokens come back as they were generated)
  EXPECT_NE(r.out.find("[reused 284 cached tokens"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace pipit
