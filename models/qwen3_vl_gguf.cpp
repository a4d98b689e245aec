// Qwen3-VL's GGUF import: the language model (llama.cpp arch qwen3vl: Qwen3 with interleaved M-RoPE sections,
// DeepStack features added by the first layers when an mmproj feeds them) and the mmproj projector qwen3vl_merger,
// which also carries Qwen3.5's vision tower (its language model: models/qwen3_5_gguf.cpp). Registered beside
// models/qwen3_vl.cpp in models/gguf_traits.h's registry, read by convert/gguf_import.cpp and convert/gguf_mmproj.cpp.
// The mmproj's DeepStack mergers are named by vision block (v.deepstack.B.*).
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// Alone the language model is a Qwen3 (text positions make M-RoPE plain RoPE); with a qwen3vl_merger mmproj it
// becomes qwen3_vl.
Status qwen3vl_config(const GgufArchInput& in, nlohmann::json& cfg, std::vector<std::string>& notes) {
  const std::string ctx = "[gguf] " + in.f.path();
  // rope.dimension_sections holds (t, h, w, 0)
  PIPIT_ASSIGN_OR_RETURN(nlohmann::json sec, in.m.rope_sections());
  // llama.cpp's qwen3vl graph always interleaves the sections (LLAMA_ROPE_TYPE_IMROPE), as HF's Qwen3-VL
  if (!cfg["rope_scaling"].is_null())
    return Error::unsupported("{}: qwen3vl with rope scaling {} is not supported", ctx, cfg["rope_scaling"].dump());
  cfg["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", sec}, {"mrope_interleaved", true}};
  PIPIT_ASSIGN_OR_RETURN(int64_t n_ds, in.m.get_int_or("n_deepstack_layers", 0));
  if (n_ds > 0) notes.push_back("qwen3vl: " + std::to_string(n_ds) + " DeepStack layers (fed by an mmproj)");
  return Status::ok();
}

const GgufArchRegistrar kQwen3VLGguf({.gguf = "qwen3vl", .model_type = "qwen3", .hf_class = "Qwen3ForCausalLM",
                                      .config = qwen3vl_config});

