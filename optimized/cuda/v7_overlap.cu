// optimized/cuda/v7_overlap.cu -- rung 7 of the CUDA forward ladder (written in session 10, `best` in
// sessions 11-12): v4 for DeltaNet and GDN with the intra-chunk kernel's shared arrays overlapped by
// lifetime, so that 3 blocks of 256 threads fit per SM instead of 2 (RESULTS.md "Forward rung 7").
// Its intra kernel also serves rung 9 (kLean: rung 6's lean outputs), rung 10 (kPdlWait: launched as a
// programmatic dependent) and, since session 14, the saving forward and backward rung 18's prepare (kA: A
// written too, as rung 4's intra kernel writes it): instantiations of the same kernel whose other values are
// rung 7's.
//
// Measured (H200, session 11 calls 1-2, bench/logs_session11/): bit for bit with v4 (177 assertions), the
// properties pass, memcheck 0 errors, racecheck 0 hazards. Intra kernel alone 0.444 -> 0.405 ms (DeltaNet)
// and 0.483 -> 0.439 (GDN) at B=8 T=4096 H=16 K=V=128: the hypothesis (0.40-0.45) held. Whole forward, one
// process with fla: DeltaNet 0.937 -> 0.916 (fla 1.009), GDN 0.976 -> 0.953 (fla 0.849); B=1 T=32768:
// 1.478 -> 1.437 (fla 1.561), 1.510 -> 1.465 (fla 1.453). GDN is still slower than fla.
// Session 14 (calls 3-4, bench/logs_session14/): the row stride of the float32 sL / sA, 65 -> 72 (V7Smem::LDF:
// the mma fragment accesses were 4-way bank conflicts). Same values, so still v4's bits (193 assertions);
// intra kernel alone, B=8: DeltaNet 0.405 -> 0.385, GDN 0.438 -> 0.416 (rung 9's: 0.379 -> 0.361, 0.408 ->
// 0.382).
// Session 16 (calls 3-4, bench/logs_session16/): fewer instructions for the same values -- the E1 load loop's
// global offsets advance by a constant per sweep instead of a 64-bit product per row, sL and A's off-diagonal
// blocks are zeroed by 16-byte stores, A's hi / lo split takes four columns a step, and L and P are written a
// column pair at a time. Rung 9's intra kernel alone, two builds in one process each time: GDN 0.383 -> 0.352 ms
// and DeltaNet 0.363 -> 0.336 (call 3: the first three), then 0.351 -> 0.348 and 0.335 -> 0.334 (call 4: the
// column pairs). The kernel issues about one instruction every two cycles per scheduler and waits at barriers;
// DRAM is not its limit. The bit tests against rungs 4 and 6 and the saved tests pass (calls 3-4).
//
// Why (session 7 ncu, RESULTS.md "Forward rung 6"): v4's tci::intra<128, GDN> takes 113,664 B of dynamic
// shared memory, 2 blocks per SM, and stalls mostly at its barriers (phases done by few warps: the
// cumsum on warp 0, A's diagonal blocks on warps 0-1). More resident blocks hide those stalls.
//
// What changes against v4 (tc_common.cuh, intra_body with V4Levels, gate none or scalar): only where
// each array lives and in which barrier interval (epoch) each independent loop runs; every value is
// computed by the same expressions from the same operands (SPEC section 4, steps 1-2; the paper's
// Eqs.14-17 in chunked form), so o and the final state are v4's bit for bit (test_cuda_forward.cu).
// Epochs (barrier-separated, the same 9 + 2 VP/64 __syncthreads as v4, none added):
//   E1 loads k, q (sK, sQ), g, beta; zero sL, sP   E2 cumsum of g (warp 0)
//   E3 L, P by tensor cores; q~ = scale q exp(G) to the workspace (v4: in E8)
//   E4 A's diagonal blocks (warps 0-1); A's other blocks zeroed (v4: in E1); P to the workspace (v4: E8)
//   E5-E7 A's off-diagonal levels (scratch sT)   E8 A split hi / lo; e = beta k exp(G), k~, exp(G_C)
//   E9 w_aux = A e staged   E10, E11 (per 64 value columns) w_aux out, u0 hi / lo, u = A u0
// Layout (bytes; R = max(64 x LDK bf16, 64 x LDF float32), LDF = 72 since session 14, 65 before):
//   [0, tile)        sK (E1-E8), then u0 lo (E10-E11)
//   R1               sQ (E1-E3), then sA (E4-E8), then w_aux staging (E9-E10)
//   R2               sL (E1-E7), then sE: e (E8-E9), then u0 hi (E10-E11)
//   R3 (18,432)      sP (E1-E4) and sT (E5-E7), then sAh, sAl (E8-)
//   512              sBeta, sG
// KP = 128: 73,216 B (71,168 with LDF 65; v4 113,664); KP = 64: 65,024 B (61,440; v4 89,088): 3 blocks per
// SM (228 KB, 1 KB reserved per block). Range: bf16 inputs, 16 <= K <= 128, gate none or scalar; every other call runs
// what `best` runs (v4 where v4 takes the call, else v1), so v7 takes every call. The state kernel is
// v4's (tc_state_launch), reading the same workspace.
#include <algorithm>
#include <type_traits>
#include <string>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {
namespace {

using tci::pack8;
using tci::st_global16;
using tci::to_f;
using tci::unpack8;

/// Rung 7's shared layout (byte offsets; file comment). Arrays in one region never live in the same epoch.
template <int KP>
struct V7Smem {
  static constexpr int LDK = ldk(KP);
  static constexpr int tile = 64 * LDK * 2;
  // Row stride (floats) of sL and sA. v4's 65 suits column walks, but this kernel reaches them only as mma
  // fragments (row g8 / column 2 t4, and transposed for B), by rows and as broadcasts: there 65 meant 4-way
  // bank conflicts (session 14, call 3's ncu: 12.9 M of 55.7 M shared wavefronts excessive). At 72 a fragment's pair of
  // columns is one conflict-free 8-byte access (ptxas merges them) and a transposed fragment 2-way: 2.2 M
  // excessive, intra kernel 5% faster (call 4: GDN 0.408 -> 0.382 ms in rung 9; 68 gave 4.1 M, 0.386).
  static constexpr int LDF = 72;
  static constexpr int fmat = 64 * LDF * 4;  // sL, sA: float32 [64][LDF]
  static constexpr int R = tile > fmat ? tile : fmat;
  static constexpr int sK = 0;          // also u0 lo
  static constexpr int sQ = sK + tile;  // R1
  static constexpr int sA = sQ;
  static constexpr int sW = sQ;         // w_aux staging
  static constexpr int sL = sQ + R;     // R2
  static constexpr int sE = sL;         // e, then u0 hi
  static constexpr int sP = sL + R;     // R3
  static constexpr int sT = sP + 64 * 72 * 2;
  static constexpr int sAh = sP;
  static constexpr int sAl = sAh + 64 * 72 * 2;
  static constexpr int sBeta = sAl + 64 * 72 * 2;
  static constexpr int sG = sBeta + 64 * 4;
  static constexpr int bytes = sG + 64 * 4;
  static_assert(sT + 8 * 16 * 9 * 4 <= sBeta, "sT must fit in R3 beside sP");
  static_assert(3 * (bytes + 1024) <= 228 * 1024, "3 blocks per SM");
  static_assert(bytes == (KP == 128 ? 73216 : KP == 64 ? 65024 : bytes), "the file comment's sizes");
};

/// v4's intra_body for gate none / scalar (CH = false, tc_inverse; a_out with kA, else unused) with V7Smem's layout and
/// the epochs of the file comment. Per value the arithmetic is v4's. kLean (forward rung 9, v9_lean_overlap.cu):
/// rung 6's lean outputs -- no q~ and k~ tiles; G_i, the row's cumulative log2 decay, to lean_g instead
/// (E3) -- so that rung 6's lean state kernel reads q and k from the inputs; every other value as kLean =
/// false, which is rung 7 (v4 with kLean = false) unchanged. kPdlWait (forward rung 10, v10_pipeline.cu,
/// which launches this kernel as a programmatic dependent of the previous segment's state kernel): block
/// (0, 0) ends with griddepcontrol.wait, so that this grid completes only after that state kernel has
/// completed and its writes (the segment's final state) are visible; every value as without it. kA (since
/// session 14: the saving forward, and backward rung 18's prepare in this range): A = (I + L)^-1 also to
/// a_out ([B * T * H, 64] float32, row (token * H + head), rows past a ragged chunk's end not written), as
/// v4's intra kernel writes it (tc_common.cuh intra_body's a_out); a_out is unused otherwise. Since session 15
/// kA also writes lean_g (as kLean does, beside q~ and k~), which the lean state kernels of the saving forward
/// (v2_state_lean_save) and of the backward's recompute (v2_state_bwd_lean) read where forward rung 9 is `best`.
template <int KP, int GATE, class Tg, bool kLean = false, bool kPdlWait = false, bool kA = false>
__global__ void __launch_bounds__(kThreads) intra_v7(KParams p, float* a_out) {
  using S = V7Smem<KP>;
  constexpr int LDF = S::LDF;
  constexpr int LDK = S::LDK;
  extern __shared__ __align__(16) char smem[];
  bf16* sK = reinterpret_cast<bf16*>(smem + S::sK);
  bf16* sQ = reinterpret_cast<bf16*>(smem + S::sQ);
  bf16* sW = reinterpret_cast<bf16*>(smem + S::sW);
  bf16* sE = reinterpret_cast<bf16*>(smem + S::sE);
  float* sL = reinterpret_cast<float*>(smem + S::sL);
  float* sA = reinterpret_cast<float*>(smem + S::sA);
  float* sT = reinterpret_cast<float*>(smem + S::sT);
  bf16* sAh = reinterpret_cast<bf16*>(smem + S::sAh);
  bf16* sAl = reinterpret_cast<bf16*>(smem + S::sAl);
  bf16* sP = reinterpret_cast<bf16*>(smem + S::sP);
  float* sBeta = reinterpret_cast<float*>(smem + S::sBeta);
  float* sG = reinterpret_cast<float*>(smem + S::sG);

  const int K = p.K, H = p.H, h = blockIdx.y, c = blockIdx.x;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* k = static_cast<const bf16*>(p.k);
  const Tg* gg = static_cast<const Tg*>(p.g);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  int tok0, Lc;
  chunk_of(p, c, tok0, Lc);
  auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
  const V2Ws ws = v2_ws(p, KP);
  const std::int64_t cw = std::int64_t(c) * H + h;
  const int VP = vpad(p.V);
  const float scale = p.scale;

  // ---- E1: one batch of loads (v4's phase 1); sL and sP zeroed (disjoint from sK, sQ). sA lives in
  // sQ's bytes and is zeroed in E4.
  // A thread's 16-byte column d8 is the same in every sweep (kThreads is a multiple of KP / 8) and its row
  // advances by RS, so the global offset advances by RS H K: one 64-bit add per sweep instead of the row's
  // product (session 16: this loop was 7% of the kernel's instructions, mostly that address arithmetic).
  const bool vec_k = K % 8 == 0;
  {
    constexpr int PK = KP / 8, RS = kThreads / PK;
    static_assert(kThreads % PK == 0 && 64 % RS == 0, "a fixed column per thread, whole sweeps");
    const int d8 = (tid % PK) * 8, i0 = tid / PK;
    const std::int64_t step = std::int64_t(RS) * H * K;
    std::int64_t off = row(i0) * K + d8;  // element offset of (token tok0 + i, head h, channel d8)
    for (int i = i0; i < 64; i += RS, off += step) {
      const bool in = i < Lc && d8 < K;
      if (vec_k) {
        cp_async16(sK + i * LDK + d8, in ? k + off : k, in ? 16 : 0);
        cp_async16(sQ + i * LDK + d8, in ? q + off : q, in ? 16 : 0);
      } else {
        for (int e = 0; e < 8; ++e) {
          const bool ok = in && d8 + e < K;
          sK[i * LDK + d8 + e] = ok ? k[off + e] : __float2bfloat16(0.f);
          sQ[i * LDK + d8 + e] = ok ? q[off + e] : __float2bfloat16(0.f);
        }
      }
    }
  }
  if (tid < 64) sG[tid] = (GATE == kGateScalar && tid < Lc) ? ld(gg + row(tid)) : 0.f;
  if (tid >= 64 && tid < 128) sBeta[tid - 64] = tid - 64 < Lc ? ld(beta + row(tid - 64)) : 0.f;
  cp_async_commit();
  tci::VTile vt;
  tci::load_vtile<false, Tg>(vt, p, tok0, Lc, h, 0);
  for (int idx = tid; idx < 64 * LDF / 4; idx += kThreads) reinterpret_cast<float4*>(sL)[idx] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int idx = tid; idx < 64 * 72 / 8; idx += kThreads)
    reinterpret_cast<uint4*>(sP)[idx] = make_uint4(0, 0, 0, 0);
  cp_async_wait<0>();
  __syncthreads();

