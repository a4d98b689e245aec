// HfTokenizer: builds the pipeline from tokenizer.json and runs encode/decode (see hf_tokenizer.h).
// Reference for the order of steps: HF tokenizers/src/tokenizer/mod.rs encode_single_sequence, post_process, decode.
#include "tokenizer/hf_tokenizer.h"

#include <algorithm>

#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace pipit {

using tok::json;
using tok::JsonFields;

Result<std::shared_ptr<HfTokenizer>> HfTokenizer::create(const json& j, tok::BpeTables* tables) {
  auto t = std::make_shared<HfTokenizer>();
  PIPIT_TRY(t->parse(j, tables));
  return t;
}

Status HfTokenizer::parse(const json& j, tok::BpeTables* tables) {
  if (!j.is_object()) return Error::format("[tokenizer.json] expected a JSON object at the top level");
  JsonFields top(j, "top level");
  if (const json* v = top.find("version")) {
    if (!v->is_string() || v->get<std::string>() != "1.0")
      return top.error(fmt("unknown tokenizer.json version {}, expected \"1.0\"", v->dump()));
  }
  // Model first: the added tokens need its vocab.
  PIPIT_ASSIGN_OR_RETURN(const json* model, top.required("model"));
  if (!model->is_object()) return top.error("field 'model' must be an object");
  std::string model_type = "BPE";
  if (auto it = model->find("type"); it != model->end()) {
    model_type = it->is_string() ? it->get<std::string>() : it->dump();
  } else if (!model->contains("merges")) {
    return top.error("field 'model' has no 'type' and no 'merges'; only BPE models are supported");
  }
  if (model_type == "WordPiece" || model_type == "Unigram" || model_type == "WordLevel") {
    return Error::unsupported("[tokenizer.json] model: type '{}' is not supported (pipit supports BPE)", model_type);
  }
  if (model_type != "BPE") return Error::format("[tokenizer.json] model: unknown model type '{}'", model_type);
  PIPIT_ASSIGN_OR_RETURN(model_, tok::Bpe::parse(*model, "model", tables));

  if (const json* v = top.find("normalizer")) {
    PIPIT_ASSIGN_OR_RETURN(normalizer_, tok::parse_normalizer(*v, "normalizer"));
  }
  if (const json* v = top.find("pre_tokenizer")) {
    PIPIT_ASSIGN_OR_RETURN(pre_tokenizer_, tok::parse_pre_tokenizer(*v, "pre_tokenizer"));
  }
  if (const json* v = top.find("post_processor")) {
    PIPIT_ASSIGN_OR_RETURN(post_processor_, tok::parse_post_processor(*v, "post_processor"));
  }
  if (const json* v = top.find("decoder")) {
    PIPIT_ASSIGN_OR_RETURN(decoder_, tok::parse_decoder(*v, "decoder"));
  }
  if (const json* v = top.find("truncation")) {
    JsonFields f(*v, "truncation");
    if (!v->is_object()) return f.error("expected an object or null");
    PIPIT_ASSIGN_OR_RETURN(int64_t max_length, f.integer("max_length"));
    if (max_length < 0) return f.error("field 'max_length' must be non-negative");
    Truncation t;
    t.max_length = static_cast<size_t>(max_length);
    if (const json* d = f.find("direction")) {
      if (*d != "Left" && *d != "Right") return f.error("field 'direction' must be \"Left\" or \"Right\"");
      t.left = *d == "Left";
    }
    f.find("strategy"), f.find("stride");  // only matter for pairs and overflowing encodings
    PIPIT_TRY(f.finish());
    truncation_ = t;
  }
  if (const json* v = top.find("padding")) {
    JsonFields f(*v, "padding");
    if (!v->is_object()) return f.error("expected an object or null");
    Padding p;
    PIPIT_ASSIGN_OR_RETURN(const json* strategy, f.required("strategy"));
    if (strategy->is_object() && strategy->contains("Fixed") && (*strategy)["Fixed"].is_number_unsigned()) {
      p.fixed = (*strategy)["Fixed"].get<size_t>();
    } else if (*strategy != "BatchLongest") {
      return f.error("field 'strategy' must be \"BatchLongest\" or {\"Fixed\": n}");
    }
    if (const json* d = f.find("direction")) p.left = *d == "Left";
    if (const json* m = f.find("pad_to_multiple_of")) {
      if (!m->is_number_unsigned()) return f.error("field 'pad_to_multiple_of' must be a count or null");
      p.multiple = m->get<size_t>();
    }
    PIPIT_ASSIGN_OR_RETURN(int64_t pad_id, f.integer("pad_id", 0));
    p.pad_id = static_cast<int32_t>(pad_id);
    f.find("pad_type_id"), f.find("pad_token");
    PIPIT_TRY(f.finish());
    padding_ = p;
  }

  std::vector<tok::AddedToken> added;
  if (const json* v = top.find("added_tokens")) {
    if (!v->is_array()) return top.error("field 'added_tokens' must be a list");
    for (size_t i = 0; i < v->size(); ++i) {
      PIPIT_ASSIGN_OR_RETURN(tok::AddedToken t, tok::parse_added_token((*v)[i], fmt("added_tokens[{}]", i)));
      added.push_back(std::move(t));
    }
  }
  PIPIT_TRY(added_.build(added, *model_, normalizer_.get()));
  PIPIT_TRY(top.finish());
  vocab_size_ = std::max(model_->max_id(), added_.max_id()) + 1;
  return Status::ok();
}

