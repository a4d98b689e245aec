// Gemma 4's log-mel feature extractor (HF Gemma4AudioFeatureExtractor, numpy), step for step: right-pad the clip
// with zeros to a multiple of 128 samples (the processor's pad_to_multiple_of), 160 zeros on the left (semicausal
// padding, frame_length / 2), frames of frame_length + 1 = 321 samples every hop_length = 160 with the last sample
// dropped, a periodic Hann window (float32, as HF multiplies), rfft of size fft_length = 512 in float64 (numpy 1.x
// computes rfft of float32 input in float64), magnitude (not power), an HTK mel filter bank without normalisation
// (audio_utils.mel_filter_bank(norm=None, mel_scale="htk"), float64), natural log of (mel + mel_floor), cast to
// float32; a frame is valid when its last sample is real audio, and invalid frames are zeroed.
#pragma once

#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace pipit {

struct LogMelConfig {
  int sampling_rate = 16000;
  int feature_size = 128;  // mel bins
  int frame_length = 320;  // samples (20 ms)
  int hop_length = 160;    // samples (10 ms)
  int fft_length = 512;
  double min_frequency = 0.0, max_frequency = 8000.0;
  double mel_floor = 1e-3;
  int pad_to_multiple_of = 128;
};

// The "feature_extractor" object of processor_config.json (or a flat preprocessor dict) over the Hub defaults.
// Errors for settings this extractor does not implement (preemphasis, dither, per-bin normalisation, fft_overdrive)
// and for sizes out of range.
Result<LogMelConfig> parse_log_mel_config(const nlohmann::json& j);

struct LogMelFeatures {
  int64_t n_frames = 0;
  std::vector<float> features;  // [n_frames, feature_size], invalid frames zero
  std::vector<uint8_t> mask;    // [n_frames], 1 = valid
};

// Errors when the clip is too short for one frame.
Result<LogMelFeatures> log_mel_features(const LogMelConfig& cfg, std::span<const float> samples);

}  // namespace pipit
