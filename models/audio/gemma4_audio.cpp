// Gemma 4 audio tower (HF Gemma4AudioModel, a USM-style conformer) and its projector (embed_audio), on the log-mel
// features of models/audio/log_mel.h: subsampling (2 x [Conv2d 3x3 stride 2 -> LayerNorm over channels -> ReLU],
// the time mask applied before each conv and halved after, flatten (freq, channel), input_proj_linear), then per
// conformer layer: half-step FFN, chunked local self-attention (relative positions, per-dim query scale, logit
// soft-cap), light conv (GLU, causal depthwise conv), half-step FFN, RMSNorm; output_proj; embed_audio (weightless
// RMSNorm -> Linear into the decoder's embedding space). Every linear but the convs, relative_k_proj and the two
// projections is a Gemma4ClippableLinear (input and output clamped to stored bounds).
// reference: HF modeling_gemma4.py (Gemma4AudioSubSampleConvProjection, Gemma4AudioRelPositionalEncoding,
// Gemma4AudioAttention, Gemma4AudioFeedForward, Gemma4AudioLightConv1d, Gemma4AudioLayer, Gemma4AudioModel,
// Gemma4MultimodalEmbedder), processing_gemma4.py (token count), ../shared/testdata/reference/gemma4_audio.py.
//
// Only the frames of real audio are run through the conformer: the frame mask is a prefix, and a valid frame
// never reads a later one (attention sees the 11 previous frames and itself, the depthwise conv is causal), so
// dropping the padded tail after subsampling gives HF's valid rows exactly.
#include <cmath>

#include "backends/ops.h"
#include "core/host_f32.h"
#include "models/audio/audio_model.h"
#include "models/audio/log_mel.h"

