// What GGUF import (convert/gguf_import.cpp, convert/gguf_mmproj.cpp) knows about a family, declared beside the
// model and registered with it, so that convert/ names no model: one GgufArch per llama.cpp architecture
// (general.architecture), one GgufProjector per mmproj projector type (clip.projector_type), and a family's own
// vocabulary type (GgufVocab) or byte-level BPE pre-tokenizer (GgufPreTokenizer).
//
// convert/ reads llama.cpp's generic llama-family layout itself: the metadata every arch writes (embedding_length,
// block_count, head counts, key_length, rope.freq_base, context_length, ...), its tensor names (token_embd,
// blk.N.attn_q, ffn_gate, ...), q/k rows permuted for rotate_half RoPE, stacked experts, linear and Llama 3 RoPE
// scaling, the vocabulary. A record says how its arch differs: flags for the small differences, and hooks for the
// config fields the arch keeps in its own keys, for tensors the converter rewrote, or for a whole import.
// Register from the model's folder with a static GgufArchRegistrar / GgufProjectorRegistrar (the executables link
// pipit's objects, not the archive, so the registrars are kept; see README's note on --whole-archive).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/tensor.h"
#include "format/checkpoint.h"
#include "format/gguf.h"
#include "format/gguf_meta.h"

namespace pipit {

// The parts of GGUF import that need convert/ (the CPU kernels' dequantization, the vocabulary translation), lent
// to a family's hooks: models/ calls no kernel table.
class GgufTools {
 public:
  virtual ~GgufTools() = default;
  // Whether the reference kernels read dtype d as f32 (the float and block types pipit knows).
  virtual bool can_widen(DType d) const = 0;
  // An f32 copy of t (whole rows through those kernels); "[gguf] <name>: type <T>" when they cannot read it.
  virtual Result<Tensor> widen_f32(const Tensor& t, const std::string& name) const = 0;
  // The vocabulary as an HF tokenizer in c.tokenizer_parts, or why not in c.tokenizer_error (and a note).
  virtual void attach_tokenizer(const GgufFile& f, Checkpoint& c) const = 0;
  // The end-of-generation ids llama.cpp picks by their text for this vocabulary (the EOS id first), when it picks
  // more than the EOS id; empty otherwise.
  virtual std::vector<int64_t> eog_ids(const GgufFile& f, int64_t n_vocab) const = 0;
};

// What the shared path has read when it calls an arch's config or tensor hook.
struct GgufArchInput {
  const GgufFile& f;
  const GgufMeta& m;
  const GgufTools& tools;
  int64_t n_layer, n_embd, n_head, n_head_kv, head_dim;  // n_layer: the decoder's (GgufArch::decoder_layers)
};

struct GgufArch {
  std::string gguf;        // general.architecture
  std::string model_type;  // the HF model_type and class of the text checkpoint it becomes
  std::string hf_class;
  bool permuted_qk = false;        // convert_hf_to_gguf permutes q/k rows (LlamaModel and its subclasses)
  bool optional_ffn = false;       // feed_forward_length may be absent (a MoE model's experts have their own width)
  bool partial_rope = false;       // rope.dimension_count may be below head_dim (the config hook reads it)
  bool own_rope_scaling = false;   // rope.scaling.* is the config hook's to read (not the shared linear rule)
  bool shifted_norms = false;      // every *norm.weight stored as 1 + w (llama.cpp's norm_shift): 1 subtracted
  bool stacked_experts = false;    // blk.N.ffn_{gate,up,down}_exps split into HF's per-expert matrices
  // Per-layer names (after "blk.N.") tried before the shared table, e.g. a family's extra norms.
  std::vector<std::pair<std::string, std::string>> layer_names;

