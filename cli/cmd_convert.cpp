// `pipit convert INPUT -o OUT.pipit [--quant ...] [--recipe FILE] [--target ...]`: any checkpoint pipit reads
// (HF directory with safetensors or pytorch_model.bin, .gguf, .pipit) -> one .pipit file.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "cli/command.h"
#include "convert/converter.h"

namespace pipit::cli {

namespace {

int cmd_convert(Args& a) {
  a.option({"-o", "--output"}, "output .pipit file");
  a.option({"-q", "--quant"}, "f32 | f16 | bf16 | q8 | q4 | q4_k_m (= q4_k) | q4_k_s | q5_k_m (= q5_k) | q5_k_s |\n"
            "q6_k (llama.cpp's K-quant mixes) | auto (keep each tensor's source dtype)", "auto");
  a.option({"--recipe"}, "JSON recipe: {\"rules\": [{\"pattern\": GLOB, \"dtype\": TYPE}, ...]}, first match wins");
  a.option({"--target"}, "generic | x86 | arm (x86, arm: q4/q8 matrices stored as the\n"
            "16-row panels of the integer kernels; no repacking at load)", "generic");
  a.option({"-t", "--threads"}, "threads for quantization (default: physical cores)");
  a.flag({"--quiet"}, "no progress output");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || a.positionals().size() != 1 || !a.has("-o")) {
    std::printf("usage: pipit convert INPUT -o OUT.pipit [--quant f32|f16|bf16|q8|q4|q4_k_m|q5_k_m|q6_k|...] "
                "[--recipe FILE] "
                "[--target generic|x86|arm]\n"
                "INPUT: a HF checkpoint directory (safetensors or pytorch_model.bin), a .gguf or a .pipit file.\n%s",
                a.usage().c_str());
    return a.help() ? 0 : 1;
  }
  ConvertOptions opt;
  opt.output = a.get("-o");
  opt.quant = a.get("--quant");  // Q4_K_M as llama.cpp spells it is q4_k_m
  std::transform(opt.quant.begin(), opt.quant.end(), opt.quant.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  opt.recipe_path = a.get("--recipe");
  opt.target = a.get("--target");
  opt.progress = !a.get_flag("--quiet");
  if (a.has("--threads")) {
    auto t = a.get_int("--threads");
    if (!t || *t < 1) return fail(a, "--threads must be a positive integer");
    opt.n_threads = int(*t);
  }
  auto rep = convert_file(a.positionals()[0], opt);
  if (!rep) return fail(a, rep.status().message());
  for (auto& n : rep->notes) std::fprintf(stderr, "[convert] note: %s\n", n.c_str());
  for (auto& p : rep->plans)
    if (!p.fallback.empty())
      std::fprintf(stderr, "[convert] fallback: %s -> %s instead of %s (%s)\n", p.name.c_str(),
                   std::string(dtype_name(p.dst)).c_str(), p.wanted.c_str(), p.fallback.c_str());
  std::printf("wrote %s: %s\n", opt.output.c_str(), rep->summary().c_str());
  return 0;
}

}  // namespace

PIPIT_REGISTER_COMMAND("convert", "HF / PyTorch / GGUF checkpoint -> .pipit, optionally quantized (q8, q4)",
                       cmd_convert);

}  // namespace pipit::cli
