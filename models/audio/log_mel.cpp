// Log-mel features (log_mel.h). reference: HF feature_extraction_gemma4.py, audio_utils.py (mel_filter_bank,
// window_function, hertz_to_mel htk), ../shared/testdata/reference/gemma4_audio.py FeatureExtractor.
#include "models/audio/log_mel.h"

#include <cmath>
#include <complex>

namespace pipit {

namespace {

double hz_to_mel(double f) { return 2595.0 * std::log10(1.0 + f / 700.0); }
double mel_to_hz(double m) { return 700.0 * (std::pow(10.0, m / 2595.0) - 1.0); }

// np.linspace(a, b, n): a + i * step, the last element exactly b
std::vector<double> linspace(double a, double b, int n) {
  std::vector<double> v(static_cast<size_t>(n));
  const double step = (b - a) / double(n - 1);
  for (int i = 0; i < n; ++i) v[size_t(i)] = a + double(i) * step;
  v[size_t(n - 1)] = b;
  return v;
}

// mel_filter_bank(num_frequency_bins, num_mel_filters, fmin, fmax, sr, norm=None, mel_scale="htk"):
// [n_freq, n_mel] triangles min(down, up) clipped at 0, in float64.
std::vector<double> mel_filters(const LogMelConfig& c) {
  const int n_freq = c.fft_length / 2 + 1, n_mel = c.feature_size;
  const auto mel = linspace(hz_to_mel(c.min_frequency), hz_to_mel(c.max_frequency), n_mel + 2);
  std::vector<double> filt(mel.size());
  for (size_t i = 0; i < mel.size(); ++i) filt[i] = mel_to_hz(mel[i]);
  const auto fft_freqs = linspace(0.0, double(c.sampling_rate / 2), n_freq);
  std::vector<double> bank(size_t(n_freq) * size_t(n_mel));
  for (int f = 0; f < n_freq; ++f)
    for (int m = 0; m < n_mel; ++m) {
      const size_t mi = size_t(m);
      // slopes = filter_freqs - fft_freq; down = -slopes[m] / diff[m]; up = slopes[m + 2] / diff[m + 1]
      const double down = -(filt[mi] - fft_freqs[size_t(f)]) / (filt[mi + 1] - filt[mi]);
      const double up = (filt[mi + 2] - fft_freqs[size_t(f)]) / (filt[mi + 2] - filt[mi + 1]);
      bank[size_t(f) * size_t(n_mel) + mi] = std::max(0.0, std::min(down, up));
    }
  return bank;
}

// In-place iterative radix-2 FFT (n a power of two), float64: the frames are short (512), so this is cheap, and
// double precision keeps it at numpy's rfft (pocketfft) to ~1e-15 relative.
void fft(std::vector<std::complex<double>>& a) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {  // bit reversal
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const double ang = -2.0 * M_PI / double(len);
    for (size_t i = 0; i < n; i += len)
      for (size_t k = 0; k < len / 2; ++k) {
        const std::complex<double> w(std::cos(ang * double(k)), std::sin(ang * double(k)));
        const std::complex<double> u = a[i + k], v = a[i + k + len / 2] * w;
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
      }
  }
}

}  // namespace

