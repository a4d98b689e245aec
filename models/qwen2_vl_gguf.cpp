// Qwen2-VL / Qwen2.5-VL's GGUF import: the language model (llama.cpp arch qwen2vl: Qwen2 with M-RoPE sections) and
// the vision tower of its mmproj file (projectors qwen2vl_merger and qwen2.5vl_merger; llama.cpp's
// convert_hf_to_gguf.py Qwen2VLVisionModel, tools/mtmd/clip.cpp). Registered beside models/qwen2_vl.cpp in
// models/gguf_traits.h's registry, read by convert/gguf_import.cpp and convert/gguf_mmproj.cpp.
// Layout differences undone in the mmproj:
//  - the Conv3d patch embedding [E, 3, 2, p, p] is stored as two Conv2d kernels, v.patch_embd.weight (frame 0) and
//    v.patch_embd.weight.1 (frame 1): interleaved back (a copy);
//  - the fused attention qkv is stored as attn_q / attn_k / attn_v: concatenated back (a copy);
//  - the image processor's settings live in clip.vision.* (mean, std, patch size, merge size, pixel bounds).
// Everything else is a view of the mapped file under HF names.
#include "models/gguf_traits.h"

namespace pipit {

namespace {

// rope.dimension_sections holds (t, h, w, 0): kept as HF's mrope_section for an mmproj to use. Alone the language
// model is a Qwen2 (text positions turn every M-RoPE stream alike, which is plain RoPE); with an mmproj file it
// becomes qwen2_vl / qwen2_5_vl.
Status qwen2vl_config(const GgufArchInput& in, nlohmann::json& cfg, std::vector<std::string>&) {
  PIPIT_ASSIGN_OR_RETURN(nlohmann::json sec, in.m.rope_sections());
  if (cfg["rope_scaling"].is_null()) cfg["rope_scaling"] = {{"type", "mrope"}};
  cfg["rope_scaling"]["mrope_section"] = sec;
  cfg["use_sliding_window"] = false;
  return Status::ok();
}

const GgufArchRegistrar kQwen2VLGguf({.gguf = "qwen2vl", .model_type = "qwen2", .hf_class = "Qwen2ForCausalLM",
                                      .config = qwen2vl_config});

Status add_qwen2vl_mmproj(Checkpoint& c, const GgufFile& text, const GgufFile& mm, const GgufTools& tools,
                          const std::string& type, bool v25) {
  const std::string ctx = "[gguf] " + mm.path();
  const nlohmann::json& rs = c.config["rope_scaling"];
  if (!rs.is_object() || !rs.contains("mrope_section"))
    return Error::invalid_argument("{}: a {} projector needs a qwen2vl language model, and {} is {}", ctx, type,
                                   text.path(), c.config["model_type"].dump());

  PIPIT_ASSIGN_OR_RETURN(int64_t E, gguf_clip_int(mm, "vision.embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t F, gguf_clip_int(mm, "vision.feed_forward_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t depth, gguf_clip_int(mm, "vision.block_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, gguf_clip_int(mm, "vision.attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t patch, gguf_clip_int(mm, "vision.patch_size"));
  PIPIT_ASSIGN_OR_RETURN(int64_t out_dim, gguf_clip_int(mm, "vision.projection_dim"));
  PIPIT_ASSIGN_OR_RETURN(int64_t merge, gguf_clip_int(mm, "vision.spatial_merge_size", 2));
  if (out_dim != c.config.value("hidden_size", int64_t(0)))
    return Error::invalid_argument("{}: projection_dim {} but the language model's width is {}", ctx, out_dim,
                                   c.config.value("hidden_size", int64_t(0)));
  nlohmann::json v = {{"depth", depth}, {"num_heads", n_head}, {"patch_size", patch}, {"spatial_merge_size", merge},
                      {"temporal_patch_size", 2}, {"in_channels", 3}};
  if (v25) {
    PIPIT_ASSIGN_OR_RETURN(int64_t wa, gguf_clip_int(mm, "vision.n_wa_pattern"));
    PIPIT_ASSIGN_OR_RETURN(int64_t window, gguf_clip_int(mm, "vision.window_size", 112));
    if (wa <= 0) return Error::format("{}: clip.vision.n_wa_pattern must be positive", ctx);
    nlohmann::json full = nlohmann::json::array();  // every n_wa_pattern-th block attends over the whole image
    for (int64_t b = wa - 1; b < depth; b += wa) full.push_back(b);
    v.update({{"hidden_size", E}, {"intermediate_size", F}, {"out_hidden_size", out_dim}, {"window_size", window},
              {"fullatt_block_indexes", full}, {"hidden_act", "silu"}});
  } else {
    if (E <= 0 || F % E != 0)
      return Error::unsupported("{}: feed_forward_length {} is not a multiple of {}", ctx, F, E);
    v.update({{"embed_dim", E}, {"mlp_ratio", F / E}, {"hidden_size", out_dim}, {"hidden_act", "quick_gelu"}});
  }
  c.config["model_type"] = v25 ? "qwen2_5_vl" : "qwen2_vl";
  c.config["architectures"] = {v25 ? "Qwen2_5_VLForConditionalGeneration" : "Qwen2VLForConditionalGeneration"};
  c.config["vision_config"] = v;
  PIPIT_ASSIGN_OR_RETURN(c.config["image_token_id"], gguf_token_id(text, "<|image_pad|>"));
  PIPIT_ASSIGN_OR_RETURN(c.config["vision_start_token_id"], gguf_token_id(text, "<|vision_start|>"));
  PIPIT_ASSIGN_OR_RETURN(c.config["vision_end_token_id"], gguf_token_id(text, "<|vision_end|>"));

  // the image processor: Qwen2VLImageProcessor with the file's mean / std / patch / merge (and pixel bounds when
  // the file has them; else HF's defaults)
  nlohmann::json pp = {{"image_processor_type", "Qwen2VLImageProcessor"}, {"patch_size", patch},
                       {"merge_size", merge}, {"temporal_patch_size", 2}};
  PIPIT_ASSIGN_OR_RETURN(pp["image_mean"], gguf_clip_floats(mm, "vision.image_mean", 3));
  PIPIT_ASSIGN_OR_RETURN(pp["image_std"], gguf_clip_floats(mm, "vision.image_std", 3));
  if (gguf_clip_key(mm, "vision.image_min_pixels")) {
    PIPIT_ASSIGN_OR_RETURN(pp["min_pixels"], gguf_clip_int(mm, "vision.image_min_pixels"));
  }
  if (gguf_clip_key(mm, "vision.image_max_pixels")) {
    PIPIT_ASSIGN_OR_RETURN(pp["max_pixels"], gguf_clip_int(mm, "vision.image_max_pixels"));
  }
  c.texts["preprocessor_config"] = pp.dump();

  // tensors: v.* / mm.* -> visual.*
  auto get = [&](const std::string& name) -> Result<Tensor> {
    const GgufTensorInfo* ti = mm.find_tensor(name);
    if (!ti) return Error::not_found("{}: missing tensor '{}'", ctx, name);
    return mm.tensor(*ti);
  };
  PIPIT_ASSIGN_OR_RETURN(Tensor f0, get("v.patch_embd.weight"));
  PIPIT_ASSIGN_OR_RETURN(Tensor f1, get("v.patch_embd.weight.1"));
  PIPIT_ASSIGN_OR_RETURN(c.tensors["visual.patch_embed.proj.weight"],
                         gguf_join_frames(tools, f0, f1, "v.patch_embd.weight"));
  const std::pair<const char*, const char*> kBlock[] = {
      {"attn_out", "attn.proj"}, {"ln1", "norm1"}, {"ln2", "norm2"},
      {"ffn_up", v25 ? "mlp.up_proj" : "mlp.fc1"}, {"ffn_down", v25 ? "mlp.down_proj" : "mlp.fc2"},
      {"ffn_gate", "mlp.gate_proj"}};
  for (int64_t b = 0; b < depth; ++b) {
    const std::string g = "v.blk." + std::to_string(b) + ".", h = "visual.blocks." + std::to_string(b) + ".";
    for (const char* kind : {"weight", "bias"}) {
      std::vector<Tensor> qkv;
      for (const char* p : {"attn_q.", "attn_k.", "attn_v."}) {
        PIPIT_ASSIGN_OR_RETURN(Tensor t, get(g + p + kind));
        qkv.push_back(t);
      }
      PIPIT_ASSIGN_OR_RETURN(c.tensors[h + "attn.qkv." + kind], gguf_concat_rows(tools, qkv, g + "attn_q/k/v." + kind));
      for (auto& [from, to] : kBlock) {
        const GgufTensorInfo* ti = mm.find_tensor(g + from + "." + kind);
        if (!ti) continue;  // the tower names what it misses
        PIPIT_ASSIGN_OR_RETURN(c.tensors[h + to + "." + kind], mm.tensor(*ti));
      }
    }
  }
  const std::pair<const char*, const char*> kMerger[] = {
      {"v.post_ln", "visual.merger.ln_q"}, {"mm.0", "visual.merger.mlp.0"}, {"mm.2", "visual.merger.mlp.2"}};
  for (auto& [from, to] : kMerger)
    for (const char* kind : {"weight", "bias"})
      if (const GgufTensorInfo* ti = mm.find_tensor(std::string(from) + "." + kind)) {
        PIPIT_ASSIGN_OR_RETURN(c.tensors[std::string(to) + "." + kind], mm.tensor(*ti));
      }
  c.notes.push_back("mmproj " + mm.path() + " (" + type + "): patch embedding frames and q/k/v joined");
  return Status::ok();
}

const GgufProjectorRegistrar kQwen2VLMerger("qwen2vl_merger", [](Checkpoint& c, const GgufFile& text,
                                                                 const GgufFile& mm, const GgufTools& tools) {
  return add_qwen2vl_mmproj(c, text, mm, tools, "qwen2vl_merger", false);
});
const GgufProjectorRegistrar kQwen25VLMerger("qwen2.5vl_merger", [](Checkpoint& c, const GgufFile& text,
                                                                    const GgufFile& mm, const GgufTools& tools) {
  return add_qwen2vl_mmproj(c, text, mm, tools, "qwen2.5vl_merger", true);
});

}  // namespace

}  // namespace pipit