namespace pipit {

namespace {

constexpr int kSampleRate = 16000;  // Gemma4AudioFeatureExtractor's sampling_rate (the decoder's, audio_decode.h)

// Gemma4Processor's settings of processor_config.json: the log-mel extractor ("feature_extractor") and the cap on
// soft tokens per clip (audio_seq_length x audio_ms_per_token: 750 x 40 ms = 30 s).
struct Gemma4AudioProcessor {
  LogMelConfig mel;
  int64_t seq_len = 750, ms_per_token = 40;
  double max_seconds() const { return double(seq_len * ms_per_token) / 1000.0; }
};

Result<Gemma4AudioProcessor> gemma4_audio_processor(const nlohmann::json& processor) {
  Gemma4AudioProcessor p;
  PIPIT_ASSIGN_OR_RETURN(p.mel, parse_log_mel_config(processor));
  if (p.mel.feature_size != 128)  // the mel bins after two stride-2 convs: 128 -> 64 -> 32
    return Error::unsupported("[gemma4 audio] feature_size {} (the tower takes 128 mel bins)", p.mel.feature_size);
  auto int_field = [&](const char* key, int64_t def) {
    return processor.is_object() && processor.contains(key) && processor[key].is_number_integer()
               ? processor[key].get<int64_t>() : def;
  };
  p.seq_len = int_field("audio_seq_length", 750);
  p.ms_per_token = int_field("audio_ms_per_token", 40);
  if (p.seq_len <= 0 || p.seq_len > 100000 || p.ms_per_token <= 0 || p.ms_per_token > 1000)
    return Error::invalid_argument("[gemma4 audio] audio_seq_length {} / audio_ms_per_token {} out of range",
                                   p.seq_len, p.ms_per_token);
  return p;
}

// Log-mel frames of a clip of n_samples (log_mel.h: right-padded to pad_to_multiple_of, frame_length / 2 zeros on
// the left, frames of frame_length + 1 every hop_length), and how many of them hold real audio (a prefix).
std::pair<int64_t, int64_t> gemma4_frames(const LogMelConfig& mel, int64_t n_samples) {
  const int64_t n_pad = (n_samples + mel.pad_to_multiple_of - 1) / mel.pad_to_multiple_of * mel.pad_to_multiple_of;
  const int64_t size = mel.frame_length + 1, left = mel.frame_length / 2;
  if (n_pad + left < size) return {0, 0};
  const int64_t n_frames = (n_pad + left - size) / mel.hop_length + 1;
  int64_t valid = 0;
  for (int64_t f = 0; f < n_frames; ++f) valid += f * mel.hop_length + size - 1 - left < n_samples;
  return {n_frames, valid};
}

// Gemma4ClippableLinear: clamp(input) -> linear (no bias) -> clamp(output); bounds absent = no clamp.
struct ClipLinear {
  Tensor w;
  float in_lo = -INFINITY, in_hi = INFINITY, out_lo = -INFINITY, out_hi = INFINITY;
};

struct AudioLayer {
  struct Ffn {
    Tensor pre_norm, post_norm;
    ClipLinear up, down;  // ffw_layer_1 [4H, H], ffw_layer_2 [H, 4H]
  } ffn1, ffn2;
  Tensor norm_pre_attn, norm_post_attn, norm_out;
  ClipLinear q, k, v, post;
  Tensor q_scale;  // [hd] f32 per dim: softplus(per_dim_scale) (after the encoder's hd^-0.5 / ln 2)
  Tensor rel_k_w;  // relative_k_proj [H, H]
  Tensor lconv_pre_norm, conv_norm;
  ClipLinear lin_start, lin_end;  // [2H, H], [H, H]
  Tensor dw;                      // depthwise conv [H, K] f32
};

class Gemma4AudioEncoder : public AudioEncoder {
 public:
  Status load(const HfConfig& top, const WeightSource& w, const nlohmann::json& processor) {
    if (!top.has("audio_config")) return Error::invalid_argument("[gemma4 audio] config.json has no audio_config");
    const HfConfig ac = top.sub("audio_config");
    const HfConfig tc = top.sub("text_config");
    PIPIT_ASSIGN_OR_RETURN(H_, ac.get_int("hidden_size"));
    PIPIT_ASSIGN_OR_RETURN(n_head_, ac.get_int("num_attention_heads"));
    PIPIT_ASSIGN_OR_RETURN(int64_t n_layer, ac.get_int("num_hidden_layers"));
    PIPIT_ASSIGN_OR_RETURN(n_embd_, tc.get_int("hidden_size"));
    const auto ch = ac.get_int_list("subsampling_conv_channels");
    if (ch.size() != 2)
      return Error::invalid_argument("[gemma4 audio] subsampling_conv_channels must list 2 channel counts");
    c0_ = ch[0], c1_ = ch[1];
    const int64_t K = ac.get_int_or("conv_kernel_size", 5);
    out_dim_ = ac.get_int_or("output_proj_dims", 1536);
    const int64_t chunk = ac.get_int_or("attention_chunk_size", 12), left = ac.get_int_or("attention_context_left", 13);
    const int64_t right = ac.get_int_or("attention_context_right", 0);
    softcap_ = float(ac.get_float_or("attention_logit_cap", 50.0));
    eps_ = float(ac.get_float_or("rms_norm_eps", 1e-6));
    gclip_ = float(ac.get_float_or("gradient_clipping", 1e10));
    residual_weight_ = float(ac.get_float_or("residual_weight", 0.5));
    const bool clipped = ac.get_bool_or("use_clipped_linears", true);
    if (H_ <= 0 || H_ > 65536 || n_head_ <= 0 || H_ % n_head_ || n_layer <= 0 || n_layer > 256 || c0_ <= 0 ||
        c1_ <= 0 || c0_ > 4096 || c1_ > 4096 || K <= 0 || K > 64 || out_dim_ <= 0 || out_dim_ > 65536 || chunk <= 0 ||
        left <= 1 || left > 1024)
      return Error::invalid_argument("[gemma4 audio] audio_config sizes out of range (hidden {}, heads {}, layers {}, "
                                     "channels {}/{}, kernel {}, output_proj_dims {}, chunk {}, context_left {})", H_,
                                     n_head_, n_layer, c0_, c1_, K, out_dim_, chunk, left);
    // HF's blocked attention with its rel-shift equals "query i sees keys i - (left - 2) .. i with relative
    // embedding of distance i - j" when the past context equals half the block context (E2B / E4B: chunk 12,
    // left 13, right 0); other shapes are refused rather than computed differently
    if (right != 0 || chunk != left - 1)
      return Error::unsupported("[gemma4 audio] attention_chunk_size {} / attention_context_left {} / right {} (only "
                                "chunk = left - 1, right = 0 is supported, as in every released Gemma 4)", chunk,
                                left, right);
    window_ = int(left - 1);
    const int64_t hd = H_ / n_head_;
    q_scale_ = float(std::pow(double(hd), -0.5) / std::log(2.0));  // then * softplus(per_dim_scale) per dim
    const int64_t n_freq = 128;  // the mel bins after two stride-2 convs: 128 -> 64 -> 32
    PIPIT_ASSIGN_OR_RETURN(const Gemma4AudioProcessor proc, gemma4_audio_processor(processor));
    mel_ = proc.mel;
    max_seconds_ = proc.max_seconds();  // 750 x 40 ms = 30 s: at most 750 soft tokens
    // HF's Gemma4Processor.replace_audio_token: one <|audio|> becomes <|audio>, n x <|audio|>, <audio|>
    const int32_t audio = int32_t(top.get_int_or("audio_token_id", -1));
    const int32_t boa = int32_t(top.get_int_or("boa_token_id", -1));
    const int32_t eoa = int32_t(top.get_int_or("eoa_token_id", top.get_int_or("eoa_token_index", -1)));
    if (audio < 0 || boa < 0 || eoa < 0)
      return Error::invalid_argument("[gemma4 audio] config.json lacks audio_token_id / boa_token_id / eoa_token_id");
    tokens_ = {audio, {boa}, {eoa}};

    const std::string P = "model.audio_tower.", S = P + "subsample_conv_projection.";
    PIPIT_ASSIGN_OR_RETURN(Tensor w0, w.get(S + "layer0.conv.weight", {c0_, 1, 3, 3}));
    PIPIT_ASSIGN_OR_RETURN(Tensor w1, w.get(S + "layer1.conv.weight", {c1_, c0_, 3, 3}));
    conv0_ = w0.reshape({c0_, 9});
    conv1_ = w1.reshape({c1_, c0_ * 9});
    PIPIT_ASSIGN_OR_RETURN(norm0_, w.get(S + "layer0.norm.weight", {c0_}));
    PIPIT_ASSIGN_OR_RETURN(norm1_, w.get(S + "layer1.norm.weight", {c1_}));
    // HF sizes input_proj_linear as (channels0 // 4) * channels1, which is the flattened (freq, channel) width
    // only when channels0 = 128 (= the mel bins); a checkpoint where they differ could not run in HF either
    if ((c0_ / 4) * c1_ != (n_freq / 4) * c1_)
      return Error::unsupported("[gemma4 audio] subsampling_conv_channels[0] = {} (HF's input_proj_linear needs 128)",
                                c0_);
    PIPIT_ASSIGN_OR_RETURN(in_proj_, w.get(S + "input_proj_linear.weight", {H_, (n_freq / 4) * c1_}));
    zeros0_ = host_full_f32({c0_}, 0.0f);
    zeros1_ = host_full_f32({c1_}, 0.0f);

    auto clip_linear = [&](const std::string& p, int64_t n_out, int64_t n_in) -> Result<ClipLinear> {
      ClipLinear L;
      PIPIT_ASSIGN_OR_RETURN(L.w, w.get(p + ".linear.weight", {n_out, n_in}));
      if (!clipped) return L;
      float* dst[4] = {&L.in_lo, &L.in_hi, &L.out_lo, &L.out_hi};
      const char* names[4] = {".input_min", ".input_max", ".output_min", ".output_max"};
      for (int i = 0; i < 4; ++i) {
        if (!w.has(p + names[i])) continue;  // HF keeps +-inf when a bound was never calibrated
        PIPIT_ASSIGN_OR_RETURN(Tensor b, w.find(p + names[i]));
        if (b.numel() != 1) return Error::format("[gemma4 audio] {}{}: {} (a scalar)", p, names[i], b.describe());
        PIPIT_ASSIGN_OR_RETURN(*dst[i], host_scalar_f32(b));
      }
      return L;
    };
    // Gemma4AudioRelPositionalEncoding: distances context/2 .. 0, [sin | cos] over H/2 timescales (float32); a
    // constant table, made once here
    const int64_t n_ts = H_ / 2, n_pos = window_ + 1;
    Tensor pos_emb = Tensor::empty(DType::F32, {n_pos, H_});
    const float inc = float(std::log(10000.0) / double(std::max<int64_t>(n_ts - 1, 1)));
    for (int64_t r = 0; r < n_pos; ++r) {
      const float dist = float(window_ - r);
      for (int64_t i = 0; i < n_ts; ++i) {
        const float st = dist * std::exp(float(i) * -inc);
        pos_emb.ptr<float>()[r * H_ + i] = std::sin(st);
        pos_emb.ptr<float>()[r * H_ + n_ts + i] = std::cos(st);
      }
    }
    pos_emb_ = pos_emb;
    for (int64_t il = 0; il < n_layer; ++il) {
      const std::string p = P + "layers." + std::to_string(il) + ".";
      AudioLayer L;
      for (auto [ff, name] : {std::pair{&L.ffn1, "feed_forward1."}, std::pair{&L.ffn2, "feed_forward2."}}) {
        PIPIT_ASSIGN_OR_RETURN(ff->pre_norm, w.get(p + name + "pre_layer_norm.weight", {H_}));
        PIPIT_ASSIGN_OR_RETURN(ff->post_norm, w.get(p + name + "post_layer_norm.weight", {H_}));
        PIPIT_ASSIGN_OR_RETURN(ff->up, clip_linear(p + name + "ffw_layer_1", 4 * H_, H_));
        PIPIT_ASSIGN_OR_RETURN(ff->down, clip_linear(p + name + "ffw_layer_2", H_, 4 * H_));
      }
      PIPIT_ASSIGN_OR_RETURN(L.norm_pre_attn, w.get(p + "norm_pre_attn.weight", {H_}));
      PIPIT_ASSIGN_OR_RETURN(L.norm_post_attn, w.get(p + "norm_post_attn.weight", {H_}));
      PIPIT_ASSIGN_OR_RETURN(L.norm_out, w.get(p + "norm_out.weight", {H_}));
      PIPIT_ASSIGN_OR_RETURN(L.q, clip_linear(p + "self_attn.q_proj", H_, H_));
      PIPIT_ASSIGN_OR_RETURN(L.k, clip_linear(p + "self_attn.k_proj", H_, H_));
      PIPIT_ASSIGN_OR_RETURN(L.v, clip_linear(p + "self_attn.v_proj", H_, H_));
      PIPIT_ASSIGN_OR_RETURN(L.post, clip_linear(p + "self_attn.post", H_, H_));
      PIPIT_ASSIGN_OR_RETURN(Tensor pds, w.get(p + "self_attn.per_dim_scale", {hd}));
      PIPIT_ASSIGN_OR_RETURN(L.q_scale, host_f32(pds));
      float* qs = L.q_scale.ptr<float>();
      for (int64_t d = 0; d < hd; ++d) qs[d] = qs[d] > 20.0f ? qs[d] : std::log1p(std::exp(qs[d]));  // torch softplus
      PIPIT_ASSIGN_OR_RETURN(L.rel_k_w, w.get(p + "self_attn.relative_k_proj.weight", {H_, H_}));
      PIPIT_ASSIGN_OR_RETURN(L.lconv_pre_norm, w.get(p + "lconv1d.pre_layer_norm.weight", {H_}));
      PIPIT_ASSIGN_OR_RETURN(L.conv_norm, w.get(p + "lconv1d.conv_norm.weight", {H_}));
      PIPIT_ASSIGN_OR_RETURN(L.lin_start, clip_linear(p + "lconv1d.linear_start", 2 * H_, H_));
      PIPIT_ASSIGN_OR_RETURN(L.lin_end, clip_linear(p + "lconv1d.linear_end", H_, H_));
      PIPIT_ASSIGN_OR_RETURN(Tensor dw, w.get(p + "lconv1d.depthwise_conv1d.weight", {H_, 1, K}));
      PIPIT_ASSIGN_OR_RETURN(L.dw, host_f32(dw, {H_, K}));
      layers_.push_back(std::move(L));
    }
    PIPIT_ASSIGN_OR_RETURN(out_proj_, w.get(P + "output_proj.weight", {out_dim_, H_}));
    PIPIT_ASSIGN_OR_RETURN(out_bias_, w.get(P + "output_proj.bias", {out_dim_}));
    PIPIT_ASSIGN_OR_RETURN(embed_proj_, w.get("model.embed_audio.embedding_projection.weight", {n_embd_, out_dim_}));
    ones_out_ = host_full_f32({out_dim_}, 1.0f);
    return Status::ok();
  }

