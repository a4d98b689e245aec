// Pre-tokenizers of HF `tokenizers`: ByteLevel, Split, Digits, Metaspace, Whitespace, WhitespaceSplit,
// Punctuation, BertPreTokenizer and Sequence. Reference: tokenizers/src/pre_tokenizers/*.rs (v0.22).
#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace pipit::tok {
namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;

// Replaces each piece by the non-empty ranges `split(piece, ranges)` produces.
template <class SplitFn>
Status split_pieces(std::vector<Piece>& pieces, SplitFn split) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  Ranges ranges;
  for (Piece& p : pieces) {
    ranges.clear();
    PIPIT_TRY(split(p, ranges));
    if (ranges.size() == 1 && ranges[0].first == 0 && ranges[0].second == p.text.size()) {
      if (!p.text.empty()) out.push_back(std::move(p));
      continue;
    }
    for (auto& [b, e] : ranges) {
      if (b >= e) continue;
      out.push_back({p.text.substr(b, e - b), p.at_start && b == 0});
    }
  }
  pieces = std::move(out);
  return Status::ok();
}

template <class Pred>
void split_on_chars(const std::string& text, Pred pred, SplitBehavior behavior, Ranges& ranges) {
  std::vector<Match> ms;
  find_char_matches(text, pred, ms);
  ranges = apply_split_behavior(ms, behavior);
}

// GPT-2's pre-tokenization regex, used by ByteLevel when use_regex is on.
constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool add_prefix_space, std::shared_ptr<Regex> re) : add_prefix_space_(add_prefix_space),
                                                                   re_(std::move(re)) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (Piece& p : pieces) {
        if (!p.text.empty() && p.text[0] == ' ') continue;
        std::string t(1, ' ');
        t += p.text;
        p.text.swap(t);
      }
    }
    if (re_) {
      std::vector<std::pair<size_t, size_t>> ms;
      std::vector<Match> matches;
      PIPIT_TRY(split_pieces(pieces, [&](const Piece& p, Ranges& r) -> Status {
        ms.clear();
        PIPIT_TRY(re_->find_all(p.text, ms));
        size_t prev = 0;
        for (auto& [s, e] : ms) {  // Isolated: matches and the gaps between them, in order
          if (prev != s) r.emplace_back(prev, s);
          r.emplace_back(s, e);
          prev = e;
        }
        if (prev != p.text.size()) r.emplace_back(prev, p.text.size());
        return Status::ok();
      }));
    }
    std::string mapped;
    for (Piece& p : pieces) {
      mapped.clear();
      byte_level_encode(p.text, mapped);
      p.text.swap(mapped);
    }
    return Status::ok();
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<Regex> re_;
};

