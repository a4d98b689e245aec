// UTF-8 validation and lossy repair, the character predicates HF `tokenizers` relies on (from tables measured
// through HF, generated/hf_unicode_props.h), and Unicode normalization through utf8proc.
#include "tokenizer/unicode.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <vector>

#include <utf8proc.h>

#include "tokenizer/generated/hf_unicode_props.h"

namespace pipit::tok {

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Length of the valid prefix of the sequence starting at s[i] (Unicode table 3-7), and its full length when
// complete. Returns {consumed, complete}: consumed >= 1 always.
struct SeqCheck { size_t consumed; bool complete; bool truncated = false; };

SeqCheck check_seq(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  if (c < 0x80) return {1, true};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) { need = 2; }
  else if (c == 0xE0) { need = 3; lo = 0xA0; }
  else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) { need = 3; }
  else if (c == 0xED) { need = 3; hi = 0x9F; }
  else if (c == 0xF0) { need = 4; lo = 0x90; }
  else if (c >= 0xF1 && c <= 0xF3) { need = 4; }
  else if (c == 0xF4) { need = 4; hi = 0x8F; }
  else return {1, false};
  size_t k = 1;
  for (; k < need; ++k) {
    if (i + k >= s.size()) return {k, false, true};
    unsigned char x = b(k);
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) return {k, false};
  }
  return {need, true};
}

}  // namespace

bool utf8_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    SeqCheck r = check_seq(s, i);
    if (!r.complete) return false;
    i += r.consumed;
  }
  return true;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    SeqCheck r = check_seq(s, i);
    if (r.complete) out.append(s.substr(i, r.consumed));
    else utf8_append(out, kReplacementChar);
    i += r.consumed;
  }
  return out;
}

size_t utf8_incomplete_tail(std::string_view s) {
  // A sequence is at most 4 bytes: look for a lead byte among the last 3.
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    size_t i = s.size() - k;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) continue;
    return check_seq(s, i).truncated ? k : 0;
  }
  return 0;
}

namespace {

bool in_table(const generated::CodeRange* r, size_t n, uint32_t cp) {
  const generated::CodeRange* end = r + n;
  const generated::CodeRange* it =
      std::upper_bound(r, end, cp, [](uint32_t v, const generated::CodeRange& x) { return v < x.first; });
  return it != r && (it - 1)->last >= cp;
}

template <size_t N>
bool in_table(const generated::CodeRange (&r)[N], uint32_t cp) {
  return in_table(r, N, cp);
}

}  // namespace

bool is_whitespace(uint32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return in_table(generated::kHf_rust_space, c);
}

bool is_numeric(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_table(generated::kHf_numeric, c);
}

bool is_punctuation(uint32_t c) {
  if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
                        (c >= 0x7B && c <= 0x7E);
  return in_table(generated::kHf_punct, c);
}

bool is_combining_mark(uint32_t c) { return c >= 0x300 && in_table(generated::kHf_combining_mark, c); }

bool is_word_char(uint32_t c) {
  if (c < 0x80) return c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  return in_table(generated::kHf_rust_word, c);
}

