// Sane maxima for sizes that come from a user, a file or a request, and the memory this process may still use.
// Everything a user controls is checked against these before it is allocated (runtime/memory_plan.h for sessions,
// HfConfig::validate_sizes for config.json), so a typo such as `-c 10000000` or a config with head_dim 3e9 is a
// one-line error naming the setting, never an allocation failure deep in the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pipit {

// Far above any real model (the largest public ones have hidden 16384-25600, 128k-262k vocab, 128 layers, 256
// experts, 1M positions), far below what would overflow an int or a size_t product of a few of them.
struct Limits {
  static constexpr int64_t kMaxCtx = int64_t(1) << 24;        // -c, n_ctx
  static constexpr int64_t kMaxBatch = int64_t(1) << 20;      // n_batch (prefill chunk)
  static constexpr int64_t kMaxThreads = 1024;                // -t
  static constexpr int64_t kMaxSlots = 4096;                  // parallel sequences
  static constexpr int64_t kMaxDim = int64_t(1) << 20;        // hidden_size, intermediate_size, ...
  static constexpr int64_t kMaxHeadDim = int64_t(1) << 14;    // head_dim
  static constexpr int64_t kMaxHeads = int64_t(1) << 14;      // num_attention_heads, num_key_value_heads
  static constexpr int64_t kMaxLayers = int64_t(1) << 14;     // num_hidden_layers, depth
  static constexpr int64_t kMaxVocab = int64_t(1) << 24;      // vocab_size
  static constexpr int64_t kMaxExperts = int64_t(1) << 16;    // num_experts, num_local_experts
  static constexpr int64_t kMaxPositions = int64_t(1) << 30;  // max_position_embeddings, sliding_window
  static constexpr int64_t kMaxImageSide = int64_t(1) << 15;  // image_size, patch_size
  static constexpr int64_t kMaxTokenId = (int64_t(1) << 31) - 1;  // token ids are int32
  static constexpr size_t kMaxPromptFile = size_t(64) << 20;  // -f: 64 MiB, ~16M tokens (the -c maximum)
  static constexpr int64_t kMaxNoRepeatNgram = 1024;          // no_repeat_ngram_size (HF's; DeepSeek-OCR: 20)
};

// Bytes this process may still allocate: /proc/meminfo MemAvailable (sysconf's free pages where there is no
// /proc), lowered to RLIMIT_AS / RLIMIT_DATA minus what is mapped already when such a limit is set.
// PIPIT_MEM_AVAILABLE (bytes) overrides it, so tests can ask for a small machine.
uint64_t available_memory();

// "1.2 GB", "340 MB", "12 KB", "17 bytes" (decimal units, as `free -h` users read them).
std::string format_bytes(uint64_t bytes);

}  // namespace pipit