class SplitPre : public PreTokenizer {
 public:
  SplitPre(Pattern p, SplitBehavior b, bool invert) : pattern_(std::move(p)), behavior_(b), invert_(invert) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Match> ms;
    return split_pieces(pieces, [&](const Piece& p, Ranges& r) -> Status {
      PIPIT_TRY(pattern_.find_matches(p.text, ms));
      if (invert_)
        for (Match& m : ms) m.is_match = !m.is_match;
      r = apply_split_behavior(ms, behavior_);
      return Status::ok();
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Splits on a per-character predicate with a fixed behavior (Digits, Punctuation, WhitespaceSplit, ...).
template <class Pred>
class CharSplitPre : public PreTokenizer {
 public:
  CharSplitPre(Pred pred, SplitBehavior b) : pred_(pred), behavior_(b) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    return split_pieces(pieces, [&](const Piece& p, Ranges& r) -> Status {
      split_on_chars(p.text, pred_, behavior_, r);
      return Status::ok();
    });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <class Pred>
std::unique_ptr<PreTokenizer> make_char_split(Pred pred, SplitBehavior b) {
  return std::make_unique<CharSplitPre<Pred>>(pred, b);
}

// Whitespace: keeps the runs matched by \w+|[^\w\s]+ and drops everything else.
class WhitespacePre : public PreTokenizer {
 public:
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    return split_pieces(pieces, [&](const Piece& p, Ranges& r) -> Status {
      const std::string& s = p.text;
      size_t i = 0;
      int run = 0;  // 0 none, 1 word run, 2 symbol run
      size_t run_start = 0;
      while (i < s.size()) {
        size_t b = i;
        uint32_t c = utf8_next(s, i);
        int kind = is_word_char(c) ? 1 : is_whitespace(c) ? 0 : 2;
        if (kind != run) {
          if (run != 0) r.emplace_back(run_start, b);
          run = kind;
          run_start = b;
        }
      }
      if (run != 0) r.emplace_back(run_start, s.size());
      return Status::ok();
    });
  }
};

enum class PrependScheme { kFirst, kNever, kAlways };

class MetaspacePre : public PreTokenizer {
 public:
  MetaspacePre(std::string rep, PrependScheme scheme, bool split) : rep_(std::move(rep)), scheme_(scheme),
                                                                    split_(split) {
    size_t i = 0;
    rep_cp_ = utf8_next(rep_, i);
  }
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    return split_pieces(pieces, [&](Piece& p, Ranges& r) -> Status {
      std::string& s = p.text;
      if (s.find(' ') != std::string::npos) {
        std::string t;
        t.reserve(s.size() + 8);
        for (char ch : s) {
          if (ch == ' ') t += rep_;
          else t.push_back(ch);
        }
        s.swap(t);
      }
      bool starts = s.compare(0, rep_.size(), rep_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_start))) {
        s.insert(0, rep_);
      }
      if (split_) {
        uint32_t rc = rep_cp_;
        split_on_chars(s, [rc](uint32_t c) { return c == rc; }, SplitBehavior::kMergedWithNext, r);
      } else {
        r.emplace_back(0, s.size());
      }
      return Status::ok();
    });
  }

 private:
  std::string rep_;
  uint32_t rep_cp_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> v) : items_(std::move(v)) {}
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    for (auto& p : items_) PIPIT_TRY(p->pre_tokenize(pieces));
    return Status::ok();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

class BertPre : public PreTokenizer {
 public:
  Status pre_tokenize(std::vector<Piece>& pieces) const override {
    PIPIT_TRY(split_pieces(pieces, [](const Piece& p, Ranges& r) -> Status {
      split_on_chars(p.text, is_whitespace, SplitBehavior::kRemoved, r);
      return Status::ok();
    }));
    return split_pieces(pieces, [](const Piece& p, Ranges& r) -> Status {
      split_on_chars(p.text, is_punctuation, SplitBehavior::kIsolated, r);
      return Status::ok();
    });
  }
};

Result<PrependScheme> parse_prepend_scheme(JsonFields& f) {
  const json* v = f.find("prepend_scheme");
  PrependScheme scheme = PrependScheme::kAlways;
  if (v) {
    std::string s = v->is_string() ? v->get<std::string>() : "";
    if (s == "first") scheme = PrependScheme::kFirst;
    else if (s == "never") scheme = PrependScheme::kNever;
    else if (s == "always") scheme = PrependScheme::kAlways;
    else return f.error(fmt("field 'prepend_scheme' must be \"first\", \"never\" or \"always\", got {}", v->dump()));
  }
  PIPIT_ASSIGN_OR_RETURN(bool add_prefix_space, f.boolean("add_prefix_space", true));
  if (!add_prefix_space) {  // legacy field: false means "never"
    if (v && scheme != PrependScheme::kNever) return f.error("add_prefix_space does not match prepend_scheme");
    scheme = PrependScheme::kNever;
  }
  return scheme;
}

}  // namespace