// Qwen3.5's vision tower, projector qwen3vl_merger (llama.cpp conversion/qwen3vl.py Qwen3VLVisionModel, which also
// writes Qwen3-VL's; tools/mtmd/clip.cpp). Unlike the Qwen2 towers the fused qkv stays fused (v.blk.N.attn_qkv), the
// patch embedding has a bias, the learned position table is v.position_embd, and the merger's norm / fc1 / fc2 are
// v.post_ln / mm.0 / mm.2. The image processor's pixel bounds are llama.cpp's for this projector (8 to 4096 merged
// tokens, clip.cpp set_limit_image_tokens) unless the file names them (clip.vision.image_min/max_pixels); the
// mmproj holds no video settings, so videos take HF's Qwen3-VL video defaults.
Status add_qwen3vl_mmproj(Checkpoint& c, const GgufFile& text, const GgufFile& mm, const GgufTools& tools) {
  const std::string ctx = "[gguf] " + mm.path();
  nlohmann::json text_cfg = c.config;
  // Qwen3.5 (qwen35) or Qwen3-VL (qwen3vl, imported as a Qwen3 with interleaved M-RoPE sections)
  const bool q35 = text_cfg.value("model_type", "") == "qwen3_5_text";
  const bool q3vl = text_cfg.value("model_type", "") == "qwen3" && text_cfg["rope_scaling"].is_object() &&
                    text_cfg["rope_scaling"].contains("mrope_section");
  if (!q35 && !q3vl)
    return Error::invalid_argument("{}: a qwen3vl_merger projector needs a qwen35 (Qwen3.5) or qwen3vl (Qwen3-VL) "
                                   "language model, and {} is {}", ctx, text.path(),
                                   text_cfg.value("model_type", std::string("?")));
  PIPIT_ASSIGN_OR_RETURN(int64_t E, gguf_clip_int(mm, "vision.embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t F, gguf_clip_int(mm, "vision.feed_forward_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t depth, gguf_clip_int(mm, "vision.block_count"));
  // DeepStack (Qwen3-VL): clip.vision.is_deepstack_layers, one bool per vision block; block b's merger is
  // v.deepstack.b.* (named by block, HF's deepstack_merger_list.k by position in deepstack_visual_indexes)
  nlohmann::json ds_index = nlohmann::json::array();
  if (const GgufValue* ds = gguf_clip_key(mm, "vision.is_deepstack_layers"); ds && ds->type == GgufType::kArray) {
    if (int64_t(ds->arr_size()) != depth)
      return Error::format("{}: clip.vision.is_deepstack_layers holds {} values for {} blocks", ctx, ds->arr_size(),
                           depth);
    for (size_t b = 0; b < ds->arr_size(); ++b)
      if (const GgufValue x = ds->at(b); x.is_int() && x.as_int() != 0) ds_index.push_back(int64_t(b));
  }
  if (q35 && !ds_index.empty())
    return Error::unsupported("{}: DeepStack layers (Qwen3-VL's) with a Qwen3.5 language model", ctx);
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, gguf_clip_int(mm, "vision.attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t patch, gguf_clip_int(mm, "vision.patch_size"));
  PIPIT_ASSIGN_OR_RETURN(int64_t out_dim, gguf_clip_int(mm, "vision.projection_dim"));
  PIPIT_ASSIGN_OR_RETURN(int64_t merge, gguf_clip_int(mm, "vision.spatial_merge_size", 2));
  if (out_dim != text_cfg.value("hidden_size", int64_t(0)))
    return Error::invalid_argument("{}: projection_dim {} but the language model's width is {}", ctx, out_dim,
                                   text_cfg.value("hidden_size", int64_t(0)));
  auto get = [&](const std::string& name) -> Result<Tensor> {
    const GgufTensorInfo* ti = mm.find_tensor(name);
    if (!ti) return Error::not_found("{}: missing tensor '{}'", ctx, name);
    return mm.tensor(*ti);
  };
  PIPIT_ASSIGN_OR_RETURN(Tensor pos, get("v.position_embd.weight"));
  if (pos.ndim() != 2 || pos.dim(1) != E)
    return Error::format("{}: v.position_embd.weight is {}, expected [positions, {}]", ctx, pos.describe(), E);
  c.tensors["visual.pos_embed.weight"] = pos;
  const nlohmann::json v = {{"depth", depth}, {"hidden_size", E}, {"intermediate_size", F}, {"num_heads", n_head},
                            {"patch_size", patch}, {"spatial_merge_size", merge}, {"temporal_patch_size", 2},
                            {"in_channels", 3}, {"out_hidden_size", out_dim}, {"num_position_embeddings", pos.dim(0)},
                            {"hidden_act", "gelu_pytorch_tanh"}, {"deepstack_visual_indexes", ds_index}};
  if (q3vl) text_cfg["model_type"] = "qwen3_vl_text";
  const char* hf_class = q35 ? "Qwen3_5ForConditionalGeneration" : "Qwen3VLForConditionalGeneration";
  nlohmann::json top = {{"architectures", {hf_class}},
                        {"model_type", q35 ? "qwen3_5" : "qwen3_vl"}, {"text_config", text_cfg}, {"vision_config", v},
                        {"tie_word_embeddings", text_cfg.value("tie_word_embeddings", false)}};
  if (text_cfg.contains("eos_token_id")) top["eos_token_id"] = text_cfg["eos_token_id"];
  PIPIT_ASSIGN_OR_RETURN(top["image_token_id"], gguf_token_id(text, "<|image_pad|>"));
  PIPIT_ASSIGN_OR_RETURN(top["video_token_id"], gguf_token_id(text, "<|video_pad|>"));
  PIPIT_ASSIGN_OR_RETURN(top["vision_start_token_id"], gguf_token_id(text, "<|vision_start|>"));
  PIPIT_ASSIGN_OR_RETURN(top["vision_end_token_id"], gguf_token_id(text, "<|vision_end|>"));
  c.config = top;

  const int64_t unit = patch * patch * merge * merge;  // pixels per merged token
  nlohmann::json pp = {{"image_processor_type", "Qwen2VLImageProcessor"}, {"patch_size", patch},
                       {"merge_size", merge}, {"temporal_patch_size", 2}};
  PIPIT_ASSIGN_OR_RETURN(pp["image_mean"], gguf_clip_floats(mm, "vision.image_mean", 3));
  PIPIT_ASSIGN_OR_RETURN(pp["image_std"], gguf_clip_floats(mm, "vision.image_std", 3));
  PIPIT_ASSIGN_OR_RETURN(pp["min_pixels"], gguf_clip_int(mm, "vision.image_min_pixels", 8 * unit));
  PIPIT_ASSIGN_OR_RETURN(pp["max_pixels"], gguf_clip_int(mm, "vision.image_max_pixels", 4096 * unit));
  c.texts["preprocessor_config"] = pp.dump();

  PIPIT_ASSIGN_OR_RETURN(Tensor f0, get("v.patch_embd.weight"));
  PIPIT_ASSIGN_OR_RETURN(Tensor f1, get("v.patch_embd.weight.1"));
  PIPIT_ASSIGN_OR_RETURN(c.tensors["visual.patch_embed.proj.weight"],
                         gguf_join_frames(tools, f0, f1, "v.patch_embd.weight"));
  PIPIT_ASSIGN_OR_RETURN(c.tensors["visual.patch_embed.proj.bias"], get("v.patch_embd.bias"));
  const std::pair<const char*, const char*> kBlock[] = {{"attn_qkv", "attn.qkv"}, {"attn_out", "attn.proj"},
                                                        {"ln1", "norm1"},         {"ln2", "norm2"},
                                                        {"ffn_up", "mlp.linear_fc1"}, {"ffn_down", "mlp.linear_fc2"}};
  for (int64_t b = 0; b < depth; ++b)
    for (auto& [from, to] : kBlock)
      for (const char* kind : {".weight", ".bias"}) {
        PIPIT_ASSIGN_OR_RETURN(c.tensors["visual.blocks." + std::to_string(b) + "." + to + kind],
                               get("v.blk." + std::to_string(b) + "." + from + kind));
      }
  const std::pair<const char*, const char*> kMerger[] = {
      {"v.post_ln", "visual.merger.norm"}, {"mm.0", "visual.merger.linear_fc1"}, {"mm.2", "visual.merger.linear_fc2"}};
  for (auto& [from, to] : kMerger)
    for (const char* kind : {".weight", ".bias"}) {
      PIPIT_ASSIGN_OR_RETURN(c.tensors[std::string(to) + kind], get(std::string(from) + kind));
    }
  const std::pair<const char*, const char*> kDeepStack[] = {
      {"norm", "norm"}, {"fc1", "linear_fc1"}, {"fc2", "linear_fc2"}};
  for (size_t k = 0; k < ds_index.size(); ++k)
    for (auto& [from, to] : kDeepStack)
      for (const char* kind : {".weight", ".bias"}) {
        PIPIT_ASSIGN_OR_RETURN(c.tensors["visual.deepstack_merger_list." + std::to_string(k) + "." + to + kind],
                               get("v.deepstack." + std::to_string(ds_index[k].get<int64_t>()) + "." + from + kind));
      }
  c.notes.push_back("mmproj " + mm.path() + " (qwen3vl_merger): patch embedding frames joined" +
                    (ds_index.empty() ? "" : ", DeepStack mergers of blocks " + ds_index.dump()));
  return Status::ok();
}

const GgufProjectorRegistrar kQwen3VLMerger("qwen3vl_merger", add_qwen3vl_mmproj);

}  // namespace

}  // namespace pipit