  Result<int64_t> n_audio_tokens(int64_t n_samples) const override {
    if (n_samples <= 0) return Error::invalid_argument("[audio] the clip has 0 samples");
    if (double(n_samples) / kSampleRate > max_seconds_ + 1e-9)
      return Error::invalid_argument("[audio] the clip is {} samples; at most {} s ({} samples) are taken", n_samples,
                                     max_seconds_, int64_t(max_seconds_ * kSampleRate));
    // frames (log_mel.h) whose last sample is real audio, then the mask halved twice ([::2])
    const auto [n_frames, valid] = gemma4_frames(mel_, n_samples);
    if (n_frames == 0)
      return Error::invalid_argument("[audio] the clip has {} samples: too short for one audio frame", n_samples);
    const int64_t n_tok = ((valid + 1) / 2 + 1) / 2;  // the valid frames are a prefix: ceil(ceil(v / 2) / 2)
    if (n_tok == 0)
      return Error::invalid_argument("[audio] the clip has {} samples: too short to give one audio token", n_samples);
    return n_tok;
  }

  Result<Tensor> encode(Ctx& ctx, std::span<const float> samples) const override {
    PIPIT_ASSIGN_OR_RETURN(int64_t n_tok, n_audio_tokens(int64_t(samples.size())));
    PIPIT_ASSIGN_OR_RETURN(LogMelFeatures mel, log_mel_features(mel_, samples));
    const int64_t T = mel.n_frames, F = mel_.feature_size;
    Tensor feat = Tensor::from_data(DType::F32, {T, F}, mel.features.data(), nullptr);
    ctx.name(feat, "audio.input_features");
    // subsampling: [T, F, 1] -> [T1, F/2, c0] -> [T2, F/4, c1]; the mask zeroes time rows before each conv
    std::vector<uint8_t> m = mel.mask;
    Tensor h = Tensor::from_data(DType::F32, {T, F, 1}, mel.features.data(), nullptr);
    for (int li = 0; li < 2; ++li) {
      const int64_t rows = h.dim(0);
      for (int64_t t = 0; t < rows;) {  // each run of masked time rows
        if (m[size_t(t)]) {
          ++t;
          continue;
        }
        int64_t e = t;
        while (e < rows && !m[size_t(e)]) ++e;
        Tensor run = h.slice(0, t, e);
        fill_(ctx, run, 0.0f);
        t = e;
      }
      Tensor y = conv2d_3x3_s2(ctx, h, li == 0 ? conv0_ : conv1_);  // heap
      const int64_t C = y.dim(2);
      Tensor n = layer_norm(ctx, y.reshape({y.dim(0) * y.dim(1), C}), li == 0 ? norm0_ : norm1_,
                            li == 0 ? zeros0_ : zeros1_, eps_);
      clamp_(ctx, n, 0.0f, INFINITY);  // ReLU
      h = heap_copy(ctx, n.reshape(y.shape()));
      std::vector<uint8_t> half;
      for (size_t t = 0; t < m.size(); t += 2) half.push_back(m[t]);
      m = std::move(half);
    }
    int64_t valid = 0;
    for (uint8_t v : m) valid += v;
    if (valid != n_tok)
      return Error::internal("[gemma4 audio] {} valid encoder frames, the processor counts {}", valid, n_tok);
    // valid rows only (see the top of the file); heap copies from here, the arena holds one layer's activations
    Tensor flat = h.slice(0, 0, n_tok).reshape({n_tok, h.dim(1) * h.dim(2)});
    Tensor x = heap_copy(ctx, linear(ctx, flat, in_proj_));
    ctx.name(x, "audio.subsample");
    for (size_t il = 0; il < layers_.size(); ++il) {
      ArenaScope scope(*ctx.arena);
      const AudioLayer& L = layers_[il];
      x = ffn(ctx, x, L.ffn1);
      Tensor a = to_f32(ctx, x);
      clamp_(ctx, a, -gclip_, gclip_);
      a = rms_norm(ctx, a, L.norm_pre_attn, eps_);
      a = attention(ctx, a, L);
      clamp_(ctx, a, -gclip_, gclip_);
      a = rms_norm(ctx, a, L.norm_post_attn, eps_);
      add_(ctx, a, x);
      x = light_conv(ctx, a, L);
      x = ffn(ctx, x, L.ffn2);
      clamp_(ctx, x, -gclip_, gclip_);
      x = heap_copy(ctx, rms_norm(ctx, x, L.norm_out, eps_));
      ctx.name(x, "audio.layer", int(il));
    }
    ArenaScope scope(*ctx.arena);
    Tensor enc = ctx.name(linear(ctx, x, out_proj_, out_bias_), "audio.encoder_out");
    Tensor e = rms_norm(ctx, enc, ones_out_, eps_);
    return heap_copy(ctx, ctx.name(linear(ctx, e, embed_proj_), "audio_embeds"));
  }

