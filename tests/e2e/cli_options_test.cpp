// The CLI's options as a new user meets them (issue 36, issue 35 item 13): sampling values refused by the server's
// rules, llama.cpp spellings (--ctx-size, -n -1, Q4_K_M), "did you mean", --version, the prompt from stdin, and
// `tokenize` / `template` on .pipit and .gguf files as on HF folders. Each runs the real binary on stories260k.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_run_util.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace pipit {
namespace {

using test::run_cli;
using test::RunResult;

std::string stories() { return test::model_dir("stories260k"); }

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

void expect_one_error_line(const RunResult& r, const std::string& needle) {
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(lines(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.out;
}

class CliOptions : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipit_cli_options_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// The server's ranges (validate() in runtime/sampler.h), named by the CLI's options; refused before the model loads.
TEST_F(CliOptions, SamplingValuesOutOfRange) {
  const std::pair<const char*, const char*> cases[] = {
      {"--temp -1", "--temp"},          {"--temp 2.5", "--temp"},
      {"--top-p 2", "--top-p"},         {"--top-p -0.1", "--top-p"},
      {"--min-p -1", "--min-p"},        {"--min-p 1.5", "--min-p"},
      {"--top-k -100", "--top-k"},      {"--repeat-penalty 0", "--repeat-penalty"},
      {"--presence-penalty 1e30", "--presence-penalty"},   {"--presence-penalty -1e30", "--presence-penalty"},
      {"--frequency-penalty 1e30", "--frequency-penalty"}, {"--frequency-penalty -3", "--frequency-penalty"},
      {"--presence-penalty 1e300", "--presence-penalty"},  // finite as a double, infinite as the float it becomes
  };
  for (auto [args, name] : cases) {
    SCOPED_TRACE(args);
    expect_one_error_line(run_cli("run -m " + stories() + " -p hi -n 1 " + args), name);
  }
  // the ends of each range are allowed
  auto ok = run_cli("run -m " + stories() + " -p hi -n 2 -t 1 --temp 2 --top-p 1 --min-p 0 --top-k -1 "
                    "--presence-penalty -2 --frequency-penalty 2 --repeat-penalty 10");
  EXPECT_EQ(ok.code, 0) << ok.out;
}

// `bench --bandwidth`: each tg test's fraction of the decode roofline, whose bytes a token are the weights plus the
// K/V its attention reads on average over the test: stories260k (5 layers x 4 kv heads x head_dim 8, f16: 640 bytes
// a position) at depth 8, 4 tokens: positions 9 .. 12 see 10.5 keys on average.
TEST_F(CliOptions, BenchRooflineCountsKvReads) {
  auto r = run_cli("bench -m " + stories() + " -p 0 -n 4 -d 8 -r 1 -t 1 --bandwidth --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')), nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_EQ(j["tests"].size(), 1u) << r.out;
  const auto& t = j["tests"][0];
  ASSERT_TRUE(t.contains("roofline")) << r.out;
  const auto& f = t["roofline"];
  EXPECT_DOUBLE_EQ(f["kv_bytes"].get<double>(), 640.0 * 10.5);
  EXPECT_DOUBLE_EQ(f["weight_bytes"].get<double>(), j["size_bytes"].get<double>());
  const double gbs = f["read_gb_s"].get<double>(), bytes = f["weight_bytes"].get<double>() + 640.0 * 10.5;
  ASSERT_GT(gbs, 0.0);
  EXPECT_NEAR(f["roofline_ts"].get<double>(), gbs * 1e9 / bytes, 1e-6 * f["roofline_ts"].get<double>());
  EXPECT_NEAR(f["fraction"].get<double>(), t["avg_ts"].get<double>() * bytes / (gbs * 1e9), 1e-9);
  // the table says it in words
  auto text = run_cli("bench -m " + stories() + " -p 0 -n 4 -r 1 -t 1 --bandwidth");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_TRUE(std::regex_search(text.out, std::regex(R"(tg4, 1 threads: [0-9.]+ t/s = [0-9.]+ of the roofline)")))
      << text.out;
}

TEST_F(CliOptions, BenchRefusesNothingToMeasure) {
  expect_one_error_line(run_cli("bench -m " + stories() + " -p 0 -n 0"), "nothing to measure");
  for (const char* t : {",", "1,", "2x", "0", "1,,2"}) {
    SCOPED_TRACE(t);
    expect_one_error_line(run_cli("bench -m " + stories() + " -p 8 -n 0 -r 1 -t '" + std::string(t) + "'"), "-t");
  }
}

TEST_F(CliOptions, DidYouMean) {
  expect_one_error_line(run_cli("run --temprature 0"), "did you mean '--temp'");
  expect_one_error_line(run_cli("run --temperature 0"), "did you mean '--temp'");
  expect_one_error_line(run_cli("run --n-predcit 4"), "did you mean '--n-predict'");
  expect_one_error_line(run_cli("rn -m x"), "did you mean 'run'");
  expect_one_error_line(run_cli("tokenise -m x"), "did you mean 'tokenize'");
  // nothing close: no guess
  auto r = run_cli("run --frobnicate");
  expect_one_error_line(r, "unknown option '--frobnicate'");
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << r.out;
  auto x = run_cli("run -x 1");  // one letter replaced is no typo of -m or -t
  expect_one_error_line(x, "unknown option '-x'");
  EXPECT_EQ(x.out.find("did you mean"), std::string::npos) << x.out;
  auto c = run_cli("zzzzzz");
  expect_one_error_line(c, "unknown command 'zzzzzz'");
  EXPECT_EQ(c.out.find("did you mean"), std::string::npos) << c.out;
}

// llama.cpp habits that mean something else here: -s 42 (their seed, our system message) and -ngl get a hint.
TEST_F(CliOptions, LlamaCppSeedAndGpuLayers) {
  expect_one_error_line(run_cli("run -m " + stories() + " -p hi -s 42"), "use --seed 42");
  expect_one_error_line(run_cli("chat -m " + stories() + " -s 7 < /dev/null"), "use --seed 7");
  expect_one_error_line(run_cli("run -m " + stories() + " -p hi -ngl 99"), "--device");
  // a system message that is text, or a number spelled --system: taken (no template here: ignored, exit 0)
  EXPECT_EQ(run_cli("run -m " + stories() + " -p hi -n 1 -s 'be brief'").code, 0);
  EXPECT_EQ(run_cli("run -m " + stories() + " -p hi -n 1 --system 42").code, 0);
}

// llama.cpp's spellings: --ctx-size for -c, -n -1 for "until the context is full".
TEST_F(CliOptions, CtxSizeAndUnlimitedTokens) {
  auto r = run_cli("run -m " + stories() + " -p \"Once upon a time\" --ctx-size 48 -n -1 --temp 0 --ignore-eos -t 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("the context is full (48 tokens)"), std::string::npos) << r.out;
  expect_one_error_line(run_cli("run -m " + stories() + " -p hi -n -2"), "-n -2");
}

TEST_F(CliOptions, QuantNamesAnyCase) {
  const std::string out = (dir_ / "s.pipit").string();
  auto r = run_cli("convert " + stories() + " -o " + out + " --quant Q8 --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  auto i = run_cli("inspect " + out);
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_NE(i.out.find("q8_0"), std::string::npos) << i.out;
}

TEST_F(CliOptions, Version) {
  auto r = run_cli("--version");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^pipit \d+\.\d+\.\d+\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\ncommit: ([0-9a-f]{7,}(-dirty)?|unknown)\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\ncompiler: (gcc|clang) \S+)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nkernels: (ref|avx2|avx512|neon|dotprod|i8mm)\S*\n)"))) << r.out;
}

// The prompt from stdin: -f - and a pipe without -p give the same text as -p.
TEST_F(CliOptions, PromptFromStdin) {
  const std::string args = " -m " + stories() + " -n 16 --temp 0 -t 1";
  auto with_p = run_cli("run" + args + " -p \"Once upon a time\"", false);
  ASSERT_EQ(with_p.code, 0) << with_p.out;
  auto dash = test::run_sh("printf 'Once upon a time' | " + test::pipit_binary() + " run" + args + " -f -", false);
  auto pipe = test::run_sh("printf 'Once upon a time' | " + test::pipit_binary() + " run" + args, false);
  // echo's newline is not part of the prompt (one trailing newline is dropped, as llama.cpp's -f does)
  auto echo = test::run_sh("echo 'Once upon a time' | " + test::pipit_binary() + " run" + args, false);
  EXPECT_EQ(dash.code, 0) << dash.out;
  EXPECT_EQ(pipe.code, 0) << pipe.out;
  EXPECT_EQ(dash.out, with_p.out);
  EXPECT_EQ(pipe.out, with_p.out);
  EXPECT_EQ(echo.out, with_p.out);
  // an empty pipe is no prompt
  expect_one_error_line(test::run_sh("printf '' | " + test::pipit_binary() + " run" + args), "no prompt");
}

// run --json: one object on stdout whose text is what the streamed run prints.
TEST_F(CliOptions, RunJson) {
  const std::string args = "run -m " + stories() + " -p \"Once upon a time\" -n 12 --temp 0 -t 1";
  auto streamed = run_cli(args + " --no-echo", false);
  auto r = run_cli(args + " --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_EQ(lines(r.out), 1u) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["text"].get<std::string>() + "\n", streamed.out);
  EXPECT_FALSE(j["text"].get<std::string>().empty());
  EXPECT_EQ(j["tokens"].size(), 12u) << r.out;
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["timings"]["prompt_tokens"], 5) << r.out;  // BOS + "Once upon a time"
  EXPECT_EQ(j["timings"]["generated_tokens"], 12);
  EXPECT_GT(j["timings"]["generation_tokens_per_s"].get<double>(), 0);
}

// inspect --json: one object; a folder and its q8 .pipit hold the same tensors, the .pipit in q8_0.
TEST_F(CliOptions, InspectJson) {
  const std::string q8 = (dir_ / "s.pipit").string();
  ASSERT_EQ(run_cli("convert " + stories() + " -o " + q8 + " --quant q8 --quiet").code, 0);
  auto parse = [](const RunResult& r) {
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(lines(r.out), 1u) << r.out.substr(0, 400);
    return nlohmann::json::parse(r.out, nullptr, false);
  };
  auto dir = parse(run_cli("inspect --json " + stories(), false));
  auto pip = parse(run_cli("inspect " + q8 + " --json", false));
  auto gguf = parse(run_cli("inspect --json " + std::string(PIPIT_SOURCE_DIR) +
                            "/tests/data/llamacpp_gguf/stories260k-Q4_0.gguf", false));
  ASSERT_TRUE(dir.is_object() && pip.is_object() && gguf.is_object());
  EXPECT_EQ(dir["format"], "safetensors");
  EXPECT_EQ(pip["format"], "pipit");
  EXPECT_EQ(gguf["format"], "gguf");
  for (auto* j : {&dir, &pip, &gguf}) EXPECT_EQ((*j)["model_type"], "llama");
  EXPECT_EQ(dir["n_params"], pip["n_params"]);
  EXPECT_EQ(dir["tensors"].size(), pip["tensors"].size());
  EXPECT_TRUE(pip["dtypes"].contains("q8_0")) << pip["dtypes"].dump();
  EXPECT_LT(pip["bytes"].get<uint64_t>(), dir["bytes"].get<uint64_t>());  // 8-bit weights from f32
  EXPECT_GT(dir["texts"]["tokenizer"].get<uint64_t>(), 0u);
}

// run -q: the answer alone, on stdout; nothing on stderr (no load / speed line).
TEST_F(CliOptions, RunQuiet) {
  const std::string args = "run -m " + stories() + " -p \"Once upon a time\" -n 12 --temp 0 -t 1";
  auto plain = run_cli(args, false);
  auto quiet = test::run_sh("PIPIT_PROGRESS=1 " + test::pipit_binary() + " " + args + " -q");
  EXPECT_EQ(quiet.code, 0) << quiet.out;
  EXPECT_EQ(quiet.out, plain.out);
  EXPECT_EQ(quiet.out.find("[pipit]"), std::string::npos) << quiet.out;
  EXPECT_NE(run_cli(args).out.find("[pipit] load"), std::string::npos);
}

// --chat-template FILE replaces the model's template (stories260k has none: raw without it) and
// --chat-template-kwargs gives it variables; bad values are one line.
TEST_F(CliOptions, ChatTemplateFileAndKwargs) {
  const std::string t = (dir_ / "t.jinja").string();
  std::ofstream(t) << "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}"
                      "{% if flag %} FLAG FLAG FLAG{% endif %}";
  auto prompt_tokens = [](const std::string& args) {
    auto r = run_cli("run -m " + stories() + " -p hi -n 1 -t 1 --json " + args, false);
    EXPECT_EQ(r.code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() ? j["timings"]["prompt_tokens"].get<int>() : -1;
  };
  const int raw = prompt_tokens(""), with_t = prompt_tokens("--chat-template " + t),
            with_kw = prompt_tokens("--chat-template " + t + " --chat-template-kwargs '{\"flag\": true}'");
  EXPECT_EQ(raw, 3);     // BOS + "hi"
  EXPECT_GT(with_t, raw);  // "[user]hi", no BOS (the template writes what it wants)
  EXPECT_GT(with_kw, with_t + 2);
  expect_one_error_line(run_cli("run -m " + stories() + " -p hi --chat-template-kwargs '[1]'"), "a JSON object");
  expect_one_error_line(run_cli("run -m " + stories() + " -p hi --chat-template /nonexistent.jinja"),
                        "--chat-template");
  auto chat = test::run_sh("echo hello | " + test::pipit_binary() + " chat -m " + stories() +
                           " -n 2 -t 1 --chat-template " + t);
  EXPECT_EQ(chat.code, 0) << chat.out;  // without --chat-template: 'this model has no chat template'
}

// -m org/name: the snapshot `hf download` leaves in the Hugging Face cache (HF_HOME here), as the path would.
TEST_F(CliOptions, ModelFromHfCache) {
  const fs::path repo = dir_ / "hf" / "hub" / "models--tiny--stories";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots");
  fs::copy(stories(), repo / "snapshots" / "abc123", fs::copy_options::recursive);
  std::ofstream(repo / "refs" / "main") << "abc123";
  const std::string env = "HF_HOME=" + (dir_ / "hf").string() + " HF_HUB_CACHE= ";
  const std::string args = " -p \"Once upon a time\" -n 8 --temp 0 -t 1";
  auto want = run_cli("run -m " + stories() + args, false);
  auto got = test::run_sh(env + test::pipit_binary() + " run -m tiny/stories" + args, false);
  EXPECT_EQ(got.code, 0) << got.out;
  EXPECT_EQ(got.out, want.out);
  EXPECT_EQ(test::run_sh(env + test::pipit_binary() + " tokenize -m tiny/stories -p hi").code, 0);
  auto missing = test::run_sh(env + test::pipit_binary() + " run -m tiny/nothing -p hi");
  expect_one_error_line(missing, "not in the Hugging Face cache");
  EXPECT_NE(missing.out.find("hf download tiny/nothing"), std::string::npos) << missing.out;
}

// README: "every -m takes an HF folder, a .pipit or a .gguf": tokenize and template too, with the folder's answers.
TEST_F(CliOptions, TokenizeAndTemplateOnPipitAndGguf) {
  fs::path folder = dir_ / "stories";
  fs::copy(stories(), folder, fs::copy_options::recursive);
  std::ofstream(folder / "tokenizer_config.json")
      << R"({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true,)"
      << R"( "chat_template": "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"})";
  const std::string pipit_file = (dir_ / "stories.pipit").string();
  auto c = run_cli("convert " + folder.string() + " -o " + pipit_file + " --quiet");
  ASSERT_EQ(c.code, 0) << c.out;
  const std::string gguf = std::string(PIPIT_SOURCE_DIR) + "/tests/data/llamacpp_gguf/stories260k-Q4_0.gguf";

  auto want = run_cli("tokenize -m " + folder.string() + " -p \"Once upon a time, Lily\"");
  ASSERT_EQ(want.code, 0) << want.out;
  for (const std::string& m : {pipit_file, gguf}) {
    SCOPED_TRACE(m);
    auto got = run_cli("tokenize -m " + m + " -p \"Once upon a time, Lily\"");
    EXPECT_EQ(got.code, 0) << got.out;
    EXPECT_EQ(got.out, want.out);
  }
  const std::string msgs = " --messages '[{\"role\": \"user\", \"content\": \"hi\"}]'";
  auto t_want = run_cli("template -m " + folder.string() + msgs);
  ASSERT_EQ(t_want.code, 0) << t_want.out;
  EXPECT_NE(t_want.out.find("<user>hi"), std::string::npos) << t_want.out;
  auto t_got = run_cli("template -m " + pipit_file + msgs);
  EXPECT_EQ(t_got.code, 0) << t_got.out;
  EXPECT_EQ(t_got.out, t_want.out);
  // a file without a tokenizer: one line
  expect_one_error_line(run_cli("tokenize -m " + (dir_ / "none.gguf").string() + " -p hi"), "none.gguf");
}

}  // namespace
}  // namespace pipit
