// llama.cpp's mmproj files (a multimodal model's towers as a GGUF of their own, general.architecture "clip") merged
// with their language model's GGUF into one HF-style checkpoint. Which projector types pipit reads, and how each
// one's tensors and clip.* settings map back to HF's, is the GgufProjector registered beside its model
// (models/gguf_traits.h); this file finds it by clip.projector_type.
#include "convert/gguf_import.h"
#include "format/gguf_meta.h"
#include "models/gguf_traits.h"

namespace pipit {

Status add_gguf_mmproj(Checkpoint& c, const GgufFile& text, const GgufFile& mm) {
  const std::string ctx = "[gguf] " + mm.path();
  const GgufValue* arch = mm.find("general.architecture");
  if (!arch || arch->type != GgufType::kString || arch->s != "clip")
    return Error::format("{}: not an mmproj file (general.architecture is not 'clip')", ctx);
  const GgufValue* pt = gguf_clip_key(mm, "vision.projector_type");
  if (!pt) pt = gguf_clip_key(mm, "projector_type");
  if (!pt || pt->type != GgufType::kString) return Error::format("{}: no clip.projector_type", ctx);
  const GgufProjector* p = find_gguf_projector(pt->s);
  if (!p) {
    std::string names;
    for (const auto& n : gguf_projector_names()) names += (names.empty() ? "" : ", ") + n;
    return Error::unsupported("{}: projector type '{}' is not supported ({} are)", ctx, pt->s, names);
  }
  return p->add(c, text, mm, gguf_tools());
}

Result<Checkpoint> open_gguf_checkpoint(const std::string& path, const std::string& mmproj) {
  PIPIT_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
  PIPIT_ASSIGN_OR_RETURN(Checkpoint c, import_gguf(f));
  if (mmproj.empty()) return c;
  PIPIT_ASSIGN_OR_RETURN(GgufFile mm, GgufFile::open(mmproj));
  PIPIT_TRY(add_gguf_mmproj(c, f, mm));
  return c;
}

}  // namespace pipit
