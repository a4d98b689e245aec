// GGUF -> the HF view of a checkpoint: llama.cpp tensor names and metadata mapped to HF names and an HF config.json,
// llama.cpp's mmproj files (a multimodal model's towers) merged in, and the GGUF vocabulary turned into an HF
// tokenizer.json.
//
// What convert/ knows is llama.cpp's generic llama-family layout, shared by its archs:
//  - convert_hf_to_gguf.py permutes the rows of q_proj / k_proj (weights and biases) of the archs it converts with
//    LlamaModel so its RoPE can rotate adjacent pairs: within each head, HF row j*(head_dim/2) + i becomes GGUF row
//    2i + j. We apply the inverse (a row copy, the only tensors not used in place) so HF's rotate_half RoPE applies.
//    Archs that llama.cpp runs with NEOX-style RoPE are stored unpermuted.
//  - MoE experts are stored stacked per layer ([n_expert, rows, cols]): each expert is a view of its slice.
//  - Llama 3 RoPE scaling is stored as a `rope_freqs` tensor of per-frequency factors instead of config values; the
//    HF rope_scaling (rope_type llama3: factor, low/high_freq_factor, original_max_position_embeddings) is recovered
//    from it and checked to reproduce every factor.
// What an arch does beyond that (norms stored as 1 + w, fused or reordered tensors, per-layer metadata, settings
// llama.cpp fixes in its graph code rather than the metadata) is its GgufArch record, and an mmproj projector type's
// layout its GgufProjector record: models/gguf_traits.h, registered beside each model (models/*_gguf.cpp), where
// each family's differences are listed.
// Tensors of types F32, F16, BF16, Q8_0, Q4_0 and the other block types of ggml_to_dtype (K-quants, IQ4_NL/XS, Q4_1,
// Q5_0/1, MXFP4) are views of the mapped file (their bytes are pipit's blocks, core/dtype.h); any other type is an
// error naming it.
#pragma once

#include <string>

#include "convert/checkpoint.h"
#include "format/gguf.h"

namespace pipit {

class GgufTools;

Result<Checkpoint> import_gguf(const GgufFile& f);
// mmproj: llama.cpp's vision-tower file for a multimodal model (gguf_mmproj.cpp); empty: text only.
Result<Checkpoint> open_gguf_checkpoint(const std::string& path, const std::string& mmproj = "");
// Adds an mmproj file's towers, image / audio processor and multimodal config to the checkpoint of its language
// model (`text`, imported into `c`), by the file's projector type (a registered GgufProjector).
Status add_gguf_mmproj(Checkpoint& c, const GgufFile& text, const GgufFile& mmproj);
// What a family's import hooks borrow from convert/ (models/gguf_traits.h).
const GgufTools& gguf_tools();

// The vocabulary in a GGUF file as an HF tokenizer (tokenizer.ggml.model "gpt2": byte-level BPE; "llama":
// SentencePiece-style BPE with byte fallback; another: the GgufVocab registered for it beside its family,
// models/gguf_traits.h): as parts, which the loader builds the tokenizer from and import_gguf keeps in the checkpoint,
// or as the tokenizer.json and tokenizer_config.json texts those parts write (tokenizer_parts_texts).
Result<TokenizerParts> gguf_tokenizer_parts(const GgufFile& f);
using HfTokenizerTexts = TokenizerTexts;
Result<HfTokenizerTexts> gguf_tokenizer_to_hf(const GgufFile& f);
// The end-of-generation ids of a vocabulary whose stops llama.cpp picks by their text (llama-vocab.cpp), the EOS id
// first, as its GgufVocab's eog_ids says; empty for other vocabularies.
std::vector<int64_t> gguf_vocab_eog_ids(const GgufFile& f, int64_t n_vocab);

}  // namespace pipit
