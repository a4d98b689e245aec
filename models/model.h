// What every model implements, and what the runtime hands it: a Batch of tokens from one or more sequences, a
// KvCache with one slot per sequence, and a WeightSource of tensors under their HF names (whatever file they came
// from: safetensors, .pipit or GGUF).
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/ops.h"
#include "core/status.h"
#include "core/tensor.h"
#include "models/hf_config.h"

namespace pipit {

// Tensors by HF name. get() checks the shape (and that the dtype is a weight dtype) and names the tensor in errors.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  virtual Result<Tensor> find(const std::string& name) const = 0;  // no checks
  Result<Tensor> get(const std::string& name, const std::vector<int64_t>& shape) const;
  // Optional tensor: undefined Tensor when absent, error when present with the wrong shape.
  Result<Tensor> get_optional(const std::string& name, const std::vector<int64_t>& shape) const;
  // A tensor the model makes at load (a weightless norm's ones), placed where its weights are: the host tensor
  // itself, or a device copy when the model runs on a device (runtime/loader.cpp), so its ops see one memory.
  virtual Result<Tensor> constant(const Tensor& host) const { return host; }
  // The weights of the parts that run on the CPU whatever the device the decoder runs on: vision and audio towers
  // and their projectors. A model loads those parts through host(), so that placement (runtime/loader.cpp keeps
  // them off the device) and the memory estimate (tower bytes) learn which weights they are from the model itself.
  // A source that wraps another (aliases) answers with the host() of the source it wraps, wrapped alike.
  virtual const WeightSource& host() const { return *this; }
};

// Media features that take the place of some tokens' input embeddings (image, video frame and audio tokens). Read
// by the models that take media (models/blocks.h input_embeddings; Gemma 4 splices its own).
struct MediaEmbd {
  Tensor embd;               // [n_rows, n_embd] f32: the features, one row per media token
  std::vector<int32_t> row;  // per token of the batch: its row of `embd`, or -1 (text). Empty: no media in the batch
  bool empty() const { return row.empty(); }
};

// Rotary positions in 3 streams (temporal, height, width) for the models with M-RoPE (Qwen's VL family), which
// position media tokens themselves (Model::media_positions): stream s of token i is pos[s * n_tokens + i]. They
// differ from Batch::pos (the KV row) after an image. Empty: every stream equals Batch::pos.
struct PosStreams {
  static constexpr int kStreams = 3;
  std::vector<int32_t> pos;
  bool empty() const { return pos.empty(); }
};

// A batch: tokens of several sequences concatenated. Sequence s owns tokens [begin, begin + n) and KV slot `slot`;
// pos[i] is token i's position in its sequence (and its KV row). `logits_rows` lists the token indices whose logits
// are wanted, in output order (usually the last token of each sequence; all tokens for `pipit logits`).
// The multimodal inputs (runtime/multimodal.h builds them) are empty for text, and each is read only by the models
// that use it: the others ignore them.
struct Batch {
  struct Seq {
    int slot;
    int64_t begin, n;
  };
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;
  std::vector<Seq> seqs;
  std::vector<int64_t> logits_rows;
  MediaEmbd media;  // media features in place of token embeddings
  // DeepStack (Qwen3-VL): deepstack[k] [n_rows, n_embd] f32 is added to the hidden state of every media token after
  // decoder layer k (row media.row[i] to token i). Read by the decoders that ask for it (LlamaOptions::deepstack,
  // models/blocks.h add_deepstack_); empty for every other model.
  std::vector<Tensor> deepstack;
  PosStreams pos_streams;  // M-RoPE positions (models that have none ignore them)

  int64_t n_tokens() const { return int64_t(tokens.size()); }
  // One sequence in slot `slot`, tokens at positions pos0.., logits for the last token (or all).
  static Batch single(std::span<const int32_t> tokens, int32_t pos0, int slot = 0, bool all_logits = false);
};

// Shapes of the f32 tensors that make up one layer's recurrent state for one sequence (e.g. Gated DeltaNet: the
// causal conv window and the delta-rule matrices). Empty: the layer is an attention layer with K/V rows.
using StateShapes = std::vector<std::vector<int64_t>>;

