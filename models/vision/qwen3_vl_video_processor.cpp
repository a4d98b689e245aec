// Qwen3VLVideoProcessor (Qwen3-VL, Qwen3.5) on decoded frames: sample frames at `fps` from the clip's own frame
// rate, smart_resize with the pixel budget counted over all sampled frames, rescale + normalize fused as HF's fast
// processors do ((x - mean / r) / (std / r) in float32), pad to whole temporal patches with the last frame, and
// flatten into the rows a Qwen vision tower takes, as an image's (t > 1). The prompt: per temporal patch, its
// timestamp as text ("<0.2 seconds>"), <|vision_start|>, h * w / merge^2 video tokens, <|vision_end|>; each temporal
// patch is a span of grid (1, h, w), as HF's get_rope_index splits a video (models/qwen_rope_index.h).
// Limits: at most max_frames sampled frames (HF default 768) and the longest_edge pixel budget over all of them.
// reference: HF video_processing_qwen3_vl.py (sample_frames, smart_resize, _preprocess), processing_qwen3_vl.py
// (_calculate_timestamps, __call__: the video placeholder replaced per temporal patch).
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "models/vision/image_processor_fields.h"
#include "models/vision/qwen_patch_rows.h"
#include "models/vision/video_processor.h"
#include "models/vision/vision_model.h"

namespace pipit {

namespace {

using image_fields::py_round;

// sample_frames: int(total / video_fps * fps) frames within [min_frames, min(max_frames, total)], at
// np.linspace(0, total - 1, n).round() (linspace: start + i * step, the last one exactly the end).
std::vector<int32_t> sample_frames(int64_t total, double video_fps, const VideoProcessorConfig& c) {
  int64_t n = int64_t(double(total) / video_fps * c.fps);
  n = std::min({std::max(n, c.min_frames), c.max_frames, total});
  std::vector<int32_t> idx(size_t(n), 0);
  const double step = n > 1 ? double(total - 1) / double(n - 1) : 0.0;
  for (int64_t i = 0; i < n; ++i)
    idx[size_t(i)] = int32_t(i == n - 1 && n > 1 ? total - 1 : py_round(double(i) * step));
  return idx;
}

// video_processing_qwen3_vl.smart_resize: as the image one, but the pixel budget counts every sampled frame.
Result<std::pair<int64_t, int64_t>> video_smart_resize(int64_t frames, int64_t height, int64_t width, int64_t tf,
                                                       int64_t factor, int64_t min_pixels, int64_t max_pixels) {
  if (frames < tf)
    return Error::invalid_argument("[video processor] {} sampled frame(s), fewer than the temporal patch {}", frames,
                                   tf);
  if (height < factor || width < factor) {
    const double scale = std::max(double(factor) / double(height), double(factor) / double(width));
    height = int64_t(double(height) * scale);
    width = int64_t(double(width) * scale);
  } else if (double(std::max(height, width)) / double(std::min(height, width)) > 200) {
    return Error::invalid_argument("[video processor] frames {}x{}: aspect ratio above 200 (HF's limit)", width,
                                   height);
  }
  if (std::fegetround() != FE_TONEAREST) std::fesetround(FE_TONEAREST);
  int64_t h = py_round(double(height) / double(factor)) * factor, w = py_round(double(width) / double(factor)) * factor;
  const int64_t t = py_round(double(frames) / double(tf)) * tf;
  if (t * h * w > max_pixels) {
    const double beta = std::sqrt(double(frames * height * width) / double(max_pixels));
    h = std::max(factor, int64_t(std::floor(double(height) / beta / double(factor))) * factor);
    w = std::max(factor, int64_t(std::floor(double(width) / beta / double(factor))) * factor);
  } else if (t * h * w < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / double(frames * height * width));
    h = int64_t(std::ceil(double(height) * beta / double(factor))) * factor;
    w = int64_t(std::ceil(double(width) * beta / double(factor))) * factor;
  }
  return std::make_pair(h, w);
}

Status read_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  if (!j.contains(key) || j[key].is_null()) return Status::ok();
  const auto& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    return Error::invalid_argument("[video processor] {}: {} must be an integer in [{}, {}]", key, v.dump(), lo, hi);
  *out = v.get<int64_t>();
  return Status::ok();
}

