// The GGUF vocabulary (tokenizer.ggml.*) as an HF tokenizer.json, so one tokenizer implementation serves every input.
//  - "gpt2" (byte-level BPE): tokens and merges are already in HF's byte-level alphabet; the pre-tokenizer regex
//    comes from tokenizer.ggml.pre (llama.cpp's names: default/gpt2, llama-bpe, qwen2).
//  - "llama" (SentencePiece BPE): HF's Llama layout — normalizer Prepend("▁") + Replace(" ", "▁"), byte fallback,
//    and merges derived from the piece scores the way transformers' SentencePieceExtractor does: every split of a
//    piece into two pieces of the vocabulary, ordered by the merged piece's score (highest first).
//  - "gemma4" (Gemma 4's BPE, llama.cpp's own tokenizer model): HF's Gemma 4 tokenizer.json (transformers v5
//    GemmaTokenizer) — normalizer Replace(" " -> "▁"), pre-tokenizer Split(" ", merged_with_previous) (a no-op after
//    that normalizer: the whole text between added tokens is one BPE word), byte fallback (<0xXX> pieces), the merges
//    as stored, no prefix space; the decoder Replace("▁" -> " ") + ByteFallback + Fuse. llama.cpp's tokenizer
//    (LLAMA_VOCAB_PRE_TYPE_GEMMA4) escapes the same spaces and also splits the text at newline runs; with a
//    vocabulary whose pieces never mix newlines with other characters (Gemma 3's, and so presumably Gemma 4's) no
//    merge crosses such a boundary and the two agree, but for runs of newlines, which llama.cpp takes as one piece
//    when the vocabulary has it and HF merges. BOS is always added, as llama.cpp forces for this model (HF's Gemma 4
//    tokenizer adds none; its chat template writes <bos>).
// Token types (llama.cpp): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte; unknown, control and
// user-defined tokens become HF added tokens (special unless user-defined).
#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "convert/gguf_import.h"

