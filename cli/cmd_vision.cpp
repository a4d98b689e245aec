// `pipit vision`: run a vision-language model's image side only — the HF processor and the vision tower — and write
// what HF would feed the language model, under the names the goldens use: pixel_values, image_grid_thw (Qwen),
// vision_embeds and, for Qwen3-VL, deepstack_embeds.K (DeepStack merger K's features); for DeepSeek-OCR
// pixel_values is the global view and pixel_values_crops the tiles of crop mode (--image-mode). With --stages, also
// every named intermediate of the tower (vision.patch_embed, vision.pos_embed, vision.block.N, ...; DeepSeek-OCR:
// vision.sam.*, vision.clip.* of the global view), images concatenated along rows. With --video (a file or its frames):
// pixel_values_videos, video_grid_thw, video_embeds, the sampled frame indices and timestamps (and video_vision.*).
// For parity checks against transformers and for timing the tower.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/image_args.h"
#include "format/safetensors.h"
#include "models/vision/vision_model.h"

namespace pipit::cli {

namespace {

// Columns [c0, c0 + n) of a 2-D tensor, as a contiguous copy.
Tensor columns(const Tensor& t, int64_t c0, int64_t n) {
  Tensor out = Tensor::empty(DType::F32, {t.dim(0), n});
  for (int64_t r = 0; r < t.dim(0); ++r)
    std::memcpy(out.ptr<float>() + r * n, t.ptr<float>() + r * t.dim(1) + c0, size_t(n) * 4);
  return out;
}

// Images stacked as HF returns them: Qwen patch rows concatenated, CLIP images along a new first dimension.
Tensor concat(const std::vector<Tensor>& parts, bool stack) {
  std::vector<int64_t> shape = parts[0].shape();
  int64_t rows = 0;
  for (const auto& p : parts) rows += stack ? 1 : p.dim(0);
  if (stack) shape.insert(shape.begin(), rows);
  else shape[0] = rows;
  Tensor out = Tensor::empty(parts[0].dtype(), shape);
  size_t off = 0;
  for (const auto& p : parts) {
    std::memcpy(out.data() + off, p.data(), p.nbytes());
    off += p.nbytes();
  }
  return out;
}

// --video: what HF's video processor and the tower give (pixel_values_videos, video_grid_thw, video_embeds), the
// sampled frame indices and timestamps, and with --stages the tower's intermediates as video_vision.*.
int write_video(const Args& a, const LoadedModel& lm, const SessionOptions& so) {
  if (!takes_video(*lm.model))
    return fail(a, fmt("--video: model type '{}' does not take video input", lm.model->info().arch));
  auto fps = a.get_float("--video-fps");
  if (!fps) return fail(a, fps.status().message());
  ThreadPool pool(so.n_threads > 0 ? so.n_threads : ThreadPool::default_threads());
  std::vector<std::pair<std::string, Tensor>> stages;
  TensorHook hook;
  if (a.has("--stages"))
    hook = [&](const std::string& name, int layer, const Tensor& t) {
      Tensor c = Tensor::empty(DType::F32, t.shape());
      std::memcpy(c.data(), t.data(), c.nbytes());
      stages.push_back({"video_" + (layer >= 0 ? name + "." + std::to_string(layer) : name), c});
    };
  auto t0 = std::chrono::steady_clock::now();
  auto v = encode_video_frames(lm, a.get("--video"), *fps, pool, hook);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!v) return fail(a, v.status().message());
  const ProcessedVideo& pv = v->processed;
  Tensor grid = Tensor::empty(DType::I32, {1, 3});
  std::memcpy(grid.data(), pv.patches.grid_thw.data(), 12);
  Tensor idx = Tensor::empty(DType::I32, {int64_t(pv.frame_indices.size())});
  std::memcpy(idx.data(), pv.frame_indices.data(), idx.nbytes());
  Tensor ts = Tensor::empty(DType::F32, {int64_t(pv.timestamps.size())});
  for (size_t i = 0; i < pv.timestamps.size(); ++i) ts.ptr<float>()[i] = float(pv.timestamps[i]);
  std::vector<std::pair<std::string, Tensor>> out = {{"pixel_values_videos", pv.patches.pixel_values},
                                                     {"video_grid_thw", grid},
                                                     {"video_embeds", v->features},
                                                     {"video_frame_indices", idx},
                                                     {"video_timestamps", ts}};
  for (auto& s : stages)
    if (std::none_of(out.begin(), out.end(), [&](const auto& o) { return o.first == s.first; })) out.push_back(s);
  if (auto st = write_safetensors(a.get("-o"), out); !st) return fail(a, st.message());
  std::fprintf(stderr, "[pipit] video: %zu frames sampled, %lld video tokens, decode + vision encode %.1f ms, threads %d\n",
               pv.frame_indices.size(), static_cast<long long>(v->features.dim(0)), ms, pool.size());
  return 0;
}

int cmd_vision(Args& a) {
  add_model_options(a);
  add_image_options(a);
  a.option({"-o", "--output"}, "safetensors to write pixel_values, image_grid_thw, vision_embeds, deepstack_embeds.K");
  add_video_options(a);
  a.flag({"--stages"}, "also write the tower's intermediates (vision.patch_embed, vision.block.N, ...)");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || !a.has("-m") || !(has_images(a) || has_video(a)) || !a.has("-o")) {
    std::printf("usage: pipit vision -m MODEL --image IMG [--image IMG2 ...] --output OUT.safetensors\n"
                "       pipit vision -m MODEL --video CLIP --output OUT.safetensors\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  if (has_images(a) && has_video(a)) return fail(a, "give --image or --video, not both");
  auto so = session_options(a);
  if (!so) return fail(a, so.status().message());
  auto opt = image_options(a);
  if (!opt) return fail(a, opt.status().message());
  auto lo = load_options(a);
  if (!lo) return fail(a, lo.status().message());
  auto lm = load_model(a.get("-m"), *lo);
  if (!lm) return fail(a, lm.status().message());
  if (auto st = check_kv_type(*lm->model, so->kv_dtype); !st) return fail(a, st.message());
  if (has_video(a)) return write_video(a, *lm, *so);
  auto pp = preprocessor_config_of(*lm);
  if (!pp) return fail(a, pp.status().message());
  auto proc = image_processor_for(*lm->model, *pp, *opt);
  if (!proc) return fail(a, proc.status().message());

  ThreadPool pool(so->n_threads > 0 ? so->n_threads : ThreadPool::default_threads());
  std::vector<Tensor> pixels, feats, crops;  // crops: DeepSeek-OCR's tiles (crop mode), images in order
  const int64_t n_embd = lm->model->info().n_embd;
  const int n_deepstack = lm->model->vision()->vision_tokens().deepstack;
  std::vector<std::vector<Tensor>> deepstack{size_t(n_deepstack)};
  // --stages: each named intermediate, per image in order (copied: the tower's arena is reused)
  std::vector<std::string> stage_names;
  std::map<std::string, std::vector<Tensor>> stages;
  TensorHook hook;
  if (a.has("--stages"))
    hook = [&](const std::string& name, int layer, const Tensor& t) {
      const std::string key = layer >= 0 ? name + "." + std::to_string(layer) : name;
      if (!stages.count(key)) stage_names.push_back(key);
      Tensor c = Tensor::empty(DType::F32, t.shape());
      std::memcpy(c.data(), t.data(), c.nbytes());
      stages[key].push_back(c);
    };
  Tensor grid = Tensor::empty(DType::I32, {int64_t(a.get_all("--image").size()), 3});
  // Qwen's processors return one list of patch rows for all images, with a (t, h, w) grid each
  auto kind = find_image_processor(proc->kind);
  if (!kind) return fail(a, kind.status().message());
  const bool qwen = (*kind)->concatenates_patches();
  double encode_ms = 0;
  for (const auto& src : a.get_all("--image")) {
    auto img = load_image(src);
    if (!img) return fail(a, img.status().message());
    auto t0 = std::chrono::steady_clock::now();
    auto e = encode_image(*lm->model, *proc, *img, pool, hook);
    encode_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!e) return fail(a, e.status().message());
    std::memcpy(grid.ptr<int32_t>() + pixels.size() * 3, e->processed.grid_thw.data(), 12);
    pixels.push_back(e->processed.pixel_values);
    if (e->processed.crops.defined()) crops.push_back(e->processed.crops);
    if (n_deepstack == 0) {
      feats.push_back(e->features);
      continue;
    }
    feats.push_back(columns(e->features, 0, n_embd));
    for (int k = 0; k < n_deepstack; ++k)
      deepstack[size_t(k)].push_back(columns(e->features, (k + 1) * n_embd, n_embd));
  }
  std::vector<std::pair<std::string, Tensor>> out = {{"pixel_values", concat(pixels, !qwen)},
                                                     {"vision_embeds", concat(feats, !qwen)}};
  if (qwen) out.push_back({"image_grid_thw", grid});
  if (!crops.empty()) out.push_back({"pixel_values_crops", concat(crops, false)});
  for (int k = 0; k < n_deepstack; ++k)
    out.push_back({"deepstack_embeds." + std::to_string(k), concat(deepstack[size_t(k)], false)});
  for (const auto& name : stage_names)
    if (stages[name].size() == pixels.size()) out.push_back({name, concat(stages[name], !qwen)});
  if (auto st = write_safetensors(a.get("-o"), out); !st) return fail(a, st.message());
  std::fprintf(stderr, "[pipit] %zu image(s), %lld image tokens, vision encode %.1f ms, threads %d\n", pixels.size(),
               static_cast<long long>(out[1].second.numel() / lm->model->info().n_embd), encode_ms, pool.size());
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("vision", "image(s) or a video through a VLM's processor and vision tower -> safetensors",
                       cmd_vision);

}  // namespace pipit::cli
