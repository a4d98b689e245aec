// Why a model without a vision side (Model::vision() null) refuses images although its family takes them, e.g.
// Gemma 4, whose towers are not implemented yet. The model file registers one sentence for its model_type; the
// front ends append it to their "does not take images" errors. Same pattern as chat_format.h.
#pragma once

#include <string>

namespace pipit {

void register_media_note(const char* model_type, const char* note);
const char* media_note(const std::string& model_type);  // null when the model_type registered none
// " (note)" when there is one, else "": for appending to an error message.
std::string media_note_suffix(const std::string& model_type);

struct MediaNoteRegistrar {
  MediaNoteRegistrar(const char* model_type, const char* note) { register_media_note(model_type, note); }
};

}  // namespace pipit
