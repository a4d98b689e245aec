// Audio decode with libsndfile and resampling with libsoxr (why these two: audio_decode.h).
#include "models/audio/audio_decode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#if PIPIT_WITH_AUDIO_DECODE
#include <sndfile.h>
#include <soxr.h>
#endif

namespace pipit {

namespace {

std::string seconds_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}

Status too_long(const std::string& what, double seconds, double max_seconds) {
  return Error::invalid_argument("[audio] {}: the clip is {} long; at most {} of audio is taken per clip", what,
                                 seconds_text(seconds), seconds_text(max_seconds));
}

}  // namespace

Status check_pcm(std::span<const float> samples, double max_seconds, const std::string& what) {
  if (samples.empty()) return Error::invalid_argument("[audio] {}: the clip has 0 samples", what);
  const double seconds = double(samples.size()) / kAudioSampleRate;
  if (seconds > max_seconds) return too_long(what, seconds, max_seconds);
  for (size_t i = 0; i < samples.size(); ++i)
    if (!std::isfinite(samples[i]))
      return Error::invalid_argument("[audio] {}: sample {} is not a finite number", what, i);
  return Status::ok();
}

#if !PIPIT_WITH_AUDIO_DECODE

bool audio_decode_available() { return false; }

Result<AudioClip> decode_audio_file(const std::string& path, double) {
  return Error::unsupported("[audio] {}: this pipit was built without libsndfile / libsoxr "
                            "(PIPIT_WITH_AUDIO_DECODE off), so it cannot read audio files; pass 16 kHz mono float "
                            "PCM through the C API or Python instead", path);
}

Result<AudioClip> decode_audio_bytes(std::span<const uint8_t>, const std::string&, double, const std::string& what) {
  return decode_audio_file(what, 0.0);
}

#else

bool audio_decode_available() { return true; }

namespace {

// libsndfile's virtual I/O over a byte span (no temporary file).
struct MemoryFile {
  std::span<const uint8_t> bytes;
  sf_count_t pos = 0;
};

sf_count_t mem_length(void* u) { return sf_count_t(static_cast<MemoryFile*>(u)->bytes.size()); }
sf_count_t mem_seek(sf_count_t offset, int whence, void* u) {
  auto* m = static_cast<MemoryFile*>(u);
  const sf_count_t n = sf_count_t(m->bytes.size());
  sf_count_t p = whence == SEEK_SET ? offset : whence == SEEK_CUR ? m->pos + offset : n + offset;
  m->pos = std::clamp<sf_count_t>(p, 0, n);
  return m->pos;
}
sf_count_t mem_read(void* ptr, sf_count_t count, void* u) {
  auto* m = static_cast<MemoryFile*>(u);
  const sf_count_t n = std::clamp<sf_count_t>(count, 0, sf_count_t(m->bytes.size()) - m->pos);
  if (n > 0) std::memcpy(ptr, m->bytes.data() + m->pos, size_t(n));
  m->pos += n;
  return n;
}
sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }
sf_count_t mem_tell(void* u) { return static_cast<MemoryFile*>(u)->pos; }

// libsndfile opens a file shorter than its header declares and only notes it in its log ("data : 38400 (should be
// 19178)"): we refuse it, as HF's loader would hand a model half a clip without a word.
std::string header_mismatch(SNDFILE* f) {
  char log[8192] = {0};
  sf_command(f, SFC_GET_LOG_INFO, log, sizeof(log) - 1);
  const char* line = log;
  while (*line) {
    const char* end = std::strchr(line, '\n');
    const std::string l(line, end ? size_t(end - line) : std::strlen(line));
    if (l.rfind("data", 0) == 0 && l.find("should be") != std::string::npos) return l;
    if (!end) break;
    line = end + 1;
  }
  return "";
}

