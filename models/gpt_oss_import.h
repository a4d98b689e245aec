// GPT-OSS experts as HF stores them -> the layout pipit's matmuls take, at checkpoint open (loader and converter:
// registered as GPT-OSS's checkpoint layout, models/checkpoint_traits.h).
//
// HF keeps each layer's experts as two fused parameters used as x @ W: mlp.experts.gate_up_proj [E, H, 2I] and
// mlp.experts.down_proj [E, I, H], either as BF16 tensors or, as the Hub ships them, MXFP4: *_blocks U8
// [E, out, in/32, 16] and *_scales U8 [E, out, in/32]. pipit's linear takes weights [out, in], so both become
//   model.layers.N.mlp.experts.gate_up_proj.weight  [E, 2I, H]   (row 2j = gate unit j, row 2j + 1 = up unit j)
//   model.layers.N.mlp.experts.down_proj.weight     [E, H, I]
// MXFP4 pairs are rebuilt as mxfp4 blocks (core/dtype.h: the scale byte, then the 16 nibble bytes in ggml's order)
// — the same 4.25 bits per weight, never widened; BF16 experts are transposed (a copy). A .pipit file already holds
// the rebuilt tensors and passes through unchanged.
#pragma once

#include "core/status.h"
#include "format/checkpoint.h"

namespace pipit {

// No-op unless c.config's model_type is gpt_oss. Errors name the tensor (a *_blocks without its *_scales, shapes
// that disagree).
Status import_gpt_oss_experts(Checkpoint& c);

}  // namespace pipit
