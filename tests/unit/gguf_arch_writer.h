// HF checkpoint -> GGUF for the architectures beyond llama / qwen2 / qwen3, as llama.cpp's convert_hf_to_gguf.py
// writes them (conversion/gemma.py Gemma3Model, qwen.py Qwen3MoeModel / Qwen2VLModel / Qwen2VLVisionModel,
// llama.py SmolLM3Model; names from gguf-py tensor_mapping.py), written independently of the importer:
//  - gemma3: norm weights + 1, post_attention_norm / ffn_norm (pre-FFN) / post_ffw_norm, sliding_window;
//  - qwen3moe: experts stacked into ffn_{gate,up,down}_exps [n_expert, rows, cols], router ffn_gate_inp;
//  - smollm3: LlamaModel's q/k row permutation;
//  - qwen2vl: the language model with rope.dimension_sections, and the mmproj file (general.architecture clip):
//    Conv3d patch embedding split into two frames, qkv split into q / k / v, merger as v.post_ln / mm.0 / mm.2.
// Where a tiny test model departs from what llama.cpp derives from a real model's shape, the writer adds the
// metadata key llama.cpp reads for it (gemma3 sliding_window_pattern; clip.vision.window_size / image_*_pixels)
// or pipit's one extra key (gemma3.attention.scale for query_pre_attn_scalar != head_dim).
#pragma once

#include "tests/unit/gguf_test_writer.h"

