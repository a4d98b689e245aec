// Converter: plan -> header -> tensors streamed through f32 row blocks into the requested dtype, with progress.
#include "convert/converter.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>

#include "backends/cpu/kernels.h"
#include "core/output_file.h"
#include "core/panels.h"
#include "core/threads.h"
#include "format/pipit_format.h"
#include "models/mapped_weights.h"
#ifdef PIPIT_WITH_TOKENIZER
#include "tokenizer/tokenizer.h"
#endif

namespace pipit {

namespace {

using Clock = std::chrono::steady_clock;

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) b /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

// Progress on stderr: a redrawn bar on a terminal, a plain line every ~10% otherwise.
class Progress {
 public:
  Progress(bool enabled, int64_t n_tensors, uint64_t total_bytes)
      : on_(enabled), tty_(enabled && isatty(2)), n_(n_tensors), total_(std::max<uint64_t>(total_bytes, 1)),
        start_(Clock::now()) {}
  void update(int64_t done, uint64_t bytes, const std::string& name) {
    if (!on_) return;
    const double frac = double(bytes) / double(total_);
    const double el = std::chrono::duration<double>(Clock::now() - start_).count();
    const double eta = frac > 0.01 ? el * (1 - frac) / frac : 0;
    if (tty_) {
      if (done < n_ && el - last_draw_ < 0.1) return;
      last_draw_ = el;
      const int w = 30, fill = int(frac * w);
      std::string bar(size_t(fill), '#');
      bar.resize(size_t(w), '.');
      std::fprintf(stderr, "\r[%s] %lld/%lld tensors  %s / %s  ETA %.0fs  %-40.40s", bar.c_str(), (long long)done,
                   (long long)n_, human_bytes(double(bytes)).c_str(), human_bytes(double(total_)).c_str(), eta,
                   name.c_str());
      if (done == n_) std::fprintf(stderr, "\n");
    } else {
      const int decile = int(frac * 10);
      if (decile <= last_decile_ && done < n_) return;
      last_decile_ = decile;
      std::fprintf(stderr, "[convert] %3d%%  %lld/%lld tensors  %s  %.1fs\n", int(frac * 100), (long long)done,
                   (long long)n_, human_bytes(double(bytes)).c_str(), el);
    }
  }

 private:
  bool on_, tty_;
  int64_t n_;
  uint64_t total_;
  Clock::time_point start_;
  double last_draw_ = -1;
  int last_decile_ = -1;
};

// Called with the source bytes of the tensor done so far, after each block of rows (progress inside large tensors:
// a 151k-row embedding at q4_k_m takes tens of seconds).
using RowsDone = std::function<void(uint64_t src_bytes)>;

Status write_tensor(const Tensor& src, DType dst, PipitWriter& w, size_t index, ThreadPool& pool,
                    const RowsDone& on_rows);

// A panel dtype (q4_0x16, q8_0x16; core/dtype.h): the rows are made in the plain dtype (copied or quantized, as
// write_tensor does), then packed 16 rows at a time. Blocks of rows are whole panels, so the stream of packed blocks
// is the packed tensor.
Status write_panels(const Tensor& src, DType dst, PipitWriter& w, size_t index, ThreadPool& pool,
                    const RowsDone& on_rows) {
  const DType plain = dtype_unpanel(dst);
  const int64_t K = src.dim(-1), rows = src.dim(0), row = dtype_row_bytes(plain, K);
  const int64_t block = std::max<int64_t>(1, (int64_t(1) << 18) / std::max<int64_t>(K, 1)) * kPanelRows;
  std::vector<uint8_t> packed(size_t(std::min(block, rows) * row));
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t nr = std::min(block, rows - r0);
    const Tensor part = src.slice(0, r0, r0 + nr);
    Tensor flat;  // the block in the plain dtype
    if (src.dtype() == plain) {
      flat = part;
    } else {
      flat = Tensor::empty(plain, part.shape());
      const Kernels& k = ref_kernels();
      ToF32Fn to = k.to_f32[int(src.dtype())];
      FromF32Fn from = k.from_f32[int(plain)];
      if (!to || !from)
        return Error::unsupported("[convert] no conversion from {} to {}", dtype_name(src.dtype()), dtype_name(plain));
      const int64_t src_row = dtype_row_bytes(src.dtype(), K);
      pool.parallel_for(nr, [&](int64_t a, int64_t b) {
        std::vector<float> f(static_cast<size_t>(K));
        for (int64_t r = a; r < b; ++r) {
          to(part.data() + r * src_row, f.data(), K);
          from(f.data(), flat.data() + r * row, K);
        }
      }, 16);
    }
    pack_panels(plain, flat.data(), row, nr, K, packed.data());
    PIPIT_TRY(w.append(index, packed.data(), size_t(nr * row)));
    if (on_rows) on_rows(uint64_t(r0 + nr) * uint64_t(dtype_row_bytes(src.dtype(), K)));
  }
  return Status::ok();
}

