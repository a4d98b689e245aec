// The compiled tokenizer (Tokenizer::compile / load_compiled): what a .pipit stores beside tokenizer.json so that a
// load reads the vocabulary and merges as records instead of JSON. For Qwen3's 11 MB tokenizer.json the JSON path is
// ~0.2 s here - lexing 150k tokens and 150k merges, then two token lookups per merge - most of a cold start once the
// weights are read in place. The text stays in the file: it is what other readers (and older pipits) use.
//
// Bytes (integers little-endian):
//   0   8  magic "PIPITOK1"
//   8   4  u32 tree_bytes: the tokenizer.json tree with model.vocab {} and model.merges [] (JSON text)
//   12  4  u32 n_vocab, 16 4 u32 n_merges, 20 4 u32 string_bytes
//   24     the tree, then the vocab records, the merge records and the strings (tok::BpeResolved)
// A version change is a new magic: an unknown one is refused, and the loader falls back to the text.
#include <cstring>

#include "core/utf8_check.h"
#include "tokenizer/hf_tokenizer.h"

namespace pipit {

namespace {

constexpr char kMagic[8] = {'P', 'I', 'P', 'I', 'T', 'O', 'K', '1'};
constexpr size_t kHeaderBytes = 24;

}  // namespace

Result<std::string> Tokenizer::compile(std::string_view tokenizer_json) {
  tok::BpeTables tables;
  PIPIT_ASSIGN_OR_RETURN(nlohmann::json tree, parse_tokenizer_json(tokenizer_json, tables));
  PIPIT_ASSIGN_OR_RETURN(std::shared_ptr<HfTokenizer> t, HfTokenizer::create(tree, &tables));
  std::string vocab, merges, strings;
  t->model().export_resolved(vocab, merges, strings);
  // the tree is valid UTF-8 (the text was), so this writes it back as it was read
  const std::string text = tree.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const uint64_t total = kHeaderBytes + text.size() + vocab.size() + merges.size() + strings.size();
  if (total > UINT32_MAX) return Error::unsupported("[tokenizer] too large to compile ({} bytes)", total);
  std::string out(kMagic, sizeof(kMagic));
  tok::append_le32(out, uint32_t(text.size()));
  tok::append_le32(out, uint32_t(vocab.size() / tok::BpeResolved::kVocabRecord));
  tok::append_le32(out, uint32_t(merges.size() / tok::BpeResolved::kMergeRecord));
  tok::append_le32(out, uint32_t(strings.size()));
  out.reserve(size_t(total));
  out += text;
  out += vocab;
  out += merges;
  out += strings;
  return out;
}

Result<std::shared_ptr<Tokenizer>> Tokenizer::load_compiled(std::string_view c, std::string_view tokenizer_config_json) {
  if (c.size() < kHeaderBytes || std::memcmp(c.data(), kMagic, sizeof(kMagic)) != 0)
    return Error::format("[tokenizer] compiled tokenizer: unknown magic (written by another pipit version?)");
  const uint64_t tree = tok::load_le32(c.data() + 8), n_vocab = tok::load_le32(c.data() + 12),
                 n_merges = tok::load_le32(c.data() + 16), strings = tok::load_le32(c.data() + 20);
  const uint64_t need = kHeaderBytes + tree + n_vocab * tok::BpeResolved::kVocabRecord +
                        n_merges * tok::BpeResolved::kMergeRecord + strings;
  if (need != c.size())
    return Error::format("[tokenizer] compiled tokenizer: {} bytes, its header says {}", c.size(), need);
  const char* p = c.data() + kHeaderBytes;
  const std::string_view tree_text(p, size_t(tree));
  tok::BpeResolved r;
  r.vocab = reinterpret_cast<const uint8_t*>(p + tree);
  r.n_vocab = uint32_t(n_vocab);
  r.merges = r.vocab + n_vocab * tok::BpeResolved::kVocabRecord;
  r.n_merges = uint32_t(n_merges);
  r.strings = std::string_view(reinterpret_cast<const char*>(r.merges + n_merges * tok::BpeResolved::kMergeRecord),
                               size_t(strings));
  // Tokens are checked once, all together: the text they came from was UTF-8, and the tokenizer assumes it.
  if (utf8_error_offset(tree_text) != std::string_view::npos || utf8_error_offset(r.strings) != std::string_view::npos)
    return Error::format("[tokenizer] compiled tokenizer: not valid UTF-8");
  tok::BpeTables tables;
  tables.resolved = r;
  PIPIT_ASSIGN_OR_RETURN(nlohmann::json j, parse_tokenizer_json(tree_text, tables));
  PIPIT_ASSIGN_OR_RETURN(std::shared_ptr<HfTokenizer> t, HfTokenizer::create(j, &tables));
  PIPIT_ASSIGN_OR_RETURN(TokenizerConfig cfg, parse_tokenizer_config(tokenizer_config_json));
  t->set_config(std::move(cfg));
  return std::shared_ptr<Tokenizer>(std::move(t));
}

}  // namespace pipit
