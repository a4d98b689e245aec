// `-m org/name` as `hf download org/name` (or transformers' from_pretrained) leaves it: the snapshot folder in the
// Hugging Face cache, so a model downloaded once for Python runs here without its path.
// Cache location, as huggingface_hub reads it: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. The snapshot is the one refs/main names, else the
// only one there. Non-goals: downloading, revisions other than main, the cache's file locks.
#pragma once

#include <string>

namespace pipit {

// A Hub id: "org/name", one '/', letters, digits and -_. only (not a path such as ./x/y or /x).
bool looks_like_hub_id(const std::string& path);
// The cache's hub folder (whether or not it exists).
std::string hf_hub_cache_dir();
// `path` itself when it exists or is not a Hub id; else the cached snapshot folder, or "" when it is not cached.
std::string resolve_model_path(const std::string& path);

}  // namespace pipit