// A panel source (a .pipit written for the cpu target) converted to anything else: a block of whole panels at a
// time is unpacked to its plain dtype (exact) and converted as a plain tensor's rows would be.
Status write_from_panels(const Tensor& src, DType dst, PipitWriter& w, size_t index, ThreadPool& pool,
                         const RowsDone& on_rows) {
  const DType plain = dtype_unpanel(src.dtype());
  const int64_t K = src.dim(-1), rows = src.rows();
  const int64_t block = std::max<int64_t>(1, (int64_t(1) << 18) / std::max<int64_t>(K, 1)) * kPanelRows;
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t nr = std::min(block, rows - r0);
    Tensor part = Tensor::empty(plain, {nr, K});
    unpack_panel_rows(src.dtype(), src.data(), K, r0, r0 + nr, part.data());
    const uint64_t before = uint64_t(r0) * uint64_t(dtype_row_bytes(src.dtype(), K));
    const RowsDone in_part = [&](uint64_t b) {
      if (on_rows) on_rows(before + b);
    };
    PIPIT_TRY(write_tensor(part, dst, w, index, pool, in_part));
  }
  return Status::ok();
}

// Converts `src` to `dst` and appends it to the writer: plain copies go straight from the mapping; everything else
// goes through f32, a block of rows at a time, rows split across the pool (each row's bytes depend only on that
// row, so the output does not depend on the thread count).
Status write_tensor(const Tensor& src, DType dst, PipitWriter& w, size_t index, ThreadPool& pool,
                    const RowsDone& on_rows) {
  if (dtype_is_panel(src.dtype()) && src.dtype() != dst) return write_from_panels(src, dst, w, index, pool, on_rows);
  if (dtype_is_panel(dst) && src.dtype() != dst) return write_panels(src, dst, w, index, pool, on_rows);
  if (src.dtype() == dst) {
    const size_t n = src.nbytes(), chunk = size_t(16) << 20;
    for (size_t off = 0; off < n || off == 0; off += chunk) {
      PIPIT_TRY(w.append(index, src.data() + off, std::min(chunk, n - off)));
      if (n == 0) break;
    }
    return Status::ok();
  }
  const Kernels& k = ref_kernels();
  ToF32Fn to = k.to_f32[int(src.dtype())];
  FromF32Fn from = k.from_f32[int(dst)];
  if (!to || !from)
    return Error::unsupported("[convert] no conversion from {} to {}", dtype_name(src.dtype()), dtype_name(dst));
  const int64_t K = src.dim(-1), rows = src.numel() / std::max<int64_t>(K, 1);
  const int64_t src_row = dtype_row_bytes(src.dtype(), K), dst_row = dtype_row_bytes(dst, K);
  const int64_t block = std::max<int64_t>(1, (int64_t(4) << 20) / std::max<int64_t>(K, 1));  // ~16 MB of f32
  std::vector<float> f(size_t(std::min(block, rows) * K));
  std::vector<uint8_t> out(size_t(std::min(block, rows) * dst_row));
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t nr = std::min(block, rows - r0);
    pool.parallel_for(nr, [&](int64_t a, int64_t b) {
      for (int64_t r = a; r < b; ++r) {
        to(src.data() + (r0 + r) * src_row, f.data() + r * K, K);
        from(f.data() + r * K, out.data() + r * dst_row, K);
      }
    }, std::max<int64_t>(16, (int64_t(1) << 16) / std::max<int64_t>(K, 1)));  // >= 64K elements per thread
    PIPIT_TRY(w.append(index, out.data(), size_t(nr * dst_row)));
    if (on_rows) on_rows(uint64_t(r0 + nr) * uint64_t(src_row));
  }
  if (rows == 0) PIPIT_TRY(w.append(index, nullptr, 0));
  return Status::ok();
}

}  // namespace

