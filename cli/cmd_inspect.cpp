// `pipit inspect FILE`: what is inside a .pipit file (header, config summary, recipe, tensors), a .gguf (metadata,
// tensors), a .safetensors file or an HF directory; `--json` the same as one object. `--load` also loads the model
// and reports the time and resident memory it took (the zero-copy check).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include "backends/device.h"
#include "cli/command.h"
#include "cli/common.h"
#include "convert/checkpoint.h"
#include "core/storage.h"
#include "format/gguf.h"
#include "format/pipit_format.h"
#include "format/safetensors.h"
#include "runtime/loader.h"
#include "runtime/memory_estimate.h"

namespace pipit::cli {

namespace {

std::string mb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f MB", bytes / 1e6);
  return b;
}

// Resident set size of this process in bytes (Linux /proc), 0 when unknown.
double rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024;
  return 0;
}

void print_config(const nlohmann::json& c) {
  const HfConfig top(c);
  const HfConfig text = top.sub("text_config");  // a VLM's language model (Gemma 4, newer Qwen-VL configs), or top
  auto get = [&](const char* k, int64_t def = 0) { return (long long)text.get_int_or(k, top.get_int_or(k, def)); };
  const long long n_head = get("num_attention_heads");
  std::printf("arch: %s  hidden %lld, layers %lld, heads %lld/%lld, head_dim %lld, ff %lld, vocab %lld%s\n",
              top.model_type().c_str(), get("hidden_size"), get("num_hidden_layers"), n_head,
              get("num_key_value_heads", n_head), get("head_dim"), get("intermediate_size"), get("vocab_size"),
              text.get_bool_or("tie_word_embeddings", top.get_bool_or("tie_word_embeddings", false)) ? ", tied" : "");
}

void print_tensor_table(const std::vector<std::tuple<std::string, std::string, std::string, uint64_t>>& rows,
                        bool all) {
  std::map<std::string, std::pair<int, uint64_t>> by_type;
  uint64_t total = 0;
  std::printf("tensors (%zu):\n", rows.size());
  size_t shown = 0;
  for (auto& [name, dtype, shape, bytes] : rows) {
    by_type[dtype].first++;
    by_type[dtype].second += bytes;
    total += bytes;
    if (all || shown < 40) {
      std::printf("  %-52s %-6s %-18s %12llu\n", name.c_str(), dtype.c_str(), shape.c_str(), (unsigned long long)bytes);
      ++shown;
    }
  }
  if (shown < rows.size()) std::printf("  ... %zu more (--all lists every tensor)\n", rows.size() - shown);
  for (auto& [t, v] : by_type) std::printf("  %-6s %5d tensors  %s\n", t.c_str(), v.first, mb(double(v.second)).c_str());
  std::printf("  total  %s\n", mb(double(total)).c_str());
}

int inspect_pipit(const std::string& path, bool all) {
  auto f = PipitFile::open(path);
  if (!f) {
    std::fprintf(stderr, "pipit inspect: error: %s\n", f.status().message().c_str());
    return 1;
  }
  const auto& h = f->header();
  std::printf("file: %s (%s), .pipit version %u, data at byte %llu\n", path.c_str(), mb(double(f->file_size())).c_str(),
              f->version(), (unsigned long long)f->data_offset());
  if (h.contains("generator")) std::printf("generator: %s\n", h["generator"].dump().c_str());
  print_config(f->config());
  for (const char* k : {"tokenizer", "tokenizer_config", "chat_template", "preprocessor_config", "processor_config"})
    if (auto t = f->text(k)) std::printf("%s: %zu bytes\n", k, t->size());
  if (auto b = f->blob("tokenizer_compiled"))
    std::printf("tokenizer_compiled: %zu bytes (read at load in place of the tokenizer text)\n", b->size());
  if (h.contains("generation_config")) std::printf("generation_config: %s\n", h["generation_config"].dump().c_str());
  if (h.contains("quantization")) {
    const auto& q = h["quantization"];
    std::printf("quantization: quant %s, target %s, layout %s, source %s\n", q.value("quant", "?").c_str(),
                q.value("target", "?").c_str(), q.value("layout", "?").c_str(), q.value("source_format", "?").c_str());
    if (q.contains("rules") && q["rules"].is_array())
      for (auto& r : q["rules"]) std::printf("  rule: %s\n", r.is_string() ? r.get<std::string>().c_str() : "?");
    if (q.contains("fallbacks") && q["fallbacks"].is_array())
      for (auto& fb : q["fallbacks"]) std::printf("  fallback: %s\n", fb.dump().c_str());
  }
  std::vector<std::tuple<std::string, std::string, std::string, uint64_t>> rows;
  for (auto& e : f->entries())
    rows.emplace_back(e.name, std::string(dtype_name(e.dtype)), shape_to_string(e.shape), e.nbytes);
  print_tensor_table(rows, all);
  return 0;
}