 private:
  static Tensor clip_linear(Ctx& ctx, const Tensor& x, const ClipLinear& L) {
    Tensor in = x;
    if (std::isfinite(L.in_lo) || std::isfinite(L.in_hi)) {
      in = to_f32(ctx, x);
      clamp_(ctx, in, L.in_lo, L.in_hi);
    }
    Tensor y = linear(ctx, in, L.w);
    if (std::isfinite(L.out_lo) || std::isfinite(L.out_hi)) clamp_(ctx, y, L.out_lo, L.out_hi);
    return y;
  }

  // Gemma4AudioFeedForward: clamp -> RMSNorm -> ffw_layer_1 -> SiLU -> ffw_layer_2 -> clamp -> RMSNorm, then
  // residual + residual_weight * that.
  Tensor ffn(Ctx& ctx, const Tensor& x, const AudioLayer::Ffn& f) const {
    Tensor h = to_f32(ctx, x);
    clamp_(ctx, h, -gclip_, gclip_);
    h = rms_norm(ctx, h, f.pre_norm, eps_);
    h = clip_linear(ctx, h, f.up);
    silu_(ctx, h);
    h = clip_linear(ctx, h, f.down);
    clamp_(ctx, h, -gclip_, gclip_);
    h = rms_norm(ctx, h, f.post_norm, eps_);
    scale_(ctx, h, residual_weight_);
    add_(ctx, h, x);
    return h;
  }

