// Lookups over the generated HF property tables: a two-level table for the letter/number/space classes that the
// fast pre-tokenizers test on every character, binary search for the rest.
#include "tokenizer/unicode_props.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_map>
#include <vector>

namespace pipit::tok {
namespace {

// Two-level table: 128-code-point blocks, identical blocks shared.
struct ClassTable {
  static constexpr uint32_t kShift = 7, kBlock = 1u << kShift, kBlocks = 0x110000 >> kShift;
  std::vector<uint16_t> index;  // block -> offset / kBlock into data
  std::vector<uint8_t> data;

  ClassTable() {
    std::vector<uint8_t> flat(0x110000, static_cast<uint8_t>(CharClass::kOther));
    auto fill = [&](const generated::CodeRange* r, size_t n, CharClass c) {
      for (size_t i = 0; i < n; ++i)
        for (uint32_t cp = r[i].first; cp <= r[i].last; ++cp) flat[cp] = static_cast<uint8_t>(c);
    };
    fill(generated::kHf_L, std::size(generated::kHf_L), CharClass::kLetter);
    fill(generated::kHf_N, std::size(generated::kHf_N), CharClass::kNumber);
    fill(generated::kHf_s, std::size(generated::kHf_s), CharClass::kSpace);
    index.resize(kBlocks);
    std::unordered_map<std::string, uint16_t> seen;
    for (uint32_t b = 0; b < kBlocks; ++b) {
      std::string key(reinterpret_cast<const char*>(flat.data() + b * kBlock), kBlock);
      auto [it, fresh] = seen.emplace(key, static_cast<uint16_t>(data.size() >> kShift));
      if (fresh) data.insert(data.end(), key.begin(), key.end());
      index[b] = it->second;
    }
  }
};

const ClassTable& class_table() {
  static const ClassTable t;
  return t;
}

std::string loose(std::string_view name) {  // Oniguruma matches property names loosely
  std::string s;
  for (char c : name)
    if (c != '_' && c != ' ' && c != '-') s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return s;
}

const generated::HfProperty* table_entry(const std::string& name) {
  for (const auto& p : generated::kHfProperties)
    if (name == p.name) return &p;
  return nullptr;
}

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp >= 0x110000) return CharClass::kOther;
  const ClassTable& t = class_table();
  return static_cast<CharClass>(
      t.data[(static_cast<uint32_t>(t.index[cp >> ClassTable::kShift]) << ClassTable::kShift) |
             (cp & (ClassTable::kBlock - 1))]);
}

const generated::HfProperty* hf_property(std::string_view name) {
  static const struct { const char* alias; const char* name; } kAliases[] = {
      {"l", "L"}, {"letter", "L"}, {"lu", "Lu"}, {"uppercaseletter", "Lu"}, {"ll", "Ll"}, {"lowercaseletter", "Ll"},
      {"lt", "Lt"}, {"titlecaseletter", "Lt"}, {"lm", "Lm"}, {"modifierletter", "Lm"}, {"lo", "Lo"},
      {"otherletter", "Lo"}, {"n", "N"}, {"number", "N"}, {"nd", "Nd"}, {"decimalnumber", "Nd"}, {"nl", "Nl"},
      {"letternumber", "Nl"}, {"no", "No"}, {"othernumber", "No"}, {"p", "P"}, {"punctuation", "P"},
      {"punct", "P"}, {"s", "S"}, {"symbol", "S"}, {"m", "M"}, {"mark", "M"}, {"combiningmark", "M"},
      {"z", "Z"}, {"separator", "Z"}};
  std::string key = loose(name);
  for (auto& a : kAliases)
    if (key == a.alias) return table_entry(a.name);
  return nullptr;
}

const generated::HfProperty* hf_escape_class(char c) {
  if (c != 'w' && c != 'd' && c != 's') return nullptr;
  return table_entry(std::string(1, c));
}

bool in_property(const generated::HfProperty& p, uint32_t cp) {
  const generated::CodeRange* end = p.ranges + p.n_ranges;
  const generated::CodeRange* it =
      std::upper_bound(p.ranges, end, cp, [](uint32_t v, const generated::CodeRange& r) { return v < r.first; });
  return it != p.ranges && (it - 1)->last >= cp;
}

}  // namespace pipit::tok
