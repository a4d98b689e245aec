// `pipit convert INPUT -o OUT.pipit [--quant ...] [--recipe FILE] [--target ...]`: any checkpoint pipit reads
// (HF directory with safetensors or pytorch_model.bin, .gguf, .pipit) -> one .pipit file.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "cli/command.h"
#include "convert/converter.h"
#include "core/output_file.h"
#include "format/pipit_format.h"

namespace pipit::cli {

namespace {

// The temporary file the writer fills beside the output (core/output_file.h create_temp_beside: OUT.tmp.PID), removed
// when Ctrl-C or a TERM ends the conversion, so an interrupted run leaves nothing behind. A fixed buffer: the handler
// may only call async-signal-safe functions.
char g_tmp_path[PATH_MAX + 32];

void remove_tmp_and_die(int sig) {
  if (g_tmp_path[0]) ::unlink(g_tmp_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void remove_tmp_on_interrupt(const std::string& output) {
  const std::string tmp = output + ".tmp." + std::to_string(::getpid());
  if (tmp.size() >= sizeof(g_tmp_path)) return;
  std::memcpy(g_tmp_path, tmp.c_str(), tmp.size() + 1);
  struct sigaction sa = {};
  sa.sa_handler = remove_tmp_and_die;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

// An existing output that is not a .pipit file, by content or by name (a checkpoint, a document:
// `-o model.safetensors` by mistake), is not replaced without --force. A name ending in .pipit is taken as meant
// (a half-written earlier output is replaced, as the hostile suite's output cases expect).
Status check_overwrite(const std::string& output, bool force) {
  struct stat st;
  if (force || ::stat(output.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0 ||
      output.ends_with(".pipit") || is_pipit_file(output))
    return Status::ok();
  return Error::invalid_argument("[convert] '{}' exists and is not a .pipit file ({} bytes): converting would replace "
                                 "it; choose another -o (a .pipit name), remove it, or pass --force", output, int64_t(st.st_size));
}

int cmd_convert(Args& a) {
  a.option({"-o", "--output"}, "output .pipit file");
  a.option({"-q", "--quant"}, "f32 | f16 | bf16 | q8 | q4 | q4_k_m (= q4_k) | q4_k_s | q5_k_m (= q5_k) | q5_k_s |\n"
            "q6_k (llama.cpp's K-quant mixes) | auto (keep each tensor's source dtype)", "auto");
  a.option({"--recipe"}, "JSON recipe: {\"rules\": [{\"pattern\": GLOB, \"dtype\": TYPE}, ...]}, first match wins");
  a.option({"--target"}, "cpu | generic (cpu: q4/q8 matrices stored as the 16-row panels every CPU\n"
            "kernel reads in place, no repacking at load; generic: GGUF's plain blocks; x86 and arm are cpu)", "cpu");
  a.option({"-t", "--threads"}, "threads for quantization (default: physical cores)");
  a.flag({"--quiet"}, "no progress output");
  a.flag({"--force"}, "replace -o even when it is an existing file that is not a .pipit");
  if (auto st = a.parse(); !st) return fail(a, st.message());
  if (a.help() || a.positionals().size() != 1 || !a.has("-o")) {
    std::printf("usage: pipit convert INPUT -o OUT.pipit [--quant f32|f16|bf16|q8|q4|q4_k_m|q5_k_m|q6_k|...] "
                "[--recipe FILE] "
                "[--target cpu|generic]\n"
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
  // the file the writer renames onto: -o, or the target of a symlink -o (refused here when it cannot be replaced)
  auto real_out = replaceable_output(opt.output, "[convert]");
  if (!real_out) return fail(a, real_out.status().message());
  if (auto st = check_overwrite(*real_out, a.get_flag("--force")); !st) return fail(a, st.message());
  remove_tmp_on_interrupt(*real_out);
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