  // Gemma4AudioAttention: q scaled per dim, k by ln(1 + e) / ln 2, local attention with relative keys and soft-cap.
  Tensor attention(Ctx& ctx, const Tensor& x, const AudioLayer& L) const {
    const int64_t n = x.dim(0), hd = H_ / n_head_;
    Tensor q = clip_linear(ctx, x, L.q), k = clip_linear(ctx, x, L.k), v = clip_linear(ctx, x, L.v);
    const float k_scale = float(std::log(1.0 + M_E) / std::log(2.0));
    scale_(ctx, q, q_scale_);
    Tensor q_heads = q.reshape({n * n_head_, hd});
    scale_channels_(ctx, q_heads, L.q_scale);
    scale_(ctx, k, k_scale);
    // relative keys by distance: row d = relative_k_proj(the position embedding of distance d)
    Tensor rk = linear(ctx, pos_emb_, L.rel_k_w);  // [window + 1, H], row r = distance window - r
    std::vector<int64_t> by_distance(static_cast<size_t>(window_));
    for (int d = 0; d < window_; ++d) by_distance[size_t(d)] = window_ - d;
    Tensor rel_k = gather_rows(ctx, rk, by_distance).reshape({window_, n_head_, hd});
    Tensor o = local_rel_attention(ctx, q.reshape({n, n_head_, hd}), k.reshape({n, n_head_, hd}),
                                   v.reshape({n, n_head_, hd}), rel_k, window_, softcap_);
    return clip_linear(ctx, o.reshape({n, H_}), L.post);
  }

