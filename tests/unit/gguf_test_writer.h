// A minimal GGUF writer for tests, written independently of the importer: raw GGUF v3 bytes (metadata of every value
// type, tensor infos, aligned data) and an HF checkpoint -> GGUF export that does what llama.cpp's
// convert_hf_to_gguf.py does for llama / qwen2 / qwen3 (names, metadata, q/k row permutation for llama, Llama 3
// rope_freqs), so import tests check the importer against an independent description of the format.
#pragma once

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/cpu/ref/ref.h"
#include "backends/cpu/kernels.h"
#include <cstdio>
#include "core/dtype.h"
#include "format/safetensors.h"

namespace pipit::test {

class GgufWriter {
 public:
  // ggml type ids used here: F32 0, F16 1, Q4_0 2, Q8_0 8, Q4_K 12, BF16 30.
  void u32(const std::string& k, uint32_t v) { key(k, 4); put(v); }
  void i32(const std::string& k, int32_t v) { key(k, 5); put(v); }
  void f32(const std::string& k, float v) { key(k, 6); put(v); }
  void boolean(const std::string& k, bool v) { key(k, 7); put(uint8_t(v)); }
  void str(const std::string& k, const std::string& v) { key(k, 8); put_str(v); }
  void u64(const std::string& k, uint64_t v) { key(k, 10); put(v); }
  void f64(const std::string& k, double v) { key(k, 12); put(v); }
  void strs(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9);
    put(uint32_t(8));
    put(uint64_t(v.size()));
    for (auto& s : v) put_str(s);
  }
  void f32s(const std::string& k, const std::vector<float>& v) {
    key(k, 9);
    put(uint32_t(6));
    put(uint64_t(v.size()));
    for (float x : v) put(x);
  }
  void i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9);
    put(uint32_t(5));
    put(uint64_t(v.size()));
    for (int32_t x : v) put(x);
  }
  // ne: GGUF order (innermost first).
  void tensor(const std::string& name, uint32_t type, std::vector<uint64_t> ne, std::string bytes) {
    tensors_.push_back({name, type, std::move(ne), std::move(bytes)});
  }

  std::string bytes(uint32_t alignment = 32) const {
    std::string out;
    auto w = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
    const uint32_t magic = 0x46554747, version = 3;
    const uint64_t nt = tensors_.size(), nkv = n_kv_;
    w(&magic, 4), w(&version, 4), w(&nt, 8), w(&nkv, 8);
    out += kv_;
    uint64_t off = 0;
    std::vector<uint64_t> offs;
    for (auto& t : tensors_) {
      const uint64_t len = t.name.size();
      const uint32_t nd = uint32_t(t.ne.size());
      w(&len, 8), out += t.name, w(&nd, 4);
      for (auto d : t.ne) w(&d, 8);
      w(&t.type, 4), w(&off, 8);
      offs.push_back(off);
      off = (off + t.data.size() + alignment - 1) / alignment * alignment;
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    const size_t base = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(base + offs[i], '\0');
      out += tensors_[i].data;
    }
    return out;
  }
  void write(const std::string& path) const {
    const std::string b = bytes();
    std::ofstream(path, std::ios::binary).write(b.data(), std::streamsize(b.size()));
  }

 private:
  struct T {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> ne;
    std::string data;
  };
  template <class V>
  void put(V v) {
    kv_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_str(const std::string& s) {
    put(uint64_t(s.size()));
    kv_ += s;
  }
  void key(const std::string& k, uint32_t type) {
    put_str(k);
    put(type);
    ++n_kv_;
  }
  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

// ---- HF checkpoint -> GGUF, as convert_hf_to_gguf.py does it ----

struct HfToGguf {
  bool q8 = false;       // store 2-D weights (except the embedding) as Q8_0, quantized by the reference quantizer
  bool q4 = false;       // ... as Q4_0
  bool with_llama2c_tokenizer = false;  // stories260k: vocab from tokenizer.json + scores from original/tok512.bin
  // "q4_k_m", "q5_k_m" or "q6_k": the types llama-quantize's default mix gives each tensor (kmix_type below),
  // quantized by pipit's reference quantizers (llama.cpp's quantize_row_*_ref)
  std::string kmix;
  bool dequantized = false;  // with kmix: store each quantized tensor's dequantized values as F32 (the reference)
};

// The ggml type llama-quantize (no imatrix, not --pure) gives a 2-D weight under a K mix, written from
// llama_tensor_get_type's description (llama.cpp src/llama-quant.cpp) for llama-like models without experts:
// the output head (token_embd when tied) Q6_K (Q8_0 when its rows are not whole 256-blocks); under _M attn_v and
// ffn_down of layer i Q6_K when i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2; the rest the base type; rows that are
// not whole 256-blocks fall back Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16 when not whole 32-blocks.
inline uint32_t kmix_type(const std::string& mix, const std::string& gname, int64_t ne0, int64_t n_layer, bool tied) {
  constexpr uint32_t kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kF16 = 1;
  const uint32_t base = mix == "q6_k" ? kQ6_K : mix == "q5_k_m" ? kQ5_K : kQ4_K;
  uint32_t t = base;
  int layer = -1;
  char what[64] = {};
  std::sscanf(gname.c_str(), "blk.%d.%63[a-z_]", &layer, what);
  const auto more = [&](int64_t i) { return i < n_layer / 8 || i >= 7 * n_layer / 8 || (i - n_layer / 8) % 3 == 2; };
  if (gname == "output.weight" || (tied && gname == "token_embd.weight")) {
    t = ne0 % 256 == 0 ? kQ6_K : kQ8_0;
  } else if (mix != "q6_k" && (std::string(what) == "attn_v" || std::string(what) == "ffn_down") && more(layer)) {
    t = kQ6_K;
  }
  if (ne0 % 256 != 0) t = t == kQ4_K ? kQ5_0 : t == kQ5_K ? kQ5_1 : t == kQ6_K ? kQ8_0 : t;
  if (ne0 % 32 != 0) t = kF16;
  return t;
}

// HF name -> llama.cpp name (an independent table: the inverse of what the importer maps).
inline std::string gguf_name(const std::string& hf) {
  static const std::map<std::string, std::string> kTop = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  static const std::map<std::string, std::string> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},         {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},           {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},           {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},               {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},               {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},                {"mlp.down_proj.weight", "ffn_down.weight"}};
  if (auto it = kTop.find(hf); it != kTop.end()) return it->second;
  const std::string p = "model.layers.";
  if (hf.rfind(p, 0) != 0) return "";
  const size_t dot = hf.find('.', p.size());
  const std::string layer = hf.substr(p.size(), dot - p.size()), rest = hf.substr(dot + 1);
  auto it = kLayer.find(rest);
  return it == kLayer.end() ? "" : "blk." + layer + "." + it->second;
}

