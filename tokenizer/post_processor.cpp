// Post-processors of HF `tokenizers`: TemplateProcessing, ByteLevel (offsets only: ids unchanged), BertProcessing,
// RobertaProcessing and Sequence. Reference: tokenizers/src/processors/*.rs (v0.22).
#include "tokenizer/post_processor.h"

#include <map>

#include "tokenizer/json_fields.h"

namespace pipit::tok {
namespace {

class IdentityProcessor : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
  size_t added_tokens() const override { return 0; }
};

// The single-sequence template as a list of pieces: a special token's ids, or the sequence itself (empty).
class TemplateProcessor : public PostProcessor {
 public:
  explicit TemplateProcessor(std::vector<std::vector<int32_t>> pieces) : pieces_(std::move(pieces)) {
    for (auto& p : pieces_) added_ += p.size();
  }
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    std::vector<int32_t> out;
    out.reserve(ids.size() + added_);
    for (auto& p : pieces_) {
      if (p.empty()) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), p.begin(), p.end());
    }
    ids = std::move(out);
  }
  size_t added_tokens() const override { return added_; }

 private:
  std::vector<std::vector<int32_t>> pieces_;
  size_t added_ = 0;
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> v) : items_(std::move(v)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (auto& p : items_) p->process(ids, add_special_tokens);
  }
  size_t added_tokens() const override {
    size_t n = 0;
    for (auto& p : items_) n += p->added_tokens();
    return n;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> items_;
};

// A template piece: {"SpecialToken": {"id": "<s>", "type_id": 0}} or {"Sequence": {"id": "A", "type_id": 0}};
// HF's string form ("$A", "[CLS]", "$A:0") is accepted too.
Result<std::optional<std::string>> parse_piece(const json& p, JsonFields& f, size_t i) {
  if (p.is_string()) {
    std::string s = p.get<std::string>();
    std::string id = s.substr(0, s.find(':'));
    if (!id.empty() && id[0] == '$') {
      if (id == "$" || id == "$A" || id == "$a") return std::optional<std::string>();
      if (id == "$B" || id == "$b") return f.error("templates with a pair sequence ($B) are not supported in 'single'");
      bool digits = id.size() > 1;
      for (size_t k = 1; k < id.size(); ++k) digits = digits && id[k] >= '0' && id[k] <= '9';
      if (digits) return std::optional<std::string>();
      return f.error(fmt("single[{}]: cannot read template piece '{}'", i, s));
    }
    return std::optional<std::string>(id);
  }
  if (p.is_object() && p.size() == 1) {
    auto it = p.begin();
    if (it.key() == "Sequence" && it->is_object()) return std::optional<std::string>();
    if (it.key() == "SpecialToken" && it->is_object() && it->contains("id") && (*it)["id"].is_string())
      return std::optional<std::string>((*it)["id"].get<std::string>());
  }
  return f.error(fmt("single[{}] must be {{\"SpecialToken\": {{\"id\": ...}}}} or {{\"Sequence\": ...}}, got {}", i,
                     p.dump()));
}