struct KvCacheSpec {
  int n_layer, n_head_kv, head_dim;
  std::vector<int> window = {};  // per layer: sliding window (0, or no entry: full context)
  // Per layer (no entry: none): a recurrent layer (linear attention, SSM) keeps a fixed-size state per sequence
  // instead of K/V rows. Hybrid models (Qwen3.5) mix both kinds.
  std::vector<StateShapes> state = {};
};

// A copy of one slot's recurrent state after `pos` tokens (Session keeps a few to rewind to: see truncate()).
struct StateSnapshot {
  int pos = 0;
  std::vector<float> data;
};

// K and V per layer and slot: [n_rows, n_head_kv, head_dim] each, in f32 or f16. A full-context layer has n_ctx rows
// (position p at row p). A sliding-window layer keeps a ring of window + n_batch rows (position p at row
// p % n_rows): a forward adds at most n_batch tokens per sequence, so its first query still finds its whole window.
// Recurrent layers (KvCacheSpec::state) hold no rows but f32 state tensors per slot, updated in place. A state is
// the summary of exactly the tokens [0, state_pos) and cannot be cut back: begin_state() zeroes it for a sequence
// that starts at position 0 and refuses a sequence that does not continue where it ends; rewinding goes through
// snapshots (save_state / restore_state) or a re-prefill from 0.
class KvCache {
 public:
  // n_batch <= 0 (or a ring that would not be smaller than n_ctx) keeps the layer at n_ctx rows.
  // dev: K/V rows and recurrent state in that device's memory (snapshots are host copies: save_state /
  // restore_state / read_state read and write the device).
  KvCache(const KvCacheSpec& spec, int n_slot, int n_ctx, DType dtype, int n_batch = 0, Device* dev = nullptr);
  Tensor k(int layer, int slot) const { return k_[size_t(layer) * n_slot_ + slot]; }
  Tensor v(int layer, int slot) const { return v_[size_t(layer) * n_slot_ + slot]; }
  int n_ctx() const { return n_ctx_; }  // positions 0 .. n_ctx - 1
  int n_slot() const { return n_slot_; }
  int n_layer() const { return int(rows_.size()); }
  int n_rows(int layer) const { return rows_[size_t(layer)]; }
  bool is_ring(int layer) const { return rows_[size_t(layer)] > 0 && rows_[size_t(layer)] < n_ctx_; }
  // Tokens one sequence may add in one forward (n_ctx without rings).
  int max_chunk() const { return max_chunk_; }
  // The smallest n a sequence holding positions [0, n_past) can be cut back to (Session::truncate) while every ring
  // still holds the window its next query needs; below it the sequence must be recomputed from 0.
  int min_rewind(int n_past) const;
  DType dtype() const { return dtype_; }
  size_t bytes() const;

  // ---- recurrent state ----
  bool has_state() const { return state_floats_ > 0; }
  bool is_recurrent(int layer) const { return !state_shapes_[size_t(layer)].empty(); }
  // State tensor i of a recurrent layer for a slot (f32, shape from the spec).
  Tensor state(int layer, int slot, int i) const;
  // Tokens the slot's state summarises; -1 after a forward that failed midway (the state is lost).
  int state_pos(int slot) const { return state_pos_[size_t(slot)]; }
  // Before a forward: every sequence of the batch that starts at position 0 gets a zero state; the others must
  // start at their state_pos. Marks the slots in flight (-1) until end_state().
  Status begin_state(const char* arch, const Batch& batch);
  void end_state(const Batch& batch);  // after a forward that succeeded: state_pos = last position + 1
  StateSnapshot save_state(int slot) const;
  void restore_state(int slot, const StateSnapshot& s);
  // The slot's state as save_state lays it out (layers in order, each layer's tensors in order), into
  // state_bytes_per_slot() bytes at `out` (runtime/state_copy.h reuses one buffer).
  void read_state(int slot, float* out) const;
  size_t state_bytes_per_slot() const { return size_t(state_floats_) * 4; }

 private:
  int n_slot_, n_ctx_, max_chunk_;
  DType dtype_;
  Device* dev_ = nullptr;  // where the K/V rows and the states live (null: the host)
  std::vector<int> rows_, window_;  // per layer
  std::vector<Tensor> k_, v_;
  std::vector<StateShapes> state_shapes_;  // per layer
  std::vector<std::vector<Tensor>> state_;  // [layer * n_slot + slot] -> the layer's state tensors
  std::vector<int> state_pos_;              // per slot
  int64_t state_floats_ = 0;                // per slot, all layers
};

