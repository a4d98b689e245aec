// Ops of the audio encoders (Gemma 4's conformer; backends/cpu/ops_audio.cpp). Plain scalar loops split over the
// thread pool: they are the reference, and the tower's time goes to the matmuls (linear), which they call where
// one fits (the 3x3 convolutions are im2col + linear). Kept out of ops.h so that adding them did not rebuild
// everything; same conventions (f32 activations from the arena, shapes checked with PIPIT_ASSERT).
#pragma once

#include "backends/cpu/ops.h"
#include "backends/cpu/ops_patch.h"  // clamp_ (shared with the vision towers)

namespace pipit {

void silu_(Ctx& ctx, Tensor& x);                       // x * sigmoid(x), in place
// torch GLU over the last dim: x [n, 2C] -> a * sigmoid(b), a = columns [0, C), b = [C, 2C).
Tensor glu(Ctx& ctx, const Tensor& x);

// Depthwise causal conv1d over time: x [T, C] f32, w [C, K] f32 (torch Conv1d(C, C, K, groups=C) weight [C, 1, K]),
// y[t][c] = sum_j w[c][j] * x[t - (K - 1) + j][c], inputs before t = 0 read as 0 (left pad K - 1).
Tensor depthwise_conv1d_causal(Ctx& ctx, const Tensor& x, const Tensor& w);

// torch Conv2d(Cin, Cout, 3, stride=2, padding=1, bias=False) on a channels-last input x [H, W, Cin] f32;
// w [Cout, Cin * 9] (the [Cout, Cin, 3, 3] weight flattened, any weight dtype). Returns [H', W', Cout] with
// H' = (H - 1) / 2 + 1 (same for W). Built as im2col over a block of output rows + linear, so the im2col buffer
// stays small whatever H is.
Tensor conv2d_3x3_s2(Ctx& ctx, const Tensor& x, const Tensor& w);

// Local self-attention with relative-position logits and a soft-cap (Gemma 4's audio attention, which HF computes
// over blocks of `chunk` queries with a Transformer-XL rel-shift; the same numbers, written per query): query i of
// q [T, n_head, hd] sees keys j in [i - window + 1, i], j >= 0; logit = q_i . k_j + q_i . rel_k[i - j], then
// softcap * tanh(logit / softcap) (softcap > 0), softmax over the keys it sees, times v. rel_k: [window, n_head,
// hd] f32, row d = the relative key of distance d. k, v: [T, n_head, hd] f32 contiguous. Returns [T, n_head, hd].
Tensor local_rel_attention(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel_k,
                           int window, float softcap);

}  // namespace pipit