namespace {

Result<std::string> utf8proc_run(std::string_view s, int options) {
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    static_cast<utf8proc_ssize_t>(s.size()), &out,
                                    static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    return Error::invalid_argument("[tokenizer] unicode normalization failed: {}", utf8proc_errmsg(n));
  }
  std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

// A code point utf8proc would decompose but HF's (older) normalization tables do not know: HF leaves it as it is,
// and, to HF an unassigned starter, it also blocks reordering and composition across it.
bool hf_frozen(uint32_t c, bool compat) {
  if (c < 0xA0) return false;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  bool decomposes = p->decomp_seqindex != UINT16_MAX && (compat || p->decomp_type == 0);
  if (!decomposes) return false;
  return compat ? !in_table(generated::kHf_nfkd_changes, c) : !in_table(generated::kHf_nfd_changes, c);
}

// utf8proc may compose into a code point HF's tables do not know (U+11938, Unicode 13): HF keeps such pairs apart.
Status split_unknown_composites(std::string& part) {
  bool any = false;
  for (size_t i = 0; i < part.size() && !any;) {
    uint32_t c = utf8_next(part, i);
    any = c >= 0x300 && hf_frozen(c, false);
  }
  if (!any) return Status::ok();
  std::string out;
  for (size_t i = 0; i < part.size();) {
    size_t start = i;
    uint32_t c = utf8_next(part, i);
    if (c >= 0x300 && hf_frozen(c, false)) {
      PIPIT_ASSIGN_OR_RETURN(std::string d, utf8proc_run(std::string_view(part).substr(start, i - start),
                                                         UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
      out += d;
    } else {
      out.append(part, start, i - start);
    }
  }
  part = std::move(out);
  return Status::ok();
}

// A code point that no neighbour can change under NFC: a starter (ccc 0) that cannot be the second element of a
// composition (Hangul V/T jamo are composed algorithmically, so they are excluded by range).
bool nfc_boundary(uint32_t c) {
  if (c < 0x300) return true;  // below the first combining mark nothing composes backward
  if (c >= 0x1160 && c <= 0x11FF) return false;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  if (p->combining_class != 0) return false;
  return p->comb_index == UINT16_MAX || p->comb_index < 0x8000;
}

// A boundary code point that NFC leaves unchanged on its own: no canonical decomposition at all.
bool nfc_inert(uint32_t c) {
  if (c < 0xC0) return true;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  return p->decomp_seqindex == UINT16_MAX || p->decomp_type != 0;
}

// `chunk` canonically decomposed and ordered, as UTF-8, with a stable sort of each run of marks by combining class.
// utf8proc orders marks by exchanging neighbours, quadratic in a run's length (a run of 40k alternating marks:
// 5.5 s); given the ordered decomposition it makes one pass. The result is the same: canonical ordering is exactly
// a stable sort by combining class within each run of non-starters.
Result<std::string> decompose_ordered(std::string_view chunk) {
  std::vector<utf8proc_int32_t> cps;
  cps.reserve(chunk.size());
  utf8proc_int32_t buf[32];
  for (size_t i = 0; i < chunk.size();) {
    const uint32_t c = utf8_next(chunk, i);
    int last_boundclass = 0;
    const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buf, 32,
                                                       static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE),
                                                       &last_boundclass);
    if (n < 0 || n > 32)
      return Error::invalid_argument("[tokenizer] unicode normalization failed: {}", utf8proc_errmsg(n < 0 ? n : -1));
    cps.insert(cps.end(), buf, buf + n);
  }
  auto ccc = [](utf8proc_int32_t c) { return utf8proc_get_property(c)->combining_class; };
  for (size_t b = 0; b < cps.size();) {
    if (ccc(cps[b]) == 0) {
      ++b;
      continue;
    }
    size_t e = b;
    while (e < cps.size() && ccc(cps[e]) != 0) ++e;
    std::stable_sort(cps.begin() + long(b), cps.begin() + long(e),
                     [&](utf8proc_int32_t x, utf8proc_int32_t y) { return ccc(x) < ccc(y); });
    b = e;
  }
  std::string out;
  out.reserve(cps.size() * 2);
  utf8proc_uint8_t enc[4];
  for (utf8proc_int32_t c : cps) out.append(reinterpret_cast<char*>(enc), size_t(utf8proc_encode_char(c, enc)));
  return out;
}

// NFC of `s`, cut into chunks at boundary code points (NFC of a concatenation split before a boundary is the
// concatenation of the NFCs); chunks of one inert code point are copied, the rest go through utf8proc.
Result<std::string> nfc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    uint32_t c = utf8_next(s, i);
    bool single_ok = nfc_inert(c) && nfc_boundary(c);
    // Extend the chunk over the following non-boundary code points.
    while (i < s.size()) {
      size_t j = i;
      uint32_t d = utf8_next(s, j);
      if (nfc_boundary(d)) break;
      single_ok = false;
      i = j;
    }
    if (single_ok) {
      out.append(s.substr(start, i - start));
    } else {
      // a long chunk (a run of marks) is put in canonical order here first: see decompose_ordered
      std::string ordered;
      std::string_view chunk = s.substr(start, i - start);
      if (chunk.size() > 256) {
        PIPIT_ASSIGN_OR_RETURN(ordered, decompose_ordered(chunk));
        chunk = ordered;
      }
      PIPIT_ASSIGN_OR_RETURN(std::string part, utf8proc_run(chunk, UTF8PROC_STABLE | UTF8PROC_COMPOSE));
      PIPIT_TRY(split_unknown_composites(part));
      out += part;
    }
  }
  return out;
}

bool is_ascii(std::string_view s) {
  for (char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  return true;
}

}  // namespace

namespace {

Result<std::string> normalize_span(std::string_view s, NormForm form) {
  switch (form) {
    case NormForm::kNFC: return nfc(s);
    case NormForm::kNFD: return utf8proc_run(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case NormForm::kNFKC: {
      PIPIT_ASSIGN_OR_RETURN(std::string r, utf8proc_run(s, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
      PIPIT_TRY(split_unknown_composites(r));
      return r;
    }
    case NormForm::kNFKD: return utf8proc_run(s, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return std::string(s);
}

}  // namespace

Result<std::string> normalize_form(std::string_view s, NormForm form) {
  if (is_ascii(s)) return std::string(s);
  bool compat = form == NormForm::kNFKC || form == NormForm::kNFKD;
  // Normalize the spans between frozen code points, which are copied as they are.
  std::string out;
  size_t span = 0, i = 0;
  while (i < s.size()) {
    size_t start = i;
    uint32_t c = utf8_next(s, i);
    if (!hf_frozen(c, compat)) continue;
    PIPIT_ASSIGN_OR_RETURN(std::string part, normalize_span(s.substr(span, start - span), form));
    out += part;
    out.append(s.substr(start, i - start));
    span = i;
  }
  if (span == 0) return normalize_span(s, form);
  PIPIT_ASSIGN_OR_RETURN(std::string part, normalize_span(s.substr(span), form));
  out += part;
  return out;
}

std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
      ++i;
      continue;
    }
    size_t start = i;
    uint32_t c = utf8_next(s, i);
    const auto* end = std::end(generated::kHfLowercase);
    const auto* it = std::lower_bound(std::begin(generated::kHfLowercase), end, c,
                                      [](const generated::LowercaseEntry& e, uint32_t v) { return e.cp < v; });
    if (it != end && it->cp == c) out += it->lower;  // e.g. İ -> i + combining dot above
    else out.append(s, start, i - start);
  }
  return out;
}

}  // namespace pipit::tok
