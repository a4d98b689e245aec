// The dotprod (Armv8.2-A SDOT) kernels of this folder, registered by fill_dotprod.cpp; i8mm uses them for M = 1.
#pragma once

#include "backends/cpu/kernels.h"

namespace pipit::dotprod {

void matmul_q8_0(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_0(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_k(const MatmulArgs& a, int64_t n0, int64_t n1);  // llama.cpp super-block formats
void matmul_q5_k(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q6_k(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_xs(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_mxfp4(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);  // panels (core/dtype.h)
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_mxfp4x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q6_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q2_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q3_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_xsx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_nlx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_1x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_1x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);

}  // namespace pipit::dotprod
