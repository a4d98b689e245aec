// A model's own prompt format, for checkpoints whose tokenizer carries no chat template because the model's remote
// code renders prompts in Python (DeepSeek-OCR's infer()). The model file registers the format as a Jinja template
// for its model_type; the loader installs it only when the checkpoint's tokenizer has no template of its own.
#pragma once

#include <string>

namespace pipit {

void register_builtin_chat_template(const char* model_type, const char* jinja);
const char* builtin_chat_template(const std::string& model_type);  // null when the model_type registered none

struct ChatTemplateRegistrar {
  ChatTemplateRegistrar(const char* model_type, const char* jinja) { register_builtin_chat_template(model_type, jinja); }
};

}  // namespace pipit