namespace pipit::test {

inline std::string tensor_bytes(const Tensor& t) { return std::string(reinterpret_cast<const char*>(t.data()), t.nbytes()); }
inline std::vector<uint64_t> ggml_ne(const std::vector<int64_t>& shape) {
  return std::vector<uint64_t>(shape.rbegin(), shape.rend());
}
inline uint32_t ggml_type_of(const Tensor& t) { return t.dtype() == DType::F32 ? 0 : t.dtype() == DType::F16 ? 1 : 30; }

// f32 bytes of v + 1 for every element (bf16/f32 input), Gemma3Model.norm_shift
inline std::string plus_one_f32(const Tensor& t) {
  std::vector<float> f = to_f32(t);
  for (float& x : f) x += 1.0f;
  return std::string(reinterpret_cast<const char*>(f.data()), f.size() * 4);
}

// An HF byte-level BPE tokenizer (tokenizer.json + tokenizer_config.json in `dir`) as llama.cpp stores it: tokens
// by id (unused ids "[PAD]"), token types (1 normal, 3 control, 4 user-defined, 5 unused), "a b" merges, the
// pre-tokenizer's llama.cpp name and the chat template.
inline void gguf_vocab_from_hf(GgufWriter& g, const std::string& dir, const std::string& pre, int64_t n_vocab) {
  auto tj = nlohmann::json::parse(std::ifstream(dir + "/tokenizer.json"));
  auto tc = nlohmann::json::parse(std::ifstream(dir + "/tokenizer_config.json"));
  std::vector<std::string> tokens(size_t(n_vocab), "[PAD]");
  std::vector<int32_t> types(tokens.size(), 5);
  for (auto& [tok, id] : tj["model"]["vocab"].items()) tokens[id.get<size_t>()] = tok, types[id.get<size_t>()] = 1;
  for (auto& a : tj["added_tokens"])
    tokens[a["id"].get<size_t>()] = a["content"], types[a["id"].get<size_t>()] = a["special"] ? 3 : 4;
  std::vector<std::string> merges;
  for (auto& m : tj["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  g.str("tokenizer.ggml.model", "gpt2");
  g.str("tokenizer.ggml.pre", pre);
  g.strs("tokenizer.ggml.tokens", tokens);
  g.i32s("tokenizer.ggml.token_type", types);
  g.strs("tokenizer.ggml.merges", merges);
  g.boolean("tokenizer.ggml.add_bos_token", false);
  if (tc.contains("chat_template")) g.str("tokenizer.chat_template", tc["chat_template"].get<std::string>());
}

// Writes the language model of `model_dir` (gemma3_text, qwen3_moe, smollm3, qwen2_vl or qwen2_5_vl) as a GGUF;
// tokenizer_dir: a byte-level BPE tokenizer to store as its vocabulary (qwen2vl without one: placeholder tokens
// with the special ones at the config's ids).
inline void hf_to_gguf_arch(const std::string& model_dir, const std::string& out,
                            const std::string& tokenizer_dir = "") {
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(model_dir + "/config.json"));
  const std::string mt = cfg["model_type"];
  const std::string arch = mt == "gemma3_text" ? "gemma3" : mt == "qwen3_moe" ? "qwen3moe"
                           : mt == "smollm3" ? "smollm3" : "qwen2vl";
  auto st = SafetensorsSet::open_dir(model_dir);
  const int64_t n_embd = cfg["hidden_size"], n_head = cfg["num_attention_heads"], n_layer = cfg["num_hidden_layers"];
  const int64_t n_head_kv = cfg.value("num_key_value_heads", n_head);
  const int64_t head_dim = cfg.value("head_dim", n_embd / n_head);
  GgufWriter g;
  g.str("general.architecture", arch);
  g.str("general.name", "test");
  g.u32(arch + ".context_length", uint32_t(cfg.value("max_position_embeddings", 4096)));
  g.u32(arch + ".embedding_length", uint32_t(n_embd));
  g.u32(arch + ".block_count", uint32_t(n_layer));
  g.u32(arch + ".feed_forward_length", uint32_t(cfg["intermediate_size"].get<int>()));
  g.u32(arch + ".attention.head_count", uint32_t(n_head));
  g.u32(arch + ".attention.head_count_kv", uint32_t(n_head_kv));
  g.u32(arch + ".attention.key_length", uint32_t(head_dim));
  g.u32(arch + ".attention.value_length", uint32_t(head_dim));
  g.u32(arch + ".rope.dimension_count", uint32_t(head_dim));
  g.f32(arch + ".attention.layer_norm_rms_epsilon", float(cfg.value("rms_norm_eps", 1e-6)));
  g.f32(arch + ".rope.freq_base", float(cfg.value("rope_theta", 10000.0)));
  g.u32("tokenizer.ggml.bos_token_id", uint32_t(cfg.value("bos_token_id", 1)));
  g.u32("tokenizer.ggml.eos_token_id", uint32_t(cfg.value("eos_token_id", 2)));
  if (cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object() &&
      cfg["rope_scaling"].value("rope_type", "") == "linear") {
    g.str(arch + ".rope.scaling.type", "linear");
    g.f32(arch + ".rope.scaling.factor", cfg["rope_scaling"]["factor"].get<float>());
  }
  if (arch == "gemma3") {
    g.u32("gemma3.attention.sliding_window", uint32_t(cfg["sliding_window"].get<int>()));
    std::vector<int32_t> swa;  // written as i32 0/1 (llama.cpp reads the array form as bools)
    for (auto& lt : cfg["layer_types"]) swa.push_back(lt == "sliding_attention" ? 1 : 0);
    g.i32s("gemma3.attention.sliding_window_pattern", swa);
    const double qpas = cfg.value("query_pre_attn_scalar", double(head_dim));
    if (qpas != double(head_dim)) g.f32("gemma3.attention.scale", float(1.0 / std::sqrt(qpas)));
  } else if (arch == "qwen3moe") {
    g.u32("qwen3moe.expert_count", uint32_t(cfg["num_experts"].get<int>()));
    g.u32("qwen3moe.expert_used_count", uint32_t(cfg["num_experts_per_tok"].get<int>()));
    g.u32("qwen3moe.expert_feed_forward_length", uint32_t(cfg["moe_intermediate_size"].get<int>()));
  }
  if (!tokenizer_dir.empty()) {
    gguf_vocab_from_hf(g, tokenizer_dir, "gpt2", cfg["vocab_size"].get<int64_t>());
  } else if (arch == "qwen2vl") {
    std::vector<std::string> toks;
    for (int64_t i = 0; i < cfg["vocab_size"].get<int64_t>(); ++i) toks.push_back("t" + std::to_string(i));
    toks[cfg["image_token_id"].get<size_t>()] = "<|image_pad|>";
    toks[cfg["vision_start_token_id"].get<size_t>()] = "<|vision_start|>";
    toks[cfg["vision_end_token_id"].get<size_t>()] = "<|vision_end|>";
    g.strs("tokenizer.ggml.tokens", toks);
  }
  if (arch == "qwen2vl") {
    std::vector<int32_t> sec;
    for (auto& s : cfg["rope_scaling"]["mrope_section"]) sec.push_back(s.get<int32_t>());
    sec.push_back(0);
    g.i32s("qwen2vl.rope.dimension_sections", sec);
  }

  std::map<std::string, std::vector<Tensor>> experts;  // "blk.N.ffn_gate_exps.weight" -> per expert
  for (auto& [name, t] : st->tensors()) {
    if (name.rfind("visual.", 0) == 0) continue;  // the mmproj file's
    std::string gname = gguf_name(name);
    std::string bytes = tensor_bytes(t);
    uint32_t type = ggml_type_of(t);
    const std::string layer_rest = name.rfind("model.layers.", 0) == 0 ? name.substr(name.find('.', 13) + 1) : "";
    const std::string blk = layer_rest.empty() ? "" : "blk." + name.substr(13, name.find('.', 13) - 13) + ".";
    if (arch == "gemma3") {
      if (layer_rest == "post_attention_layernorm.weight") gname = blk + "post_attention_norm.weight";
      if (layer_rest == "pre_feedforward_layernorm.weight") gname = blk + "ffn_norm.weight";
      if (layer_rest == "post_feedforward_layernorm.weight") gname = blk + "post_ffw_norm.weight";
      if (name.size() > 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0) {
        bytes = plus_one_f32(t);
        type = 0;
      }
    }
    if (arch == "qwen3moe" && layer_rest == "mlp.gate.weight") gname = blk + "ffn_gate_inp.weight";
    if (arch == "qwen3moe" && layer_rest.rfind("mlp.experts.", 0) == 0) {
      const size_t d = layer_rest.find('.', 12);
      const int e = std::stoi(layer_rest.substr(12, d - 12));
      const std::string proj = layer_rest.substr(d + 1);
      const std::string key = blk + (proj == "gate_proj.weight" ? "ffn_gate_exps" : proj == "up_proj.weight"
                                     ? "ffn_up_exps" : "ffn_down_exps") + ".weight";
      auto& v = experts[key];
      if (int(v.size()) <= e) v.resize(size_t(e) + 1);
      v[size_t(e)] = t;
      continue;
    }
    if (arch == "smollm3" && (name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos))
      bytes = permute_rows(bytes, t.dim(0), name.find("q_proj") != std::string::npos ? n_head : n_head_kv);
    g.tensor(gname, type, ggml_ne(t.shape()), bytes);
  }
  for (auto& [key, v] : experts) {  // stacked in expert order: ne {cols, rows, n_expert}
    std::string bytes;
    for (auto& t : v) bytes += tensor_bytes(t);
    g.tensor(key, ggml_type_of(v[0]), {uint64_t(v[0].dim(1)), uint64_t(v[0].dim(0)), uint64_t(v.size())}, bytes);
  }
  g.write(out);
}

// Writes the vision tower of a qwen2_vl / qwen2_5_vl checkpoint as llama.cpp's mmproj file. Weights as F32 (the
// bf16 values exactly; llama.cpp's converter keeps the patch embedding F16/F32 and may store the rest in F16).
inline void hf_to_mmproj(const std::string& model_dir, const std::string& out) {
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(model_dir + "/config.json"));
  nlohmann::json pp = nlohmann::json::parse(std::ifstream(model_dir + "/preprocessor_config.json"));
  const nlohmann::json& v = cfg["vision_config"];
  const bool v25 = cfg["model_type"] == "qwen2_5_vl";
  auto st = SafetensorsSet::open_dir(model_dir);
  GgufWriter g;
  g.str("general.architecture", "clip");
  g.boolean("clip.has_vision_encoder", true);
  g.str("clip.projector_type", v25 ? "qwen2.5vl_merger" : "qwen2vl_merger");
  const int64_t E = v25 ? v["hidden_size"].get<int64_t>() : v["embed_dim"].get<int64_t>();
  const int64_t F = v25 ? v["intermediate_size"].get<int64_t>() : E * v.value("mlp_ratio", 4);
  g.u32("clip.vision.projection_dim", uint32_t(cfg["hidden_size"].get<int>()));
  g.u32("clip.vision.image_size", 560);
  g.u32("clip.vision.patch_size", uint32_t(v["patch_size"].get<int>()));
  g.u32("clip.vision.embedding_length", uint32_t(E));
  g.u32("clip.vision.feed_forward_length", uint32_t(F));
  g.u32("clip.vision.block_count", uint32_t(v["depth"].get<int>()));
  g.u32("clip.vision.attention.head_count", uint32_t(v["num_heads"].get<int>()));
  g.f32("clip.vision.attention.layer_norm_epsilon", float(cfg.value("rms_norm_eps", 1e-6)));
  g.f32s("clip.vision.image_mean", pp["image_mean"].get<std::vector<float>>());
  g.f32s("clip.vision.image_std", pp["image_std"].get<std::vector<float>>());
  g.u32("clip.vision.image_min_pixels", uint32_t(pp["min_pixels"].get<int>()));
  g.u32("clip.vision.image_max_pixels", uint32_t(pp["max_pixels"].get<int>()));
  if (v25) {
    g.boolean("clip.use_silu", true);
    g.u32("clip.vision.n_wa_pattern", uint32_t(v["fullatt_block_indexes"][0].get<int>() + 1));
    g.u32("clip.vision.window_size", uint32_t(v["window_size"].get<int>()));
  } else {
    g.boolean("clip.use_gelu", true);
  }
  auto f32 = [](const Tensor& t) {
    std::vector<float> f = to_f32(t);
    return std::string(reinterpret_cast<const char*>(f.data()), f.size() * 4);
  };
  for (auto& [name, t] : st->tensors()) {
    if (name.rfind("visual.", 0) != 0) continue;
    std::string n = name.substr(7);
    const std::string kind = n.substr(n.rfind('.') + 1);
    const std::string base = n.substr(0, n.rfind('.'));
    if (base == "patch_embed.proj") {  // [E, C, 2, p, p] -> two [E, C, p, p]
      const int64_t Eo = t.dim(0), C = t.dim(1), p = t.dim(3);
      std::vector<float> all = to_f32(t), fr[2];
      for (int64_t e = 0; e < Eo; ++e)
        for (int64_t c = 0; c < C; ++c)
          for (int k = 0; k < 2; ++k) {
            const float* src = all.data() + ((e * C + c) * 2 + k) * p * p;
            fr[k].insert(fr[k].end(), src, src + p * p);
          }
      for (int k = 0; k < 2; ++k)
        g.tensor(k == 0 ? "v.patch_embd.weight" : "v.patch_embd.weight.1", 0, ggml_ne({Eo, C, p, p}),
                 std::string(reinterpret_cast<const char*>(fr[k].data()), fr[k].size() * 4));
      continue;
    }
    if (base.rfind("blocks.", 0) == 0) {
      const std::string b = base.substr(7, base.find('.', 7) - 7), rest = base.substr(base.find('.', 7) + 1);
      const std::string blk = "v.blk." + b + ".";
      if (rest == "attn.qkv") {  // rows [q; k; v]
        const std::string all = f32(t);
        const int64_t rows = t.dim(0) / 3, row_bytes = (t.ndim() == 2 ? t.dim(1) : 1) * 4;
        std::vector<int64_t> shape = t.shape();
        shape[0] = rows;
        const char* parts[] = {"attn_q", "attn_k", "attn_v"};
        for (int k = 0; k < 3; ++k)
          g.tensor(blk + parts[k] + "." + kind, 0, ggml_ne(shape), all.substr(size_t(k * rows * row_bytes),
                                                                               size_t(rows * row_bytes)));
        continue;
      }
      static const std::map<std::string, std::string> kBlock = {
          {"attn.proj", "attn_out"}, {"norm1", "ln1"}, {"norm2", "ln2"}, {"mlp.fc1", "ffn_up"},
          {"mlp.fc2", "ffn_down"}, {"mlp.up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"},
          {"mlp.gate_proj", "ffn_gate"}};
      g.tensor(blk + kBlock.at(rest) + "." + kind, 0, ggml_ne(t.shape()), f32(t));
      continue;
    }
    static const std::map<std::string, std::string> kMerger = {
        {"merger.ln_q", "v.post_ln"}, {"merger.mlp.0", "mm.0"}, {"merger.mlp.2", "mm.2"}};
    g.tensor(kMerger.at(base) + "." + kind, 0, ggml_ne(t.shape()), f32(t));
  }
  g.write(out);
}

}  // namespace pipit::test
