// Row-interleaved panels of q4_0 / q8_0 / mxfp4 / q2_K .. q6_K / iq4_xs weights (q4_0x16, q8_0x16, q4_kx16, ...; the
// byte layout is defined in core/dtype.h): packing plain rows into panels (once, at load or in the converter) and
// reading one row back out (embedding lookups of a tied output matrix, dequantization).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace pipit {

// src: N rows of K elements of `plain` (Q4_0, Q8_0, MXFP4, Q2_K .. Q6_K, IQ4_XS), row stride src_stride bytes,
// N % kPanelRows == 0. dst: N * dtype_row_bytes(dtype_panel_of(plain), K) bytes in the panel layout.
void pack_panels(DType plain, const uint8_t* src, int64_t src_stride, int64_t N, int64_t K, uint8_t* dst);
// Rows [r0, r1) of a packed tensor (row r0 may be anywhere in a panel) back to plain blocks at dst (contiguous
// rows of K / 32 blocks).
void unpack_panel_rows(DType panel, const uint8_t* src, int64_t K, int64_t r0, int64_t r1, uint8_t* dst);

}  // namespace pipit