namespace pipit {

namespace {

using nlohmann::json;

constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

// Qwen3.5's (llama.cpp's "qwen35": the regex of the Hub tokenizer.json, quoted in llama-vocab.cpp): Qwen2's with
// combining marks kept in words ([\p{L}\p{M}]+ where Qwen2 has \p{L}+).
constexpr const char* kQwen35Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

json split_regex(const char* re) {
  return {{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"}, {"invert", false}};
}

// TemplateProcessing that adds BOS and/or EOS around a sequence (null when neither).
json template_processing(const std::string* bos, int64_t bos_id, const std::string* eos, int64_t eos_id) {
  if (!bos && !eos) return nullptr;
  json single = json::array(), pair = json::array(), special = json::object();
  auto tok = [](const std::string& t, int type_id) { return json{{"SpecialToken", {{"id", t}, {"type_id", type_id}}}}; };
  auto seq = [](const char* id, int type_id) { return json{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
  if (bos) single.push_back(tok(*bos, 0));
  single.push_back(seq("A", 0));
  if (eos) single.push_back(tok(*eos, 0));
  pair = single;
  if (bos) pair.push_back(tok(*bos, 1));
  pair.push_back(seq("B", 1));
  if (eos) pair.push_back(tok(*eos, 1));
  if (bos) special[*bos] = {{"id", *bos}, {"ids", {bos_id}}, {"tokens", {*bos}}};
  if (eos) special[*eos] = {{"id", *eos}, {"ids", {eos_id}}, {"tokens", {*eos}}};
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", special}};
}

// Start offsets of the UTF-8 code points of s (a split between two code points is what Python's str slicing does).
std::vector<size_t> codepoint_starts(const std::string& s) {
  std::vector<size_t> v;
  for (size_t k = 0; k < s.size(); ++k)
    if ((static_cast<unsigned char>(s[k]) & 0xc0) != 0x80) v.push_back(k);
  return v;
}

// transformers' SentencePieceExtractor.extract: for each piece (in id order) every split into two vocabulary pieces,
// those sorted by (id of left, id of right); then all merges stably sorted by the piece's score, highest first.
// Pieces longer than kMaxMergePiece bytes get no merges: real SentencePiece vocabularies stay under ~100 bytes, and
// the split search is quadratic in the piece length, which a hostile file could otherwise exploit.
constexpr size_t kMaxMergePiece = 1024;

json spm_merges(const std::vector<std::string>& tokens, const std::vector<float>& scores,
                const std::unordered_map<std::string_view, int64_t>& vocab) {
  struct Merge {
    int64_t l, r;
    float score;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string_view piece = tokens[id];
    if (piece.size() > kMaxMergePiece) continue;
    std::vector<Merge> local;
    for (size_t cut : codepoint_starts(tokens[id])) {
      if (cut == 0) continue;
      auto l = vocab.find(piece.substr(0, cut)), r = vocab.find(piece.substr(cut));
      if (l != vocab.end() && r != vocab.end()) local.push_back({l->second, r->second, scores[id]});
    }
    std::sort(local.begin(), local.end(), [](auto& a, auto& b) { return a.l != b.l ? a.l < b.l : a.r < b.r; });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](auto& a, auto& b) { return a.score > b.score; });
  json out = json::array();
  for (auto& m : merges) out.push_back(tokens[size_t(m.l)] + " " + tokens[size_t(m.r)]);
  return out;
}

Result<std::vector<std::string>> string_array(const GgufFile& f, const char* key, bool required) {
  std::vector<std::string> out;
  const GgufValue* v = f.find(key);
  if (!v) {
    if (required) return Error::not_found("[gguf] {}: no {}", f.path(), key);
    return out;
  }
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kString)
    return Error::format("[gguf] {}: {} is not an array of strings", f.path(), key);
  out.reserve(v->arr.size());
  for (auto& e : v->arr) out.push_back(e.s);
  return out;
}

}  // namespace

std::vector<int64_t> gguf_vocab_eog_ids(const GgufFile& f, int64_t n_vocab) {
  std::vector<int64_t> out;
  const GgufValue* mv = f.find("tokenizer.ggml.model");
  const GgufValue* tv = f.find("tokenizer.ggml.tokens");
  if (!mv || mv->type != GgufType::kString || mv->s != "gemma4" || !tv || tv->type != GgufType::kArray ||
      tv->elem_type != GgufType::kString)
    return out;
  const GgufValue* ev = f.find("tokenizer.ggml.eos_token_id");
  if (ev && ev->is_int() && ev->as_int() >= 0 && ev->as_int() < n_vocab) out.push_back(ev->as_int());
  for (const char* name : {"<eos>", "<turn|>", "<|tool_response>"}) {
    for (size_t id = 0; id < tv->arr.size() && int64_t(id) < n_vocab; ++id) {
      if (tv->arr[id].s != name) continue;
      if (std::find(out.begin(), out.end(), int64_t(id)) == out.end()) out.push_back(int64_t(id));
      break;
    }
  }
  return out;
}

Result<HfTokenizerTexts> gguf_tokenizer_to_hf(const GgufFile& f) {
  const std::string ctx = "[gguf] " + f.path();
  const GgufValue* mv = f.find("tokenizer.ggml.model");
  if (!mv || mv->type != GgufType::kString) return Error::not_found("{}: no tokenizer.ggml.model", ctx);
  const std::string model = mv->s;
  if (model != "gpt2" && model != "llama" && model != "gemma4")
    return Error::unsupported("{}: tokenizer model '{}' is not supported (gpt2, llama, gemma4 are)", ctx, model);
  PIPIT_ASSIGN_OR_RETURN(auto tokens, string_array(f, "tokenizer.ggml.tokens", true));
  const int64_t n = int64_t(tokens.size());
  std::vector<int> types(tokens.size(), kNormal);
  if (const GgufValue* tv = f.find("tokenizer.ggml.token_type")) {
    if (tv->type != GgufType::kArray || tv->arr.size() != tokens.size())
      return Error::format("{}: tokenizer.ggml.token_type must be an array of {} ints", ctx, n);
    for (size_t k = 0; k < types.size(); ++k) types[k] = int(tv->arr[k].as_int());
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  if (const GgufValue* sv = f.find("tokenizer.ggml.scores")) {
    if (sv->type != GgufType::kArray || sv->arr.size() != tokens.size())
      return Error::format("{}: tokenizer.ggml.scores must be an array of {} numbers", ctx, n);
    for (size_t k = 0; k < scores.size(); ++k) scores[k] = float(sv->arr[k].as_double());
  }
  auto id_of = [&](const char* key) -> int64_t {
    const GgufValue* v = f.find(key);
    return v && v->is_int() && v->as_int() >= 0 && v->as_int() < n ? v->as_int() : -1;
  };
  auto flag = [&](const char* key, bool def) {
    const GgufValue* v = f.find(key);
    return v && v->type == GgufType::kBool ? v->as_int() != 0 : def;
  };
  const int64_t bos = id_of("tokenizer.ggml.bos_token_id"), eos = id_of("tokenizer.ggml.eos_token_id");
  const int64_t unk = id_of("tokenizer.ggml.unknown_token_id"), pad = id_of("tokenizer.ggml.padding_token_id");
  const bool spm = model == "llama", gemma4 = model == "gemma4";
  // llama.cpp overrides a gemma4 file's add_bos_token false to true (its PR 21500): Gemma 4 needs the BOS
  const bool add_bos = (gemma4 || flag("tokenizer.ggml.add_bos_token", spm)) && bos >= 0;
  const bool add_eos = flag("tokenizer.ggml.add_eos_token", false) && eos >= 0;

  json vocab = json::object();
  std::unordered_map<std::string_view, int64_t> ids;  // views into `tokens`, which outlives it
  json added = json::array();
  for (int64_t id = 0; id < n; ++id) {
    const std::string& t = tokens[size_t(id)];
    if (!ids.count(t)) {
      ids[t] = id;
      vocab[t] = id;
    }
    const int ty = types[size_t(id)];
    if (ty == kUnknown || ty == kControl || ty == kUserDefined)
      added.push_back({{"id", id}, {"content", t}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", ty != kUserDefined}});
  }
  const std::string* bos_s = add_bos ? &tokens[size_t(bos)] : nullptr;
  const std::string* eos_s = add_eos ? &tokens[size_t(eos)] : nullptr;

  json tj = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}};
  json bpe = {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}};
  if (gemma4) {
    tj["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
    tj["pre_tokenizer"] = {
        {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
    tj["decoder"] = {{"type", "Sequence"},
                     {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}},
                                                {"content", " "}},
                                               {{"type", "ByteFallback"}},
                                               {{"type", "Fuse"}}})}};
    // llama.cpp refuses a gemma4 vocabulary without merges ("cannot find tokenizer merges")
    PIPIT_ASSIGN_OR_RETURN(auto merges, string_array(f, "tokenizer.ggml.merges", true));
    bpe["unk_token"] = unk >= 0 ? json(tokens[size_t(unk)]) : json(nullptr);
    bpe["continuing_subword_prefix"] = nullptr;
    bpe["end_of_word_suffix"] = nullptr;
    bpe["fuse_unk"] = true;
    bpe["byte_fallback"] = true;
    bpe["ignore_merges"] = false;
    bpe["merges"] = merges;
  } else if (spm) {
    json norm = json::array();
    if (flag("tokenizer.ggml.add_space_prefix", true)) norm.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
    norm.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
    tj["normalizer"] = {{"type", "Sequence"}, {"normalizers", norm}};
    tj["pre_tokenizer"] = nullptr;
    json dec = json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                            {{"type", "ByteFallback"}},
                            {{"type", "Fuse"}}});
    if (flag("tokenizer.ggml.add_space_prefix", true))
      dec.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    tj["decoder"] = {{"type", "Sequence"}, {"decoders", dec}};
    bpe["unk_token"] = unk >= 0 ? json(tokens[size_t(unk)]) : json(nullptr);
    bpe["continuing_subword_prefix"] = nullptr;
    bpe["end_of_word_suffix"] = nullptr;
    bpe["fuse_unk"] = true;
    bpe["byte_fallback"] = true;
    bpe["ignore_merges"] = false;
    bpe["merges"] = spm_merges(tokens, scores, ids);
  } else {
    const GgufValue* pv = f.find("tokenizer.ggml.pre");
    const std::string pre = pv && pv->type == GgufType::kString ? pv->s : "default";
    tj["normalizer"] = nullptr;
    bool ignore_merges = false;
    if (pre == "default" || pre == "gpt2" || pre == "gpt-2") {
      tj["pre_tokenizer"] = byte_level(true);
    } else if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe") {
      tj["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split_regex(kLlama3Regex), byte_level(false)}}};
      ignore_merges = true;
    } else if (pre == "qwen2" || pre == "qwen35") {
      // NFC as Qwen2's tokenizer.json (Qwen3.5's is taken to keep it: the GGUF does not say)
      tj["normalizer"] = {{"type", "NFC"}};
      tj["pre_tokenizer"] = {{"type", "Sequence"},
                             {"pretokenizers", {split_regex(pre == "qwen2" ? kQwen2Regex : kQwen35Regex),
                                                byte_level(false)}}};
    } else {
      return Error::unsupported("{}: pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported (default, gpt2, "
                                "llama-bpe, qwen2, qwen35 are)",
                                ctx, pre);
    }
    tj["decoder"] = byte_level(true);
    PIPIT_ASSIGN_OR_RETURN(auto merges, string_array(f, "tokenizer.ggml.merges", true));
    bpe["unk_token"] = nullptr;
    bpe["continuing_subword_prefix"] = "";
    bpe["end_of_word_suffix"] = "";
    bpe["fuse_unk"] = false;
    bpe["byte_fallback"] = false;
    bpe["ignore_merges"] = ignore_merges;
    bpe["merges"] = merges;
  }
  tj["post_processor"] = template_processing(bos_s, bos, eos_s, eos);
  tj["model"] = bpe;

  json tc = {{"add_bos_token", add_bos}, {"add_eos_token", add_eos}, {"clean_up_tokenization_spaces", false},
             {"tokenizer_class",
              spm ? "LlamaTokenizerFast" : gemma4 ? "GemmaTokenizer" : "PreTrainedTokenizerFast"}};
  tc["bos_token"] = bos >= 0 ? json(tokens[size_t(bos)]) : json(nullptr);
  tc["eos_token"] = eos >= 0 ? json(tokens[size_t(eos)]) : json(nullptr);
  tc["unk_token"] = unk >= 0 ? json(tokens[size_t(unk)]) : json(nullptr);
  tc["pad_token"] = pad >= 0 ? json(tokens[size_t(pad)]) : json(nullptr);
  if (const GgufValue* ct = f.find("tokenizer.chat_template"); ct && ct->type == GgufType::kString)
    tc["chat_template"] = ct->s;
  HfTokenizerTexts out;
  // invalid UTF-8 in a token must not throw out of dump(): replace it (HF files are valid UTF-8 by construction)
  out.tokenizer_json = tj.dump(-1, ' ', false, json::error_handler_t::replace);
  out.tokenizer_config_json = tc.dump(2, ' ', false, json::error_handler_t::replace);
  return out;
}

}  // namespace pipit
