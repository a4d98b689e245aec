// Model loading: whatever open_checkpoint reads (HF directory with safetensors or PyTorch files, .pipit, .gguf)
// becomes a WeightSource over HF names; the model, the tokenizer and the generation defaults come from it.
#include "runtime/loader.h"

#include "backends/device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

#include "backends/cpu/kernels.h"
#include "core/json_depth.h"
#include "core/limits.h"
#include "core/page_migration.h"
#include "core/panels.h"
#include "core/storage.h"
#include "convert/checkpoint.h"
#include "convert/gguf_import.h"
#include "models/mapped_weights.h"
#include "runtime/hf_cache.h"
#ifdef PIPIT_WITH_TOKENIZER
#include "models/chat_format.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#endif

namespace pipit {

Result<Tensor> MapWeightSource::find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return Error::not_found("[load] missing tensor '{}'", name);
  return it->second;
}

namespace {

// generation_config.json is optional; its eos ids are added to the config's, its no_repeat_ngram_size replaces the
// family's default (a value out of range is ignored, as HF ignores fields it cannot use).
void merge_generation_config(LoadedModel& lm) {
  HfConfig g(lm.generation_config);
  auto& info = lm.model->mutable_info();
  for (auto id : g.get_int_list("eos_token_id"))
    if (std::find(info.eos_ids.begin(), info.eos_ids.end(), int32_t(id)) == info.eos_ids.end())
      info.eos_ids.push_back(int32_t(id));
  if (info.bos_id < 0) info.bos_id = int32_t(g.get_int_or("bos_token_id", -1));
  const int64_t ngram = g.get_int_or("no_repeat_ngram_size", info.no_repeat_ngram_size);
  if (ngram >= 0 && ngram <= Limits::kMaxNoRepeatNgram) info.no_repeat_ngram_size = int(ngram);
}

// The tokenizer from the checkpoint's texts: tokenizer.json + tokenizer_config.json, and a chat_template.jinja when
// tokenizer_config.json has no template (newer HF checkpoints keep it there); or from its parts (a GGUF vocabulary),
// which it takes out of the checkpoint.
Status load_tokenizer(Checkpoint& c, LoadedModel& lm) {
#ifdef PIPIT_WITH_TOKENIZER
  if (c.format != "pipit" && c.format != "gguf" && is_directory(c.path)) {
    if (file_exists(c.path + "/tokenizer.json")) {
      PIPIT_ASSIGN_OR_RETURN(lm.tokenizer, Tokenizer::load_dir(c.path));
    }
    return Status::ok();
  }
  if (c.tokenizer_parts) {
    TokenizerParts parts = std::move(*c.tokenizer_parts);
    c.tokenizer_parts.reset();
    if (auto ct = c.texts.find("chat_template"); ct != c.texts.end() && parts.config.is_object() &&
                                                 !parts.config.contains("chat_template"))
      parts.config["chat_template"] = ct->second;
    auto t = Tokenizer::load_parts(std::move(parts));
    if (!t) return t.status().with_context("[load] " + c.path);
    lm.tokenizer = std::move(t).value();
    return Status::ok();
  }
  const std::optional<std::string_view> tj = c.tokenizer_json();
  if (!tj) return Status::ok();
  std::string cfg = c.texts.count("tokenizer_config") ? c.texts.at("tokenizer_config") : "";
  if (auto ct = c.texts.find("chat_template"); ct != c.texts.end()) {
    auto j = nlohmann::json::parse(cfg.empty() ? "{}" : cfg, nullptr, false);
    if (j.is_object() && !j.contains("chat_template")) {
      j["chat_template"] = ct->second;
      cfg = j.dump();
    }
  }
  // The compiled form when the file has one (the text's vocabulary and merges as records: ~0.2 s less for Qwen3's);
  // one that does not read back (damaged, or from another version) leaves the text, which is the reference.
  Result<std::shared_ptr<Tokenizer>> t = Status::ok();
  if (!c.tokenizer_compiled_view.empty()) t = Tokenizer::load_compiled(c.tokenizer_compiled_view, cfg);
  if (c.tokenizer_compiled_view.empty() || !t) t = Tokenizer::load(*tj, cfg);
  if (!t) return t.status().with_context("[load] " + c.path);
  lm.tokenizer = std::move(t).value();
#else
  (void)c;
  (void)lm;
#endif
  return Status::ok();
}

// The model's own prompt format when the checkpoint's tokenizer has no template (models/chat_format.h).
void use_builtin_template(LoadedModel& lm) {
#ifdef PIPIT_WITH_TOKENIZER
  if (auto* hf = dynamic_cast<HfTokenizer*>(lm.tokenizer.get()); hf && hf->config().chat_template.empty()) {
    if (const char* t = builtin_chat_template(lm.config.model_type())) {
      TokenizerConfig tc = hf->config();
      tc.chat_template = t;
      hf->set_config(std::move(tc));
    }
  }
#else
  (void)lm;
#endif
}

// The model's view of its weights when it runs on a device: each tensor is uploaded the first time the model asks
// for it (tied embeddings / output head share one upload); what the model loads through host() (its vision or audio
// tower and their projectors, WeightSource::host) stays on the host: those parts run on the CPU (mixed placement).
class DeviceWeightSource : public WeightSource {
 public:
  DeviceWeightSource(const WeightSource& base, std::shared_ptr<Device> dev) : base_(base), dev_(std::move(dev)) {}
  bool has(const std::string& name) const override { return base_.has(name); }
  Result<Tensor> find(const std::string& name) const override {
    PIPIT_ASSIGN_OR_RETURN(Tensor t, base_.find(name));
    if (auto it = uploaded_.find(name); it != uploaded_.end()) return it->second;
    auto up = dev_->upload_weight(t);
    if (!up.is_ok()) return up.status().with_context("[load] " + name);
    uploaded_[name] = *up;
    return up;
  }
  Result<Tensor> constant(const Tensor& host) const override { return dev_->upload_weight(host); }
  const WeightSource& host() const override { return base_; }
  Status status() { return dev_->take_error(); }