Result<ProcessedVideo> preprocess_qwen3_vl(int64_t n_clip, const FrameSource& frame, double video_fps,
                                           const VideoProcessorConfig& c) {
  ProcessedVideo out;
  if (c.do_sample_frames) {
    out.frame_indices = sample_frames(n_clip, video_fps, c);
  } else {
    if (n_clip > c.max_frames)
      return Error::invalid_argument("[video processor] {} frames without sampling, more than max_frames {}", n_clip,
                                     c.max_frames);
    for (int64_t i = 0; i < n_clip; ++i) out.frame_indices.push_back(int32_t(i));
  }
  // only the sampled frames are decoded, one at a time; the first gives the size every other must have
  PIPIT_ASSIGN_OR_RETURN(Image first, frame(out.frame_indices[0]));
  const int H = first.height, W = first.width;
  auto check = [&](const Image& img, int32_t index) -> Status {
    if (img.height != H || img.width != W || img.rgb.size() != size_t(H) * size_t(W) * 3)
      return Error::invalid_argument("[video processor] frame {} is {}x{}, frame {} {}x{}: frames must be one size",
                                     index, img.width, img.height, out.frame_indices[0], W, H);
    return Status::ok();
  };
  PIPIT_TRY(check(first, out.frame_indices[0]));
  const int64_t p = c.patch_size, m = c.merge_size, tps = c.temporal_patch_size, T = int64_t(out.frame_indices.size());
  int64_t rh = H, rw = W;
  if (c.do_resize) {
    PIPIT_ASSIGN_OR_RETURN(auto hw, video_smart_resize(T, H, W, tps, p * m, c.min_pixels, c.max_pixels));
    rh = hw.first;
    rw = hw.second;
  }
  if (rh % (p * m) || rw % (p * m))
    return Error::invalid_argument("[video processor] frames {}x{} are not a multiple of patch * merge = {} "
                                   "(do_resize is off)", rw, rh, p * m);
  // rescale + normalize fused as BaseImageProcessorFast does: (x - mean / r) / (std / r) in float32
  std::array<float, 3> sub{}, div{};
  for (size_t ch = 0; ch < 3; ++ch) {
    const float inv_r = float(1.0 / c.rescale_factor);
    sub[ch] = c.do_normalize ? (c.do_rescale ? c.mean[ch] * inv_r : c.mean[ch]) : 0.0f;
    div[ch] = c.do_normalize ? (c.do_rescale ? c.std[ch] * inv_r : c.std[ch]) : 1.0f;
  }
  const bool rescale_only = c.do_rescale && !c.do_normalize;
  // frames as CHW planes, the last repeated up to whole temporal patches
  const int64_t n_frames = (T + tps - 1) / tps * tps, plane = rh * rw;
  std::vector<float> chw(size_t(n_frames * 3 * plane));
  for (int64_t f = 0; f < n_frames; ++f) {
    float* dst = chw.data() + f * 3 * plane;
    if (f >= T) {  // padding: the last sampled frame again
      std::memcpy(dst, chw.data() + (T - 1) * 3 * plane, size_t(3 * plane) * 4);
      continue;
    }
    Image src;
    if (f == 0) {
      src = std::move(first);
    } else {
      PIPIT_ASSIGN_OR_RETURN(src, frame(out.frame_indices[size_t(f)]));
      PIPIT_TRY(check(src, out.frame_indices[size_t(f)]));
    }
    // torchvision's antialiased bicubic where HF resizes; PIL's here (the same filter on uint8, within a level)
    const Image resized = (rh == H && rw == W) ? std::move(src) : resize_image(src, int(rw), int(rh), c.resample);
    for (int64_t i = 0; i < plane; ++i)
      for (int64_t ch = 0; ch < 3; ++ch) {
        const float u = float(resized.rgb[size_t(i * 3 + ch)]);
        dst[ch * plane + i] =
            rescale_only ? float(double(u) * c.rescale_factor) : (u - sub[size_t(ch)]) / div[size_t(ch)];
      }
  }
  // rows (t, h/m, w/m, m, m), columns (channel, frame in the temporal patch, py, px)
  const int64_t gt = n_frames / tps, gh = rh / p, gw = rw / p, cols = 3 * tps * p * p;
  ProcessedImage& pi = out.patches;
  pi.grid_thw = {int32_t(gt), int32_t(gh), int32_t(gw)};
  pi.resized_height = int(rh);
  pi.resized_width = int(rw);
  pi.pixel_values = Tensor::empty(DType::F32, {gt * gh * gw, cols});
  float* dst = pi.pixel_values.ptr<float>();
  for (int64_t t = 0; t < gt; ++t)
    dst = qwen_patch_rows(dst, gh, gw, m, p, tps, rh, rw,
                          [&](int64_t k) { return chw.data() + (t * tps + k) * 3 * plane; });
  // _calculate_timestamps: indices padded with the last to whole temporal patches, idx / fps, first/last mean
  std::vector<int32_t> idx = out.frame_indices;
  while (int64_t(idx.size()) % tps) idx.push_back(idx.back());
  for (size_t i = 0; i < idx.size(); i += size_t(tps))
    out.timestamps.push_back((double(idx[i]) / video_fps + double(idx[i + size_t(tps) - 1]) / video_fps) / 2);
  return out;
}

