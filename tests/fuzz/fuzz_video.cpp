// libFuzzer target: video files in memory (modules/video_ffmpeg.cpp, linked in directly: FFmpeg's demuxers and
// decoders behind pipit's memory input, format whitelist, limits, frame counting and keyframe seeks) on arbitrary
// bytes; the first frames and a distant one are asked for, as a processor's sampling would.
// build and run: scripts/fuzz.sh 300 build-fuzz video
#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/vision/video_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  auto v = pipit::open_video_decoder_ffmpeg("", &bytes, "fuzz");
  if (!v.is_ok()) return 0;
  pipit::VideoDecoder& f = **v;
  if (int64_t(f.width()) * f.height() > (1 << 20)) return 0;
  const int64_t n = f.n_frames();
  for (int64_t i : {int64_t(0), int64_t(1), n / 2, n - 1, n + 5}) {
    if (i < 0 || i > (int64_t(1) << 30)) continue;
    if (!f.frame(int32_t(i)).is_ok()) break;
  }
  return 0;
}
