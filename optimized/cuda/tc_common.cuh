// optimized/cuda/tc_common.cuh -- what the tensor-core rungs (v2, v3) share: the chunk-major
// workspace written by their intra-chunk kernels and read by the sequential state kernel of v2.
#pragma once

#include "optimized/cuda/mma.cuh"
#include "optimized/cuda/versions.cuh"

namespace linattn::cuda::detail {

using bf16 = __nv_bfloat16;
constexpr int C = 64;
constexpr int kThreads = 256;
constexpr float kLog2e = 1.4426950408889634f;

__host__ __device__ constexpr int ldk(int KP) { return KP + 8; }
__host__ __device__ inline int vpad(int V) { return (V + 63) / 64 * 64; }

/// Chunk-major workspace of one call; (chunk c, head h) owns block cw = c * H + h of each array.
struct V2Ws {
  bf16* w;    // [cw][64][KP]  w_aux
  bf16* qg;   // [cw][64][KP]  scale * q . exp(G)
  bf16* kd;   // [cw][64][KP]  k . exp(G_C - G)
  bf16* P;    // [cw][64][64]  intra-chunk read (lower triangle incl. diagonal)
  float* u;   // [cw][64][VP]  u = A u0
  float* gC;  // [cw][KP]      exp(G_C)
};

__host__ __device__ inline V2Ws v2_ws(const KParams& p, int KP) {
  const std::int64_t blocks = std::int64_t(p.num_chunks) * p.H;
  V2Ws w;
  char* base = static_cast<char*>(p.ws);
  w.w = reinterpret_cast<bf16*>(base);
  w.qg = w.w + blocks * C * KP;
  w.kd = w.qg + blocks * C * KP;
  w.P = w.kd + blocks * C * KP;
  w.u = reinterpret_cast<float*>(w.P + blocks * C * C);
  w.gC = w.u + blocks * C * vpad(p.V);
  return w;
}


/// Benchmark knob: with LINATTN_TC_ONLY=intra (or state) set, only that kernel is launched, so the
/// benchmark can time the two kernels apart (the results are then wrong). Unset: both run.
bool skip_kernel(const char* which);
/// The sequential state kernel of v2 (used by v3 too); KP = 64 or 128.
void tc_state_launch(const Call& c, int KP);
inline int tc_pick_kp(int K) { return K <= 64 ? 64 : 128; }
std::size_t tc_workspace_bytes(const KParams& p);

}  // namespace linattn::cuda::detail
