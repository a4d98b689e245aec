#include "runtime/memory_estimate.h"

#include <algorithm>
#include <set>

#include "convert/checkpoint.h"
#include "models/hf_config.h"
#include "models/model.h"
#include "models/vision/image_processor.h"
#include "models/audio/audio_model.h"
#include "models/vision/vision_model.h"
#include "runtime/loader.h"
#include "runtime/memory_plan.h"
#include "runtime/multimodal_video.h"

namespace pipit {

namespace {

// The checkpoint's tensors as the model asks for them, counting each distinct one it takes (tensors it never asks
// for, such as the K/V projections of KV-shared layers or an unused head, are never touched and cost nothing).
// What the model takes through host() (its towers and projectors, WeightSource::host) also counts as tower bytes.
class CountingWeightSource : public WeightSource {
 public:
  explicit CountingWeightSource(const MapWeightSource& base) : base_(base), tower_(*this) {}
  bool has(const std::string& name) const override { return base_.has(name); }
  Result<Tensor> find(const std::string& name) const override { return take(name, false); }
  const WeightSource& host() const override { return tower_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t tower_bytes() const { return tower_bytes_; }

 private:
  class Tower : public WeightSource {
   public:
    explicit Tower(const CountingWeightSource& all) : all_(all) {}
    bool has(const std::string& name) const override { return all_.has(name); }
    Result<Tensor> find(const std::string& name) const override { return all_.take(name, true); }

   private:
    const CountingWeightSource& all_;
  };
  Result<Tensor> take(const std::string& name, bool tower) const {
    auto t = base_.find(name);
    if (t && used_.insert(name).second) {
      bytes_ += t->nbytes();
      if (tower) tower_bytes_ += t->nbytes();
    }
    return t;
  }
  const MapWeightSource& base_;
  const Tower tower_;
  mutable std::set<std::string> used_;
  mutable uint64_t bytes_ = 0, tower_bytes_ = 0;
};

int64_t text_int(const HfConfig& cfg, const char* key, int64_t def) {
  const HfConfig t = cfg.sub("text_config");
  return t.get_int_or(key, cfg.get_int_or(key, def));
}

// The decoder's activations for one chunk of `chunk` tokens: the arena keeps the residual stream and the chunk's
// input rows, and one layer's temporaries at a time (models rewind it after each layer): the normed input, q / k /
// v and the attention output, the MLP's gate, up and activation rows (for MoE: the routed tokens' rows per expert
// chosen), the int8 copies of matmul inputs, then the logits of the last row. Per token, in floats.
double decoder_activation_bytes(const HfConfig& cfg, const ModelInfo& info, int64_t chunk) {
  const double d = double(info.n_embd);
  const double heads = double(text_int(cfg, "num_attention_heads", 1));
  const double head_dim = double(std::max<int64_t>(info.kv.head_dim, 1));
  const double q = heads * head_dim, kv = double(info.kv.n_head_kv) * head_dim;
  double ff = double(text_int(cfg, "intermediate_size", int64_t(4 * d)));
  const int64_t moe_ff = text_int(cfg, "moe_intermediate_size", 0);
  const int64_t top_k = text_int(cfg, "num_experts_per_tok", 0);
  if (moe_ff > 0 && top_k > 0) ff = std::max(ff, double(moe_ff) * double(top_k));
  const double per_token = 6 * d + 2 * q + 2 * kv + 3 * ff;
  return double(chunk) * per_token * 4.0 + double(info.n_vocab) * 4.0 * 2;  // + the logits row and its copy
}

// The rule of a vision tower's activations: the patches' rows of a block's temporaries (as the decoder's, at the
// tower's widths), plus the pixel values. Vision attention runs in key chunks, so no patches x patches matrix is held.
double vision_tower_bytes(const HfConfig& cfg, const ImageProcessorKind::Extent& x) {
  const HfConfig vc = cfg.sub("vision_config");
  const double hidden = double(vc.get_int_or("hidden_size", vc.get_int_or("embed_dim", 1024)));
  const double inter = double(vc.get_int_or("intermediate_size", int64_t(hidden * vc.get_float_or("mlp_ratio", 4))));
  return x.patches * (8 * hidden + 3 * inter) * 4.0 + x.pixels * 4.0;
}

// One media input encoded at its processor's largest size, the largest of what the model takes (an image, a video,
// an audio clip; they are encoded one at a time): each bound is its processor's (image and video processor kinds,
// the audio record), reached by name. 0 for a text model.
double tower_activation_bytes(const LoadedModel& lm, const nlohmann::json& audio_processor) {
  double bytes = 0;
  const VisionLanguageModel* v = lm.model->vision();
  if (v) {
    ImageProcessorConfig pc = v->default_processor();
    if (lm.preprocessor_config.is_object())
      if (auto p = parse_image_processor(lm.preprocessor_config, pc)) pc = *p;
    if (auto kind = find_image_processor(pc.kind)) bytes = vision_tower_bytes(lm.config, (*kind)->max_extent(pc));
    if (takes_video(*lm.model)) {
      auto vpp = video_preprocessor_config_of(lm);
      auto vc = video_processor_for(*lm.model, vpp.is_ok() ? *vpp : nlohmann::json());
      if (!vc.is_ok()) vc = *v->default_video_processor();  // a file the run would refuse: the model's defaults
      if (auto kind = find_video_processor(vc->kind))
        bytes = std::max(bytes, vision_tower_bytes(lm.config, (*kind)->max_extent(*vc)));
    }
  }
  if (takes_audio(lm.config.model_type()))
    if (auto a = audio_encode_bytes(lm.config, audio_processor)) bytes = std::max(bytes, *a);
  return bytes;
}

}  // namespace

Result<MemoryEstimate> estimate_memory(const std::string& path, const MemoryEstimateOptions& opt) {
  PIPIT_ASSIGN_OR_RETURN(Checkpoint c, open_checkpoint(path));
  LoadedModel lm;
  lm.path = path;
  lm.config = HfConfig(c.config);
  if (auto pp = c.texts.find("preprocessor_config"); pp != c.texts.end()) {
    auto j = nlohmann::json::parse(pp->second, nullptr, false);
    if (j.is_object()) lm.preprocessor_config = std::move(j);
  }
  nlohmann::json audio_processor;  // processor_config.json: an audio record's feature extractor and token cap
  if (auto pc = c.texts.find("processor_config"); pc != c.texts.end()) {
    auto j = nlohmann::json::parse(pc->second, nullptr, false);
    if (j.is_object()) audio_processor = std::move(j);
  }
  const size_t tokenizer_text = c.tokenizer_parts    ? tokenizer_parts_text_bytes(*c.tokenizer_parts)
                                : c.tokenizer_json() ? c.tokenizer_json()->size()
                                                     : 0;
  MapWeightSource base(std::move(c.tensors));
  CountingWeightSource counting(base);
  PIPIT_ASSIGN_OR_RETURN(lm.model, create_model(lm.config, counting));
  const ModelInfo& info = lm.model->info();

  MemoryEstimate e;
  e.weights = counting.bytes();
  e.tower_weights = counting.tower_bytes();
  SessionSizes s;
  s.n_ctx = opt.n_ctx > 0 ? opt.n_ctx : std::min<int64_t>(info.max_ctx > 0 ? info.max_ctx : 4096, 4096);
  s.n_batch = opt.n_batch;
  s.n_slot = opt.n_slot;
  s.kv_dtype = opt.kv_dtype;
  if (s.n_ctx > Limits::kMaxCtx || s.n_slot < 1 || s.n_slot > Limits::kMaxSlots || s.n_batch < 1)
    return Error::invalid_argument("[memory] context {}, {} sequences, batch {}: out of range", s.n_ctx, s.n_slot,
                                   s.n_batch);
  e.kv_cache = uint64_t(kv_cache_bytes(info, s.n_slot, s.n_ctx, s.kv_dtype, s.n_batch));
  e.activations = uint64_t(decoder_activation_bytes(lm.config, info, std::min(s.n_batch, s.n_ctx)));
  e.tower_activations = uint64_t(tower_activation_bytes(lm, audio_processor));
  // The tokenizer's tables (vocabulary strings, the id maps, merges) measured at ~1.5x tokenizer.json's bytes.
  e.tokenizer = uint64_t(double(tokenizer_text) * 1.5);
  // Parsing tokenizer.json (the vocab and merges as SAX events, the rest as a tree): `pipit tokenize` with Qwen's
  // 11.4 MB file peaks 47.8 MB above `pipit --version` (4.2x; 80.6 MB, 7x, when the vocab was built as JSON values);
  // with the weights beside it, `pipit run` of a 19.7 MB Qwen2-VL-shaped checkpoint peaks at 93 MB (5.3x).
  // A GGUF's vocabulary is no JSON text but its parts (tokens, merges: a copy of each as a string, then the tables
  // built from them, beside the file's pages that hold them): `pipit tokenize` of Qwen3-0.6B's Q4_0 GGUF, whose parts
  // would write ~4.8 MB of tokenizer.json (tokenizer_parts_text_bytes), peaks 52 MB above `pipit --version` (10.9x;
  // 61 MB when each vocabulary element was also a metadata value of its own). The estimate for it said 26 MB.
  e.load_transient = uint64_t(double(tokenizer_text) * (c.tokenizer_parts ? 11.0 : 5.5));
  // The engine's code and the libraries it maps, the thread pool's touched stacks, the allocator's arenas:
  // `pipit --version` peaks at 9 MB; `pipit run` of stories260k (3.6 MB of the parts above) at 14.8 MB.
  e.runtime = uint64_t(12) << 20;
  return e;
}

}  // namespace pipit
