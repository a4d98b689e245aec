// Row-interleaved panels of q4_0 / q8_0 / mxfp4 / q2_K .. q6_K / iq4_xs / iq4_nl weights (q4_0x16, q8_0x16, ...; the
// byte layout is defined in core/dtype.h): packing plain rows into panels (once, at load or in the converter) and
// reading one row back out (embedding lookups of a tied output matrix, dequantization).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace pipit {

// The panel dtype the loader packs `plain` into (dtype_panel_of; plain types without panels map to themselves).
constexpr DType panel_dtype_for(DType plain) { return dtype_panel_of(plain); }
// A q5_0 block as the q8_0 block of the same values (d kept, qs[i] = q_i - 16): exact, the scalar reference's q5_0 dot.
void q5_0_to_q8_0(const BlockQ5_0& b, BlockQ8_0& out);

// src: N rows of K elements of `plain` (Q4_0, Q8_0, Q5_0, MXFP4, Q2_K .. Q6_K, IQ4_XS, IQ4_NL, Q4_1, Q5_1), row
// stride src_stride bytes, N % kPanelRows == 0. dst: N * dtype_row_bytes(panel_dtype_for(plain), K) bytes in the
// panel layout.
void pack_panels(DType plain, const uint8_t* src, int64_t src_stride, int64_t N, int64_t K, uint8_t* dst);
// Rows [r0, r1) of a packed tensor (row r0 may be anywhere in a panel) back to plain blocks at dst (contiguous
// rows of K / 32 blocks).
void unpack_panel_rows(DType panel, const uint8_t* src, int64_t K, int64_t r0, int64_t r1, uint8_t* dst);

}  // namespace pipit
