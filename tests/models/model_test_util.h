// Helpers for model tests: a checkpoint directory with an edited config.json (weights linked from the original),
// and loading a model with an error message on failure.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "format/safetensors.h"
#include "runtime/loader.h"
#include "tests/test_util.h"

namespace pipit::test {

// A temporary copy of testdata model `name` whose config.json went through `edit`; removed with the object.
class EditedCheckpoint {
 public:
  EditedCheckpoint(const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                   const std::string& config_path = "") {
    namespace fs = std::filesystem;
    static int counter = 0;
    const std::string src = model_dir(name);
    dir_ = (fs::temp_directory_path() / ("pipit_" + name + "_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter++))).string();
    fs::create_directories(dir_);
    std::ifstream in(config_path.empty() ? src + "/config.json" : config_path);
    nlohmann::json cfg = nlohmann::json::parse(in);
    edit(cfg);
    std::ofstream(dir_ + "/config.json") << cfg.dump(2);
    fs::create_symlink(src + "/model.safetensors", dir_ + "/model.safetensors");
  }
  ~EditedCheckpoint() { std::filesystem::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// Test checkpoint `model` and (with `golden`) its golden.safetensors, loaded once per suite (SetUpTestSuite: model
// loads dominate these tests) into the suite's static pointers; a failure fails the test. free_suite_model in
// TearDownTestSuite.
inline void load_suite_model(const std::string& model, LoadedModel** lm, SafetensorsFile** golden = nullptr) {
  auto m = load_model(model_dir(model));
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  *lm = new LoadedModel(std::move(m).value());
  if (!golden) return;
  auto g = SafetensorsFile::open(model_dir(model) + "/golden.safetensors");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  *golden = new SafetensorsFile(std::move(g).value());
}
inline void free_suite_model(LoadedModel** lm, SafetensorsFile** golden = nullptr) {
  delete *lm;
  *lm = nullptr;
  if (golden) {
    delete *golden;
    *golden = nullptr;
  }
}

// golden[name], failing the test (and returning an empty tensor) when the golden has no such tensor.
inline Tensor golden_tensor(const SafetensorsFile& golden, const std::string& name) {
  auto t = golden.get(name);
  EXPECT_TRUE(t.is_ok()) << "golden has no " << name << ": " << t.status().message();
  return t.is_ok() ? *t : Tensor();
}

}  // namespace pipit::test
