// The C API over a test checkpoint the way its golden tests run it: a folder that links the checkpoint's files and
// holds a toy tokenizer, the model loaded, a session with the f32 KV cache the goldens were made for (2 threads),
// and greedy generate options.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <initializer_list>
#include <string>

#include "include/pipit/pipit.h"
#include "tests/test_util.h"

namespace pipit::test {

struct CapiGolden {
  std::filesystem::path dir;
  pipit_model* model = nullptr;
  pipit_session* session = nullptr;
  pipit_generate_options opt;

  // A fresh folder pipit_<tag>_<pid> with `files` of test model `model` linked into it (the caller adds the
  // tokenizer files, e.g. with copy_tokenizer).
  void make_dir(const std::string& tag, const std::string& model, std::initializer_list<const char*> files) {
    namespace fs = std::filesystem;
    dir = fs::temp_directory_path() / ("pipit_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const char* f : files) fs::create_symlink(model_dir(model) + "/" + f, dir / f);
  }
  // tokenizer.json and tokenizer_config.json from tests/data/<name>/.
  void copy_tokenizer(const std::string& name) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      std::filesystem::copy_file(std::string(PIPIT_SOURCE_DIR) + "/tests/data/" + name + "/" + f, dir / f);
  }
  // Loads the folder, opens the session, greedy options of max_tokens.
  void open(int32_t max_tokens) {
    ASSERT_EQ(pipit_model_load(dir.c_str(), nullptr, &model), PIPIT_OK) << pipit_last_error();
    pipit_session_options so;
    pipit_session_options_default(&so);
    so.n_threads = 2;
    so.kv_type = PIPIT_KV_F32;
    ASSERT_EQ(pipit_session_create(model, &so, &session), PIPIT_OK) << pipit_last_error();
    pipit_generate_options_default(&opt);
    opt.temperature = 0.0f;
    opt.max_tokens = max_tokens;
  }
  void close() {
    pipit_session_destroy(session);
    pipit_model_destroy(model);
    session = nullptr;
    model = nullptr;
    std::filesystem::remove_all(dir);
  }
};

}  // namespace pipit::test
