// Video files (MP4, MOV, WebM, MKV, AVI, MPEG-TS, OGG, FLV) decoded with FFmpeg's libraries (Debian's libavformat,
// libavcodec, libswscale): no home-made demuxer or decoder. Frames come out as 8-bit RGB the way HF's video loader
// gets them from PyAV (`frame.to_ndarray(format="rgb24")`: libswscale, bilinear, the stream's own colour matrix), and
// the clip's frame count and rate are its header's (`stream.frames`, `stream.average_rate`), which is what HF's
// sampler is given. Only the frames a processor asks for are converted; a distant frame is reached by a keyframe
// seek, so a long clip costs about its sampled frames, not its length.
//
// The FFmpeg code is a module, libpipit_video.so, loaded at the first video file (models/vision/video_decoder.h):
// found through $PIPIT_VIDEO_MODULE, next to the library or program that holds this code, then in the build and
// install directories. Optional at build time (PIPIT_WITH_FFMPEG): an app or a phone build often hands frames over
// itself; without the module, opening a file is a clear error and frames still work (runtime/multimodal_video.h).
// Limits (bounded cost for hostile input): the container must be one of the formats above (no playlists, no network
// or other protocols: nothing but the file or the bytes given is read), at most kMaxVideoSeconds long and
// kMaxImagePixels per frame. Not applied: rotation metadata (PyAV does not apply it either).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/vision/image.h"

namespace pipit {

constexpr double kMaxVideoSeconds = 3600;  // 1 hour: a 768-frame sampler already spreads frames 4.7 s apart there

// Whether video files can be decoded here (the module is found and loads).
bool video_files_supported();

class VideoDecoder;

class VideoFile {
 public:
  // `what` names the input in errors (the path, "data URL", "video 1").
  static Result<std::unique_ptr<VideoFile>> open(const std::string& path);
  static Result<std::unique_ptr<VideoFile>> open_bytes(std::vector<uint8_t> bytes, const std::string& what);
  ~VideoFile();

  int64_t n_frames() const { return n_frames_; }  // from the header (or duration x rate where it has no count)
  double fps() const { return fps_; }
  int width() const { return width_; }
  int height() const { return height_; }
  const std::string& codec() const { return codec_; }

  // Frame `index` (display order) as RGB. Indices must not decrease from one call to the next (a processor asks
  // for its sampled frames in order). A header that promises more frames than the stream holds gives the last one.
  Result<Image> frame(int32_t index);

 private:
  explicit VideoFile(std::unique_ptr<VideoDecoder> dec);
  std::unique_ptr<VideoDecoder> dec_;
  int64_t n_frames_ = 0;
  double fps_ = 0;
  int width_ = 0, height_ = 0;
  std::string codec_;
};

// A path, or a "data:video/...;base64,..." URL.
Result<std::unique_ptr<VideoFile>> open_video(const std::string& source);

// True for what looks like a data URL of a video ("data:video/...").
bool is_video_data_url(const std::string& source);

}  // namespace pipit
