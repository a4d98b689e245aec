// Decoders of HF `tokenizers`: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, BPEDecoder and Sequence.
// Invalid UTF-8 follows Rust: ByteLevel decodes all bytes with from_utf8_lossy (one U+FFFD per maximal invalid
// subpart); ByteFallback turns a run of <0xNN> tokens that is not valid UTF-8 into one U+FFFD per byte.
// Reference: tokenizers/src/decoders/*.rs, pre_tokenizers/{byte_level,metaspace}.rs (v0.22).
#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace pipit::tok {
namespace {

const char kReplacementUtf8[] = "\xEF\xBF\xBD";

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    const auto& a = byte_level_alphabet();
    std::string bytes;
    for (const std::string& t : tokens) {
      size_t mark = bytes.size();
      size_t i = 0;
      bool all = true;
      while (i < t.size()) {
        uint32_t c = utf8_next(t, i);
        if (c >= 512 || a.byte_of[c] < 0) { all = false; break; }
        bytes.push_back(static_cast<char>(a.byte_of[c]));
      }
      if (!all) {  // a token outside the alphabet (an added token) contributes its own UTF-8 bytes
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_valid(bytes) ? std::move(bytes) : utf8_lossy(bytes));
  }
};

enum class PrependScheme { kFirst, kNever, kAlways };

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string rep, PrependScheme s) : rep_(std::move(rep)), scheme_(s) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (t.find(rep_) == std::string::npos) continue;
      std::string out;
      out.reserve(t.size());
      for (size_t p = 0; p < t.size();) {
        if (t.compare(p, rep_.size(), rep_) == 0) {
          if (i != 0 || scheme_ == PrependScheme::kNever) out.push_back(' ');
          p += rep_.size();
        } else {
          out.push_back(t[p++]);
        }
      }
      t = std::move(out);
    }
  }

 private:
  std::string rep_;
  PrependScheme scheme_;
};

// "<0xNN>" -> the byte; also what Rust's u8::from_str_radix accepts in those two places (a '+' and one digit).
int byte_token_value(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (t[3] == '+') return hex(t[4]);
  int h = hex(t[3]), l = hex(t[4]);
  return h < 0 || l < 0 ? -1 : h * 16 + l;
}

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    size_t run_len = 0;
    auto flush = [&] {
      if (run_len == 0) return;
      if (utf8_valid(run)) out.push_back(run);
      else
        for (size_t k = 0; k < run_len; ++k) out.emplace_back(kReplacementUtf8);
      run.clear();
      run_len = 0;
    };
    for (std::string& t : tokens) {
      int b = byte_token_value(t);
      if (b >= 0) {
        run.push_back(static_cast<char>(b));
        ++run_len;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of `content` from each token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop) : c_(std::move(content)), start_(start),
                                                                  stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start_ && t.compare(b, c_.size(), c_) == 0 && b < e; ++k) b += c_.size();
      for (size_t k = 0; k < stop_ && e >= b + c_.size() && t.compare(e - c_.size(), c_.size(), c_) == 0; ++k)
        e -= c_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string c_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern p, std::string content) : pattern_(std::move(p)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<Match> ms;
    for (std::string& t : tokens) {
      if (!pattern_.find_matches(t, ms).is_ok()) continue;  // a regex failure leaves the token as it is
      if (ms.size() == 1 && !ms[0].is_match) continue;
      std::string out;
      for (const Match& m : ms) {
        if (m.is_match) out += content_;
        else out.append(t, m.start, m.end - m.start);
      }
      t = std::move(out);
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// BPEDecoder: the end-of-word suffix becomes a space, except in the last token where it is removed.
class BpeSuffixDecoder : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (suffix_.empty()) return;
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      const char* rep = i + 1 == tokens.size() ? "" : " ";
      std::string out;
      for (size_t p = 0; p < t.size();) {
        if (t.compare(p, suffix_.size(), suffix_) == 0) {
          out += rep;
          p += suffix_.size();
        } else {
          out.push_back(t[p++]);
        }
      }
      t = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> v) : items_(std::move(v)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& d : items_) d->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> items_;
};

Result<PrependScheme> parse_scheme(JsonFields& f) {
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
  if (!add_prefix_space) {
    if (v && scheme != PrependScheme::kNever) return f.error("add_prefix_space does not match prepend_scheme");
    scheme = PrependScheme::kNever;
  }
  return scheme;
}

}  // namespace

Result<std::unique_ptr<Decoder>> parse_decoder(const json& j, const std::string& where, int depth) {
  PIPIT_ASSIGN_OR_RETURN(std::string type, component_type(j, where));
  JsonFields f(j, where + " (" + type + ")");
  std::unique_ptr<Decoder> d;
  if (type == "ByteLevel") {
    f.find("add_prefix_space"), f.find("trim_offsets"), f.find("use_regex");  // pre-tokenizer options, unused here
    d = std::make_unique<ByteLevelDecoder>();
  } else if (type == "Metaspace") {
    PIPIT_ASSIGN_OR_RETURN(std::string rep, f.one_char("replacement"));
    PIPIT_ASSIGN_OR_RETURN(PrependScheme scheme, parse_scheme(f));
    PIPIT_ASSIGN_OR_RETURN(bool split, f.boolean("split", true));
    (void)split;
    f.find("str_rep");
    d = std::make_unique<MetaspaceDecoder>(std::move(rep), scheme);
  } else if (type == "ByteFallback") {
    d = std::make_unique<ByteFallbackDecoder>();
  } else if (type == "Fuse") {
    d = std::make_unique<FuseDecoder>();
  } else if (type == "Strip") {
    PIPIT_ASSIGN_OR_RETURN(std::string content, f.one_char("content"));
    PIPIT_ASSIGN_OR_RETURN(int64_t start, f.integer("start"));
    PIPIT_ASSIGN_OR_RETURN(int64_t stop, f.integer("stop"));
    if (start < 0 || stop < 0) return f.error("fields 'start' and 'stop' must be non-negative");
    d = std::make_unique<StripDecoder>(std::move(content), static_cast<size_t>(start), static_cast<size_t>(stop));
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
    d = std::make_unique<ReplaceDecoder>(std::move(p), std::move(content));
  } else if (type == "BPEDecoder") {
    PIPIT_ASSIGN_OR_RETURN(std::string suffix, f.str("suffix"));
    d = std::make_unique<BpeSuffixDecoder>(std::move(suffix));
  } else if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return f.error(fmt("Sequence nested deeper than {} levels", kMaxSequenceDepth));
    PIPIT_ASSIGN_OR_RETURN(const json* arr, f.array("decoders"));
    std::vector<std::unique_ptr<Decoder>> items;
    for (size_t i = 0; i < arr->size(); ++i) {
      PIPIT_ASSIGN_OR_RETURN(auto item, parse_decoder((*arr)[i], fmt("{}.decoders[{}]", where, i), depth + 1));
      items.push_back(std::move(item));
    }
    d = std::make_unique<SequenceDecoder>(std::move(items));
  } else if (type == "WordPiece" || type == "CTC") {
    return Error::unsupported("[tokenizer.json] {}: decoder type '{}' is not supported", where, type);
  } else {
    return Error::format("[tokenizer.json] {}: unknown decoder type '{}'", where, type);
  }
  PIPIT_TRY(f.finish());
  return d;
}

}  // namespace pipit::tok
