// The AVX-VNNI kernels of this folder, registered by fill_avxvnni.cpp. Signatures are the table's
// (backends/cpu/kernels.h).
#pragma once

#include "backends/cpu/kernels.h"

namespace pipit::avxvnni {

void matmul_q8_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);  // panels (core/dtype.h)
void matmul_q4_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_mxfp4x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);  // K-quant panels
void matmul_q5_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q6_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q2_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q3_kx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_xsx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_iq4_nlx16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q4_1x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_1x16(const MatmulArgs& a, int64_t n0, int64_t n1);
void matmul_q5_0x16(const MatmulArgs& a, int64_t n0, int64_t n1);

}  // namespace pipit::avxvnni