 private:
  const WeightSource& base_;
  std::shared_ptr<Device> dev_;
  mutable std::map<std::string, Tensor> uploaded_;
};

// What the loader does to the weights before the model sees them (LoadOptions), in one pass that gives every
// rewritten or copied matrix its place in one buffer:
//  - pack: q4_0 / q8_0 (and q2_K .. q6_K / iq4_xs / iq4_nl / q4_1 / q5_0 / q5_1 / mxfp4 where this CPU has their
//    panel kernels) matrices -> 16-row panels (LoadOptions::pack_weights), the same bytes per weight as the file's;
//  - bf16dot: f16 / bf16 matrices -> bf16dot (LoadOptions::precision_fast): bf16 ones are the same bytes under the
//    new dtype (then copied as below), f16 ones are rounded to bf16 (to nearest even);
//  - copy: matrices (2-D, 3-D stacked experts, >= 1 MiB) still in the file mapping -> anonymous memory. Decode reads
//    every weight once per token, and read in place from the page cache it ran far below the read bandwidth: a
//    Qwen3-1.7B-shaped F16 GGUF decoded 1.4-1.6 tok/s on one thread here against 7.7 tok/s from the same bytes in
//    anonymous memory (roofline 8.4), all of it user time stalled on the weight loads: the 4 KiB pages of a 3.4 GB
//    mapping (TLB and, on a VM, nested page walks).
// One buffer rather than one per matrix: the kernel backs it with 2 MiB pages (HeapStorage), which it cannot do
// for a separate 1.7 MiB mapping per matrix. Per-matrix buffers left two thirds of Qwen3-0.6B's Q4_0 weights on
// 4 KiB pages (AnonHugePages 140 of 425 MB). The file's pages of each tensor are released as soon as it is
// rewritten, and the buffer's pages are only touched as they are written, so the peak stays near one copy.
// A plain copy (the file's bytes as they are: the panels of a .pipit written for this CPU, an f16 or bf16 matrix) is
// not made at load any more: the matrix is read in place from the mapping and its pages are moved to anonymous huge
// pages in the background (core/page_migration.h), which took the copy off the path to the first token. A sharded
// checkpoint gets a thread per file. migrate = false (PIPIT_COPY_AT_LOAD=1) copies at load as before.
struct RehomeOptions {
  bool pack = false, kquant = false, mxfp4 = false, bf16dot = false, copy = false, migrate = true;
  std::string model_type;  // the weights it keeps mapped (models/mapped_weights.h) stay as they are
};

// The dtype t is rewritten to (its own for a plain copy), or false when it stays where it is.
bool rehome_dtype(const Tensor& t, const RehomeOptions& o, DType* to) {
  const DType d = t.dtype();
  if (!t.is_contiguous()) return false;
  const bool k = d == DType::Q2_K || d == DType::Q3_K || d == DType::Q4_K || d == DType::Q5_K || d == DType::Q6_K ||
                 d == DType::IQ4_XS || d == DType::IQ4_NL || d == DType::Q4_1 || d == DType::Q5_0 || d == DType::Q5_1;
  const bool q = d == DType::Q4_0 || d == DType::Q8_0;
  if (o.pack && (q || (k && o.kquant)) && t.ndim() == 2 && t.dim(0) % kPanelRows == 0)
    *to = panel_dtype_for(d);
  else if (o.pack && o.mxfp4 && d == DType::MXFP4 && (t.ndim() == 2 || t.ndim() == 3) && t.dim(-2) % kPanelRows == 0)
    *to = DType::MXFP4X16;  // stacked experts [E, N, K]: E * N rows, no panel across two experts
  else if (o.bf16dot && d == DType::F16 && t.ndim() == 2)
    *to = DType::BF16DOT;
  else if (o.copy && dynamic_cast<const MmapStorage*>(t.storage().get()) && (t.ndim() == 2 || t.ndim() == 3) &&
           t.nbytes() >= (size_t(1) << 20))
    *to = d;
  else
    return false;
  return true;
}

// The matrices of each mapping that are read in place until their pages are moved (core/page_migration.h).
void start_migrations(const std::map<std::shared_ptr<const MmapStorage>, std::vector<Tensor*>>& migrate) {
  for (auto& [map, ts] : migrate) {
    std::vector<std::pair<size_t, size_t>> ranges;
    for (Tensor* t : ts) ranges.emplace_back(size_t(t->data() - map->data()), t->nbytes());
    auto owner = MigratingStorage::start(map, std::move(ranges));
    if (!owner) continue;  // not 2 MiB aligned (checked before, so not expected): read in place from the mapping
    for (Tensor* t : ts) *t = Tensor::from_data(t->dtype(), t->shape(), t->data(), owner);
  }
}

void rehome_weights(std::map<std::string, Tensor>& tensors, const RehomeOptions& o) {
  struct Move {
    Tensor* t;
    DType to;
    size_t offset;  // in the buffer
  };
  std::vector<Move> plan;
  std::map<std::shared_ptr<const MmapStorage>, std::vector<Tensor*>> migrate;  // per mapping, in file order
  size_t total = 0;
  for (auto& [name, t] : tensors) {
    if (keep_mapped(o.model_type, name)) continue;  // read by rows only, or not at all: stays mapped, as stored
    if (o.bf16dot && t.dtype() == DType::BF16 && t.ndim() == 2 && t.is_contiguous())  // the same bytes, relabelled
      t = Tensor::from_data(DType::BF16DOT, t.shape(), t.data(), t.storage());
    DType to;
    if (!rehome_dtype(t, o, &to)) continue;
    if (auto map = std::dynamic_pointer_cast<const MmapStorage>(t.storage());
        o.migrate && to == t.dtype() && map && MigratingStorage::can_migrate(*map)) {
      migrate[map].push_back(&t);
      continue;
    }
    plan.push_back({&t, to, total});
    total += (size_t(t.rows() * dtype_row_bytes(to, t.dim(-1))) + kAlign - 1) / kAlign * kAlign;
  }
  if (plan.empty()) return start_migrations(migrate);
  auto buf = HeapStorage::make(total);
  const Kernels& k = kernels();
  auto move = [&](const Move& mv) {
    Tensor& t = *mv.t;
    Tensor n = Tensor::from_data(mv.to, t.shape(), buf->data() + mv.offset, buf);
    // a panel matrix of a cpu-target .pipit is only copied (mv.to is its own dtype): packing it again read its
    // panels as plain blocks and scrambled every such matrix of >= 1 MiB (Gemma 4 E2B q8 gave NaN logits)
    if (dtype_is_panel(mv.to) && mv.to != t.dtype()) {
      pack_panels(t.dtype(), t.data(), t.row_stride(), t.rows(), t.dim(-1), n.data());
    } else if (mv.to != t.dtype()) {  // f16 -> bf16dot
      const int64_t K = t.dim(1);
      std::vector<float> row(static_cast<size_t>(K));
      for (int64_t i = 0; i < t.dim(0); ++i) {  // SIMD f16 -> f32 (exact) -> bf16 (nearest even): 0.6B in ~1 s, not 4
        k.to_f32[int(DType::F16)](t.row_ptr(i), row.data(), K);
        k.from_f32[int(DType::BF16)](row.data(), n.row_ptr(i), K);
      }
    } else {
      std::memcpy(n.data(), t.data(), t.nbytes());
    }
    if (auto* m = dynamic_cast<const MmapStorage*>(t.storage().get())) m->release(t.data(), t.nbytes());
    t = n;
  };
  // The matrices are independent (each its own tensor and its own part of the buffer), so they are split across
  // threads, every n-th to one: the rewrite and the first touches of the buffer's fresh pages are the whole of a
  // GGUF's load beside the tokenizer (a 0.6B Q4_0 file: ~1 s of CPU here, most of it in the kernel zeroing pages).
  const size_t n_threads =
      total >= (size_t(16) << 20) ? std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 4) : 1;
  std::vector<std::exception_ptr> failed(n_threads);  // a bad_alloc goes to load_model's handler
  auto share = [&](size_t i) {  // matrices i, i + n_threads, ...
    try {
      for (size_t j = i; j < plan.size(); j += n_threads) move(plan[j]);
    } catch (...) {
      failed[i] = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < n_threads; ++i) helpers.emplace_back(share, i);
  share(0);
  for (auto& h : helpers) h.join();
  for (auto& e : failed)
    if (e) std::rethrow_exception(e);
  start_migrations(migrate);  // after every release() above: a moved chunk must not be dropped (it would read zeros)
}

// -m as given, or the Hugging Face cache's snapshot of an "org/name" id (runtime/hf_cache.h); a Hub id that is not
// cached is an error saying where it was looked for and how to get it.
Result<std::string> model_path(const std::string& given) {
  const std::string path = resolve_model_path(given);
  if (path.empty())
    return Error::not_found("[load] {}: no such file or directory, and not in the Hugging Face cache ({}); "
                            "download it with `hf download {}` or give its path", given, hf_hub_cache_dir(), given);
  return path;
}

Result<LoadedModel> load_model_impl(const std::string& given, const LoadOptions& opt) {
  PIPIT_ASSIGN_OR_RETURN(const std::string path, model_path(given));
  if (!opt.mmproj.empty() && is_directory(path))
    return Error::invalid_argument("[load] --mmproj goes with a .gguf model; '{}' is a directory (an HF checkpoint "
                                   "holds its vision tower itself)", path);
  PIPIT_ASSIGN_OR_RETURN(Checkpoint c, opt.mmproj.empty() ? open_checkpoint(path)
                                                          : open_gguf_checkpoint(path, opt.mmproj));
  LoadedModel lm;
  lm.path = path;
  lm.config = HfConfig(c.config);
  lm.generation_config = c.generation_config.is_object() ? c.generation_config : nlohmann::json::object();
  if (auto pp = c.texts.find("preprocessor_config"); pp != c.texts.end()) {  // image processor of a VLM
    auto j = json_depth(pp->second) > kMaxJsonDepth ? nlohmann::json()  // too deep: refused below like bad JSON
                                                    : nlohmann::json::parse(pp->second, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Error::format("[load] {}: preprocessor_config.json is not a JSON object", path);
    lm.preprocessor_config = std::move(j);
  }
  // The tokenizer is built on a second thread while this one rewrites the weights and builds the model: for Qwen3's
  // 11 MB tokenizer.json it is as long as repacking a 0.6B model (~0.4 s each here), and neither needs the other.
  auto tokenizer = std::async(std::launch::async, [&c, &lm] { return load_tokenizer(c, lm); });
  const char* pack_env = std::getenv("PIPIT_PACK");
  const bool pack = opt.pack_weights && !opt.device && !(pack_env && std::string(pack_env) == "0");
  RehomeOptions ro;
  ro.pack = pack && kernels().pack_quant;
  ro.kquant = kernels().pack_kquant;
  ro.mxfp4 = kernels().pack_mxfp4;
  ro.bf16dot = opt.precision_fast && !opt.device && kernels().bf16_dot;
  ro.copy = pack && opt.copy_weights;
  const char* copy_env = std::getenv("PIPIT_COPY_AT_LOAD");
  ro.migrate = !(copy_env && std::string(copy_env) == "1");
  ro.model_type = lm.config.model_type();
  rehome_weights(c.tensors, ro);
  lm.weights = std::make_shared<MapWeightSource>(std::move(c.tensors));
  if (opt.device) {
    // Placement by capability: the model built over the host weights (views, nothing copied) says which ops its
    // forward calls; the device must have every one of them.
    PIPIT_ASSIGN_OR_RETURN(auto probe, create_model(lm.config, *lm.weights));
    OpSet needed = probe->ops_used();
    std::string missing;  // every op it lacks, by name: what a backend author needs to add
    for (Op op; (op = first_missing_op(*opt.device, needed)) != Op::kCount; needed.reset(size_t(op)))
      missing += (missing.empty() ? "'" : ", '") + std::string(op_name(op)) + "'";
    if (!missing.empty())
      return Error::unsupported("[load] {}: {} does not implement {}, which this model ({}) needs; use --device cpu",
                                path, opt.device->name(), missing, lm.config.model_type());
    probe.reset();
    DeviceWeightSource dw(*lm.weights, opt.device);
    PIPIT_ASSIGN_OR_RETURN(lm.model, create_model(lm.config, dw));
    PIPIT_TRY(dw.status());
    lm.model->mutable_info().device = opt.device;
  } else {
    PIPIT_ASSIGN_OR_RETURN(lm.model, create_model(lm.config, *lm.weights));
  }
  merge_generation_config(lm);
  PIPIT_TRY(tokenizer.get());
  use_builtin_template(lm);
#if defined(__GLIBC__)
  // Parsing tokenizer.json (11 MB for Qwen) builds a JSON tree of ~100 MB, and a GGUF's vocabulary is read as ~50 MB of
  // metadata values and string copies, all freed once the tokenizer has its tables; glibc keeps those pages unless
  // asked, and they would stay resident for the life of the process.
  if (lm.tokenizer) malloc_trim(0);
#endif
#ifdef PIPIT_WITH_TOKENIZER
  // A tokenizer of another model (a folder mixed up, a GGUF with the wrong vocab) would fail at the first id past the
  // embedding table, in the middle of a generation; say it here, with both sizes.
  if (opt.need_tokenizer && lm.tokenizer && lm.tokenizer->vocab_size() > lm.model->info().n_vocab)
    return Error::format("[load] {}: the tokenizer has {} tokens but the model's vocabulary has {}: the tokenizer "
                         "belongs to another model", path, lm.tokenizer->vocab_size(), lm.model->info().n_vocab);
#endif
  if (opt.need_tokenizer && !lm.tokenizer) {
    if (!c.tokenizer_error.empty())
      return Error::unsupported("[load] {}: this command needs a tokenizer, and the file's could not be read: {}",
                                path, c.tokenizer_error);
    return Error::not_found("[load] {}: no tokenizer (tokenizer.json); this command needs one", path);
  }
  return lm;
}

}  // namespace

Result<std::shared_ptr<Tokenizer>> load_tokenizer(const std::string& given) {
  PIPIT_ASSIGN_OR_RETURN(const std::string path, model_path(given));
#ifndef PIPIT_WITH_TOKENIZER
  return Error::unsupported("[load] {}: this build has no tokenizer (PIPIT_WITH_TOKENIZER=OFF)", path);
#else
  if (is_directory(path)) return Tokenizer::load_dir(path);
  LoadedModel lm;
  try {
    PIPIT_ASSIGN_OR_RETURN(Checkpoint c, open_checkpoint(path));
    lm.config = HfConfig(c.config);
    PIPIT_TRY(load_tokenizer(c, lm));
    if (!lm.tokenizer) {
      if (!c.tokenizer_error.empty())
        return Error::unsupported("[load] {}: the file's tokenizer could not be read: {}", path, c.tokenizer_error);
      return Error::not_found("[load] {}: the file holds no tokenizer", path);
    }
  } catch (const std::bad_alloc&) {
    return Error::unavailable("[load] {}: out of memory while loading its tokenizer", path);
  }
  use_builtin_template(lm);
  return lm.tokenizer;
#endif
}

Result<LoadedModel> load_model(const std::string& path, const LoadOptions& opt) {
  // Sizes a file declares are checked before they are allocated (HfConfig::validate_sizes, the readers' header
  // checks); what can still fail is a real allocation on a full machine (packing weights, the tokenizer's tables).
  try {
    return load_model_impl(path, opt);
  } catch (const std::bad_alloc&) {
    return Error::unavailable("[load] {}: out of memory while loading ({} available now)", path,
                              format_bytes(available_memory()));
  } catch (const std::length_error&) {
    return Error::format("[load] {}: a size in the file is too large to allocate", path);
  }
}

}  // namespace pipit
