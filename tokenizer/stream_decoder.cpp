// StreamDecoder: incremental detokenization whose pieces concatenate to exactly decode(all ids).
// Each push decodes a short window of recent ids and returns the part of its text that later ids cannot change:
//  - a trailing run of <0xNN> byte tokens is held whole (HF's ByteFallback turns the entire run into U+FFFDs
//    if any byte of it turns out invalid);
//  - trailing U+FFFD characters are held (they may be an incomplete UTF-8 sequence that the next byte completes).
// When everything decoded so far has been returned, the window restarts at its last token, kept as context: its
// own text is skipped, and it makes the next tokens decode as "not first" (Metaspace, Strip) and start at a UTF-8
// boundary (ByteLevel). Each id is decoded O(1) times, so a long generation costs O(n).
#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace pipit {
namespace {

constexpr size_t kMinWindow = 8;  // restart the window only every few ids, to amortize the context decode
const char kFffd[] = "\xEF\xBF\xBD";

bool is_byte_token(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>';
}

bool ends_with_fffd(std::string_view s, size_t end) { return end >= 3 && s.substr(end - 3, 3) == kFffd; }

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens) : tok_(tok),
                                                                              skip_special_(skip_special_tokens) {}

void StreamDecoder::reset() {
  ids_.clear();
  emitted_ = 0;
}

std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  // An id decode() drops changes nothing; a byte token extends (or starts) a held run. Either way nothing new
  // can be final yet. Once a normal token arrives, every earlier byte run is closed.
  std::string last = tok_.id_to_token(id);
  if (last.empty() || (skip_special_ && tok_.is_special(id)) || is_byte_token(last)) return "";

  std::string text = tok_.decode(ids_, skip_special_);
  size_t stable = text.size();
  while (ends_with_fffd(text, stable)) stable -= 3;
  std::string out;
  if (stable > emitted_) {
    out = text.substr(emitted_, stable - emitted_);
    emitted_ = stable;
  }
  // Restart the window at the last id once everything is out and that id can serve as context.
  if (emitted_ == text.size() && ids_.size() >= kMinWindow) {
    std::string ctx = tok_.decode(std::span<const int32_t>(&ids_.back(), 1), skip_special_);
    if (!ctx.empty() && !ends_with_fffd(ctx, ctx.size())) {
      ids_.assign(1, id);
      emitted_ = ctx.size();
    }
  }
  return out;
}

std::string StreamDecoder::flush() {
  std::string text = tok_.decode(ids_, skip_special_);
  std::string out = text.size() > emitted_ ? text.substr(emitted_) : std::string();
  reset();
  return out;
}

}  // namespace pipit
