// open_checkpoint: recognise what a path holds and present it as HF names + HF config + tokenizer texts.
#include "convert/checkpoint.h"

#include <algorithm>
#include <dirent.h>

#include "convert/gguf_import.h"
#include "convert/torch_checkpoint.h"
#include "core/json_depth.h"
#include "core/optional_file.h"
#include "core/storage.h"
#include "core/utf8_check.h"
#include "format/gguf.h"
#include "format/pipit_format.h"
#include "format/safetensors.h"
#include "models/checkpoint_traits.h"

namespace pipit {

namespace {

// HF side files kept as text in the checkpoint: key -> file name.
const std::pair<const char*, const char*> kSideTexts[] = {
    {"tokenizer", "tokenizer.json"},
    {"tokenizer_config", "tokenizer_config.json"},
    {"preprocessor_config", "preprocessor_config.json"},
    {"processor_config", "processor_config.json"},
    {"chat_template", "chat_template.jinja"},
};

std::string dir_of(const std::string& path) {
  const size_t s = path.rfind('/');
  return s == std::string::npos ? "." : (s == 0 ? "/" : path.substr(0, s));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<nlohmann::json> read_json_object(const std::string& path) {
  PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  if (json_depth(text) > kMaxJsonDepth)
    return Error::format("[load] {}: JSON nested deeper than {} levels", path, kMaxJsonDepth);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error::format("[load] {}: not a JSON object", path);
  return j;
}

// Shard file names listed by an HF index (model.safetensors.index.json / pytorch_model.bin.index.json).
Result<std::vector<std::string>> index_shards(const std::string& index) {
  PIPIT_ASSIGN_OR_RETURN(auto j, read_json_object(index));
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    return Error::format("[load] {}: no weight_map object", index);
  std::vector<std::string> shards;
  for (auto& [k, v] : j["weight_map"].items()) {
    if (!v.is_string()) return Error::format("[load] {}: weight_map['{}'] is not a file name", index, k);
    const std::string s = v.get<std::string>();
    if (s.find('/') != std::string::npos || s.find("..") != std::string::npos)
      return Error::format("[load] {}: shard name '{}' must be a plain file name", index, s);
    if (std::find(shards.begin(), shards.end(), s) == shards.end()) shards.push_back(s);
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

Status add_tensors(Checkpoint& c, std::map<std::string, Tensor> t, const std::string& origin) {
  for (auto& [k, v] : t) {
    if (c.tensors.count(k)) return Error::format("[load] tensor '{}' appears twice (again in {})", k, origin);
    c.tensors[k] = std::move(v);
  }
  return Status::ok();
}

// Torch checkpoints in a directory: pytorch_model.bin, its shards, or a single *.pt / *.pth / *.bin.
Result<std::vector<std::string>> torch_files(const std::string& dir) {
  if (file_exists(dir + "/pytorch_model.bin.index.json")) return index_shards(dir + "/pytorch_model.bin.index.json");
  if (file_exists(dir + "/pytorch_model.bin")) return std::vector<std::string>{"pytorch_model.bin"};
  std::vector<std::string> found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (ends_with(n, ".pt") || ends_with(n, ".pth") || ends_with(n, ".bin")) found.push_back(n);
    }
    closedir(d);
  }
  std::sort(found.begin(), found.end());
  if (found.size() == 1) return found;
  if (found.empty()) return std::vector<std::string>{};
  return Error::format("[load] {}: several torch files ({} ...) and no pytorch_model.bin.index.json; pass one file",
                       dir, found[0]);
}

Result<Checkpoint> open_hf(const std::string& dir, const std::string& single_file) {
  Checkpoint c;
  c.path = single_file.empty() ? dir : single_file;
  const std::string cfg = dir + "/config.json";
  if (!file_exists(cfg))
    return Error::not_found("[load] {}: no config.json{} (is this a HF checkpoint?)", dir,
                            single_file.empty() ? "" : " next to " + single_file);
  PIPIT_ASSIGN_OR_RETURN(c.config, read_json_object(cfg));
  PIPIT_TRY(read_hf_side_files(dir, c));

  const bool st_single = !single_file.empty() && ends_with(single_file, ".safetensors");
  if (st_single || (single_file.empty() && (file_exists(dir + "/model.safetensors") ||
                                            file_exists(dir + "/model.safetensors.index.json")))) {
    c.format = "safetensors";
    if (st_single) {
      PIPIT_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(single_file));
      PIPIT_TRY(add_tensors(c, f.tensors(), single_file));
    } else {
      PIPIT_ASSIGN_OR_RETURN(auto set, SafetensorsSet::open_dir(dir));
      PIPIT_TRY(add_tensors(c, set.tensors(), dir));
    }
    PIPIT_TRY(apply_checkpoint_layout(c));  // a family's own tensor layout (models/checkpoint_traits.h)
    return c;
  }
  std::vector<std::string> files;
  if (!single_file.empty()) {
    files.push_back(single_file);
  } else {
    PIPIT_ASSIGN_OR_RETURN(auto names, torch_files(dir));
    for (auto& n : names) files.push_back(dir + "/" + n);
  }
  if (files.empty())
    return Error::not_found("[load] {}: no weights (model.safetensors, model.safetensors.index.json, "
                            "pytorch_model.bin or *.pt)",
                            dir);
  c.format = "pytorch";
  for (auto& fpath : files) {
    PIPIT_ASSIGN_OR_RETURN(auto t, read_torch_checkpoint(fpath, &c.notes));
    PIPIT_TRY(add_tensors(c, std::move(t), fpath));
  }
  PIPIT_TRY(apply_checkpoint_layout(c));  // a family's own tensor layout (models/checkpoint_traits.h)
  return c;
}

Result<Checkpoint> open_pipit(const std::string& path) {
  PIPIT_ASSIGN_OR_RETURN(PipitFile f, PipitFile::open(path));
  Checkpoint c;
  c.path = path;
  c.format = "pipit";
  c.config = f.config();
  if (f.header().contains("generation_config")) c.generation_config = f.header()["generation_config"];
  for (auto& [key, file] : kSideTexts) {
    auto t = f.text(key);
    if (!t) continue;
    if (std::string_view(key) == "tokenizer" && f.version() >= 2 && f.owner()) {  // a view of the mapping
      c.tokenizer_json_view = *t;
      c.text_mapping = f.owner();
    } else {  // small, or (version 1) in the header this PipitFile owns
      c.texts[key] = std::string(*t);
    }
  }
  if (auto b = f.blob("tokenizer_compiled"); b && f.owner() && !c.tokenizer_json_view.empty()) {
    c.tokenizer_compiled_view = *b;
    c.text_mapping = f.owner();
  }
  if (f.header().contains("quantization")) c.quantization = f.header()["quantization"];
  c.tensors = f.tensors();
  return c;
}

}  // namespace

Status read_hf_side_files(const std::string& dir, Checkpoint& c) {
  PIPIT_ASSIGN_OR_RETURN(bool has_generation_config, optional_file(dir + "/generation_config.json"));
  if (has_generation_config) {
    auto g = read_json_object(dir + "/generation_config.json");
    if (g.is_ok()) c.generation_config = *g;  // a broken generation_config.json is not worth failing for
  }
  for (auto& [key, file] : kSideTexts) {
    const std::string p = dir + "/" + file;
    PIPIT_ASSIGN_OR_RETURN(bool present, optional_file(p));
    if (!present) continue;
    PIPIT_ASSIGN_OR_RETURN(std::string text, read_file(p));
    // stored as a JSON string in a .pipit header, parsed as JSON or a template: it must be UTF-8
    if (const size_t bad = utf8_error_offset(text); bad != std::string::npos)
      return Error::format("[load] {}: not valid UTF-8 (byte {} of {})", p, bad, text.size());
    c.texts[key] = std::move(text);
  }
  return Status::ok();
}

void with_tokenizer_texts(Checkpoint& c) {
  if (!c.tokenizer_parts) return;
  TokenizerTexts t = tokenizer_parts_texts(std::move(*c.tokenizer_parts));
  c.tokenizer_parts.reset();
  c.texts["tokenizer"] = std::move(t.tokenizer_json);
  c.texts["tokenizer_config"] = std::move(t.tokenizer_config_json);
}

Result<Checkpoint> open_checkpoint(const std::string& path) {
  if (is_directory(path)) return open_hf(path, "");
  if (!file_exists(path)) return Error::not_found("[load] '{}': no such file or directory", path);
  if (is_pipit_file(path)) return open_pipit(path);
  if (is_gguf_file(path)) return open_gguf_checkpoint(path);
  if (ends_with(path, ".safetensors") || ends_with(path, ".bin") || ends_with(path, ".pt") || ends_with(path, ".pth"))
    return open_hf(dir_of(path), path);
  return Error::unsupported("[load] '{}': not a HF checkpoint directory, .pipit, .gguf, .safetensors or torch file",
                            path);
}

}  // namespace pipit
