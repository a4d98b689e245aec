// `pipit vision`: run a vision-language model's image side only — the HF processor and the vision tower — and write
// what HF would feed the language model, under the names the goldens use: pixel_values, image_grid_thw (Qwen) and
// vision_embeds. For parity checks against transformers and for timing the tower.
#include <chrono>
#include <cstdio>
#include <cstring>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/image_args.h"
#include "format/safetensors.h"

namespace pipit::cli {

namespace {

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

int cmd_vision(Args& a) {
  add_model_options(a);
  add_image_options(a);
  a.option({"-o", "--output"}, "safetensors to write pixel_values, image_grid_thw, vision_embeds");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || !a.has("-m") || !has_images(a) || !a.has("-o")) {
    std::printf("usage: pipit vision -m MODEL --image IMG [--image IMG2 ...] --output OUT.safetensors\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  auto so = session_options(a);
  if (!so) return fail(a, so.status().message());
  auto opt = image_options(a);
  if (!opt) return fail(a, opt.status().message());
  auto lm = load_model(a.get("-m"));
  if (!lm) return fail(a, lm.status().message());
  if (auto st = check_kv_type(*lm->model, so->kv_dtype); !st) return fail(a, st.message());
  auto pp = preprocessor_config_of(*lm);
  if (!pp) return fail(a, pp.status().message());
  auto proc = image_processor_for(*lm->model, *pp, *opt);
  if (!proc) return fail(a, proc.status().message());

  ThreadPool pool(so->n_threads > 0 ? so->n_threads : ThreadPool::default_threads());
  std::vector<Tensor> pixels, feats;
  Tensor grid = Tensor::empty(DType::I32, {int64_t(a.get_all("--image").size()), 3});
  const bool qwen = proc->kind == ImageProcessorConfig::Kind::kQwen2VL;
  double encode_ms = 0;
  for (const auto& src : a.get_all("--image")) {
    auto img = load_image(src);
    if (!img) return fail(a, img.status().message());
    auto t0 = std::chrono::steady_clock::now();
    auto e = encode_image(*lm->model, *proc, *img, pool);
    encode_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!e) return fail(a, e.status().message());
    std::memcpy(grid.ptr<int32_t>() + pixels.size() * 3, e->processed.grid_thw.data(), 12);
    pixels.push_back(e->processed.pixel_values);
    feats.push_back(e->features);
  }
  std::vector<std::pair<std::string, Tensor>> out = {{"pixel_values", concat(pixels, !qwen)},
                                                     {"vision_embeds", concat(feats, !qwen)}};
  if (qwen) out.push_back({"image_grid_thw", grid});
  if (auto st = write_safetensors(a.get("-o"), out); !st) return fail(a, st.message());
  std::fprintf(stderr, "[pipit] %zu image(s), %lld image tokens, vision encode %.1f ms, threads %d\n", pixels.size(),
               static_cast<long long>(out[1].second.numel() / lm->model->info().n_embd), encode_ms, pool.size());
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("vision", "image(s) through a VLM's processor and vision tower -> safetensors", cmd_vision);

}  // namespace pipit::cli
