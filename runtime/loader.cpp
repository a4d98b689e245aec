// Model loading from an HF directory (more sources plug in here).
#include "runtime/loader.h"

#include <algorithm>

#include "core/storage.h"
#include "format/safetensors.h"
#ifdef PIPIT_WITH_TOKENIZER
#include "tokenizer/tokenizer.h"
#endif

namespace pipit {

Result<Tensor> MapWeightSource::find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return Error::not_found("[load] missing tensor '{}'", name);
  return it->second;
}

namespace {

// generation_config.json is optional; its eos ids are added to the config's.
void merge_generation_config(LoadedModel& lm) {
  HfConfig g(lm.generation_config);
  auto& info = lm.model->mutable_info();
  for (auto id : g.get_int_list("eos_token_id"))
    if (std::find(info.eos_ids.begin(), info.eos_ids.end(), int32_t(id)) == info.eos_ids.end())
      info.eos_ids.push_back(int32_t(id));
  if (info.bos_id < 0) info.bos_id = int32_t(g.get_int_or("bos_token_id", -1));
}

Result<LoadedModel> load_hf_dir(const std::string& dir, const LoadOptions& opt) {
  LoadedModel lm;
  lm.path = dir;
  const std::string cfg_path = dir + "/config.json";
  if (!file_exists(cfg_path)) return Error::not_found("[load] {}: no config.json (is this a HF checkpoint directory?)", dir);
  PIPIT_ASSIGN_OR_RETURN(lm.config, HfConfig::load(cfg_path));
  if (file_exists(dir + "/generation_config.json")) {
    PIPIT_ASSIGN_OR_RETURN(std::string g, read_file(dir + "/generation_config.json"));
    auto j = nlohmann::json::parse(g, nullptr, false);
    if (!j.is_discarded() && j.is_object()) lm.generation_config = j;
  }
  PIPIT_ASSIGN_OR_RETURN(auto set, SafetensorsSet::open_dir(dir));
  lm.weights = std::make_shared<MapWeightSource>(set.tensors());
  PIPIT_ASSIGN_OR_RETURN(lm.model, create_model(lm.config, *lm.weights));
  merge_generation_config(lm);
#ifdef PIPIT_WITH_TOKENIZER
  if (file_exists(dir + "/tokenizer.json")) {
    PIPIT_ASSIGN_OR_RETURN(lm.tokenizer, Tokenizer::load_dir(dir));
  }
#endif
  if (opt.need_tokenizer && !lm.tokenizer)
    return Error::not_found("[load] {}: no tokenizer.json; this command needs a tokenizer", dir);
  return lm;
}

}  // namespace

Result<LoadedModel> load_model(const std::string& path, const LoadOptions& opt) {
  if (is_directory(path)) return load_hf_dir(path, opt);
  if (!file_exists(path)) return Error::not_found("[load] '{}': no such file or directory", path);
  return Error::unsupported("[load] '{}': expected a HF checkpoint directory (config.json + *.safetensors)", path);
}

}  // namespace pipit