Status HfTokenizer::encode_text(std::string_view text, std::vector<int32_t>& ids) const {
  tok::BpeCache cache;
  std::vector<tok::Segment> raw_segments, norm_segments;
  std::vector<tok::Piece> pieces;
  std::string norm;
  added_.split(text, /*normalized_pass=*/false, raw_segments);
  for (const tok::Segment& s : raw_segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    norm.assign(text.substr(s.start, s.end - s.start));
    if (normalizer_) PIPIT_TRY(normalizer_->normalize(norm));
    added_.split(norm, /*normalized_pass=*/true, norm_segments);
    for (const tok::Segment& n : norm_segments) {
      if (n.id >= 0) {
        ids.push_back(n.id);
        continue;
      }
      pieces.clear();
      pieces.push_back({norm.substr(n.start, n.end - n.start), s.start == 0 && n.start == 0});
      if (pre_tokenizer_) PIPIT_TRY(pre_tokenizer_->pre_tokenize(pieces));
      for (const tok::Piece& p : pieces) PIPIT_TRY(model_->tokenize(p.text, ids, &cache));
    }
  }
  return Status::ok();
}

Result<std::vector<int32_t>> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!tok::utf8_valid(text)) {
    repaired = tok::utf8_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  PIPIT_TRY(encode_text(text, ids));

  if (truncation_) {
    size_t added = post_processor_ && add_special_tokens ? post_processor_->added_tokens() : 0;
    size_t max_len = truncation_->max_length > added ? truncation_->max_length - added : 0;
    if (ids.size() > max_len) {
      if (truncation_->left) ids.erase(ids.begin(), ids.end() - static_cast<ptrdiff_t>(max_len));
      else ids.resize(max_len);
    }
  }
  if (post_processor_) post_processor_->process(ids, add_special_tokens);
  if (padding_ && padding_->fixed > 0) {
    size_t target = padding_->fixed;
    if (padding_->multiple > 0 && target % padding_->multiple) target += padding_->multiple - target % padding_->multiple;
    if (ids.size() < target) {
      if (padding_->left) ids.insert(ids.begin(), target - ids.size(), padding_->pad_id);
      else ids.resize(target, padding_->pad_id);
    }
  } else if (padding_ && padding_->multiple > 0 && ids.size() % padding_->multiple) {
    // BatchLongest of one sequence is its own length, rounded up to the multiple.
    size_t target = ids.size() + padding_->multiple - ids.size() % padding_->multiple;
    if (padding_->left) ids.insert(ids.begin(), target - ids.size(), padding_->pad_id);
    else ids.resize(target, padding_->pad_id);
  }
  return ids;
}

const std::string* HfTokenizer::token_of(int32_t id) const {
  if (const std::string* t = added_.id_to_token(id)) return t;
  return model_->id_to_token(id);
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* t = token_of(id);
    if (!t) continue;  // unknown ids are dropped, as in HF
    if (skip_special_tokens && added_.is_special_content(*t)) continue;
    tokens.push_back(*t);
  }
  std::string out;
  if (!decoder_) {  // HF joins raw tokens with spaces when there is no decoder
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out.push_back(' ');
      out += tokens[i];
    }
    return out;
  }
  decoder_->decode_chain(tokens);
  for (auto& t : tokens) out += t;
  return out;
}

int32_t HfTokenizer::vocab_size() const { return vocab_size_; }

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (auto id = added_.token_to_id(token)) return id;
  return model_->token_to_id(token);
}

std::string HfTokenizer::id_to_token(int32_t id) const {
  const std::string* t = token_of(id);
  return t ? *t : std::string();
}

bool HfTokenizer::is_special(int32_t id) const {
  const std::string* t = token_of(id);
  return t && added_.is_special_content(*t);
}

}  // namespace pipit