Result<std::unique_ptr<PostProcessor>> parse_template(JsonFields& f) {
  PIPIT_ASSIGN_OR_RETURN(const json* single, f.required("single"));
  f.find("pair");  // pair templates are not used by pipit
  std::map<std::string, std::vector<int32_t>> specials;
  if (const json* st = f.find("special_tokens")) {
    if (!st->is_object()) return f.error("field 'special_tokens' must be an object");
    for (auto it = st->begin(); it != st->end(); ++it) {
      const json& v = *it;
      if (!v.is_object() || !v.contains("ids") || !v["ids"].is_array())
        return f.error(fmt("special_tokens['{}'] must have a list 'ids'", it.key()));
      std::vector<int32_t> ids;
      for (const json& id : v["ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
          return f.error(fmt("special_tokens['{}'].ids holds {}, expected a token id", it.key(), id.dump()));
        ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
      specials[it.key()] = std::move(ids);
    }
  }
  std::vector<const json*> items;
  json split_items;
  if (single->is_string()) {  // "[CLS] $A [SEP]"
    std::string s = single->get<std::string>();
    for (size_t b = 0; b <= s.size();) {
      size_t e = s.find(' ', b);
      if (e == std::string::npos) e = s.size();
      split_items.push_back(s.substr(b, e - b));
      b = e + 1;
    }
    for (const json& it : split_items) items.push_back(&it);
  } else if (single->is_array()) {
    for (const json& it : *single) items.push_back(&it);
  } else {
    return f.error("field 'single' must be a list of template pieces");
  }
  std::vector<std::vector<int32_t>> pieces;
  for (size_t i = 0; i < items.size(); ++i) {
    PIPIT_ASSIGN_OR_RETURN(std::optional<std::string> special, parse_piece(*items[i], f, i));
    if (!special) {
      pieces.emplace_back();
      continue;
    }
    auto it = specials.find(*special);
    if (it == specials.end()) return f.error(fmt("special token '{}' is used in 'single' but missing from "
                                                 "'special_tokens'", *special));
    if (it->second.empty()) continue;
    pieces.push_back(it->second);
  }
  return std::unique_ptr<PostProcessor>(new TemplateProcessor(std::move(pieces)));
}

// BertProcessing / RobertaProcessing: [cls] $A [sep], with "cls" and "sep" given as [token, id].
Result<std::unique_ptr<PostProcessor>> parse_cls_sep(JsonFields& f) {
  std::vector<std::vector<int32_t>> pieces;
  for (const char* key : {"cls", "sep"}) {
    PIPIT_ASSIGN_OR_RETURN(const json* v, f.required(key));
    if (!v->is_array() || v->size() != 2 || !(*v)[1].is_number_integer())
      return f.error(fmt("field '{}' must be [token, id]", key));
    pieces.push_back({static_cast<int32_t>((*v)[1].get<int64_t>())});
    if (std::string(key) == "cls") pieces.emplace_back();  // the sequence goes between cls and sep
  }
  return std::unique_ptr<PostProcessor>(new TemplateProcessor(std::move(pieces)));
}

}  // namespace

Result<std::unique_ptr<PostProcessor>> parse_post_processor(const json& j, const std::string& where, int depth) {
  PIPIT_ASSIGN_OR_RETURN(std::string type, component_type(j, where));
  JsonFields f(j, where + " (" + type + ")");
  std::unique_ptr<PostProcessor> p;
  if (type == "TemplateProcessing") {
    PIPIT_ASSIGN_OR_RETURN(p, parse_template(f));
  } else if (type == "ByteLevel") {
    f.find("add_prefix_space"), f.find("trim_offsets"), f.find("use_regex");  // offsets only
    p = std::make_unique<IdentityProcessor>();
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    PIPIT_ASSIGN_OR_RETURN(p, parse_cls_sep(f));
    if (type == "RobertaProcessing") f.find("trim_offsets"), f.find("add_prefix_space");
  } else if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return f.error(fmt("Sequence nested deeper than {} levels", kMaxSequenceDepth));
    PIPIT_ASSIGN_OR_RETURN(const json* arr, f.array("processors"));
    std::vector<std::unique_ptr<PostProcessor>> items;
    for (size_t i = 0; i < arr->size(); ++i) {
      PIPIT_ASSIGN_OR_RETURN(auto item, parse_post_processor((*arr)[i], fmt("{}.processors[{}]", where, i), depth + 1));
      items.push_back(std::move(item));
    }
    p = std::make_unique<SequenceProcessor>(std::move(items));
  } else {
    return Error::format("[tokenizer.json] {}: unknown post-processor type '{}'", where, type);
  }
  PIPIT_TRY(f.finish());
  return p;
}

}  // namespace pipit::tok
