// Normalizers of HF `tokenizers`: NFC/NFD/NFKC/NFKD, Lowercase, Replace, Prepend, Strip, StripAccents,
// ByteLevel and Sequence. Reference: tokenizers/src/normalizers/*.rs (v0.22).
#include "tokenizer/normalizer.h"

#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace pipit::tok {
namespace {

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(NormForm f) : form_(f) {}
  Status normalize(std::string& s) const override {
    PIPIT_ASSIGN_OR_RETURN(s, normalize_form(s, form_));
    return Status::ok();
  }

 private:
  NormForm form_;
};

class Lowercase : public Normalizer {
 public:
  Status normalize(std::string& s) const override {
    s = to_lower(s);
    return Status::ok();
  }
};

// Replaces every match of the pattern by `content` (NormalizedString::replace).
// Normalizers map text to text of about the same size (a space to a 3-byte "▁", a prepended marker); a
// tokenizer.json whose normalizers multiply it (a Replace of one character by 10,000, a Sequence of Replace("a",
// "aa") doubling 28 times into 256 MB) is refused when the text would pass this growth.
Status check_growth(size_t before, size_t after) {
  constexpr size_t kFactor = 16, kSlack = 4096;
  if (after > kFactor * before + kSlack)
    return Error::invalid_argument("[tokenizer] the normalizers make {} bytes of text from {}: tokenizer.json's "
                                   "normalizer grows text more than {}x", after, before, kFactor);
  return Status::ok();
}

class Replace : public Normalizer {
 public:
  Replace(Pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  Status normalize(std::string& s) const override {
    std::vector<Match> ms;
    PIPIT_TRY(pattern_.find_matches(s, ms));
    size_t size = 0;
    for (const Match& m : ms) size += m.is_match ? content_.size() : m.end - m.start;
    PIPIT_TRY(check_growth(s.size(), size));
    std::string out;
    out.reserve(size);
    for (const Match& m : ms) {
      if (m.is_match) out += content_;
      else out.append(s, m.start, m.end - m.start);
    }
    s = std::move(out);
    return Status::ok();
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Prepends a string to non-empty input.
class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  Status normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend_);
    return Status::ok();
  }

 private:
  std::string prepend_;
};

// Strips Unicode whitespace (char::is_whitespace) on the left and/or right.
class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  Status normalize(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!is_whitespace(utf8_next(s, i))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t start;
        if (!is_whitespace(utf8_prev(s, e, &start))) break;
        e = start;
      }
    }
    s = s.substr(b, e - b);
    return Status::ok();
  }

 private:
  bool left_, right_;
};

// Removes combining marks (HF's is_combining_mark).
class StripAccents : public Normalizer {
 public:
  Status normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
      size_t b = i;
      uint32_t c = utf8_next(s, i);
      if (is_combining_mark(c)) continue;
      out.append(s, b, i - b);
    }
    s = std::move(out);
    return Status::ok();
  }
};

// Maps every byte to the GPT-2 byte-level alphabet.
class ByteLevelNormalizer : public Normalizer {
 public:
  Status normalize(std::string& s) const override {
    std::string out;
    byte_level_encode(s, out);
    s = std::move(out);
    return Status::ok();
  }
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> v) : items_(std::move(v)) {}
  Status normalize(std::string& s) const override {
    const size_t before = s.size();
    for (auto& n : items_) {
      PIPIT_TRY(n->normalize(s));
      PIPIT_TRY(check_growth(before, s.size()));
    }
    return Status::ok();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace

Result<std::unique_ptr<Normalizer>> parse_normalizer(const json& j, const std::string& where, int depth) {
  PIPIT_ASSIGN_OR_RETURN(std::string type, component_type(j, where));
  JsonFields f(j, where + " (" + type + ")");
  std::unique_ptr<Normalizer> n;
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    NormForm form = type == "NFC" ? NormForm::kNFC : type == "NFD" ? NormForm::kNFD
                  : type == "NFKC" ? NormForm::kNFKC : NormForm::kNFKD;
    n = std::make_unique<UnicodeForm>(form);
  } else if (type == "Lowercase") {
    n = std::make_unique<Lowercase>();
  } else if (type == "StripAccents") {
    n = std::make_unique<StripAccents>();
  } else if (type == "ByteLevel") {
    n = std::make_unique<ByteLevelNormalizer>();
  } else if (type == "Replace") {
    PIPIT_ASSIGN_OR_RETURN(const json* pj, f.required("pattern"));
    bool is_regex = false;
    PIPIT_ASSIGN_OR_RETURN(std::string pat, parse_pattern_json(*pj, f.where(), &is_regex));
    PIPIT_ASSIGN_OR_RETURN(std::string content, f.str("content"));
    Pattern p = Pattern::literal(pat);
    if (is_regex) {
      auto r = Pattern::regex(pat);
      if (!r) return f.error(r.status().message());
      p = std::move(r).value();
    }
    n = std::make_unique<Replace>(std::move(p), std::move(content));
  } else if (type == "Prepend") {
    PIPIT_ASSIGN_OR_RETURN(std::string p, f.str("prepend"));
    n = std::make_unique<Prepend>(std::move(p));
  } else if (type == "Strip") {
    PIPIT_ASSIGN_OR_RETURN(bool left, f.boolean("strip_left"));
    PIPIT_ASSIGN_OR_RETURN(bool right, f.boolean("strip_right"));
    n = std::make_unique<Strip>(left, right);
  } else if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return f.error(fmt("Sequence nested deeper than {} levels", kMaxSequenceDepth));
    PIPIT_ASSIGN_OR_RETURN(const json* arr, f.array("normalizers"));
    std::vector<std::unique_ptr<Normalizer>> items;
    for (size_t i = 0; i < arr->size(); ++i) {
      PIPIT_ASSIGN_OR_RETURN(auto item, parse_normalizer((*arr)[i], fmt("{}.normalizers[{}]", where, i), depth + 1));
      items.push_back(std::move(item));
    }
    n = std::make_unique<SequenceNormalizer>(std::move(items));
  } else if (type == "BertNormalizer" || type == "Precompiled" || type == "Nmt") {
    return Error::unsupported("[tokenizer.json] {}: normalizer type '{}' is not supported", where, type);
  } else {
    return Error::format("[tokenizer.json] {}: unknown normalizer type '{}'", where, type);
  }
  PIPIT_TRY(f.finish());
  return n;
}

}  // namespace pipit::tok
