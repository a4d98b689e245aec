// llama.cpp's mmproj files (the vision tower of a multimodal model as a GGUF of its own, general.architecture
// "clip") merged with their language model's GGUF into one HF-style checkpoint. Supported projectors:
// qwen2vl_merger (Qwen2-VL) and qwen2.5vl_merger (Qwen2.5-VL), whose language model is the qwen2vl arch, and
// qwen3vl_merger with a qwen35 or qwen3vl language model (Qwen3.5, Qwen3-VL with DeepStack; add_qwen3vl_mmproj) and
// gemma4v (Gemma 4's vision tower; add_gemma4_mmproj).
// Layout differences undone here (llama.cpp's convert_hf_to_gguf.py Qwen2VLVisionModel, tools/mtmd/clip.cpp):
//  - the Conv3d patch embedding [E, 3, 2, p, p] is stored as two Conv2d kernels, v.patch_embd.weight (frame 0) and
//    v.patch_embd.weight.1 (frame 1): interleaved back (a copy);
//  - the fused attention qkv is stored as attn_q / attn_k / attn_v: concatenated back (a copy);
//  - the image processor's settings live in clip.vision.* (mean, std, patch size, merge size, pixel bounds).
// Everything else is a view of the mapped file under HF names.
#include <cmath>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "convert/gguf_import.h"

