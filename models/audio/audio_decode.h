// Audio input: decode a file (WAV, FLAC, OGG/Vorbis, Opus, MP3, ...) or bytes in memory to 16 kHz mono float PCM,
// the way HF's audio path loads a clip (librosa.load(path, sr=16000, mono=True)): libsndfile reads the file (librosa
// reads through soundfile, which is libsndfile), channels are averaged (librosa.to_mono), and a clip at another rate
// is resampled with libsoxr at its "HQ" quality (librosa's default res_type is "soxr_hq", i.e. libsoxr). So these
// two Debian libraries give what the reference pipeline gives, and no format is parsed by hand here.
//
// Both libraries are optional at configure time (PIPIT_WITH_AUDIO_DECODE, found with pkg-config): without them
// decode_audio_* return an error saying so, and raw 16 kHz float PCM (the C API, Python) still works.
//
// Bounded cost: the duration is checked against a cap from the header before a sample is read, and reading stops
// at the cap (a file whose header lies still cannot make us allocate more); 0 samples, an unknown format and a
// file shorter than its header says (libsndfile's own diagnosis) are errors naming the input.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace pipit {

constexpr int kAudioSampleRate = 16000;  // what every audio model here takes (Gemma 4's feature extractor)

struct AudioClip {
  std::vector<float> samples;  // mono, kAudioSampleRate Hz, in [-1, 1] (int PCM / 32768 as libsndfile scales it)
  int source_rate = 0;         // the file's sample rate before resampling
  int source_channels = 0;
};

// false when pipit was built without libsndfile / libsoxr.
bool audio_decode_available();

// `max_seconds` caps the clip (> 0). `what` names the input in errors ("clip.wav", "input_audio 1").
Result<AudioClip> decode_audio_file(const std::string& path, double max_seconds);
// `format` is a hint from the caller ("wav", "mp3", "flac", "ogg", ...; may be empty): libsndfile recognises the
// container by its header, except raw MPEG streams, which need the hint.
Result<AudioClip> decode_audio_bytes(std::span<const uint8_t> bytes, const std::string& format, double max_seconds,
                                     const std::string& what);

// Checks raw PCM handed over by an API (already 16 kHz mono float): not empty, finite, within the cap.
Status check_pcm(std::span<const float> samples, double max_seconds, const std::string& what);

}  // namespace pipit