// convert_hf_to_gguf.py LlamaModel.permute: w.reshape(n_head, 2, rows/n_head/2, *rest).swapaxes(1, 2).reshape(w.shape)
inline std::string permute_rows(const std::string& bytes, int64_t rows, int64_t n_head) {
  const size_t row_bytes = bytes.size() / size_t(rows);
  const int64_t half = rows / n_head / 2;
  std::string out(bytes.size(), '\0');
  // output index (h, i, j) over shape (n_head, half, 2) reads input index (h, j, i) over shape (n_head, 2, half)
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t dst = (h * half + i) * 2 + j, src = (h * 2 + j) * half + i;
        std::memcpy(out.data() + size_t(dst) * row_bytes, bytes.data() + size_t(src) * row_bytes, row_bytes);
      }
  return out;
}

inline std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DType::F32: v[size_t(i)] = t.ptr<float>()[i]; break;
      case DType::BF16: v[size_t(i)] = bf16_to_f32(t.ptr<uint16_t>()[i]); break;
      case DType::F16: v[size_t(i)] = f16_to_f32(t.ptr<uint16_t>()[i]); break;
      default: break;
    }
  }
  return v;
}

// Writes `model_dir` (an HF llama / qwen2 / qwen3 checkpoint) as a GGUF file.
inline void hf_to_gguf(const std::string& model_dir, const std::string& out, const HfToGguf& opt = {}) {
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(model_dir + "/config.json"));
  const std::string arch = cfg["model_type"];
  auto st = SafetensorsSet::open_dir(model_dir);
  const int64_t n_embd = cfg["hidden_size"], n_head = cfg["num_attention_heads"];
  const int64_t n_head_kv = cfg.value("num_key_value_heads", n_head);
  const int64_t head_dim = cfg.value("head_dim", n_embd / n_head);
  const double theta = cfg.value("rope_theta", 10000.0);
  GgufWriter g;
  g.str("general.architecture", arch);
  g.str("general.name", "test");
  g.u32(arch + ".context_length", uint32_t(cfg.value("max_position_embeddings", 4096)));
  g.u32(arch + ".embedding_length", uint32_t(n_embd));
  g.u32(arch + ".block_count", uint32_t(cfg["num_hidden_layers"].get<int>()));
  g.u32(arch + ".feed_forward_length", uint32_t(cfg["intermediate_size"].get<int>()));
  g.u32(arch + ".attention.head_count", uint32_t(n_head));
  g.u32(arch + ".attention.head_count_kv", uint32_t(n_head_kv));
  g.u32(arch + ".attention.key_length", uint32_t(head_dim));
  g.u32(arch + ".attention.value_length", uint32_t(head_dim));
  g.u32(arch + ".rope.dimension_count", uint32_t(head_dim));
  g.f32(arch + ".attention.layer_norm_rms_epsilon", float(cfg.value("rms_norm_eps", 1e-6)));
  g.f32(arch + ".rope.freq_base", float(theta));
  g.u32("general.alignment", 32);
  g.u32("tokenizer.ggml.bos_token_id", uint32_t(cfg.value("bos_token_id", 1)));
  g.u32("tokenizer.ggml.eos_token_id", uint32_t(cfg.value("eos_token_id", 2)));

  // Llama 3 rope scaling becomes a rope_freqs tensor of per-frequency factors (convert_hf_to_gguf.py)
  if (cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object() &&
      cfg["rope_scaling"].value("rope_type", "") == "llama3") {
    const auto& s = cfg["rope_scaling"];
    const double factor = s["factor"], low = s["low_freq_factor"], high = s["high_freq_factor"];
    const double old_ctx = s["original_max_position_embeddings"];
    std::string bytes;
    for (int64_t i = 0; i < head_dim; i += 2) {
      const double freq = 1.0 / std::pow(theta, double(i) / double(head_dim));
      const double wavelen = 2 * M_PI / freq;
      double f;
      if (wavelen < old_ctx / high) f = 1;
      else if (wavelen > old_ctx / low) f = factor;
      else {
        const double smooth = (old_ctx / wavelen - low) / (high - low);
        f = 1 / ((1 - smooth) / factor + smooth);
      }
      const float ff = float(f);
      bytes.append(reinterpret_cast<const char*>(&ff), 4);
    }
    g.tensor("rope_freqs.weight", 0, {uint64_t(head_dim / 2)}, bytes);
  }

  for (auto& [name, t] : st->tensors()) {
    const std::string gname = gguf_name(name);
    std::string bytes(reinterpret_cast<const char*>(t.data()), t.nbytes());
    uint32_t type = t.dtype() == DType::F32 ? 0 : t.dtype() == DType::F16 ? 1 : 30;
    std::vector<uint64_t> ne;
    for (int d = t.ndim() - 1; d >= 0; --d) ne.push_back(uint64_t(t.dim(d)));
    if (arch == "llama" && (name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos))
      bytes = permute_rows(bytes, t.dim(0), name.find("q_proj") != std::string::npos ? n_head : n_head_kv);
    if (!opt.kmix.empty() && t.ndim() == 2 && gname.find("_norm") == std::string::npos) {
      const bool tied = !st->tensors().count("lm_head.weight");
      const uint32_t kt = kmix_type(opt.kmix, gname, t.dim(1), cfg["num_hidden_layers"].get<int64_t>(), tied);
      std::vector<float> f(size_t(t.numel()));
      for (size_t i = 0; i < f.size(); ++i) {
        if (t.dtype() == DType::F32) std::memcpy(&f[i], bytes.data() + 4 * i, 4);
        else { uint16_t h; std::memcpy(&h, bytes.data() + 2 * i, 2); f[i] = bf16_to_f32(h); }
      }
      const std::map<uint32_t, DType> as = {{1, DType::F16}, {6, DType::Q5_0}, {7, DType::Q5_1}, {8, DType::Q8_0},
                                            {12, DType::Q4_K}, {13, DType::Q5_K}, {14, DType::Q6_K}};
      const DType dt = as.at(kt);
      const int64_t K = t.dim(1), rb = dtype_row_bytes(dt, K);
      std::string q(size_t(t.dim(0) * rb), '\0');
      std::vector<float> back(size_t(t.numel()));
      for (int64_t r = 0; r < t.dim(0); ++r) {
        ref_kernels().from_f32[int(dt)](f.data() + r * K, q.data() + r * rb, K);
        ref_kernels().to_f32[int(dt)](q.data() + r * rb, back.data() + r * K, K);
      }
      if (opt.dequantized) {
        bytes.assign(reinterpret_cast<const char*>(back.data()), back.size() * 4);
        type = 0;
      } else {
        bytes = q;
        type = kt;
      }
    } else if ((opt.q8 || opt.q4) && t.ndim() == 2 && name != "model.embed_tokens.weight" && t.dim(1) % 32 == 0) {
      // quantize after permuting (rows move whole, so the order does not matter)
      std::vector<float> f(size_t(t.numel()));
      for (size_t i = 0; i < f.size(); ++i) {
        if (t.dtype() == DType::F32) std::memcpy(&f[i], bytes.data() + 4 * i, 4);
        else { uint16_t h; std::memcpy(&h, bytes.data() + 2 * i, 2); f[i] = bf16_to_f32(h); }
      }
      const int64_t block = opt.q4 ? 18 : 34;
      std::string q(size_t(t.numel() / 32 * block), '\0');
      for (int64_t r = 0; r < t.dim(0); ++r) {
        char* dst = q.data() + size_t(r * t.dim(1) / 32 * block);
        if (opt.q4) ref::q4_0_from_f32(f.data() + r * t.dim(1), dst, t.dim(1));
        else ref::q8_0_from_f32(f.data() + r * t.dim(1), dst, t.dim(1));
      }
      bytes = q;
      type = opt.q4 ? 2 : 8;
    }
    g.tensor(gname, type, ne, bytes);
  }

  if (opt.with_llama2c_tokenizer) {
    // tokens from tokenizer.json (id order), scores from llama2.c's tok512.bin: i32 max_len, then per token
    // f32 score, i32 len, bytes
    nlohmann::json tj = nlohmann::json::parse(std::ifstream(model_dir + "/tokenizer.json"));
    std::vector<std::string> tokens(tj["model"]["vocab"].size());
    for (auto& [tok, id] : tj["model"]["vocab"].items()) tokens[id.get<size_t>()] = tok;
    std::ifstream tb(model_dir + "/original/tok512.bin", std::ios::binary);
    int32_t max_len = 0;
    tb.read(reinterpret_cast<char*>(&max_len), 4);
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (size_t i = 0; i < tokens.size(); ++i) {
      float sc = 0;
      int32_t len = 0;
      tb.read(reinterpret_cast<char*>(&sc), 4);
      tb.read(reinterpret_cast<char*>(&len), 4);
      std::string skip(size_t(len), '\0');
      tb.read(skip.data(), len);
      scores.push_back(sc);
      const bool byte = tokens[i].size() == 6 && tokens[i].rfind("<0x", 0) == 0;
      types.push_back(i == 0 ? 2 : (i <= 2 ? 3 : (byte ? 6 : 1)));
    }
    g.str("tokenizer.ggml.model", "llama");
    g.strs("tokenizer.ggml.tokens", tokens);
    g.f32s("tokenizer.ggml.scores", scores);
    g.i32s("tokenizer.ggml.token_type", types);
    g.u32("tokenizer.ggml.unknown_token_id", 0);
    g.boolean("tokenizer.ggml.add_bos_token", true);
    g.boolean("tokenizer.ggml.add_eos_token", false);
  }
  g.write(out);
}

