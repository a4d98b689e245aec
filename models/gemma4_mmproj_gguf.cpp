// Gemma 4's mmproj (llama.cpp's vision and audio towers in one file: projectors gemma4v and gemma4a), registered
// beside models/gemma4.cpp in models/gguf_traits.h's registry, read by convert/gguf_mmproj.cpp. Its language model is
// models/gemma4_gguf.cpp's.
#include <cmath>

#include "core/dtype.h"
#include "models/gguf_traits.h"

namespace pipit {

namespace {

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

Status add_gemma4_audio(Checkpoint& c, const GgufFile& text, const GgufFile& mm, const GgufTools& tools) {
  const std::string ctx = "[gguf] " + mm.path();
  PIPIT_ASSIGN_OR_RETURN(int64_t H, gguf_clip_int(mm, "audio.embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, gguf_clip_int(mm, "audio.attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t depth, gguf_clip_int(mm, "audio.block_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_mel, gguf_clip_int(mm, "audio.num_mel_bins", 128));
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
  PIPIT_ASSIGN_OR_RETURN(c.config["audio_token_id"], gguf_token_id(text, "<|audio|>"));
  PIPIT_ASSIGN_OR_RETURN(c.config["boa_token_id"], gguf_token_id(text, "<|audio>"));
  PIPIT_ASSIGN_OR_RETURN(c.config["eoa_token_id"], gguf_token_id(text, "<audio|>"));

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
    if (!tools.can_widen(pds.dtype()) || dtype_is_quantized(pds.dtype()))
      return Error::unsupported("{}: {}per_dim_scale.weight of type {}", ctx, g, dtype_name(pds.dtype()));
    PIPIT_ASSIGN_OR_RETURN(Tensor x, tools.widen_f32(pds, g + "per_dim_scale.weight"));
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
Status add_gemma4_mmproj(Checkpoint& c, const GgufFile& text, const GgufFile& mm, const GgufTools& tools) {
  const std::string ctx = "[gguf] " + mm.path();
  nlohmann::json text_cfg = c.config;
  if (text_cfg.value("model_type", "") != "gemma4_text")
    return Error::invalid_argument("{}: a gemma4v projector needs a gemma4 (Gemma 4) language model, and {} is {}", ctx,
                                   text.path(), text_cfg.value("model_type", std::string("?")));
  PIPIT_ASSIGN_OR_RETURN(int64_t E, gguf_clip_int(mm, "vision.embedding_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t F, gguf_clip_int(mm, "vision.feed_forward_length"));
  PIPIT_ASSIGN_OR_RETURN(int64_t depth, gguf_clip_int(mm, "vision.block_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head, gguf_clip_int(mm, "vision.attention.head_count"));
  PIPIT_ASSIGN_OR_RETURN(int64_t n_head_kv, gguf_clip_int(mm, "vision.attention.head_count_kv", n_head));
  PIPIT_ASSIGN_OR_RETURN(int64_t patch, gguf_clip_int(mm, "vision.patch_size"));
  PIPIT_ASSIGN_OR_RETURN(int64_t out_dim, gguf_clip_int(mm, "vision.projection_dim"));
  PIPIT_ASSIGN_OR_RETURN(int64_t pool, gguf_clip_int(mm, "vision.projector.scale_factor", 3));
  if (E <= 0 || n_head <= 0 || E % n_head || patch <= 0 || depth <= 0 || pool <= 0)
    return Error::format("{}: vision embedding_length {} / head_count {} / patch_size {} / block_count {} are not a "
                         "Gemma 4 tower", ctx, E, n_head, patch, depth);
  if (out_dim != text_cfg.value("hidden_size", int64_t(0)))
    return Error::invalid_argument("{}: projection_dim {} but the language model's width is {}", ctx, out_dim,
                                   text_cfg.value("hidden_size", int64_t(0)));
  double eps = 1e-6;
  if (const GgufValue* e = gguf_clip_key(mm, "vision.attention.layer_norm_epsilon"); e && e->is_number())
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
  PIPIT_ASSIGN_OR_RETURN(top["image_token_id"], gguf_token_id(text, "<|image|>"));
  PIPIT_ASSIGN_OR_RETURN(top["boi_token_id"], gguf_token_id(text, "<|image>"));
  PIPIT_ASSIGN_OR_RETURN(top["eoi_token_id"], gguf_token_id(text, "<image|>"));
  c.config = top;
  // Gemma4ImageProcessor: no mean / std in use (the file says 0 / 1), bicubic, the budget above
  c.texts["preprocessor_config"] = nlohmann::json{{"image_processor_type", "Gemma4ImageProcessor"},
                                                  {"patch_size", patch}, {"pooling_kernel_size", pool},
                                                  {"max_soft_tokens", 280}, {"do_normalize", false}}.dump();

  const std::string T = "model.vision_tower.";
  // conv kernel [E, 3, p, p] -> HF's linear [E, p * p * 3] (row, column, channel), as f32 (a few KB)
  PIPIT_ASSIGN_OR_RETURN(Tensor pe, get("v.patch_embd.weight"));
  if (pe.ndim() != 4 || pe.dim(0) != E || pe.dim(1) != 3 || pe.dim(2) != patch || pe.dim(3) != patch ||
      !tools.can_widen(pe.dtype()))
    return Error::format("{}: v.patch_embd.weight is {}, expected [{}, 3, {}, {}]", ctx, pe.describe(), E, patch,
                         patch);
  PIPIT_ASSIGN_OR_RETURN(const Tensor pf, tools.widen_f32(pe, "v.patch_embd.weight"));
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
  const GgufValue* has_audio = gguf_clip_key(mm, "has_audio_encoder");
  if (has_audio && has_audio->is_int() && has_audio->as_int() != 0) return add_gemma4_audio(c, text, mm, tools);
  return Status::ok();
}

const GgufProjectorRegistrar kGemma4V("gemma4v", add_gemma4_mmproj);

}  // namespace

}  // namespace pipit