int inspect_gguf(const std::string& path, bool all) {
  auto f = GgufFile::open(path);
  if (!f) {
    std::fprintf(stderr, "pipit inspect: error: %s\n", f.status().message().c_str());
    return 1;
  }
  std::printf("file: %s, GGUF version %u, alignment %llu, data at byte %llu\n", path.c_str(), f->version(),
              (unsigned long long)f->alignment(), (unsigned long long)f->data_offset());
  std::printf("metadata (%zu):\n", f->metadata().size());
  for (auto& [k, v] : f->metadata()) std::printf("  %-44s %s\n", k.c_str(), v.to_string().c_str());
  std::vector<std::tuple<std::string, std::string, std::string, uint64_t>> rows;
  for (auto& t : f->tensors()) {
    const GgmlTypeInfo* ti = ggml_type_info(t.type);
    rows.emplace_back(t.name, ti ? ti->name : "?", shape_to_string(t.shape()), t.nbytes);
  }
  print_tensor_table(rows, all);
  return 0;
}

int inspect_safetensors(const std::string& path, bool all) {
  auto f = SafetensorsFile::open(path);
  if (!f) {
    std::fprintf(stderr, "pipit inspect: error: %s\n", f.status().message().c_str());
    return 1;
  }
  std::printf("file: %s (safetensors)\n", path.c_str());
  for (auto& [k, v] : f->metadata()) std::printf("metadata: %s = %s\n", k.c_str(), v.c_str());
  std::vector<std::tuple<std::string, std::string, std::string, uint64_t>> rows;
  for (auto& [name, t] : f->tensors()) rows.emplace_back(name, std::string(dtype_name(t.dtype())), t.shape_str(), t.nbytes());
  print_tensor_table(rows, all);
  return 0;
}

int inspect_checkpoint(const std::string& path, bool all) {
  auto c = open_checkpoint(path);
  if (!c) {
    std::fprintf(stderr, "pipit inspect: error: %s\n", c.status().message().c_str());
    return 1;
  }
  with_tokenizer_texts(*c);  // a GGUF vocabulary: the sizes of the texts pipit convert would store
  std::printf("checkpoint: %s (%s)\n", path.c_str(), c->format.c_str());
  print_config(c->config);
  for (auto& [k, v] : c->texts) std::printf("%s: %zu bytes\n", k.c_str(), v.size());
  for (auto& n : c->notes) std::printf("note: %s\n", n.c_str());
  std::vector<std::tuple<std::string, std::string, std::string, uint64_t>> rows;
  for (auto& [name, t] : c->tensors) rows.emplace_back(name, std::string(dtype_name(t.dtype())), t.shape_str(), t.nbytes());
  print_tensor_table(rows, all);
  return 0;
}

// --json: the checkpoint as the loader reads it (HF tensor names, pipit dtypes) as one object, for scripts.
int inspect_json(const Args& a, const std::string& path) {
  auto c = open_checkpoint(path);
  if (!c) return fail(a, c.status().message());
  with_tokenizer_texts(*c);
  using ojson = nlohmann::ordered_json;
  ojson texts = ojson::object(), tensors = ojson::array(), dtypes = ojson::object();
  for (auto& [k, v] : c->texts) texts[k] = v.size();
  if (auto tj = c->tokenizer_json()) texts["tokenizer"] = tj->size();
  uint64_t total = 0, params = 0;
  std::map<std::string, std::pair<int, uint64_t>> by_dtype;  // tensors, bytes
  for (auto& [name, t] : c->tensors) {
    const std::string dt(dtype_name(t.dtype()));
    tensors.push_back({{"name", name}, {"dtype", dt}, {"shape", t.shape()}, {"bytes", t.nbytes()}});
    by_dtype[dt].first++;
    by_dtype[dt].second += t.nbytes();
    total += t.nbytes();
    params += uint64_t(t.numel());
  }
  for (auto& [dt, v] : by_dtype) dtypes[dt] = {{"tensors", v.first}, {"bytes", v.second}};
  ojson j = {{"path", path},
             {"format", c->format},
             {"model_type", HfConfig(c->config).model_type()},
             {"n_params", params},
             {"bytes", total},
             {"dtypes", dtypes},
             {"texts", texts},  // tokenizer, chat_template, ...: their sizes in bytes
             {"quantization", c->quantization},
             {"notes", c->notes},
             {"config", c->config},
             {"generation_config", c->generation_config},
             {"tensors", tensors}};
  std::printf("%s\n", j.dump(-1, ' ', false, ojson::error_handler_t::replace).c_str());
  return 0;
}

