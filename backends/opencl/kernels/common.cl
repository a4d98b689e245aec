// Prepended to every program. Buffers are passed as (base, byte offset) pairs: OpenCL 1.2 sub-buffers need
// device-specific offset alignment, and one arena buffer holds many tensors. OpenCL C 1.2 only: half is a storage
// type read with vload_half / written with vstore_half (no cl_khr_fp16 needed), as Adreno, Mali and PoCL accept.
#define GPTR(T, b, o) ((__global T*)((__global char*)(b) + (o)))

// Weight dtypes in the device layout (backends/opencl/device.cpp upload_weight):
//  0 f32  [N, K]
//  1 f16  [N, K]
//  2 q8_0 int8 quants [N, K], then f16 scales [N, K / 32]
//  3 q4_0 nibbles [N, K / 2] (block b of row n at byte n * K / 2 + 16 b; byte j holds element j in its low and
//         element j + 16 in its high nibble, as GGUF), then f16 scales [N, K / 32]; value = (q - 8) * scale
// Quants first, scales after: a work-item reading a row's blocks reads 16 / 32 contiguous, aligned bytes.
#define WT_F32 0
#define WT_F16 1
#define WT_Q8_0 2
#define WT_Q4_0 3

inline float wscale(__global const char* w, ulong N, ulong K, ulong n, ulong b, int wt) {
  const ulong qbytes = wt == WT_Q8_0 ? N * K : N * K / 2;
  return vload_half(n * (K / 32) + b, (__global const half*)(w + qbytes));
}

// weight (n, k) as f32
inline float wval(__global const char* w, ulong N, ulong K, ulong n, ulong k, int wt) {
  if (wt == WT_F32) return ((__global const float*)w)[n * K + k];
  if (wt == WT_F16) return vload_half(n * K + k, (__global const half*)w);
  const ulong b = k / 32, j = k % 32;
  if (wt == WT_Q8_0) return (float)((__global const char*)w)[n * K + k] * wscale(w, N, K, n, b, wt);
  const uchar byte = ((__global const uchar*)w)[n * (K / 2) + b * 16 + (j & 15)];
  const int q = j < 16 ? (byte & 15) : (byte >> 4);
  return (float)(q - 8) * wscale(w, N, K, n, b, wt);
}