Result<AudioClip> read_open_file(SNDFILE* f, const SF_INFO& info, double max_seconds, const std::string& what) {
  if (info.channels <= 0 || info.channels > 64)
    return Error::invalid_argument("[audio] {}: {} channels (1 to 64 are taken)", what, info.channels);
  if (info.samplerate < 1000 || info.samplerate > 768000)
    return Error::invalid_argument("[audio] {}: sample rate {} Hz (1000 to 768000 Hz are taken)", what,
                                   info.samplerate);
  if (const std::string bad = header_mismatch(f); !bad.empty())
    return Error::invalid_argument("[audio] {}: the file is truncated or its header is wrong (libsndfile: '{}')",
                                   what, bad);
  const int64_t cap = int64_t(std::floor(max_seconds * info.samplerate));
  if (info.frames > cap && info.frames != SF_COUNT_MAX)  // refused from the header, before anything is read
    return too_long(what, double(info.frames) / info.samplerate, max_seconds);
  // Read in blocks, averaging the channels (librosa.to_mono), never past cap + 1 frames whatever the header says.
  AudioClip clip;
  clip.source_rate = info.samplerate;
  clip.source_channels = info.channels;
  std::vector<float> mono;
  mono.reserve(size_t(std::clamp<int64_t>(info.frames, 0, cap)));
  constexpr sf_count_t kBlock = 16384;
  std::vector<float> buf(size_t(kBlock) * size_t(info.channels));
  for (;;) {
    const sf_count_t n = sf_readf_float(f, buf.data(), kBlock);
    if (n <= 0) break;
    for (sf_count_t i = 0; i < n; ++i) {
      float s = 0.0f;
      for (int c = 0; c < info.channels; ++c) s += buf[size_t(i) * size_t(info.channels) + size_t(c)];
      mono.push_back(info.channels == 1 ? s : s / float(info.channels));
    }
    if (int64_t(mono.size()) > cap) return too_long(what, double(mono.size()) / info.samplerate, max_seconds);
  }
  if (sf_error(f) != SF_ERR_NO_ERROR)
    return Error::invalid_argument("[audio] {}: libsndfile: {}", what, sf_strerror(f));
  if (mono.empty()) return Error::invalid_argument("[audio] {}: the file holds 0 samples", what);
  if (info.samplerate == kAudioSampleRate) {
    clip.samples = std::move(mono);
    return clip;
  }
  // libsoxr, HQ quality, float32 in and out (librosa's resample(res_type="soxr_hq") on float32 audio)
  const double ratio = double(kAudioSampleRate) / info.samplerate;
  const size_t out_len = size_t(std::ceil(double(mono.size()) * ratio));
  clip.samples.resize(out_len);
  size_t done = 0;
  const soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  soxr_error_t err = soxr_oneshot(info.samplerate, kAudioSampleRate, 1, mono.data(), mono.size(), nullptr,
                                  clip.samples.data(), out_len, &done, &io, &q, nullptr);
  if (err) return Error::internal("[audio] {}: libsoxr: {}", what, err);
  clip.samples.resize(done);
  if (clip.samples.empty()) return Error::invalid_argument("[audio] {}: the clip has 0 samples at 16 kHz", what);
  return clip;
}

struct SndfileCloser {
  SNDFILE* f;
  ~SndfileCloser() {
    if (f) sf_close(f);
  }
};

}  // namespace

Result<AudioClip> decode_audio_file(const std::string& path, double max_seconds) {
  SF_INFO info{};
  SNDFILE* f = sf_open(path.c_str(), SFM_READ, &info);
  if (!f)
    return Error::invalid_argument("[audio] {}: cannot read it as audio (libsndfile: {})", path, sf_strerror(nullptr));
  SndfileCloser close{f};
  return read_open_file(f, info, max_seconds, path);
}

Result<AudioClip> decode_audio_bytes(std::span<const uint8_t> bytes, const std::string& format, double max_seconds,
                                     const std::string& what) {
  (void)format;  // libsndfile recognises the container (and MPEG streams) from the bytes themselves
  if (bytes.empty()) return Error::invalid_argument("[audio] {}: no bytes", what);
  MemoryFile mem{bytes, 0};
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  SNDFILE* f = sf_open_virtual(&io, SFM_READ, &info, &mem);
  if (!f)
    return Error::invalid_argument("[audio] {}: cannot read it as audio (libsndfile: {})", what, sf_strerror(nullptr));
  SndfileCloser close{f};
  return read_open_file(f, info, max_seconds, what);
}

#endif

}  // namespace pipit