// Facts about a loaded model the runtime needs.
struct ModelInfo {
  std::string arch;        // HF model_type
  int64_t n_vocab = 0, n_embd = 0, n_layer = 0, max_ctx = 0;
  KvCacheSpec kv{};
  std::vector<int32_t> eos_ids;
  int32_t bos_id = -1;
  // Generation defaults the model's own code or generation_config.json uses (front ends take them unless the user
  // sets them): HF generate()'s no_repeat_ngram_size (0: off; DeepSeek-OCR's infer() generates with 20).
  int no_repeat_ngram_size = 0;
  // Where the weights were uploaded (runtime/loader.h LoadOptions::device); null: host memory, the CPU runs it.
  // Session and Engine put their KV cache and activations there too.
  std::shared_ptr<Device> device;
};

// One image (or one temporal patch of a video) in an expanded prompt: what Model::media_positions is told.
struct MediaSpan {
  int64_t begin, end;               // its tokens [begin, end) in the prompt
  std::array<int32_t, 3> grid_thw;  // the vision tower's patch grid (temporal, height, width), before any merge
};

// A model's own rotary positions for a prompt with media, counted from 0 at the prompt's first token (the runtime
// adds where the context stands, and carries `delta` for the tokens after: Batch::pos_streams).
struct MediaPositions {
  int n_stream = 0;  // 0: plain positions (token i at i, nothing below is set); M-RoPE: PosStreams::kStreams
  std::vector<int32_t> pos;          // n_stream streams of the prompt's n_tokens positions, stream-major
  int32_t delta = 0;                 // position - token index of the tokens after the prompt
  std::vector<int32_t> delta_after;  // per span: position - token index of the tokens right after it
};

class VisionLanguageModel;

class Model {
 public:
  virtual ~Model() = default;
  // The image side of a vision-language model (models/vision/vision_model.h); null for text-only models.
  virtual const VisionLanguageModel* vision() const { return nullptr; }
  // The positions of a prompt of n_tokens whose media sit at `media` (in prompt order). Models that rotate by
  // position alone keep this default (n_stream 0: the runtime uses Batch::pos); Qwen's M-RoPE family answers with
  // get_rope_index (models/qwen_rope_index.h).
  virtual Result<MediaPositions> media_positions(int64_t n_tokens, std::span<const MediaSpan> media) const {
    (void)n_tokens, (void)media;
    return MediaPositions{};
  }
  const ModelInfo& info() const { return info_; }
  ModelInfo& mutable_info() { return info_; }  // the loader merges generation_config.json into it
  // Runs the batch, appends its keys/values to `kv`, and writes f32 logits [logits_rows.size(), n_vocab].
  virtual Status forward(Ctx& ctx, const Batch& batch, KvCache& kv, Tensor* logits) = 0;
  // Every op forward() may call with this model's config (Op::kHostLoops while some step still loops over
  // activations on the host). The loader runs the model on a device only when the device supports all of them,
  // and refuses it naming the first missing op otherwise; tests/models/ops_used_test.cpp checks the list against
  // the ops a forward really calls.
  virtual OpSet ops_used() const = 0;

 protected:
  ModelInfo info_;
};

using ModelFactory = Result<std::unique_ptr<Model>> (*)(const HfConfig& cfg, const WeightSource& w);

// Registry from HF model_type to implementation; each model file registers itself.
void register_model(const char* model_type, ModelFactory f);
ModelFactory find_model(const std::string& model_type);
std::vector<std::string> registered_models();

struct ModelRegistrar {
  ModelRegistrar(const char* model_type, ModelFactory f) { register_model(model_type, f); }
};
#define PIPIT_REGISTER_MODEL(model_type, factory) \
  static ::pipit::ModelRegistrar PIPIT_CONCAT(_pipit_model_, __LINE__)(model_type, factory)

// Creates the model for cfg.model_type() (error names unknown types and lists the supported ones).
Result<std::unique_ptr<Model>> create_model(const HfConfig& cfg, const WeightSource& w);

}  // namespace pipit
