// The i8mm (Armv8.6-A SMMLA) kernels of this folder, registered by fill_i8mm.cpp.
#pragma once

#include "backends/cpu/kernels.h"

namespace pipit::i8mm {

void matmul_q8_0(const MatmulArgs& a, int64_t n0, int64_t n1);  // M = 1 goes to dotprod's kernel
void matmul_q4_0(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_bf16dot(const MatmulArgs& a, int64_t n0, int64_t n1);  // BFMMLA (FEAT_BF16); x: bf16 rows

}  // namespace pipit::i8mm