namespace pipit {

namespace {

const GgufValue* clip_key(const GgufFile& f, const std::string& key) { return f.find("clip." + key); }

Result<int64_t> clip_int(const GgufFile& f, const std::string& key, std::optional<int64_t> def = std::nullopt) {
  const GgufValue* v = clip_key(f, key);
  if (!v) {
    if (def) return *def;
    return Error::format("[gguf] {}: missing metadata 'clip.{}'", f.path(), key);
  }
  if (!v->is_int() || v->as_int() < 0 || v->as_int() > (int64_t(1) << 30))
    return Error::format("[gguf] {}: 'clip.{}' is {}, expected a non-negative integer", f.path(), key, v->to_string());
  return v->as_int();
}

Result<nlohmann::json> clip_floats(const GgufFile& f, const std::string& key, size_t n) {
  const GgufValue* v = clip_key(f, key);
  if (!v || v->type != GgufType::kArray || v->arr.size() != n)
    return Error::format("[gguf] {}: 'clip.{}' must be an array of {} numbers", f.path(), key, n);
  nlohmann::json a = nlohmann::json::array();
  for (const auto& x : v->arr) {
    if (!x.is_number()) return Error::format("[gguf] {}: 'clip.{}' must hold numbers", f.path(), key);
    a.push_back(x.as_double());
  }
  return a;
}

// A token's id in the text GGUF's vocabulary (tokenizer.ggml.tokens).
Result<int64_t> token_id(const GgufFile& text, const std::string& token) {
  const GgufValue* v = text.find("tokenizer.ggml.tokens");
  if (v && v->type == GgufType::kArray)
    for (size_t i = 0; i < v->arr.size(); ++i)
      if (v->arr[i].type == GgufType::kString && v->arr[i].s == token) return int64_t(i);
  return Error::format("[gguf] {}: the vocabulary has no '{}' token, which images need", text.path(), token);
}

// f32 copy of any tensor (whole rows through the to_f32 kernels).
Tensor widen(const Tensor& t) {
  Tensor out = Tensor::empty(DType::F32, t.shape());
  const int64_t n = t.dim(-1);
  for (int64_t r = 0; r < t.rows(); ++r) ref_kernels().to_f32[int(t.dtype())](t.row_ptr(r), out.ptr<float>() + r * n, n);
  return out;
}

// Rows of several tensors, one after the other (q, k, v -> qkv). Same dtype: their bytes; mixed: f32.
Result<Tensor> concat_rows(const std::vector<Tensor>& parts, const std::string& name) {
  bool same = true;
  for (const auto& p : parts) {
    if (p.dim(-1) != parts[0].dim(-1) || p.ndim() != parts[0].ndim())
      return Error::format("[gguf] {}: q / k / v pieces of different widths", name);
    same = same && p.dtype() == parts[0].dtype();
  }
  std::vector<Tensor> src = parts;
  if (!same)
    for (auto& p : src) {
      if (!ref_kernels().to_f32[int(p.dtype())]) return Error::unsupported("[gguf] {}: type {}", name, dtype_name(p.dtype()));
      p = widen(p);
    }
  std::vector<int64_t> shape = src[0].shape();
  shape[0] = 0;
  for (const auto& p : src) shape[0] += p.dim(0);
  Tensor out = Tensor::empty(src[0].dtype(), shape);
  size_t off = 0;
  for (const auto& p : src) {
    std::memcpy(out.data() + off, p.data(), p.nbytes());
    off += p.nbytes();
  }
  return out;
}

// Conv3d [E, C, 2, p, p] from its two frames [E, C, p, p] (llama.cpp splits the temporal axis).
Result<Tensor> join_frames(Tensor f0, Tensor f1, const std::string& name) {
  if (f0.ndim() != 4 || f0.shape() != f1.shape())
    return Error::format("[gguf] {}: frames {} and {} (expected two [E, C, p, p])", name, f0.shape_str(),
                         f1.shape_str());
  if (f0.dtype() != f1.dtype() || dtype_is_quantized(f0.dtype())) {
    if (!ref_kernels().to_f32[int(f0.dtype())] || !ref_kernels().to_f32[int(f1.dtype())])
      return Error::unsupported("[gguf] {}: type {}", name, dtype_name(f0.dtype()));
    f0 = widen(f0);
    f1 = widen(f1);
  }
  const int64_t E = f0.dim(0), C = f0.dim(1), pp = f0.dim(2) * f0.dim(3);
  Tensor out = Tensor::empty(f0.dtype(), {E, C, 2, f0.dim(2), f0.dim(3)});
  const size_t plane = size_t(pp) * size_t(dtype_info(f0.dtype()).block_bytes);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t c = 0; c < C; ++c) {
      const size_t in = size_t(e * C + c) * plane;
      std::memcpy(out.data() + (size_t(e * C + c) * 2 + 0) * plane, f0.data() + in, plane);
      std::memcpy(out.data() + (size_t(e * C + c) * 2 + 1) * plane, f1.data() + in, plane);
    }
  return out;
}

// Qwen3.5's vision tower, projector qwen3vl_merger (llama.cpp conversion/qwen3vl.py Qwen3VLVisionModel, which also
// writes Qwen3-VL's; tools/mtmd/clip.cpp). Unlike the Qwen2 towers the fused qkv stays fused (v.blk.N.attn_qkv), the
// patch embedding has a bias, the learned position table is v.position_embd, and the merger's norm / fc1 / fc2 are
// v.post_ln / mm.0 / mm.2. The image processor's pixel bounds are llama.cpp's for this projector (8 to 4096 merged
// tokens, clip.cpp set_limit_image_tokens) unless the file names them (clip.vision.image_min/max_pixels); the
// mmproj holds no video settings, so videos take HF's Qwen3-VL video defaults.
Status add_qwen3vl_mmproj(Checkpoint& c, const GgufFile& text, const GgufFile& mm) {
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
  PIPIT_ASSIGN_OR_RETURN(int64_t E, clip_int(mm, "vision.embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t F, clip_int(mm, "vision.feed_forward_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t depth, clip_int(mm, "vision.block_count"));
  // DeepStack (Qwen3-VL): clip.vision.is_deepstack_layers, one bool per vision block; block b's merger is
  // v.deepstack.b.* (named by block, HF's deepstack_merger_list.k by position in deepstack_visual_indexes)
  nlohmann::json ds_index = nlohmann::json::array();
  if (const GgufValue* ds = clip_key(mm, "vision.is_deepstack_layers"); ds && ds->type == GgufType::kArray) {
    if (int64_t(ds->arr.size()) != depth)
      return Error::format("{}: clip.vision.is_deepstack_layers holds {} values for {} blocks", ctx, ds->arr.size(),
                           depth);
    for (size_t b = 0; b < ds->arr.size(); ++b)
      if (ds->arr[b].is_int() && ds->arr[b].as_int() != 0) ds_index.push_back(int64_t(b));
  }
  if (q35 && !ds_index.empty())
    return Error::unsupported("{}: DeepStack layers (Qwen3-VL's) with a Qwen3.5 language model", ctx);
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, clip_int(mm, "vision.attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t patch, clip_int(mm, "vision.patch_size"));
  PIPIT_ASSIGN_OR_RETURN(int64_t out_dim, clip_int(mm, "vision.projection_dim"));
  PIPIT_ASSIGN_OR_RETURN(int64_t merge, clip_int(mm, "vision.spatial_merge_size", 2));
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
  PIPIT_ASSIGN_OR_RETURN(top["image_token_id"], token_id(text, "<|image_pad|>"));
  PIPIT_ASSIGN_OR_RETURN(top["video_token_id"], token_id(text, "<|video_pad|>"));
  PIPIT_ASSIGN_OR_RETURN(top["vision_start_token_id"], token_id(text, "<|vision_start|>"));
  PIPIT_ASSIGN_OR_RETURN(top["vision_end_token_id"], token_id(text, "<|vision_end|>"));
  c.config = top;

  const int64_t unit = patch * patch * merge * merge;  // pixels per merged token
  nlohmann::json pp = {{"image_processor_type", "Qwen2VLImageProcessor"}, {"patch_size", patch},
                       {"merge_size", merge}, {"temporal_patch_size", 2}};
  PIPIT_ASSIGN_OR_RETURN(pp["image_mean"], clip_floats(mm, "vision.image_mean", 3));
  PIPIT_ASSIGN_OR_RETURN(pp["image_std"], clip_floats(mm, "vision.image_std", 3));
  PIPIT_ASSIGN_OR_RETURN(pp["min_pixels"], clip_int(mm, "vision.image_min_pixels", 8 * unit));
  PIPIT_ASSIGN_OR_RETURN(pp["max_pixels"], clip_int(mm, "vision.image_max_pixels", 4096 * unit));
  c.texts["preprocessor_config"] = pp.dump();

  PIPIT_ASSIGN_OR_RETURN(Tensor f0, get("v.patch_embd.weight"));
  PIPIT_ASSIGN_OR_RETURN(Tensor f1, get("v.patch_embd.weight.1"));
  PIPIT_ASSIGN_OR_RETURN(c.tensors["visual.patch_embed.proj.weight"], join_frames(f0, f1, "v.patch_embd.weight"));
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

// Gemma 4's audio tower in the same mmproj (projector gemma4a; conversion/gemma.py Gemma4VisionAudioModel, clip.cpp,
// tools/mtmd/models/gemma4a.cpp). The converter keeps the values but: per_dim_scale is stored as softplus(x) (taken
// back as log(expm1(y)) in double: softplus of it is y to an ulp), the depthwise conv [H, 1, K] squeezed to [H, K],
// clip bounds as [1]. Fixed in clip.cpp / the graph as in every released Gemma 4 and taken back: eps 1e-6, attention
// chunk 12 with context 13 left / 0 right, logit cap 50, residual weight 0.5; the sizes come from the tensors.
const std::pair<const char*, const char*> kGemma4AudioNorms[] = {
    {"ffn_norm", "feed_forward1.pre_layer_norm"},   {"ffn_post_norm", "feed_forward1.post_layer_norm"},
    {"ffn_norm_1", "feed_forward2.pre_layer_norm"}, {"ffn_post_norm_1", "feed_forward2.post_layer_norm"},
    {"conv_norm", "lconv1d.pre_layer_norm"},        {"norm_conv", "lconv1d.conv_norm"},
    {"attn_pre_norm", "norm_pre_attn"},             {"attn_post_norm", "norm_post_attn"},
    {"ln2", "norm_out"}};
const std::pair<const char*, const char*> kGemma4AudioLinears[] = {
    {"ffn_up", "feed_forward1.ffw_layer_1"},   {"ffn_down", "feed_forward1.ffw_layer_2"},
    {"ffn_up_1", "feed_forward2.ffw_layer_1"}, {"ffn_down_1", "feed_forward2.ffw_layer_2"},
    {"conv_pw1", "lconv1d.linear_start"},      {"conv_pw2", "lconv1d.linear_end"},
    {"attn_q", "self_attn.q_proj"},            {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},            {"attn_out", "self_attn.post"}};

// A Gemma 4 clippable linear (vision and audio towers): its weight and, in a clipped tower, the four one-value
// bounds llama.cpp stores beside it (HF: <to>.input_min, ... next to <to>.linear.weight).
template <class Get>
Status take_clippable_linear(const Get& get, Checkpoint& c, const std::string& from, const std::string& to,
                             bool clipped, const std::string& ctx) {
  PIPIT_ASSIGN_OR_RETURN(c.tensors[to + ".linear.weight"], get(from + ".weight"));
  if (!clipped) return Status::ok();
  for (const char* bound : {".input_min", ".input_max", ".output_min", ".output_max"}) {
    PIPIT_ASSIGN_OR_RETURN(Tensor t, get(from + bound));
    if (t.numel() != 1) return Error::format("{}: {}{} is {}, expected one value", ctx, from, bound, t.describe());
    c.tensors[to + bound] = t;
  }
  return Status::ok();
}

Status add_gemma4_audio(Checkpoint& c, const GgufFile& text, const GgufFile& mm) {
  const std::string ctx = "[gguf] " + mm.path();
  PIPIT_ASSIGN_OR_RETURN(int64_t H, clip_int(mm, "audio.embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, clip_int(mm, "audio.attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t depth, clip_int(mm, "audio.block_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_mel, clip_int(mm, "audio.num_mel_bins", 128));
  if (H <= 0 || n_head <= 0 || H % n_head || depth <= 0 || n_mel != 128)
    return Error::format("{}: audio embedding_length {} / head_count {} / block_count {} / num_mel_bins {} are not a "
                         "Gemma 4 audio tower", ctx, H, n_head, depth, n_mel);
  auto get = [&](const std::string& name) -> Result<Tensor> {
    const GgufTensorInfo* ti = mm.find_tensor(name);
    if (!ti) return Error::not_found("{}: missing tensor '{}'", ctx, name);
    return mm.tensor(*ti);
  };
  const std::string P = "model.audio_tower.", S = P + "subsample_conv_projection.";
  PIPIT_ASSIGN_OR_RETURN(Tensor c0, get("a.conv1d.0.weight"));
  PIPIT_ASSIGN_OR_RETURN(Tensor c1, get("a.conv1d.1.weight"));
  PIPIT_ASSIGN_OR_RETURN(Tensor out, get("a.pre_encode.out.weight"));
  PIPIT_ASSIGN_OR_RETURN(Tensor dw0, get("a.blk.0.conv_dw.weight"));
  if (c0.ndim() != 4 || c1.ndim() != 4 || out.ndim() != 2 || dw0.ndim() != 2)
    return Error::format("{}: a.conv1d.0 / 1 {} / {}, a.pre_encode.out {}, conv_dw {}: not Gemma 4's shapes", ctx,
                         c0.shape_str(), c1.shape_str(), out.shape_str(), dw0.shape_str());
  const int64_t K = dw0.dim(1);
  const bool clipped = mm.find_tensor("a.blk.0.attn_q.input_min") != nullptr;
  c.config["audio_config"] = {
      {"model_type", "gemma4_audio"}, {"hidden_size", H}, {"num_attention_heads", n_head},
      {"num_hidden_layers", depth}, {"subsampling_conv_channels", {c0.dim(0), c1.dim(0)}},
      {"conv_kernel_size", K}, {"output_proj_dims", out.dim(0)}, {"attention_chunk_size", 12},
      {"attention_context_left", 13}, {"attention_context_right", 0}, {"attention_logit_cap", 50.0},
      {"residual_weight", 0.5}, {"rms_norm_eps", 1e-6}, {"use_clipped_linears", clipped}, {"hidden_act", "silu"}};
  PIPIT_ASSIGN_OR_RETURN(c.config["audio_token_id"], token_id(text, "<|audio|>"));
  PIPIT_ASSIGN_OR_RETURN(c.config["boa_token_id"], token_id(text, "<|audio>"));
  PIPIT_ASSIGN_OR_RETURN(c.config["eoa_token_id"], token_id(text, "<audio|>"));

  c.tensors[S + "layer0.conv.weight"] = c0;
  c.tensors[S + "layer1.conv.weight"] = c1;
  PIPIT_ASSIGN_OR_RETURN(c.tensors[S + "layer0.norm.weight"], get("a.conv1d.0.norm.weight"));
  PIPIT_ASSIGN_OR_RETURN(c.tensors[S + "layer1.norm.weight"], get("a.conv1d.1.norm.weight"));
  PIPIT_ASSIGN_OR_RETURN(c.tensors[S + "input_proj_linear.weight"], get("a.input_projection.weight"));
  c.tensors[P + "output_proj.weight"] = out;
  PIPIT_ASSIGN_OR_RETURN(c.tensors[P + "output_proj.bias"], get("a.pre_encode.out.bias"));
  PIPIT_ASSIGN_OR_RETURN(c.tensors["model.embed_audio.embedding_projection.weight"],
                         get("mm.a.input_projection.weight"));
  for (int64_t b = 0; b < depth; ++b) {
    const std::string g = "a.blk." + std::to_string(b) + ".", h = P + "layers." + std::to_string(b) + ".";
    for (auto& [from, to] : kGemma4AudioNorms) {
      PIPIT_ASSIGN_OR_RETURN(c.tensors[h + to + ".weight"], get(g + from + ".weight"));
    }
    for (auto& [from, to] : kGemma4AudioLinears)
      PIPIT_TRY(take_clippable_linear(get, c, g + from, h + to, clipped, ctx));
    PIPIT_ASSIGN_OR_RETURN(c.tensors[h + "self_attn.relative_k_proj.weight"], get(g + "attn_k_rel.weight"));
    PIPIT_ASSIGN_OR_RETURN(Tensor dw, get(g + "conv_dw.weight"));
    if (dw.ndim() != 2 || dw.dim(0) != H || dw.dim(1) != K)
      return Error::format("{}: {}conv_dw.weight is {}, expected [{}, {}]", ctx, g, dw.describe(), H, K);
    c.tensors[h + "lconv1d.depthwise_conv1d.weight"] = dw.reshape({H, 1, K});
    PIPIT_ASSIGN_OR_RETURN(Tensor pds, get(g + "per_dim_scale.weight"));
    if (!ref_kernels().to_f32[int(pds.dtype())] || dtype_is_quantized(pds.dtype()))
      return Error::unsupported("{}: {}per_dim_scale.weight of type {}", ctx, g, dtype_name(pds.dtype()));
    Tensor x = widen(pds);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double y = x.ptr<float>()[i];
      if (!(y > 0) || !std::isfinite(y))
        return Error::format("{}: {}per_dim_scale.weight[{}] = {} (softplus(x) must be positive)", ctx, g, i, y);
      x.ptr<float>()[i] = float(std::log(std::expm1(y)));
    }
    c.tensors[h + "self_attn.per_dim_scale"] = x;
  }
  c.notes.push_back("mmproj " + mm.path() + " (gemma4a): per_dim_scale from softplus back, depthwise conv reshaped");
  return Status::ok();
}

// Gemma 4's vision tower, projector gemma4v (llama.cpp conversion/gemma.py Gemma4VisionAudioModel, clip.cpp; the
// audio tower in the same file, gemma4a: add_gemma4_audio). The converter renames and keeps every
// value; it reshapes the patch embedder's linear [E, p*p*3] (pixels in (row, column, channel) order) into a conv
// kernel [E, 3, p, p], stores the clip bounds (0-d) as [1] and the position table as it is. Fixed in clip.cpp and
// taken back here: RoPE theta 100, pooling 3 (clip.vision.projector.scale_factor when present), gelu_tanh MLP. The
// file holds no soft-token budget: HF's default (280, the Hub processor's) applies; llama.cpp picks its own between
// 70 and 1120 tokens, so an image's token count can differ from llama-mtmd-cli's.
Status add_gemma4_mmproj(Checkpoint& c, const GgufFile& text, const GgufFile& mm) {
  const std::string ctx = "[gguf] " + mm.path();
  nlohmann::json text_cfg = c.config;
  if (text_cfg.value("model_type", "") != "gemma4_text")
    return Error::invalid_argument("{}: a gemma4v projector needs a gemma4 (Gemma 4) language model, and {} is {}", ctx,
                                   text.path(), text_cfg.value("model_type", std::string("?")));
  PIPIT_ASSIGN_OR_RETURN(int64_t E, clip_int(mm, "vision.embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t F, clip_int(mm, "vision.feed_forward_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t depth, clip_int(mm, "vision.block_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, clip_int(mm, "vision.attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head_kv, clip_int(mm, "vision.attention.head_count_kv", n_head));
  PIPIT_ASSIGN_OR_RETURN(int64_t patch, clip_int(mm, "vision.patch_size"));
  PIPIT_ASSIGN_OR_RETURN(int64_t out_dim, clip_int(mm, "vision.projection_dim"));
  PIPIT_ASSIGN_OR_RETURN(int64_t pool, clip_int(mm, "vision.projector.scale_factor", 3));
  if (E <= 0 || n_head <= 0 || E % n_head || patch <= 0 || depth <= 0 || pool <= 0)
    return Error::format("{}: vision embedding_length {} / head_count {} / patch_size {} / block_count {} are not a "
                         "Gemma 4 tower", ctx, E, n_head, patch, depth);
  if (out_dim != text_cfg.value("hidden_size", int64_t(0)))
    return Error::invalid_argument("{}: projection_dim {} but the language model's width is {}", ctx, out_dim,
                                   text_cfg.value("hidden_size", int64_t(0)));
  double eps = 1e-6;
  if (const GgufValue* e = clip_key(mm, "vision.attention.layer_norm_epsilon"); e && e->is_number())
    eps = e->as_double();
  auto get = [&](const std::string& name) -> Result<Tensor> {
    const GgufTensorInfo* ti = mm.find_tensor(name);
    if (!ti) return Error::not_found("{}: missing tensor '{}'", ctx, name);
    return mm.tensor(*ti);
  };
  PIPIT_ASSIGN_OR_RETURN(Tensor pos, get("v.position_embd.weight"));
  if (pos.ndim() != 3 || pos.dim(0) != 2 || pos.dim(2) != E)
    return Error::format("{}: v.position_embd.weight is {}, expected [2, positions, {}]", ctx, pos.describe(), E);
  const bool clipped = mm.find_tensor("v.blk.0.attn_q.input_min") != nullptr;
  const bool standardize = mm.find_tensor("v.std_bias") != nullptr;  // the tower refuses it, by name
  const nlohmann::json v = {{"model_type", "gemma4_vision"}, {"hidden_size", E}, {"intermediate_size", F},
                            {"num_hidden_layers", depth}, {"num_attention_heads", n_head},
                            {"num_key_value_heads", n_head_kv}, {"head_dim", E / n_head}, {"patch_size", patch},
                            {"pooling_kernel_size", pool}, {"position_embedding_size", pos.dim(1)},
                            {"rms_norm_eps", eps}, {"use_clipped_linears", clipped}, {"standardize", standardize},
                            {"hidden_activation", "gelu_pytorch_tanh"}, {"default_output_length", 280},
                            {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 100.0}}}};
  nlohmann::json top = {{"architectures", {"Gemma4ForConditionalGeneration"}}, {"model_type", "gemma4"},
                        {"text_config", text_cfg}, {"vision_config", v},
                        {"tie_word_embeddings", text_cfg.value("tie_word_embeddings", true)}};
  if (text_cfg.contains("eos_token_id")) top["eos_token_id"] = text_cfg["eos_token_id"];
  PIPIT_ASSIGN_OR_RETURN(top["image_token_id"], token_id(text, "<|image|>"));
  PIPIT_ASSIGN_OR_RETURN(top["boi_token_id"], token_id(text, "<|image>"));
  PIPIT_ASSIGN_OR_RETURN(top["eoi_token_id"], token_id(text, "<image|>"));
  c.config = top;
  // Gemma4ImageProcessor: no mean / std in use (the file says 0 / 1), bicubic, the budget above
  c.texts["preprocessor_config"] = nlohmann::json{{"image_processor_type", "Gemma4ImageProcessor"},
                                                  {"patch_size", patch}, {"pooling_kernel_size", pool},
                                                  {"max_soft_tokens", 280}, {"do_normalize", false}}.dump();

  const std::string T = "model.vision_tower.";
  // conv kernel [E, 3, p, p] -> HF's linear [E, p * p * 3] (row, column, channel), as f32 (a few KB)
  PIPIT_ASSIGN_OR_RETURN(Tensor pe, get("v.patch_embd.weight"));
  if (pe.ndim() != 4 || pe.dim(0) != E || pe.dim(1) != 3 || pe.dim(2) != patch || pe.dim(3) != patch ||
      !ref_kernels().to_f32[int(pe.dtype())])
    return Error::format("{}: v.patch_embd.weight is {}, expected [{}, 3, {}, {}]", ctx, pe.describe(), E, patch,
                         patch);
  const Tensor pf = widen(pe);
  Tensor lin = Tensor::empty(DType::F32, {E, 3 * patch * patch});
  for (int64_t e = 0; e < E; ++e)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t py = 0; py < patch; ++py)
        for (int64_t px = 0; px < patch; ++px)
          lin.ptr<float>()[(e * patch * patch + py * patch + px) * 3 + ch] =
              pf.ptr<float>()[((e * 3 + ch) * patch + py) * patch + px];
  c.tensors[T + "patch_embedder.input_proj.weight"] = lin;
  c.tensors[T + "patch_embedder.position_embedding_table"] = pos;
  PIPIT_ASSIGN_OR_RETURN(c.tensors["model.embed_vision.embedding_projection.weight"],
                         get("mm.input_projection.weight"));
  if (standardize) {
    PIPIT_ASSIGN_OR_RETURN(c.tensors[T + "std_bias"], get("v.std_bias"));
    PIPIT_ASSIGN_OR_RETURN(c.tensors[T + "std_scale"], get("v.std_scale"));
  }
  const std::pair<const char*, const char*> kNorms[] = {
      {"ln1", "input_layernorm"}, {"attn_post_norm", "post_attention_layernorm"},
      {"ln2", "pre_feedforward_layernorm"}, {"ffn_post_norm", "post_feedforward_layernorm"},
      {"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"}};
  const std::pair<const char*, const char*> kLinears[] = {
      {"attn_q", "self_attn.q_proj"}, {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"},
      {"attn_out", "self_attn.o_proj"}, {"ffn_gate", "mlp.gate_proj"}, {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"}};
  for (int64_t b = 0; b < depth; ++b) {
    const std::string g = "v.blk." + std::to_string(b) + ".", h = T + "encoder.layers." + std::to_string(b) + ".";
    for (auto& [from, to] : kNorms) {
      PIPIT_ASSIGN_OR_RETURN(c.tensors[h + to + ".weight"], get(g + from + ".weight"));
    }
    for (auto& [from, to] : kLinears)
      PIPIT_TRY(take_clippable_linear(get, c, g + from, h + to, clipped, ctx));
    if (const GgufTensorInfo* ti = mm.find_tensor(g + "out_scale.weight")) {  // HF's layer_scalar, when it has one
      PIPIT_ASSIGN_OR_RETURN(c.tensors[h + "layer_scalar"], mm.tensor(*ti));
    }
  }
  c.notes.push_back("mmproj " + mm.path() + " (gemma4v): patch embedder kernel back to HF's linear layout");
  const GgufValue* has_audio = clip_key(mm, "has_audio_encoder");
  if (has_audio && has_audio->is_int() && has_audio->as_int() != 0) return add_gemma4_audio(c, text, mm);
  return Status::ok();
}

}  // namespace

Status add_gguf_mmproj(Checkpoint& c, const GgufFile& text, const GgufFile& mm) {
  const std::string ctx = "[gguf] " + mm.path();
  const GgufValue* arch = mm.find("general.architecture");
  if (!arch || arch->type != GgufType::kString || arch->s != "clip")
    return Error::format("{}: not an mmproj file (general.architecture is not 'clip')", ctx);
  const GgufValue* pt = clip_key(mm, "vision.projector_type");
  if (!pt) pt = clip_key(mm, "projector_type");
  if (!pt || pt->type != GgufType::kString) return Error::format("{}: no clip.projector_type", ctx);
  if (pt->s == "qwen3vl_merger") return add_qwen3vl_mmproj(c, text, mm);
  if (pt->s == "gemma4v") return add_gemma4_mmproj(c, text, mm);
  const bool v25 = pt->s == "qwen2.5vl_merger";
  if (pt->s != "qwen2vl_merger" && !v25)
    return Error::unsupported("{}: projector type '{}' is not supported (qwen2vl_merger, qwen2.5vl_merger, "
                              "qwen3vl_merger, gemma4v are)", ctx, pt->s);
  const nlohmann::json& rs = c.config["rope_scaling"];
  if (!rs.is_object() || !rs.contains("mrope_section"))
    return Error::invalid_argument("{}: a {} projector needs a qwen2vl language model, and {} is {}", ctx, pt->s,
                                   text.path(), c.config["model_type"].dump());

  PIPIT_ASSIGN_OR_RETURN(int64_t E, clip_int(mm, "vision.embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t F, clip_int(mm, "vision.feed_forward_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t depth, clip_int(mm, "vision.block_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, clip_int(mm, "vision.attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t patch, clip_int(mm, "vision.patch_size"));
  PIPIT_ASSIGN_OR_RETURN(int64_t out_dim, clip_int(mm, "vision.projection_dim"));
  PIPIT_ASSIGN_OR_RETURN(int64_t merge, clip_int(mm, "vision.spatial_merge_size", 2));
  if (out_dim != c.config.value("hidden_size", int64_t(0)))
    return Error::invalid_argument("{}: projection_dim {} but the language model's width is {}", ctx, out_dim,
                                   c.config.value("hidden_size", int64_t(0)));
  nlohmann::json v = {{"depth", depth}, {"num_heads", n_head}, {"patch_size", patch}, {"spatial_merge_size", merge},
                      {"temporal_patch_size", 2}, {"in_channels", 3}};
  if (v25) {
    PIPIT_ASSIGN_OR_RETURN(int64_t wa, clip_int(mm, "vision.n_wa_pattern"));
    PIPIT_ASSIGN_OR_RETURN(int64_t window, clip_int(mm, "vision.window_size", 112));
    if (wa <= 0) return Error::format("{}: clip.vision.n_wa_pattern must be positive", ctx);
    nlohmann::json full = nlohmann::json::array();  // every n_wa_pattern-th block attends over the whole image
    for (int64_t b = wa - 1; b < depth; b += wa) full.push_back(b);
    v.update({{"hidden_size", E}, {"intermediate_size", F}, {"out_hidden_size", out_dim}, {"window_size", window},
              {"fullatt_block_indexes", full}, {"hidden_act", "silu"}});
  } else {
    if (E <= 0 || F % E != 0) return Error::unsupported("{}: feed_forward_length {} is not a multiple of {}", ctx, F, E);
    v.update({{"embed_dim", E}, {"mlp_ratio", F / E}, {"hidden_size", out_dim}, {"hidden_act", "quick_gelu"}});
  }
  c.config["model_type"] = v25 ? "qwen2_5_vl" : "qwen2_vl";
  c.config["architectures"] = {v25 ? "Qwen2_5_VLForConditionalGeneration" : "Qwen2VLForConditionalGeneration"};
  c.config["vision_config"] = v;
  PIPIT_ASSIGN_OR_RETURN(c.config["image_token_id"], token_id(text, "<|image_pad|>"));
  PIPIT_ASSIGN_OR_RETURN(c.config["vision_start_token_id"], token_id(text, "<|vision_start|>"));
  PIPIT_ASSIGN_OR_RETURN(c.config["vision_end_token_id"], token_id(text, "<|vision_end|>"));

  // the image processor: Qwen2VLImageProcessor with the file's mean / std / patch / merge (and pixel bounds when
  // the file has them; else HF's defaults)
  nlohmann::json pp = {{"image_processor_type", "Qwen2VLImageProcessor"}, {"patch_size", patch},
                       {"merge_size", merge}, {"temporal_patch_size", 2}};
  PIPIT_ASSIGN_OR_RETURN(pp["image_mean"], clip_floats(mm, "vision.image_mean", 3));
  PIPIT_ASSIGN_OR_RETURN(pp["image_std"], clip_floats(mm, "vision.image_std", 3));
  if (clip_key(mm, "vision.image_min_pixels")) {
    PIPIT_ASSIGN_OR_RETURN(pp["min_pixels"], clip_int(mm, "vision.image_min_pixels"));
  }
  if (clip_key(mm, "vision.image_max_pixels")) {
    PIPIT_ASSIGN_OR_RETURN(pp["max_pixels"], clip_int(mm, "vision.image_max_pixels"));
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
  PIPIT_ASSIGN_OR_RETURN(c.tensors["visual.patch_embed.proj.weight"], join_frames(f0, f1, "v.patch_embd.weight"));
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
      PIPIT_ASSIGN_OR_RETURN(c.tensors[h + "attn.qkv." + kind], concat_rows(qkv, g + "attn_q/k/v." + kind));
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
  c.notes.push_back("mmproj " + mm.path() + " (" + pt->s + "): patch embedding frames and q/k/v joined");
  return Status::ok();
}

Result<Checkpoint> open_gguf_checkpoint(const std::string& path, const std::string& mmproj) {
  PIPIT_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
  PIPIT_ASSIGN_OR_RETURN(Checkpoint c, import_gguf(f));
  if (mmproj.empty()) return c;
  PIPIT_ASSIGN_OR_RETURN(GgufFile mm, GgufFile::open(mmproj));
  PIPIT_TRY(add_gguf_mmproj(c, f, mm));
  return c;
}

}  // namespace pipit