  // ---- E2: cumulative log-decays within the chunk, in log2 units (warp 0).
  if (GATE == kGateScalar) {
    if (warp == 0) {
      float a = sG[lane], b = sG[lane + 32];
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float x = __shfl_up_sync(0xffffffffu, a, o), y = __shfl_up_sync(0xffffffffu, b, o);
        if (lane >= o) a += x, b += y;
      }
      b += __shfl_sync(0xffffffffu, a, 31);
      sG[lane] = a * kLog2e, sG[lane + 32] = b * kLog2e;
    }
  }
  __syncthreads();
  auto Gs = [&](int i) { return GATE == kGateScalar ? sG[i] : 0.f; };

  // ---- E3: L (strictly lower) and P (lower incl. diagonal); then q~ = scale q exp(G) to the
  // workspace (v4's phase 5 loop, its q part), the last read of sQ.
  {
    const int mi = warp >> 1, nh = warp & 1;
    float kk[4][4] = {}, qk[4][4] = {};
    if (32 * nh <= 16 * mi + 15) {
      mma_kk_qk<KP>(kk, qk, sK, sQ, LDK, mi, nh);
      // Element (i, j) of the fragment: L = beta_i (k_i . k_j) exp(G_i - G_j) for j < i, P = scale (q_i . k_j)
      // exp(G_i - G_j) for j <= i (v4's expressions), written a column pair (j, j + 1) at a time: one 8-byte
      // store to sL, one 4-byte store of two bf16 to sP (session 16; the same values; sP's stores halved, sL's pair may already have been merged by ptxas).
      const int ia = 16 * mi + g8;  // rows ia (fragment elements 0, 1) and ia + 8 (elements 2, 3)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int j = 32 * nh + 8 * nt + 2 * t4;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int i = ia + 8 * hh;
          const float ex0 = j <= i ? exp2f(Gs(i) - Gs(j)) : 0.f;
          const float ex1 = j + 1 <= i ? exp2f(Gs(i) - Gs(j + 1)) : 0.f;
          *reinterpret_cast<float2*>(sL + i * LDF + j) =
              make_float2(j < i ? sBeta[i] * kk[nt][2 * hh] * ex0 : 0.f, j + 1 < i ? sBeta[i] * kk[nt][2 * hh + 1] * ex1 : 0.f);
          *reinterpret_cast<unsigned*>(sP + i * 72 + j) =
              pack_bf16(j <= i ? scale * qk[nt][2 * hh] * ex0 : 0.f, j + 1 <= i ? scale * qk[nt][2 * hh + 1] * ex1 : 0.f);
        }
      }
    }
  }
  if constexpr (kLean || kA) {  // kA: the saving forward's lean state kernel and the lean recompute read it
    if (tid < 64) lean_g(p, KP)[cw * 64 + tid] = Gs(tid);  // G_i in log2 units (0: DeltaNet), as rung 6
  }
  if constexpr (!kLean) {
  for (int idx = tid; idx < 64 * (KP / 8); idx += kThreads) {
    const int i = idx / (KP / 8), d8 = (idx % (KP / 8)) * 8;
    float qv[8], G[8];
    unpack8(*reinterpret_cast<const uint4*>(sQ + i * LDK + d8), qv);
#pragma unroll
    for (int t = 0; t < 8; ++t) G[t] = Gs(i);
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const float eg = exp2f(G[t]);
      qv[t] = scale * qv[t] * eg;
    }
    st_global16(ws.qg + (cw * 64 + i) * KP + d8, pack8(qv));
  }
  }
  __syncthreads();  // E3 | E4: sQ's last read before sA, in its bytes, is written

  // ---- E4: A = (I + L)^-1, diagonal 16 x 16 blocks by float32 forward substitution (warps 0-1);
  // meanwhile the other blocks of A (and its pad columns 64 to LDF - 1) zeroed as v4 zeroes all of A in phase 1, and
  // P to the workspace (v4 copies it in phase 5).
  if (warp < 2) {
    const int I = 2 * warp + (lane >> 4), j = lane & 15;
    const float* Lb = sL + (16 * I) * LDF + 16 * I;
    float a[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) a[i] = i == j ? 1.f : 0.f;
#pragma unroll
    for (int i = 1; i < 16; ++i) {
      float s = 0.f;
#pragma unroll
      for (int m = 0; m < i; ++m) s += Lb[i * LDF + m] * a[m];
      if (i > j) a[i] = -s;
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) sA[(16 * I + i) * LDF + 16 * I + j] = a[i];
  }
  {  // every element outside A's diagonal blocks, columns 64 to LDF - 1 included: 16-byte stores, 4 threads a row
    static_assert(kThreads == 4 * 64 && LDF % 4 == 0, "4 threads per row of sA");
    const int i = tid >> 2;
    for (int c4 = tid & 3; c4 < LDF / 4; c4 += 4)  // the 4 columns 4 c4.. lie in one 16-column block
      if ((i >> 4) != (c4 >> 2)) reinterpret_cast<float4*>(sA + i * LDF)[c4] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  for (int idx = tid; idx < 64 * 8; idx += kThreads) {
    const int i = idx >> 3, j8 = (idx & 7) * 8;
    *reinterpret_cast<uint4*>(ws.P + (cw * 64 + i) * 64 + j8) = *reinterpret_cast<const uint4*>(sP + i * 72 + j8);
  }
  __syncthreads();

  // ---- E5-E7: A's off-diagonal blocks on tensor cores by levels (v4 revision 3); sT in R3 beside
  // sP (which is dead after E4).
  {
    float* sTw = sT + warp * (16 * 9);
    for (int lev = 1; lev < 4; ++lev) {
      const int nb = 4 - lev, blk = warp >> 1;
      if (blk < nb) {
        const int I = lev + blk, J = I - lev, n0 = 16 * J + 8 * (warp & 1);
        float t[4] = {};
        for (int M = J; M < I; ++M) {
          unsigned ah[4], al[4], bh[2], bl[2];
          tci::frag_a_f32(ah, al, sL, LDF, 16 * I, 16 * M, g8, t4);
          tci::frag_b_f32(bh, bl, sA, LDF, 16 * M, n0, g8, t4);
          tci::mma_hilo3(t, ah, al, bh, bl);
        }
        sTw[g8 * 9 + 2 * t4] = t[0], sTw[g8 * 9 + 2 * t4 + 1] = t[1];
        sTw[(g8 + 8) * 9 + 2 * t4] = t[2], sTw[(g8 + 8) * 9 + 2 * t4 + 1] = t[3];
        __syncwarp();
        float a2[4] = {};
        unsigned ah[4], al[4], bh[2], bl[2];
        tci::frag_a_f32(ah, al, sA, LDF, 16 * I, 16 * I, g8, t4);
        tci::frag_b_f32(bh, bl, sTw, 9, 0, 0, g8, t4);
        tci::mma_hilo3(a2, ah, al, bh, bl);
        sA[(16 * I + g8) * LDF + n0 + 2 * t4] = -a2[0], sA[(16 * I + g8) * LDF + n0 + 2 * t4 + 1] = -a2[1];
        sA[(16 * I + g8 + 8) * LDF + n0 + 2 * t4] = -a2[2], sA[(16 * I + g8 + 8) * LDF + n0 + 2 * t4 + 1] = -a2[3];
        __syncwarp();  // sTw is rewritten at the next level
      }
      __syncthreads();  // level lev's blocks of A before the next level; after level 3: sL's, sT's last reads
    }
  }

  // ---- E8: A split hi / lo into sAh, sAl (R3: sP and sT are dead); e = beta k exp(G) into sE (R2: sL
  // is dead), k~ = k exp(G_C - G) and exp(G_C) to the workspace (v4's phase 5 without its q part).
  if constexpr (kA)  // v4's a_out loop (tc_common.cuh intra_body), rows LDF apart here
    for (int idx = tid; idx < Lc * 64; idx += kThreads) a_out[row(idx >> 6) * 64 + (idx & 63)] = sA[(idx >> 6) * LDF + (idx & 63)];
  split_a_hilo<LDF>(sA, sAh, sAl, tid);  // four columns a step at LDF = 72 (tc_common.cuh)
  for (int idx = tid; idx < 64 * (KP / 8); idx += kThreads) {
    const int i = idx / (KP / 8), d8 = (idx % (KP / 8)) * 8;
    float kv[8], G[8], GC[8], e[8];
    unpack8(*reinterpret_cast<const uint4*>(sK + i * LDK + d8), kv);
#pragma unroll
    for (int t = 0; t < 8; ++t) G[t] = Gs(i), GC[t] = Gs(63);
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const float eg = exp2f(G[t]);
      e[t] = sBeta[i] * kv[t] * eg;
      kv[t] = kv[t] * exp2f(GC[t] - G[t]);
    }
    *reinterpret_cast<uint4*>(sE + i * LDK + d8) = pack8(e);
    if constexpr (!kLean) st_global16(ws.kd + (cw * 64 + i) * KP + d8, pack8(kv));
    if (i == 0) {
      float gcv[8];
#pragma unroll
      for (int t = 0; t < 8; ++t) gcv[t] = exp2f(GC[t]);
      st_global16(ws.gC + cw * KP + d8, make_float4(gcv[0], gcv[1], gcv[2], gcv[3]));
      st_global16(ws.gC + cw * KP + d8 + 4, make_float4(gcv[4], gcv[5], gcv[6], gcv[7]));
    }
  }
  __syncthreads();

  // ---- E9: w_aux = A (e . exp(G)), staged in sW (R1: sA is dead).
  {
    constexpr int NT = KP / 16;
    const int mi = warp >> 1, nb = (warp & 1) * (KP / 2);
    float acc[NT][4] = {};
    mma_lower_a_hilo<NT, false>(acc, sAh, sAl, sE, nullptr, LDK, mi, nb);
    store_frag_bf16(acc, sW, LDK, mi, nb, g8, t4);
  }
  __syncthreads();
  {  // w_aux to the workspace: a fixed 16-byte column per thread, rows RS apart (one pointer, constant steps)
    constexpr int PK = KP / 8, RS = kThreads / PK;
    const int d8 = (tid % PK) * 8, i0 = tid / PK;
    bf16* const wdst = ws.w + (cw * 64 + i0) * KP + d8;
#pragma unroll
    for (int it = 0; it < 64 / RS; ++it)
      *reinterpret_cast<uint4*>(wdst + it * RS * KP) = *reinterpret_cast<const uint4*>(sW + (i0 + it * RS) * LDK + d8);
  }

  // ---- E10, E11 per value tile: u = A u0, u0 hi in sE (e is dead), lo in sK (k is dead).
  // This warp's fragment (m-tile mi, columns nb..) and this thread's u rows (16 mi + g8 and + 8) and first column,
  // as one pointer for every value tile.
  const int mi = warp >> 1, nb = (warp & 1) * 32;
  float* const urow = ws.u + (cw * 64 + 16 * mi + g8) * VP + nb + 2 * t4;
  for (int v0 = 0; v0 < VP; v0 += 64) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int gi = tid + 256 * s, i = gi >> 3, c8 = (gi & 7) * 8;
      float vv[8], hi[8], lo[8];
      unpack8(vt.v[s], vv);
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const float u0 = sBeta[i] * vv[t];
        hi[t] = to_f(__float2bfloat16(u0));
        lo[t] = u0 - hi[t];
      }
      *reinterpret_cast<uint4*>(sE + i * LDK + c8) = pack8(hi);
      *reinterpret_cast<uint4*>(sK + i * LDK + c8) = pack8(lo);
    }
    if (v0 + 64 < VP) tci::load_vtile<false, Tg>(vt, p, tok0, Lc, h, v0 + 64);
    __syncthreads();
    float acc[4][4] = {};
    mma_lower_a_hilo<4, true>(acc, sAh, sAl, sE, sK, LDK, mi, nb);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {  // rows 16 mi + g8 (+ 8), columns v0 + nb + 8 nt + 2 t4 (+ 1)
      *reinterpret_cast<float2*>(urow + v0 + 8 * nt) = make_float2(acc[nt][0], acc[nt][1]);
      *reinterpret_cast<float2*>(urow + 8 * VP + v0 + 8 * nt) = make_float2(acc[nt][2], acc[nt][3]);
    }
    __syncthreads();
  }
  if constexpr (kPdlWait) {
#if __CUDA_ARCH__ >= 900
    if (blockIdx.x == 0 && blockIdx.y == 0) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  }
}

