// Helpers for model tests: a checkpoint directory with an edited config.json (weights linked from the original),
// and loading a model with an error message on failure.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

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

}  // namespace pipit::test