class Qwen3VlVideoProcessor : public VideoProcessorKind {
 public:
  Status parse(const nlohmann::json& vpp, VideoProcessorConfig& c) const override {
    using image_fields::read_int;  // the tower's sizes, read and checked as the image processor's
    PIPIT_TRY(read_int(vpp, "patch_size", 1, 1024, &c.patch_size));
    PIPIT_TRY(read_int(vpp, "merge_size", 1, 64, &c.merge_size));
    PIPIT_TRY(read_int(vpp, "temporal_patch_size", 1, 64, &c.temporal_patch_size));
    constexpr int64_t kMaxPixels = kMaxImagePixels;  // over all frames: what one decoded image may have
    PIPIT_TRY(pipit::read_int(vpp, "min_pixels", 1, kMaxPixels, &c.min_pixels));
    PIPIT_TRY(pipit::read_int(vpp, "max_pixels", 1, kMaxPixels, &c.max_pixels));
    if (vpp.contains("size") && vpp["size"].is_object()) {
      PIPIT_TRY(pipit::read_int(vpp["size"], "shortest_edge", 1, kMaxPixels, &c.min_pixels));
      PIPIT_TRY(pipit::read_int(vpp["size"], "longest_edge", 1, kMaxPixels, &c.max_pixels));
    }
    if (c.min_pixels > c.max_pixels)
      return Error::invalid_argument("[video processor] min above max (pixels {} > {})", c.min_pixels, c.max_pixels);
    return Status::ok();
  }
  Status check(const VideoProcessorConfig& c, const VideoProcessorConfig& m) const override {
    if (c.patch_size != m.patch_size || c.merge_size != m.merge_size || c.temporal_patch_size != m.temporal_patch_size)
      return Error::invalid_argument("[video] video processor (patch {}, merge {}, temporal {}) does not match the "
                                     "vision tower (patch {}, merge {}, temporal {})", c.patch_size, c.merge_size,
                                     c.temporal_patch_size, m.patch_size, m.merge_size, m.temporal_patch_size);
    return Status::ok();
  }
  Result<ProcessedVideo> preprocess(int64_t n_frames, const FrameSource& frame, double video_fps,
                                    const VideoProcessorConfig& c) const override {
    return preprocess_qwen3_vl(n_frames, frame, video_fps, c);
  }
  std::vector<int32_t> placeholder(const VisionTokens& t) const override {
    std::vector<int32_t> p;  // <|vision_start|><|video_pad|><|vision_end|>, as the chat templates write it
    if (t.vision_start_id >= 0) p.push_back(t.vision_start_id);
    p.push_back(t.video_token_id);
    if (t.vision_end_id >= 0) p.push_back(t.vision_end_id);
    return p;
  }
  Result<std::vector<VideoSegment>> expand(const ProcessedVideo& v, const VisionTokens& t,
                                           const TextEncoder& encode_text) const override {
    const auto grid = v.patches.grid_thw;
    const int64_t per = int64_t(grid[1]) * grid[2] / (int64_t(t.merge_size) * t.merge_size);
    if (int64_t(v.timestamps.size()) != grid[0])
      return Error::internal("[video] {} timestamps for grid {}x{}x{}", v.timestamps.size(), grid[0], grid[1],
                             grid[2]);
    std::vector<VideoSegment> out;
    for (int64_t g = 0; g < grid[0]; ++g) {  // per temporal patch: "<0.2 seconds>" <|vision_start|> .. <|vision_end|>
      VideoSegment s;
      PIPIT_ASSIGN_OR_RETURN(s.before, encode_text(video_timestamp_text(v.timestamps[size_t(g)])));
      if (t.vision_start_id >= 0) s.before.push_back(t.vision_start_id);
      s.rows = per;
      s.grid = {1, grid[1], grid[2]};
      if (t.vision_end_id >= 0) s.after.push_back(t.vision_end_id);
      out.push_back(std::move(s));
    }
    return out;
  }
  ImageProcessorKind::Extent max_extent(const VideoProcessorConfig& c) const override {
    // max_pixels bounds t * h * w over the sampled frames (padded to whole temporal patches): the tower's patches
    // are that over (temporal patch * patch^2), each of 3 * temporal * patch^2 floats
    const double tps = c.temporal_patch_size, p2 = double(c.patch_size) * c.patch_size;
    return {double(c.max_pixels) / (tps * p2), double(c.max_pixels) * 3};
  }
};

}  // namespace

std::string video_timestamp_text(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "<%.1f seconds>", seconds);  // printf rounds the binary value as Python does
  return buf;
}

PIPIT_REGISTER_VIDEO_PROCESSOR("qwen3_vl", Qwen3VlVideoProcessor);

}  // namespace pipit