bool in_v7_range(const Call& c) {
  return c.dtype == 1 && c.p.K >= 16 && c.p.K <= 128 && c.p.gate != kGateChannel;
}

/// kPdl: launched as a programmatic dependent of the previous kernel in the stream (rung 10), the kernel's
/// kPdlWait instantiation.
template <int KP, bool kLean = false, bool kPdl = false, bool kA = false>
void launch_intra_kp(const Call& c, float* a_out = nullptr) {
  // kA launches (the saving forward, rung 18's prepare) never consult LINATTN_TC_ONLY: what they write is kept.
  if ((kA || !skip_kernel("intra")) && c.p.num_chunks > 0) {
    auto go = [&](auto tg) {
      using Tg = decltype(tg);
      constexpr int bytes = V7Smem<KP>::bytes;
      auto kern = c.p.gate == kGateScalar ? intra_v7<KP, kGateScalar, Tg, kLean, kPdl, kA>
                                          : intra_v7<KP, kGateNone, Tg, kLean, kPdl, kA>;
      LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
      // The largest shared-memory carveout, so that the driver gives the SM room for 3 blocks.
      LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                              int(cudaSharedmemCarveoutMaxShared)));
      if constexpr (kPdl) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(c.p.num_chunks, c.p.H);
        cfg.blockDim = dim3(kThreads);
        cfg.dynamicSmemBytes = bytes;
        cfg.stream = c.stream;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        LINATTN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kern, c.p, a_out));
      } else {
        kern<<<dim3(c.p.num_chunks, c.p.H), kThreads, bytes, c.stream>>>(c.p, a_out);
      }
      LINATTN_CUDA_CHECK(cudaGetLastError());
    };
    if (c.gate_dtype == 0) go(float{});
    else go(bf16{});
  }
}