  // Hooks; null: the shared path alone.
  // block_count -> the decoder's layer count (blocks after the decoder's, e.g. an MTP layer, excluded).
  Result<int64_t> (*decoder_layers)(const GgufMeta& m, int64_t block_count) = nullptr;
  // The HF config fields the arch keeps in its own keys (or fixes in llama.cpp's graph code), added to `cfg`.
  Status (*config)(const GgufArchInput& in, nlohmann::json& cfg, std::vector<std::string>& notes) = nullptr;
  // Every tensor of the file under its HF name in c.tensors (c.config is the finished config), instead of the
  // shared name table.
  Status (*tensors)(const GgufArchInput& in, Checkpoint& c) = nullptr;
  // The whole checkpoint (config, tensors, tokenizer), instead of everything above.
  Result<Checkpoint> (*import)(const GgufMeta& m, const GgufArch& arch, const GgufTools& tools) = nullptr;
};

// An mmproj projector: adds the tower, its image / audio processor and the multimodal config to the checkpoint of
// its language model `c` (imported from `text`), from the mmproj file `mm`.
struct GgufProjector {
  std::string type;  // clip.projector_type (or clip.vision.projector_type)
  Status (*add)(Checkpoint& c, const GgufFile& text, const GgufFile& mm, const GgufTools& tools) = nullptr;
};

// A vocabulary type of llama.cpp's beyond its two generic ones (tokenizer.ggml.model "gpt2": byte-level BPE,
// "llama": SentencePiece BPE; convert/gguf_tokenizer.cpp), e.g. a family's own BPE.
struct GgufVocab {
  std::string model;            // tokenizer.ggml.model
  std::string tokenizer_class;  // tokenizer_config.json's tokenizer_class
  bool force_bos = false;       // BOS added whatever tokenizer.ggml.add_bos_token says (llama.cpp overrides it)
  // The tokenizer.json's normalizer / pre_tokenizer / decoder (in `tj`) and the BPE model's fields beside its vocab
  // (in `bpe`: merges, byte fallback, unk_token, ...), for a vocabulary of `tokens` (unk: the unknown id or -1).
  // bpe's vocab is left empty (the tokens are kept as a list, TokenizerParts), and merges that are all "a b" strings
  // are lifted out of it the same way.
  Status (*build)(const GgufFile& f, const std::vector<std::string>& tokens, int64_t unk, nlohmann::json& tj,
                  nlohmann::json& bpe) = nullptr;
  // The end-of-generation ids llama.cpp picks by their text, the EOS id first; null: the EOS id alone.
  std::vector<int64_t> (*eog_ids)(const GgufFile& f, int64_t n_vocab) = nullptr;
};

// A pre-tokenizer of llama.cpp's byte-level BPE vocabularies (tokenizer.ggml.model "gpt2") by its
// tokenizer.ggml.pre name, beyond GPT-2's own ("default", "gpt2"): the HF tokenizer.json's Split regex before
// ByteLevel, an NFC normalizer or none, and BPE ignore_merges (a pre-token found whole in the vocabulary is one
// token).
struct GgufPreTokenizer {
  std::vector<std::string> names;  // tokenizer.ggml.pre values; the first is the one the error lists
  std::string regex;
  bool nfc = false;
  bool ignore_merges = false;
};

void register_gguf_arch(GgufArch arch);
void register_gguf_projector(GgufProjector projector);
void register_gguf_vocab(GgufVocab vocab);
void register_gguf_pre_tokenizer(GgufPreTokenizer pre);
// The record for an arch / a projector type; null when none is registered.
const GgufArch* find_gguf_arch(const std::string& gguf);
const GgufProjector* find_gguf_projector(const std::string& type);
const GgufVocab* find_gguf_vocab(const std::string& model);
const GgufPreTokenizer* find_gguf_pre_tokenizer(const std::string& name);
// Every registered name, sorted (for the error that lists what is supported).
std::vector<std::string> gguf_arch_names();
std::vector<std::string> gguf_projector_names();
std::vector<std::string> gguf_vocab_names();
std::vector<std::string> gguf_pre_tokenizer_names();  // each record's first name

struct GgufArchRegistrar {
  explicit GgufArchRegistrar(GgufArch arch) { register_gguf_arch(std::move(arch)); }
};
struct GgufProjectorRegistrar {
  GgufProjectorRegistrar(const char* type, decltype(GgufProjector::add) add) {
    register_gguf_projector(GgufProjector{type, add});
  }
};
struct GgufVocabRegistrar {
  explicit GgufVocabRegistrar(GgufVocab vocab) { register_gguf_vocab(std::move(vocab)); }
};
struct GgufPreTokenizerRegistrar {
  explicit GgufPreTokenizerRegistrar(GgufPreTokenizer pre) { register_gguf_pre_tokenizer(std::move(pre)); }
};

// ---- helpers for the hooks ----
// An f32 copy of an F32 / F16 / BF16 tensor minus `shift` (llama.cpp's norm_shift stores 1 + w: shift 1 takes w
// back; shift 0 is a plain f32 copy); other types are an error naming the tensor.
Result<Tensor> gguf_unshift_norm(const Tensor& t, const std::string& name, float shift = 1.0f);
// Conv3d [E, C, 2, p, p] from its two frames [E, C, p, p] (llama.cpp's clip splits a temporal patch embedding in
// two Conv2d kernels: v.patch_embd.weight and .weight.1). Same dtype, unquantized: their bytes; else f32.
Result<Tensor> gguf_join_frames(const GgufTools& tools, Tensor f0, Tensor f1, const std::string& name);
// Rows of several tensors, one after the other (q, k, v -> qkv). Same dtype: their bytes; mixed: f32.
Result<Tensor> gguf_concat_rows(const GgufTools& tools, const std::vector<Tensor>& parts, const std::string& name);

}  // namespace pipit