Result<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const json& j, const std::string& where, int depth) {
  PIPIT_ASSIGN_OR_RETURN(std::string type, component_type(j, where));
  JsonFields f(j, where + " (" + type + ")");
  std::unique_ptr<PreTokenizer> p;
  if (type == "ByteLevel") {
    PIPIT_ASSIGN_OR_RETURN(bool add_prefix_space, f.boolean("add_prefix_space"));
    PIPIT_ASSIGN_OR_RETURN(bool trim_offsets, f.boolean("trim_offsets", true));  // offsets only
    (void)trim_offsets;
    PIPIT_ASSIGN_OR_RETURN(bool use_regex, f.boolean("use_regex", true));
    std::shared_ptr<Regex> re;
    if (use_regex) {
      PIPIT_ASSIGN_OR_RETURN(std::unique_ptr<Regex> r, Regex::compile(kGpt2Regex));
      re = std::move(r);
    }
    p = std::make_unique<ByteLevelPre>(add_prefix_space, std::move(re));
  } else if (type == "Split") {
    PIPIT_ASSIGN_OR_RETURN(const json* pj, f.required("pattern"));
    bool is_regex = false;
    PIPIT_ASSIGN_OR_RETURN(std::string pat, parse_pattern_json(*pj, f.where(), &is_regex));
    PIPIT_ASSIGN_OR_RETURN(std::string behavior_name, f.str("behavior"));
    auto behavior = parse_split_behavior(behavior_name);
    if (!behavior) return f.error(behavior.status().message());
    PIPIT_ASSIGN_OR_RETURN(bool invert, f.boolean("invert"));
    Pattern pattern = Pattern::literal(pat);
    if (is_regex) {
      auto r = Pattern::regex(pat);
      if (!r) return f.error(r.status().message());
      pattern = std::move(r).value();
    }
    p = std::make_unique<SplitPre>(std::move(pattern), *behavior, invert);
  } else if (type == "Digits") {
    PIPIT_ASSIGN_OR_RETURN(bool individual, f.boolean("individual_digits"));
    p = make_char_split(is_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  } else if (type == "Metaspace") {
    PIPIT_ASSIGN_OR_RETURN(std::string rep, f.one_char("replacement"));
    PIPIT_ASSIGN_OR_RETURN(PrependScheme scheme, parse_prepend_scheme(f));
    PIPIT_ASSIGN_OR_RETURN(bool split, f.boolean("split", true));
    f.find("str_rep");  // legacy, ignored by HF too
    p = std::make_unique<MetaspacePre>(std::move(rep), scheme, split);
  } else if (type == "Whitespace") {
    p = std::make_unique<WhitespacePre>();
  } else if (type == "WhitespaceSplit") {
    p = make_char_split(is_whitespace, SplitBehavior::kRemoved);
  } else if (type == "Punctuation") {
    SplitBehavior b = SplitBehavior::kIsolated;
    if (const json* bj = f.find("behavior")) {
      auto r = parse_split_behavior(bj->is_string() ? bj->get<std::string>() : bj->dump());
      if (!r) return f.error(r.status().message());
      b = *r;
    }
    p = make_char_split(is_punctuation, b);
  } else if (type == "BertPreTokenizer") {
    p = std::make_unique<BertPre>();
  } else if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return f.error(fmt("Sequence nested deeper than {} levels", kMaxSequenceDepth));
    PIPIT_ASSIGN_OR_RETURN(const json* arr, f.array("pretokenizers"));
    std::vector<std::unique_ptr<PreTokenizer>> items;
    for (size_t i = 0; i < arr->size(); ++i) {
      PIPIT_ASSIGN_OR_RETURN(auto item,
                             parse_pre_tokenizer((*arr)[i], fmt("{}.pretokenizers[{}]", where, i), depth + 1));
      items.push_back(std::move(item));
    }
    p = std::make_unique<SequencePre>(std::move(items));
  } else if (type == "CharDelimiterSplit" || type == "UnicodeScripts" || type == "FixedLength") {
    return Error::unsupported("[tokenizer.json] {}: pre-tokenizer type '{}' is not supported", where, type);
  } else {
    return Error::format("[tokenizer.json] {}: unknown pre-tokenizer type '{}'", where, type);
  }
  PIPIT_TRY(f.finish());
  return p;
}

}  // namespace pipit::tok