template <int KP>
void launch_kp(const Call& c) {
  launch_intra_kp<KP>(c);
  tc_state_launch(c, KP);
}

}  // namespace

std::size_t v7_workspace_bytes(const KParams& p) { return std::max(tc_workspace_bytes(p), v1_workspace_bytes(p)); }

void v7_launch(Call c) {
  if (!in_v7_range(c)) {
    if (v4_supports(c, nullptr)) return v4_launch(c);
    return v1_launch(c);
  }
  if (tc_pick_kp(c.p.K) == 64) return launch_kp<64>(c);
  return launch_kp<128>(c);
}

bool v7_in_range(const Call& c) { return in_v7_range(c); }

void v7_intra_launch(const Call& c, int KP) {
  if (KP == 64) return launch_intra_kp<64>(c);
  launch_intra_kp<128>(c);
}

void v7_intra_lean_launch(const Call& c, int KP) {
  if (KP == 64) return launch_intra_kp<64, true>(c);
  launch_intra_kp<128, true>(c);
}

void v7_intra_launch_with_A(const Call& c, float* a_out) {
  if (tc_pick_kp(c.p.K) == 64) return launch_intra_kp<64, false, false, true>(c, a_out);
  launch_intra_kp<128, false, false, true>(c, a_out);
}

void v7_intra_pdl_launch(const Call& c, int KP) {
  if (KP == 64) return launch_intra_kp<64, false, true>(c);
  launch_intra_kp<128, false, true>(c);
}