std::string ConvertReport::summary() const {
  char buf[256];
  const double p = double(std::max<int64_t>(n_params, 1));
  std::snprintf(buf, sizeof buf, "%lld tensors, %lld weights: %s (%.2f bits/weight) -> %s (%.2f bits/weight), file %s, %.1f s",
                (long long)n_tensors, (long long)n_params, human_bytes(double(bytes_in)).c_str(),
                double(bytes_in) * 8 / p, human_bytes(double(bytes_out)).c_str(), double(bytes_out) * 8 / p,
                human_bytes(double(file_bytes)).c_str(), seconds);
  return buf;
}

Result<ConvertReport> convert_checkpoint(const Checkpoint& c, const ConvertOptions& opt) {
  const auto t0 = Clock::now();
  PIPIT_ASSIGN_OR_RETURN(std::string quant, canonical_quant(opt.quant));
  if (quant == "source") quant = "auto";
  if (opt.target != "cpu" && opt.target != "generic" && opt.target != "x86" && opt.target != "arm")
    return Error::invalid_argument("[convert] --target '{}' (expected cpu or generic)", opt.target);
  if (opt.output.empty()) return Error::invalid_argument("[convert] no output path (-o OUT.pipit)");
  Recipe user;
  if (!opt.recipe_path.empty()) {
    PIPIT_ASSIGN_OR_RETURN(user, Recipe::load(opt.recipe_path));
  }
  if (!c.config.contains("model_type") || !c.config["model_type"].is_string())
    return Error::format("[convert] {}: config has no model_type", c.path);

  ConvertReport rep;
  PIPIT_ASSIGN_OR_RETURN(rep.plans, plan_conversion(c, quant, user));
  rep.notes = c.notes;
  // cpu (and its old names x86, arm): q4_0 / q8_0 matrices as 16-row panels, the layout of the integer GEMV/GEMM
  // kernels, so a load uses them in place (a generic file is packed at load instead: a copy of those weights in
  // memory). Not the weights the model reads by rows or not at all (models/mapped_weights.h: a row lookup in panels
  // reads 16 rows). The file is the same on every machine: the panels do not depend on the CPU converting them.
  std::string layout = "generic";
  const std::string model_type = c.config["model_type"].get<std::string>();
  for (auto& p : rep.plans) {
    if (opt.target == "generic") {
      p.dst = dtype_unpanel(p.dst);  // a panel source (a cpu-target .pipit) back to GGUF's plain blocks
    } else if ((p.dst == DType::Q4_0 || p.dst == DType::Q8_0) && p.shape.size() == 2 &&
               p.shape[0] % kPanelRows == 0 && !keep_mapped(model_type, p.name)) {
      p.dst = dtype_panel_of(p.dst);
    }
    if (dtype_is_panel(p.dst)) layout = "panel16";
  }

  nlohmann::json q = {{"quant", quant}, {"target", opt.target}, {"layout", layout}, {"source_format", c.format}};
  nlohmann::json rules = nlohmann::json::array();
  for (auto& r : user.rules) rules.push_back(r.pattern + " -> " + r.dtype);
  for (auto& d : default_rule_descriptions(quant, model_type)) rules.push_back(d);  // this family's rules only
  q["rules"] = rules;
  nlohmann::json fallbacks = nlohmann::json::array();
  std::vector<PipitWriter::Spec> specs;
  for (auto& p : rep.plans) {
    specs.push_back({p.name, p.dst, p.shape});
    if (!p.fallback.empty())
      fallbacks.push_back({{"name", p.name}, {"wanted", p.wanted}, {"used", dtype_name(p.dst)}, {"reason", p.fallback}});
  }
  q["fallbacks"] = fallbacks;

  nlohmann::json header = {{"generator", std::string("pipit ") + PIPIT_VERSION},
                           {"arch", c.config["model_type"]},
                           {"config", c.config},
                           {"quantization", q}};
  if (!c.generation_config.empty()) header["generation_config"] = c.generation_config;
  for (auto& [k, v] : c.texts) header[k] = v;
  if (!c.texts.count("tokenizer"))
    if (auto tj = c.tokenizer_json()) header["tokenizer"] = std::string(*tj);  // a .pipit's, viewed in place
  if (c.tokenizer_parts) {  // a GGUF vocabulary: stored as the files an HF checkpoint has
    TokenizerTexts t = tokenizer_parts_texts(*c.tokenizer_parts);
    header["tokenizer"] = std::move(t.tokenizer_json);
    header["tokenizer_config"] = std::move(t.tokenizer_config_json);
  }
#ifdef PIPIT_WITH_TOKENIZER
  // Its compiled form beside it, read at load instead of the text (format/pipit_format.h "blobs"); a tokenizer.json
  // pipit cannot read gets none, and its load fails on the text as it would have.
  if (header.contains("tokenizer"))
    if (auto compiled = Tokenizer::compile(header["tokenizer"].get_ref<const std::string&>()))
      header["tokenizer_compiled"] = std::move(compiled).value();
#endif
  PIPIT_ASSIGN_OR_RETURN(auto writer, PipitWriter::create(opt.output, header, specs));

  uint64_t total_in = 0;
  for (auto& [name, t] : c.tensors) total_in += t.nbytes();
  Progress progress(opt.progress, int64_t(rep.plans.size()), total_in);
  ThreadPool pool(opt.n_threads > 0 ? opt.n_threads : ThreadPool::default_threads());
  uint64_t done_bytes = 0;
  for (size_t i = 0; i < rep.plans.size(); ++i) {
    const TensorPlan& p = rep.plans[i];
    const Tensor& t = c.tensors.at(p.name);
    if (!t.is_contiguous()) return Error::internal("[convert] {}: source tensor is not contiguous", p.name);
    const RowsDone on_rows = [&](uint64_t in_tensor) { progress.update(int64_t(i), done_bytes + in_tensor, p.name); };
    PIPIT_TRY(write_tensor(t, p.dst, *writer, i, pool, on_rows).with_context("[convert] " + p.name));
    rep.bytes_in += t.nbytes();
    rep.bytes_out += dtype_row_bytes(p.dst, t.dim(-1)) * (t.numel() / std::max<int64_t>(t.dim(-1), 1));
    rep.n_params += t.numel();
    done_bytes += t.nbytes();
    progress.update(int64_t(i + 1), done_bytes, p.name);
  }
  rep.file_bytes = writer->total_bytes();
  PIPIT_TRY(writer->finish());
  rep.n_tensors = int64_t(rep.plans.size());
  rep.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return rep;
}

Result<ConvertReport> convert_file(const std::string& input, const ConvertOptions& opt) {
  // the output path first: a device, directory or dangling link is refused before a long conversion, not after
  if (!opt.output.empty()) PIPIT_TRY(replaceable_output(opt.output, "[convert]").status());
  PIPIT_ASSIGN_OR_RETURN(Checkpoint c, open_checkpoint(input));
  with_tokenizer_texts(c);  // written once here rather than from a copy of the parts
  return convert_checkpoint(c, opt);
}

}  // namespace pipit