// `--memory`: what loading the model and a session at -c N would take (runtime/memory_estimate.h).
int inspect_memory(Args& a, const std::string& path) {
  MemoryEstimateOptions o;
  auto ctx = a.get_int("-c");
  auto par = a.get_int("--parallel");
  auto kv = kv_type(a);
  if (!ctx) return fail(a, ctx.status().message());
  if (!par) return fail(a, par.status().message());
  if (!kv) return fail(a, kv.status().message());
  o.n_ctx = *ctx;
  o.n_slot = *par;
  o.kv_dtype = *kv;
  auto e = estimate_memory(path, o);
  if (!e) return fail(a, e.status().message());
  auto m = [](uint64_t b) { return mb(double(b)); };
  if (a.get_flag("--json")) {
    nlohmann::json j = {{"weights", e->weights},         {"tower_weights", e->tower_weights},
                        {"kv_cache", e->kv_cache},       {"activations", e->activations},
                        {"tower_activations", e->tower_activations}, {"tokenizer", e->tokenizer},
                        {"runtime", e->runtime},         {"load_transient", e->load_transient},
                        {"total", e->total()}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("memory estimate (peak resident at a full context):\n");
  std::printf("  weights      %12s", m(e->weights).c_str());
  if (e->tower_weights) std::printf("  (towers %s)", m(e->tower_weights).c_str());
  std::printf("\n  KV cache     %12s\n  activations  %12s\n", m(e->kv_cache).c_str(), m(e->activations).c_str());
  // the largest media input's encode: an image, a video or an audio clip
  if (e->tower_activations) std::printf("  media encode %12s\n", m(e->tower_activations).c_str());
  std::printf("  tokenizer    %12s\n  runtime      %12s\n", m(e->tokenizer).c_str(), m(e->runtime).c_str());
  std::printf("  (loading: %s reading the tokenizer, in place of the session's part)\n",
              m(e->load_transient).c_str());
  std::printf("  total        %12s\n", m(e->total()).c_str());
  return 0;
}

int cmd_inspect(Args& a) {
  a.flag({"--all"}, "list every tensor");
  a.flag({"--memory"}, "estimate the memory the model takes with a session of -c tokens, before loading it");
  a.option({"-c", "--ctx-size"}, "--memory: context length (0: min(model max, 4096))", "0");
  a.option({"-np", "--parallel"}, "--memory: parallel sequences (the server's --parallel)", "1");
  a.option({"--kv-type"}, "--memory: KV cache dtype: f16, f32 or q8", "f16");
  a.flag({"--load"}, "also load the model; report load time and resident memory");
  a.flag({"--devices"}, "list the devices models can run on (--device), and nothing else");
  a.flag({"--json"}, "one JSON object: format, model type, parameters, bytes per dtype, texts, config, tensors");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.get_flag("--devices")) {
    for (const auto& line : list_devices()) std::printf("%s\n", line.c_str());
    return 0;
  }
  if (a.help() || a.positionals().size() != 1) {
    std::printf("usage: pipit inspect FILE [--all] [--load] [--memory -c N] | pipit inspect --devices\nFILE: .pipit, .gguf, .safetensors or a HF directory\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  const std::string path = a.positionals()[0];
  const bool all = a.get_flag("--all");
  if (a.get_flag("--memory")) return inspect_memory(a, path);
  if (a.get_flag("--json")) return inspect_json(a, path);
  if (a.get_flag("--load")) {
    const double rss0 = rss_bytes();
    const auto t0 = std::chrono::steady_clock::now();
    auto lm = load_model(path);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!lm) return fail(a, lm.status().message());
    const double rss1 = rss_bytes();
    double fsize = 0;
    if (file_exists(path)) {
      std::ifstream f(path, std::ios::binary | std::ios::ate);
      fsize = double(f.tellg());
    }
    std::printf("load: %.3f s; resident memory %s before, %s after: +%s", secs, mb(rss0).c_str(), mb(rss1).c_str(),
                mb(rss1 - rss0).c_str());
    if (fsize > 0) std::printf(" = %.2f%% of the %s file", 100 * (rss1 - rss0) / fsize, mb(fsize).c_str());
    std::printf("\n");
    return 0;
  }
  if (is_pipit_file(path)) return inspect_pipit(path, all);
  if (is_gguf_file(path)) return inspect_gguf(path, all);
  if (path.size() > 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0) return inspect_safetensors(path, all);
  return inspect_checkpoint(path, all);
}

}  // namespace

PIPIT_REGISTER_COMMAND("inspect", "what is inside a .pipit / .gguf / safetensors checkpoint", cmd_inspect);

}  // namespace pipit::cli