  // Gemma4AudioLightConv1d: RMSNorm -> linear_start -> GLU -> causal depthwise conv -> clamp -> RMSNorm -> SiLU ->
  // linear_end, plus the residual.
  Tensor light_conv(Ctx& ctx, const Tensor& x, const AudioLayer& L) const {
    Tensor h = rms_norm(ctx, x, L.lconv_pre_norm, eps_);
    h = glu(ctx, clip_linear(ctx, h, L.lin_start));
    h = depthwise_conv1d_causal(ctx, h, L.dw);
    clamp_(ctx, h, -gclip_, gclip_);
    h = rms_norm(ctx, h, L.conv_norm, eps_);
    silu_(ctx, h);
    h = clip_linear(ctx, h, L.lin_end);
    add_(ctx, h, x);
    return h;
  }

  int64_t H_ = 0, n_head_ = 0, n_embd_ = 0, c0_ = 0, c1_ = 0, out_dim_ = 0;
  int window_ = 12;
  float softcap_ = 50.0f, eps_ = 1e-6f, gclip_ = 1e10f, residual_weight_ = 0.5f, q_scale_ = 1.0f;
  LogMelConfig mel_;
  Tensor conv0_, conv1_, norm0_, norm1_, zeros0_, zeros1_, in_proj_;
  Tensor pos_emb_;  // [window + 1, H] f32: the relative position embedding, row r = distance window - r
  std::vector<AudioLayer> layers_;
  Tensor out_proj_, out_bias_, embed_proj_, ones_out_;
};

Result<std::unique_ptr<AudioEncoder>> make_gemma4_audio(const HfConfig& cfg, const WeightSource& w,
                                                        const nlohmann::json& processor) {
  auto e = std::make_unique<Gemma4AudioEncoder>();
  PIPIT_TRY(e->load(cfg, w, processor));
  return std::unique_ptr<AudioEncoder>(std::move(e));
}

// One clip at the longest through encode(): the log-mel features and the time-masked copy, the two subsampling
// stages (each conv's output on the heap, its layer norm in the arena, the kept copy: 3 buffers of its size), then
// per conformer row a layer's temporaries at the tower's width (as the vision towers' rule: 8 rows of H and 3 of the
// FFN's 4H) and the projections. Measured: `pipit run` of the test checkpoint with a 30 s clip peaks at 173.0 MB
// resident, estimated 171.7 MB (of which 155 MB is this bound, the first conv stage's three buffers most of it).
Result<double> gemma4_audio_encode_bytes(const HfConfig& top, const nlohmann::json& processor) {
  PIPIT_ASSIGN_OR_RETURN(const Gemma4AudioProcessor proc, gemma4_audio_processor(processor));
  const HfConfig ac = top.sub("audio_config");
  const double H = double(ac.get_int_or("hidden_size", 1024)), out = double(ac.get_int_or("output_proj_dims", 1536));
  const auto ch = ac.get_int_list("subsampling_conv_channels");
  const double c0 = ch.size() == 2 ? double(ch[0]) : 128, c1 = ch.size() == 2 ? double(ch[1]) : 32;
  const double n_embd = double(top.sub("text_config").get_int_or("hidden_size", 0));
  const auto [frames, valid] = gemma4_frames(proc.mel, int64_t(proc.max_seconds() * kSampleRate));
  const double T = double(frames), F = double(proc.mel.feature_size), rows = double(((valid + 1) / 2 + 1) / 2);
  const double floats = 2 * T * F + 3 * (T / 2) * (F / 2) * c0 + 3 * (T / 4) * (F / 4) * c1 +
                        rows * (8 * H + 3 * 4 * H) + rows * (out + n_embd);
  return floats * 4.0;
}

}  // namespace

static AudioEncoderRegistrar kGemma4Audio("gemma4", make_gemma4_audio, gemma4_audio_encode_bytes);

}  // namespace pipit
