// Gemma 4 with an image through the real `pipit` binary, as a user runs it, on the tiny checkpoint of
// ../shared/testdata/models/gemma4 with the toy tokenizer of tests/data/gemma4_tokenizer (the checkpoint's crc32
// piece ids as added tokens, Gemma 4's special ids, a Gemma-4-style chat template):
//  - `pipit run --image img_200x150.png` on the golden image prompt (raw mode) gives the golden 32 greedy ids;
//  - through the chat template, the one <|image|> becomes <|image> + 63 soft tokens + <image|>;
//  - `pipit vision` writes the golden pixel_values and soft tokens;
//  - a broken or missing image is one clear error line and exit code 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "tests/e2e/cli_run_util.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace pipit {
namespace {

using test::run_cli;

class CliGemma4Vision : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipit_cli_g4v_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    model_ = dir_ / "gemma4";
    fs::copy(test::model_dir("gemma4"), model_, fs::copy_options::recursive);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(std::string(PIPIT_SOURCE_DIR) + "/tests/data/gemma4_tokenizer/" + f, model_ / f);
    auto g = SafetensorsFile::open(test::model_dir("gemma4") + "/golden.safetensors");
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    golden_ = std::make_unique<SafetensorsFile>(std::move(g).value());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<int32_t> ids(const std::string& key) {
    Tensor t = *golden_->get(key);
    return {t.ptr<int32_t>(), t.ptr<int32_t>() + t.numel()};
  }
  static std::string image() { return test::model_dir("gemma4") + "/img_200x150.png"; }
  void expect_error(const test::RunResult& r, const std::string& needle) {
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.out;
  }
  fs::path dir_, model_;
  std::unique_ptr<SafetensorsFile> golden_;
};

// prompts.json's image case, written as text (the toy tokenizer adds no BOS of its own: tests/data/
// make_gemma4_tokenizer.py): <bos><|turn>user\n<|image|>Describe this image.<turn|>\n<|turn>model\nSure, here
TEST_F(CliGemma4Vision, RunWithImageGivesTheGoldenGreedyIds) {
  const fs::path prompt = dir_ / "prompt.txt";
  std::ofstream(prompt) << "<bos><|turn>user\n<|image|>Describe this image.<turn|>\n<|turn>model\nSure, here";
  auto r = run_cli("run -t 2 -m " + model_.string() + " --image " + image() + " --no-template -f " +
                   prompt.string() + " -n 32 --temp 0 --ignore-eos --kv-type f32 --json", /*with_stderr=*/false);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), ids("image.greedy_ids")) << r.out;
  EXPECT_EQ(j["timings"]["prompt_tokens"].get<int64_t>(), 81) << r.out;  // golden input_ids: 17 - 1 + 65
}

TEST_F(CliGemma4Vision, ChatTemplatePlacesOneImage) {
  auto r = run_cli("run -t 2 -m " + model_.string() + " --image " + image() +
                   " -p 'Describe this image.' -n 2 --temp 0 --ignore-eos");
  ASSERT_EQ(r.code, 0) << r.out;
  // <bos><|turn>user\n<|image|>Describe this image.<turn|>\n<|turn>model\n: 14 ids, the placeholder -> 65
  EXPECT_NE(r.out.find("prompt 78 tokens"), std::string::npos) << r.out;
}

TEST_F(CliGemma4Vision, VisionCommandWritesTheGoldenStages) {
  const std::string out = (dir_ / "v.safetensors").string();
  auto r = run_cli("vision -t 2 -m " + model_.string() + " --image " + image() + " -o " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto f = SafetensorsFile::open(out);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  for (const char* key : {"pixel_values", "vision_embeds"}) {
    Tensor got = *f->get(key), want = *golden_->get(std::string("image.") + key);
    ASSERT_EQ(got.numel(), want.numel()) << key;
    EXPECT_LE(test::max_abs_diff(got.ptr<float>(), want.ptr<float>(), want.numel()).max_abs, 1e-5) << key;
  }
}

TEST_F(CliGemma4Vision, BrokenImagesAreClearErrors) {
  std::ifstream src(image(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  const fs::path cut = dir_ / "cut.png";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const std::string run = "run -m " + model_.string() + " -p hi -n 1 --image ";
  expect_error(run_cli(run + cut.string()), "cut.png");
  expect_error(run_cli(run + (dir_ / "missing.png").string()), "no such file");
}

}  // namespace
}  // namespace pipit
