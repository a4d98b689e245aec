// The GGUF vocabulary (tokenizer.ggml.*) as an HF tokenizer.json, so one tokenizer implementation serves every input;
// held as its parts (format/tokenizer_parts.h), which the loader builds the tokenizer from without writing the text.
//  - "gpt2" (byte-level BPE): tokens and merges are already in HF's byte-level alphabet; the pre-tokenizer regex
//    comes from tokenizer.ggml.pre: GPT-2's own (default/gpt2) here, the others by their registered
//    GgufPreTokenizer (models/gguf_traits.h, beside the family that brought it).
//  - "llama" (SentencePiece BPE): HF's Llama layout — normalizer Prepend("▁") + Replace(" ", "▁"), byte fallback,
//    and merges derived from the piece scores the way transformers' SentencePieceExtractor does: every split of a
//    piece into two pieces of the vocabulary, ordered by the merged piece's score (highest first).
//  - any other tokenizer.ggml.model: a family's own vocabulary type, its registered GgufVocab.
// Token types (llama.cpp): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte; unknown, control and
// user-defined tokens become HF added tokens (special unless user-defined).
#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "convert/gguf_import.h"
#include "format/gguf_meta.h"
#include "models/gguf_traits.h"

namespace pipit {

namespace {

using nlohmann::json;

constexpr const char* kGpt2Regex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
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

std::vector<std::string> spm_merges(const std::vector<std::string>& tokens, const std::vector<float>& scores,
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
  std::vector<std::string> out;
  out.reserve(merges.size());
  for (auto& m : merges) out.push_back(tokens[size_t(m.l)] + " " + tokens[size_t(m.r)]);
  return out;
}

}  // namespace

std::vector<int64_t> gguf_vocab_eog_ids(const GgufFile& f, int64_t n_vocab) {
  const GgufValue* mv = f.find("tokenizer.ggml.model");
  if (!mv || mv->type != GgufType::kString) return {};
  const GgufVocab* v = find_gguf_vocab(mv->s);
  return v && v->eog_ids ? v->eog_ids(f, n_vocab) : std::vector<int64_t>{};
}

Result<TokenizerParts> gguf_tokenizer_parts(const GgufFile& f) {
  const std::string ctx = "[gguf] " + f.path();
  const GgufValue* mv = f.find("tokenizer.ggml.model");
  if (!mv || mv->type != GgufType::kString) return Error::not_found("{}: no tokenizer.ggml.model", ctx);
  const std::string model = mv->s;
  const GgufVocab* own = model == "gpt2" || model == "llama" ? nullptr : find_gguf_vocab(model);
  if (model != "gpt2" && model != "llama" && !own) {
    std::string names = "gpt2, llama";
    for (const auto& n : gguf_vocab_names()) names += ", " + n;
    return Error::unsupported("{}: tokenizer model '{}' is not supported ({} are)", ctx, model, names);
  }
  PIPIT_ASSIGN_OR_RETURN(auto tokens, gguf_string_array(f, "tokenizer.ggml.tokens", true));
  const int64_t n = int64_t(tokens.size());
  std::vector<int> types(tokens.size(), kNormal);
  if (const GgufValue* tv = f.find("tokenizer.ggml.token_type")) {
    if (tv->type != GgufType::kArray || tv->arr_size() != tokens.size())
      return Error::format("{}: tokenizer.ggml.token_type must be an array of {} ints", ctx, n);
    for (size_t k = 0; k < types.size(); ++k) types[k] = int(tv->at(k).as_int());
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  if (const GgufValue* sv = f.find("tokenizer.ggml.scores")) {
    if (sv->type != GgufType::kArray || sv->arr_size() != tokens.size())
      return Error::format("{}: tokenizer.ggml.scores must be an array of {} numbers", ctx, n);
    for (size_t k = 0; k < scores.size(); ++k) scores[k] = float(sv->at(k).as_double());
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
  const bool spm = model == "llama";
  const bool add_bos = ((own && own->force_bos) || flag("tokenizer.ggml.add_bos_token", spm)) && bos >= 0;
  const bool add_eos = flag("tokenizer.ggml.add_eos_token", false) && eos >= 0;

  // The vocabulary stays a list of tokens by id (TokenizerParts::tokens): as a JSON object of 150k entries it cost
  // more than the rest of the tokenizer together.
  json added = json::array();
  for (int64_t id = 0; id < n; ++id) {
    const std::string& t = tokens[size_t(id)];
    const int ty = types[size_t(id)];
    if (ty == kUnknown || ty == kControl || ty == kUserDefined)
      added.push_back({{"id", id}, {"content", t}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", ty != kUserDefined}});
  }
  const std::string* bos_s = add_bos ? &tokens[size_t(bos)] : nullptr;
  const std::string* eos_s = add_eos ? &tokens[size_t(eos)] : nullptr;

  TokenizerParts out;
  json tj = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", std::move(added)}};
  json bpe = {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", json::object()}};
  if (own) {
    PIPIT_TRY(own->build(f, tokens, unk, tj, bpe));
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
    std::unordered_map<std::string_view, int64_t> ids;  // views into `tokens`, which outlives it; first id kept
    ids.reserve(tokens.size());
    for (int64_t id = 0; id < n; ++id) ids.emplace(tokens[size_t(id)], id);
    out.merges = spm_merges(tokens, scores, ids);
  } else {
    const GgufValue* pv = f.find("tokenizer.ggml.pre");
    const std::string pre = pv && pv->type == GgufType::kString ? pv->s : "default";
    tj["normalizer"] = nullptr;
    bool ignore_merges = false;
    if (pre == "default" || pre == "gpt2" || pre == "gpt-2") {
      tj["pre_tokenizer"] = byte_level(true);
    } else if (const GgufPreTokenizer* p = find_gguf_pre_tokenizer(pre)) {
      if (p->nfc) tj["normalizer"] = {{"type", "NFC"}};
      tj["pre_tokenizer"] = {{"type", "Sequence"},
                             {"pretokenizers", {split_regex(p->regex.c_str()), byte_level(false)}}};
      ignore_merges = p->ignore_merges;
    } else {
      std::string names = "default, gpt2";
      for (const auto& n : gguf_pre_tokenizer_names()) names += ", " + n;
      return Error::unsupported("{}: pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported ({} are)", ctx, pre,
                                names);
    }
    tj["decoder"] = byte_level(true);
    PIPIT_ASSIGN_OR_RETURN(out.merges, gguf_string_array(f, "tokenizer.ggml.merges", true));
    bpe["unk_token"] = nullptr;
    bpe["continuing_subword_prefix"] = "";
    bpe["end_of_word_suffix"] = "";
    bpe["fuse_unk"] = false;
    bpe["byte_fallback"] = false;
    bpe["ignore_merges"] = ignore_merges;
  }
  if (own) {
    // the family's hook writes its merges into the tree: lifted out like the others when they are all "a b"
    auto m = bpe.find("merges");
    if (m != bpe.end() && m->is_array() &&
        std::all_of(m->begin(), m->end(), [](const json& e) { return e.is_string(); })) {
      out.merges.reserve(m->size());
      for (json& e : *m) out.merges.push_back(std::move(e.get_ref<std::string&>()));
      *m = json::array();
    } else {
      out.merges_in_tree = true;
    }
  } else {
    bpe["merges"] = json::array();
  }
  tj["post_processor"] = template_processing(bos_s, bos, eos_s, eos);
  tj["model"] = std::move(bpe);

  json tc = {{"add_bos_token", add_bos}, {"add_eos_token", add_eos}, {"clean_up_tokenization_spaces", false},
             {"tokenizer_class",
              spm ? "LlamaTokenizerFast" : own ? own->tokenizer_class : "PreTrainedTokenizerFast"}};
  tc["bos_token"] = bos >= 0 ? json(tokens[size_t(bos)]) : json(nullptr);
  tc["eos_token"] = eos >= 0 ? json(tokens[size_t(eos)]) : json(nullptr);
  tc["unk_token"] = unk >= 0 ? json(tokens[size_t(unk)]) : json(nullptr);
  tc["pad_token"] = pad >= 0 ? json(tokens[size_t(pad)]) : json(nullptr);
  if (const GgufValue* ct = f.find("tokenizer.chat_template"); ct && ct->type == GgufType::kString)
    tc["chat_template"] = ct->s;
  out.tokenizer = std::move(tj);
  out.config = std::move(tc);
  out.tokens = std::move(tokens);
  return out;
}

Result<HfTokenizerTexts> gguf_tokenizer_to_hf(const GgufFile& f) {
  PIPIT_ASSIGN_OR_RETURN(TokenizerParts p, gguf_tokenizer_parts(f));
  return tokenizer_parts_texts(std::move(p));
}

}  // namespace pipit
