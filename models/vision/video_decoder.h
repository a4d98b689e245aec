// The seam between VideoFile (models/vision/video_file.h, in the library) and the code that decodes video files
// with FFmpeg's libraries (modules/video_ffmpeg.cpp, built as the module libpipit_video.so and loaded at the first
// video file). FFmpeg's libavcodec brings some 130 shared libraries with it (x264, vpx, dav1d, ...): linked into
// pipit, every process paid ~20 MB of resident memory and their relocations at start, video or not. As a module,
// only a process that opens a video file does. Both sides are built by the same build, so C++ types cross the seam.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/vision/image.h"

namespace pipit {

// One opened clip (see VideoFile for the meaning of each field and of frame()).
class VideoDecoder {
 public:
  virtual ~VideoDecoder() = default;
  virtual int64_t n_frames() const = 0;
  virtual double fps() const = 0;
  virtual int width() const = 0;
  virtual int height() const = 0;
  virtual std::string codec() const = 0;
  virtual Result<Image> frame(int32_t index) = 0;
};

// Opens a file (`bytes` null) or bytes in memory; `what` names the input in errors.
using OpenVideoDecoderFn = Result<std::unique_ptr<VideoDecoder>> (*)(const std::string& path,
                                                                     std::vector<uint8_t>* bytes,
                                                                     const std::string& what);

// The module's one exported symbol: returns its OpenVideoDecoderFn (as a plain pointer, for C linkage).
#define PIPIT_VIDEO_MODULE_ENTRY "pipit_video_module_v1"

// The module's implementation, for builds that link it directly (the fuzz target).
Result<std::unique_ptr<VideoDecoder>> open_video_decoder_ffmpeg(const std::string& path, std::vector<uint8_t>* bytes,
                                                                const std::string& what);

}  // namespace pipit
