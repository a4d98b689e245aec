// What every video processor shares: the registry of VideoProcessorKind, the common video_preprocessor_config.json
// fields, and the dispatch to a family's processor (see video_processor.h). The families' processors are beside it:
// qwen3_vl_video_processor.cpp.
#include "models/vision/video_processor.h"

#include <cmath>
#include <map>

#include "models/vision/image_processor_fields.h"

namespace pipit {

namespace {

std::map<std::string, const VideoProcessorKind*>& registry() {
  static std::map<std::string, const VideoProcessorKind*> r;
  return r;
}

Status read_count(const nlohmann::json& j, const char* key, int64_t* out) {
  if (!j.contains(key) || j[key].is_null()) return Status::ok();
  const auto& v = j[key];
  constexpr int64_t kMax = 1 << 20;
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMax)
    return Error::invalid_argument("[video processor] {}: {} must be an integer in [1, {}]", key, v.dump(), kMax);
  *out = v.get<int64_t>();
  return Status::ok();
}

}  // namespace

void register_video_processor(const char* kind, const VideoProcessorKind* impl) { registry()[kind] = impl; }

Result<const VideoProcessorKind*> find_video_processor(const std::string& kind) {
  auto it = registry().find(kind);
  if (it != registry().end()) return it->second;
  std::string known;
  for (const auto& [k, _] : registry()) known += (known.empty() ? "" : ", ") + k;
  return Error::unsupported("[video processor] no video processor '{}' (this build has {})", kind, known);
}

Result<VideoProcessorConfig> parse_video_processor(const nlohmann::json& vpp, VideoProcessorConfig c) {
  if (vpp.is_null()) return c;
  if (!vpp.is_object()) return Error::invalid_argument("[video processor] config must be a JSON object");
  using namespace image_fields;  // the fields it shares with the image processors, read and checked as theirs
  int64_t resample = int64_t(c.resample);
  PIPIT_TRY(read_int(vpp, "resample", 0, 5, &resample));
  PIPIT_ASSIGN_OR_RETURN(c.resample, resample_filter_from_pil(int(resample)));
  PIPIT_TRY(read_bool(vpp, "do_resize", &c.do_resize));
  PIPIT_TRY(read_bool(vpp, "do_rescale", &c.do_rescale));
  PIPIT_TRY(read_bool(vpp, "do_normalize", &c.do_normalize));
  bool center_crop = false;  // no video processor crops; the field is only checked, as an image config's
  PIPIT_TRY(read_bool(vpp, "do_center_crop", &center_crop));
  if (vpp.contains("rescale_factor") && !vpp["rescale_factor"].is_null()) {
    if (!vpp["rescale_factor"].is_number())
      return Error::invalid_argument("[image processor] rescale_factor: {} must be a number",
                                     vpp["rescale_factor"].dump());
    c.rescale_factor = vpp["rescale_factor"].get<double>();
  }
  PIPIT_TRY(read_triple(vpp, "image_mean", false, &c.mean));
  PIPIT_TRY(read_triple(vpp, "image_std", true, &c.std));
  PIPIT_TRY(read_count(vpp, "min_frames", &c.min_frames));
  PIPIT_TRY(read_count(vpp, "max_frames", &c.max_frames));
  if (vpp.contains("fps") && !vpp["fps"].is_null()) {
    if (!vpp["fps"].is_number() || !(vpp["fps"].get<double>() > 0) || !std::isfinite(vpp["fps"].get<double>()))
      return Error::invalid_argument("[video processor] fps: {} must be a positive number", vpp["fps"].dump());
    c.fps = vpp["fps"].get<double>();
  }
  if (vpp.contains("do_sample_frames") && vpp["do_sample_frames"].is_boolean())
    c.do_sample_frames = vpp["do_sample_frames"].get<bool>();
  if (c.min_frames > c.max_frames)
    return Error::invalid_argument("[video processor] min above max (frames {} > {})", c.min_frames, c.max_frames);
  PIPIT_ASSIGN_OR_RETURN(const VideoProcessorKind* kind, find_video_processor(c.kind));
  PIPIT_TRY(kind->parse(vpp, c));
  return c;
}

Result<ProcessedVideo> preprocess_video(std::span<const Image> frames, double video_fps,
                                        const VideoProcessorConfig& c) {
  const FrameSource get = [&frames](int32_t i) -> Result<Image> { return frames[size_t(i)]; };
  return preprocess_video(int64_t(frames.size()), get, video_fps, c);
}

Result<ProcessedVideo> preprocess_video(int64_t n_frames, const FrameSource& frame, double video_fps,
                                        const VideoProcessorConfig& c) {
  if (n_frames < 1) return Error::invalid_argument("[video processor] the video has no frames");
  if (!(video_fps > 0) || !std::isfinite(video_fps))
    return Error::invalid_argument("[video processor] frame rate {} must be a positive number", video_fps);
  PIPIT_ASSIGN_OR_RETURN(const VideoProcessorKind* kind, find_video_processor(c.kind));
  return kind->preprocess(n_frames, frame, video_fps, c);
}

}  // namespace pipit