// An HF byte-level tokenizer (its tokenizer.json and tokenizer_config.json) as llama.cpp's converter stores it in a
// GGUF: tokens by id ("[PAD]" for ids nothing uses: a repeated token, whose first id is kept), token types (1 normal,
// 3 special, 4 added, 5 unused), "a b" merges, tokenizer.ggml.pre, the BOS id when bos >= 0, the chat template.
// Returns the file's bytes.
inline std::string byte_level_vocab_gguf(const nlohmann::json& tj, const nlohmann::json& tc, const std::string& pre,
                                         int64_t bos) {
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;  // id -> (token, ggml token type)
  for (auto& [tok, id] : tj["model"]["vocab"].items()) by_id[id.get<int64_t>()] = {tok, 1};
  for (auto& a : tj["added_tokens"]) by_id[a["id"].get<int64_t>()] = {a["content"], a["special"] ? 3 : 4};
  std::vector<std::string> tokens(size_t(by_id.rbegin()->first + 1), "[PAD]");
  std::vector<int32_t> types(tokens.size(), 5);
  for (auto& [id, v] : by_id) tokens[size_t(id)] = v.first, types[size_t(id)] = v.second;
  std::vector<std::string> merges;
  for (auto& m : tj["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  GgufWriter g;
  g.str("tokenizer.ggml.model", "gpt2");
  g.str("tokenizer.ggml.pre", pre);
  g.strs("tokenizer.ggml.tokens", tokens);
  g.i32s("tokenizer.ggml.token_type", types);
  g.strs("tokenizer.ggml.merges", merges);
  if (bos >= 0) g.u32("tokenizer.ggml.bos_token_id", uint32_t(bos));
  g.boolean("tokenizer.ggml.add_bos_token", bos >= 0);
  g.str("tokenizer.chat_template", tc["chat_template"].get<std::string>());
  return g.bytes();
}

}  // namespace pipit::test