Result<LogMelConfig> parse_log_mel_config(const nlohmann::json& j0) {
  LogMelConfig c;
  if (j0.is_null()) return c;
  if (!j0.is_object()) return Error::format("[audio] the feature extractor config is not a JSON object");
  const nlohmann::json& j = j0.contains("feature_extractor") && j0["feature_extractor"].is_object()
                                ? j0["feature_extractor"] : j0;
  auto num = [&](const char* key, double def) -> Result<double> {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_number()) return Error::format("[audio] feature extractor field '{}' is not a number", key);
    return j[key].get<double>();
  };
  PIPIT_ASSIGN_OR_RETURN(double sr, num("sampling_rate", 16000));
  PIPIT_ASSIGN_OR_RETURN(double fs, num("feature_size", 128));
  PIPIT_ASSIGN_OR_RETURN(double fl, num("frame_length", 320));
  PIPIT_ASSIGN_OR_RETURN(double hl, num("hop_length", 160));
  PIPIT_ASSIGN_OR_RETURN(double fft_len, num("fft_length", 512));
  PIPIT_ASSIGN_OR_RETURN(c.min_frequency, num("min_frequency", 0.0));
  PIPIT_ASSIGN_OR_RETURN(c.max_frequency, num("max_frequency", 8000.0));
  PIPIT_ASSIGN_OR_RETURN(c.mel_floor, num("mel_floor", 1e-3));
  PIPIT_ASSIGN_OR_RETURN(double pre, num("preemphasis", 0.0));
  PIPIT_ASSIGN_OR_RETURN(double dither, num("dither", 0.0));
  PIPIT_ASSIGN_OR_RETURN(double scale, num("input_scale_factor", 1.0));
  if (sr != 16000)
    return Error::unsupported("[audio] feature extractor sampling_rate {} (16000 is supported)", sr);
  if (pre != 0.0 || dither != 0.0 || scale != 1.0)
    return Error::unsupported("[audio] feature extractor preemphasis {} / dither {} / input_scale_factor {} are not "
                              "supported (0 / 0 / 1)", pre, dither, scale);
  for (const char* k : {"per_bin_mean", "per_bin_stddev"})
    if (j.contains(k) && !j[k].is_null())
      return Error::unsupported("[audio] feature extractor field '{}' (per-bin normalisation) is not supported", k);
  if (j.contains("fft_overdrive") && j["fft_overdrive"].is_boolean() && j["fft_overdrive"].get<bool>())
    return Error::unsupported("[audio] feature extractor fft_overdrive = true is not supported");
  if (fs < 1 || fs > 1024 || fl < 16 || fl > 4096 || hl < 1 || hl > fl || fft_len < fl || fft_len > 8192 ||
      (int64_t(fft_len) & (int64_t(fft_len) - 1)) != 0 || c.min_frequency < 0 || c.max_frequency <= c.min_frequency ||
      c.max_frequency > sr / 2 || !(c.mel_floor > 0))
    return Error::invalid_argument("[audio] feature extractor sizes out of range: feature_size {}, frame_length {}, "
                                   "hop_length {}, fft_length {} (a power of two >= frame_length), min_frequency "
                                   "{} / max_frequency {} (up to sampling_rate / 2), mel_floor {}", fs, fl, hl,
                                   fft_len, c.min_frequency, c.max_frequency, c.mel_floor);
  c.sampling_rate = int(sr);
  c.feature_size = int(fs);
  c.frame_length = int(fl);
  c.hop_length = int(hl);
  c.fft_length = int(fft_len);
  return c;
}

Result<LogMelFeatures> log_mel_features(const LogMelConfig& c, std::span<const float> samples) {
  const int64_t n = int64_t(samples.size());
  const int64_t mult = c.pad_to_multiple_of;
  const int64_t n_pad = (n + mult - 1) / mult * mult;  // right zero pad
  const int64_t left = c.frame_length / 2;              // semicausal left pad
  const int64_t size = c.frame_length + 1;
  const int64_t total = n_pad + left;
  if (n == 0 || total < size)
    return Error::invalid_argument("[audio] the clip has {} samples: too short for one {}-sample frame", n, size);
  LogMelFeatures out;
  out.n_frames = (total - size) / c.hop_length + 1;
  const int n_freq = c.fft_length / 2 + 1, n_mel = c.feature_size;
  const auto bank = mel_filters(c);
  // window_function(frame_length, "hann", periodic=True) = np.hanning(N + 1)[:-1], cast to float32
  std::vector<float> window(size_t(c.frame_length));
  for (int i = 0; i < c.frame_length; ++i)
    window[size_t(i)] = float(0.5 - 0.5 * std::cos(2.0 * M_PI * double(i) / double(c.frame_length)));
  out.features.assign(size_t(out.n_frames) * size_t(n_mel), 0.0f);
  out.mask.assign(size_t(out.n_frames), 0);
  std::vector<std::complex<double>> buf(size_t(c.fft_length));
  std::vector<double> mag(static_cast<size_t>(n_freq));
  for (int64_t f = 0; f < out.n_frames; ++f) {
    // valid when the frame's last sample (index start + size - 1 of the padded clip) is real audio
    const int64_t start = f * c.hop_length;  // in the left-padded signal
    const int64_t last = start + size - 1 - left;
    out.mask[size_t(f)] = last >= 0 && last < n;
    if (!out.mask[size_t(f)]) continue;  // zeroed (HF computes it, then multiplies by the mask)
    std::fill(buf.begin(), buf.end(), std::complex<double>(0.0, 0.0));
    for (int i = 0; i < c.frame_length; ++i) {  // the frame's first frame_length samples (the last one dropped)
      const int64_t s = start + i - left;
      const float x = s >= 0 && s < n ? samples[size_t(s)] : 0.0f;
      buf[size_t(i)] = double(x * window[size_t(i)]);  // float32 product, then float64 rfft
    }
    fft(buf);
    for (int k = 0; k < n_freq; ++k) mag[size_t(k)] = std::abs(buf[size_t(k)]);
    float* row = out.features.data() + f * n_mel;
    for (int m = 0; m < n_mel; ++m) {
      double s = 0.0;
      for (int k = 0; k < n_freq; ++k) s += mag[size_t(k)] * bank[size_t(k) * size_t(n_mel) + size_t(m)];
      row[m] = float(std::log(s + c.mel_floor));
    }
  }
  return out;
}

}  // namespace pipit