std::size_t v7_intra_smem_bytes(int KP) { return KP == 64 ? V7Smem<64>::bytes : V7Smem<128>::bytes; }

int v7_intra_pdl_regs(int KP) {  // the most of its instantiations at KP (gate none / scalar, float32 / bf16 gates)
  int most = 0;
  auto take = [&](auto kern) {
    cudaFuncAttributes a{};
    LINATTN_CUDA_CHECK(cudaFuncGetAttributes(&a, kern));
    most = std::max(most, a.numRegs);
  };
  if (KP == 64) {
    take(intra_v7<64, kGateNone, float, false, true>), take(intra_v7<64, kGateScalar, float, false, true>);
    take(intra_v7<64, kGateNone, bf16, false, true>), take(intra_v7<64, kGateScalar, bf16, false, true>);
  } else {
    take(intra_v7<128, kGateNone, float, false, true>), take(intra_v7<128, kGateScalar, float, false, true>);
    take(intra_v7<128, kGateNone, bf16, false, true>), take(intra_v7<128, kGateScalar, bf16, false, true>);
  }
  return most;
}

int v7_intra_blocks_per_sm(int KP) {  // the fewest over every instantiation that runs (review15)
  int fewest = 1 << 30;
  auto count = [&](auto kern, int bytes) {
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            int(cudaSharedmemCarveoutMaxShared)));
    int n = 0;
    LINATTN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kern, kThreads, bytes));
    fewest = std::min(fewest, n);
  };
  auto each = [&](auto kp) {  // gate none / scalar x float32 / bf16 gates x rung 7, 9 (kLean), 10 (kPdlWait), kA
    constexpr int P = decltype(kp)::value;
    constexpr int bytes = V7Smem<P>::bytes;
    auto by_gate = [&](auto tg) {
      using Tg = decltype(tg);
      count(intra_v7<P, kGateNone, Tg>, bytes), count(intra_v7<P, kGateScalar, Tg>, bytes);
      count(intra_v7<P, kGateNone, Tg, true>, bytes), count(intra_v7<P, kGateScalar, Tg, true>, bytes);
      count(intra_v7<P, kGateNone, Tg, false, true>, bytes), count(intra_v7<P, kGateScalar, Tg, false, true>, bytes);
      count(intra_v7<P, kGateNone, Tg, false, false, true>, bytes);
      count(intra_v7<P, kGateScalar, Tg, false, false, true>, bytes);
    };
    by_gate(float{});
    by_gate(bf16{});
  };
  if (KP == 64) each(std::integral_constant<int, 64>{});
  else each(std::integral_constant<int, 128>{});
  return fewest;
}

}  // namespace linattn::cuda::detail
