// A Qwen3.5 checkpoint with its MTP head and a tokenizer, for the front ends' tests of speculative decoding with the
// head (--mtp, pipit_session_options.mtp, EngineOptions::mtp): the tiny qwen3_5_vl golden checkpoint (random weights,
// mtp.* included, no tokenizer) with stories260k's tokenizer (the same 512-id vocabulary size) and a small chat
// template, linked into a scratch folder (no preprocessor config: text prompts only).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"

namespace pipit::test {

class MtpModelDir {
 public:
  // `model`: another 512-token test checkpoint instead (qwen3_5: the text model without mtp.*)
  explicit MtpModelDir(const std::string& model = "qwen3_5_vl") {
    namespace fs = std::filesystem;
    dir_ = (fs::temp_directory_path() / ("pipit_mtp_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(reinterpret_cast<uintptr_t>(this)))).string();
    fs::create_directories(dir_);
    const std::string q = model_dir(model), st = model_dir("stories260k");
    fs::create_symlink(q + "/config.json", dir_ + "/config.json");
    fs::create_symlink(q + "/model.safetensors", dir_ + "/model.safetensors");
    fs::create_symlink(st + "/tokenizer.json", dir_ + "/tokenizer.json");
    std::ofstream(dir_ + "/tokenizer_config.json") << R"({"bos_token": "<s>", "eos_token": "</s>", "chat_template":
      "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"})";
  }
  ~MtpModelDir() { std::filesystem::remove_all(dir_); }
  MtpModelDir(const MtpModelDir&) = delete;
  MtpModelDir& operator=(const MtpModelDir&) = delete;
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace pipit::test
