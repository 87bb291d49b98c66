// optimized/cuda/bwd_v3_async.cu -- rung 3 of the CUDA backward ladder: rung 2 (bwd_v2_tensorcore.cu)
// with its prepare and both recurrences replaced by the forward's tensor-core kernels and one new
// kernel in their pattern (docs/derivation-backward.md, "Chunked backward", F1-F7 and B1-B11):
//
//   prepare   v3_async.cu's intra kernel (tc_common.cuh's tci::intra with v3's policy, launched by
//             v3_intra_launch_with_A: the forward's intra-chunk kernel, cp.async loads, tensor
//             cores; F1-F5: G, L, A = (I + L)^-1, w_aux, u, P, Qg, Kd, exp(G_C) into the forward's
//             chunk-major bf16 workspace, tc_common.cuh), launched with a_out so that it also writes
//             A (float32) for bwd_grads_tc; then bwd3_extras (F1 in float64 and F2 scaled: G, E, Qg,
//             Kd in float32 for B10, as rung 1's prepare computes them).
//   states    v2_tensorcore.cu's v2_state in its backward mode (kBwd): F6, F7 with S in float32
//             registers (mma accumulators) and bf16 hi + lo for the products, chunks in order with a
//             two-stage cp.async pipeline; it writes the state entering each chunk and v_new
//             (float32) instead of o.
//   dstates   bwd3_dstates (new, the same pattern in reverse): per (sequence, head, BV value
//             columns), dS' in float32 registers, its bf16 hi + lo copy in shared memory, each
//             chunk's w_aux, Qg, Kd, P, exp(G_C) and do staged by cp.async one chunk ahead:
//               B1  dv_new = P^T do + Kd dS'                      (tensor cores)
//               B3  dS = Diag(exp(G_C)) dS' + Qg^T do - w_aux^T dv_new   (tensor cores)
//             saving dS' (the gradient of each chunk's exit state) and dv_new for bwd_grads_tc;
//             dh0 = the final dS.
//   grads     rung 2's bwd_grads_tc, unchanged (bwdc::bwd_v2_grads).
//
// Numerics: the recurrences see w_aux, Qg, Kd, P and v_new / dv_new rounded to bf16 (as the
// forward's v2 / v3, whose o differs from float32 arithmetic by 3e-3 to 4e-3 relative RMS); only the
// running states S and dS' keep about 16 bits (hi + lo). So every gradient carries bf16-level error,
// the float32 gate gradients and dh0 included (rung 2: 4e-5 and 1e-6): proofs_tests/
// test_cuda_backward.cu states the bounds.
// Range: bf16 inputs and 16 <= K <= 128 (the forward kernels' range; any V <= 256). Other calls
// (float32 inputs, K < 16, K > 128) run rung 2 as a whole, so BwdVersion::v3_async accepts every call.
// Workspace: rung 1's (bwd_common.cuh) followed by the forward's (tc_common.cuh).
//
// Measured (H200; RESULTS.md, "Rung 3"): all backward tests pass (run 3, 2488 assertions; worst error
// ratios with float32 gates dbeta 8.1e-3 (DeltaNet), dk 5.2e-3, dv 3.8e-3, dh0 3.5e-3, dg 2.8e-3, against
// rung 2's 3e-3 for dq, dk, dv and 4e-5 / 8e-7 for the float32 gate gradients / dh0). Speed, DeltaNet,
// B=8 T=4096 H=16 K=V=128, bf16
// (run 1, whose state kernel lacked its u and exp(G_C) loads - the bug fixed since - so its states time
// is a little low and its gradients were wrong): backward 21.5 ms (rung 2: 46.5), prepare 1.07, states
// 0.68, dstates 0.85, grads 18.95 ms (rung 2: 10.3, 7.8, 9.3, 19.1); forward + backward 22.5 ms against
// fla's 2.84. Not timed with the fix (device time spent), nor KDA / GDN2. The lead's run 4 (binaries of
// 8a24d5b): all tests pass, memcheck 0 errors and racecheck 0 hazards on the packed batch and T = 1,
// determinism 10 of 10, so BwdVersion::best is this rung. Not yet run on a GPU: the test at K = V = 128
// with 64- and 32-column value tiles (the benchmark's instantiations of both recurrences), 50
// determinism repeats, the mutants 42-49 against their fixed-case tests (RESULTS.md, "Status").
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "optimized/cuda/bwd_common.cuh"
#include "optimized/cuda/route.hpp"
#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {
namespace {

using bwdc::BWs;
using bwdc::bwd_keep_bytes;
using bwdc::bwd_ws;
using bwdc::keep_a_off;
using bwdc::keep_s_off;
using bwdc::first_chunk;
using bwdc::gate_width;
using bwdc::Profile;
using bwdc::DsPick;

/// The forward's workspace starts here, after the backward's (256-byte aligned).
std::size_t tc_offset(const KParams& p) { return (bwdc::bwd_ws_bytes(p) + 255) / 256 * 256; }

// ------------------------------------------------------------------------------------------------
// F1 in float64 and F2 scaled, per (chunk, head), as rung 1's bwd_prepare: G_i = g_0 + ... + g_i,
// E = e (.) exp(G), Qg = scale q (.) exp(G), Kd = k (.) exp(G_last - G) (float32, [rows, K]).
// ------------------------------------------------------------------------------------------------
template <class Tg>
__global__ void __launch_bounds__(kThreads) bwd3_extras(KParams p) {
  extern __shared__ double sGx[];  // [C][KGs] cumulative log-decays, then [C] beta (as float)
  const int K = p.K, H = p.H, h = blockIdx.y;
  const int KG = gate_width(p), KGs = KG ? KG : 1;
  float* sbeta = reinterpret_cast<float*>(sGx + C * KGs);
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* k = static_cast<const bf16*>(p.k);
  const Tg* g = static_cast<const Tg*>(p.g);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const Tg* bg = static_cast<const Tg*>(p.b);
  const BWs ws = bwd_ws(p);
  const int tid = threadIdx.x, nt = blockDim.x;
  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
  for (int idx = tid; idx < Lc * KGs; idx += nt) {  // independent loads, then the scan
    const int i = idx / KGs, d = idx % KGs;
    sGx[idx] = KG ? double(ld(g + row(i) * KG + d)) : 0.0;
  }
  for (int i = tid; i < C; i += nt) sbeta[i] = (!p.gdn2 && i < Lc) ? ld(beta + row(i)) : 0.f;
  __syncthreads();
  cumsum_log_decays(sGx, KGs, KGs, Lc, tid, nt);
  __syncthreads();
  for (int idx = tid; idx < Lc * KG; idx += nt) ws.G[row(idx / KG) * KG + idx % KG] = sGx[idx];
  const bool chan = p.gate == kGateChannel;
  for (int idx = tid; idx < Lc * K; idx += nt) {
    const int i = idx / K, d = idx % K, dd = chan ? d : 0;
    const std::int64_t x = row(i) * K + d;
    const double Gi = sGx[i * KGs + dd], Gl = sGx[(Lc - 1) * KGs + dd];
    const float kv = ld(k + x), eg = expf(float(Gi));
    ws.E[x] = (p.gdn2 ? ld(bg + x) : sbeta[i]) * kv * eg;
    ws.Qg[x] = p.scale * ld(q + x) * eg;
    ws.Kd[x] = kv * expf(float(Gl - Gi));
  }
}

// ------------------------------------------------------------------------------------------------
// Rung 8's bwd3_extras at full width (issue 6): the same F1 and F2 values, every floating-point
// operation per element as bwd3_extras' (float64 G_i = g_0 + ... + g_i summed in row order, E = (e k)
// exp(G), Qg = (scale q) exp(G), Kd = k exp(G_last - G)), with wider accesses. Launched by
// launch_extras only when extras_wide_ok holds (K % 4 == 0, K <= 128, the arrays aligned for the
// vector accesses below, H K < 2^25 for the 32-bit offsets); otherwise bwd3_extras runs.
//   - Quad (row i, channels d .. d + 3), d = 4 (tid % K4), K4 = K / 4; thread tid takes rows
//     i0 = tid / K4, i0 + R, ... with R = kThreads / K4 >= 8, so at most C / 8 = 8 rows per thread
//     and one division per block (K <= 128).
//   - The per-channel gates g are loaded first, by the same quads (one 16- or 8-byte load each, all
//     of a thread's at once), and staged in float64 by two 16-byte shared stores; then every q, k, b
//     quad of the thread is loaded (8-byte bf16, 16- / 8-byte gate quads) and held in registers as raw
//     words while the block scans. The scan is cumsum_log_decays' (one thread per channel, acc += g_i
//     in row order), with 8 rows' shared loads issued ahead of their adds.
//   - E, Qg, Kd by one 16-byte store each per quad, G (per-channel gates) by two 16-byte stores, at
//     per-block bases and 32-bit offsets (bwd_common.cuh's RowBase).
//   - kMode (launch_extras picks it): 0 DeltaNet and scalar gates, 1 per-channel gates (KDA), 2
//     per-channel gates and GDN2's b, so that each holds only its own quads in registers (64 / 80 /
//     127 registers with float gates: 4 / 3 / 2 blocks per SM).
//   - Per element the same values as bwd3_extras; with scalar gates the compiler forms exp(G_i) and
//     exp(G_last - G_i) once per row of a quad (the same expression of the same value).
// ------------------------------------------------------------------------------------------------
constexpr int kExtrasRows = C / (kThreads / 32);  // rows per thread at most (K4 <= 32)

/// The raw words of one quad of a gate array: float4 (float32) or 4 bf16 in a uint2.
template <class Tg>
using Quad = std::conditional_t<std::is_same_v<Tg, float>, float4, uint2>;
template <class Tg>
__device__ __forceinline__ Quad<Tg> ld_quad(const Tg* a) {
  return *reinterpret_cast<const Quad<Tg>*>(a);
}
__device__ __forceinline__ void quad_floats(float4 v, float (&x)[4]) { x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w; }
__device__ __forceinline__ void quad_floats(uint2 v, float (&x)[4]) { bwdc::unpack4(v, x); }

template <class Tg, int kMode>
__global__ void __launch_bounds__(kThreads) bwd3_extras_wide(KParams p) {
  constexpr bool chan = kMode >= 1, gdn2 = kMode == 2;  // per-channel gates (KDA, GDN2); GDN2's erase gate b
  extern __shared__ __align__(16) double sGw[];  // [C][KGs] cumulative log-decays, then [C] beta (as float)
  const int K = p.K, h = blockIdx.y;
  const int KG = gate_width(p), KGs = KG ? KG : 1;
  float* sbw = reinterpret_cast<float*>(sGw + C * KGs);
  const int tid = threadIdx.x;
  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const BWs ws = bwd_ws(p);
  const bf16* qb = rb.base(static_cast<const bf16*>(p.q), K);
  const bf16* kb = rb.base(static_cast<const bf16*>(p.k), K);
  const Tg* bgb = rb.base_opt(static_cast<const Tg*>(p.b), K);
  const Tg* gb = rb.base_opt(static_cast<const Tg*>(p.g), KG);
  float *Eb = rb.base(ws.E, K), *Qgb = rb.base(ws.Qg, K), *Kdb = rb.base(ws.Kd, K);
  double* Gb = rb.base(ws.G, KG);
  const int K4 = K >> 2, R = kThreads / K4, i0 = tid / K4, d = 4 * (tid - i0 * K4);
  const bool act = i0 < R;  // threads R K4 .. kThreads - 1 hold no quad
  // F1's inputs: per-channel gates g by the same quads as below (one 16- or 8-byte load each, staged
  // in float64 by two 16-byte shared stores) first, so that their registers are free again before
  // the q, k, b quads are loaded.
  if (chan) {
    Quad<Tg> rg[kExtrasRows];
#pragma unroll
    for (int t = 0; t < kExtrasRows; ++t) {
      const int i = i0 + t * R;
      if (act && i < Lc) rg[t] = ld_quad(gb + i * rb.HKG + d);
    }
#pragma unroll
    for (int t = 0; t < kExtrasRows; ++t) {
      const int i = i0 + t * R;
      if (act && i < Lc) {
        float gf[4];
        quad_floats(rg[t], gf);
        *reinterpret_cast<double2*>(sGw + i * K + d) = make_double2(double(gf[0]), double(gf[1]));
        *reinterpret_cast<double2*>(sGw + i * K + d + 2) = make_double2(double(gf[2]), double(gf[3]));
      }
    }
  } else if (tid < Lc) {
    sGw[tid] = KG ? double(ld(gb + tid * rb.HKG)) : 0.0;
  }
  if (tid < C) sbw[tid] = (!gdn2 && tid < Lc) ? ld(static_cast<const Tg*>(p.beta) + rb.r0 + tid * rb.H) : 0.f;
  // Every q, k, b quad of this thread, in flight during the scan.
  uint2 rk[kExtrasRows], rq[kExtrasRows];
  Quad<Tg> rbg[kExtrasRows];
#pragma unroll
  for (int t = 0; t < kExtrasRows; ++t) {
    const int i = i0 + t * R, x = i * rb.HK + d;
    if (act && i < Lc) {
      rk[t] = *reinterpret_cast<const uint2*>(kb + x), rq[t] = *reinterpret_cast<const uint2*>(qb + x);
      if (gdn2) rbg[t] = ld_quad(bgb + x);
    }
  }
  __syncthreads();
  if (tid < KGs) {  // cumsum_log_decays: acc += g_i in row order, 8 rows' loads ahead of their adds
    double acc = 0.0;
    int i = 0;
    for (; i + 8 <= Lc; i += 8) {
      double gi[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) gi[e] = sGw[(i + e) * KGs + tid];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc += gi[e], sGw[(i + e) * KGs + tid] = acc;
    }
    for (; i < Lc; ++i) acc += sGw[i * KGs + tid], sGw[i * KGs + tid] = acc;
  }
  __syncthreads();
  if (!act) return;
  // G_last of the quad's channels (per-channel gates), or of the row (scalar gates, DeltaNet: 0).
  double gl[4];
  if (chan) {
    const double2 a = *reinterpret_cast<const double2*>(sGw + (Lc - 1) * K + d);
    const double2 b = *reinterpret_cast<const double2*>(sGw + (Lc - 1) * K + d + 2);
    gl[0] = a.x, gl[1] = a.y, gl[2] = b.x, gl[3] = b.y;
  } else {
    gl[0] = gl[1] = gl[2] = gl[3] = sGw[Lc - 1];
  }
#pragma unroll
  for (int t = 0; t < kExtrasRows; ++t) {
    const int i = i0 + t * R, x = i * rb.HK + d;
    if (i >= Lc) break;
    double gi[4];
    if (chan) {
      const double2 a = *reinterpret_cast<const double2*>(sGw + i * K + d);
      const double2 b = *reinterpret_cast<const double2*>(sGw + i * K + d + 2);
      gi[0] = a.x, gi[1] = a.y, gi[2] = b.x, gi[3] = b.y;
      // G of the quad (F1), as bwd3_extras' loop over Lc KG items.
      *reinterpret_cast<double2*>(Gb + i * rb.HKG + d) = a;
      *reinterpret_cast<double2*>(Gb + i * rb.HKG + d + 2) = b;
    } else {
      gi[0] = gi[1] = gi[2] = gi[3] = sGw[i];
      if (KG && d == 0) Gb[i * rb.HKG] = gi[0];
    }
    float kf[4], qf[4], ef[4];
    bwdc::unpack4(rk[t], kf), bwdc::unpack4(rq[t], qf);
    if (gdn2) quad_floats(rbg[t], ef);
    else ef[0] = ef[1] = ef[2] = ef[3] = sbw[i];
    float oE[4], oQ[4], oK[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {  // F2 per channel, bwd3_extras' expressions
      const float eg = expf(float(gi[e]));
      oE[e] = ef[e] * kf[e] * eg;
      oQ[e] = p.scale * qf[e] * eg;
      oK[e] = kf[e] * expf(float(gl[e] - gi[e]));
    }
    bwdc::st4(Eb + x, oE), bwdc::st4(Qgb + x, oQ), bwdc::st4(Kdb + x, oK);
  }
}

// ------------------------------------------------------------------------------------------------
// B1, B3: the state gradient, chunks in reverse, on tensor cores (v2_state's pattern).
// ------------------------------------------------------------------------------------------------
/// Rows i < Lc of the -dv_new tile sNdv (bf16 [64][LDV], columns v0 .. v0 + BV - 1) to dst[i HV + v0 + c] for
/// v0 + c < V, sign flipped (backward rung 20: bf16_rn(dv_new) for G1'): one 16-byte load, four 32-bit XORs and
/// one 16-byte store per 8-column octet where V % 8 == 0 and dst is 16-byte aligned, else item by item (unreachable
/// in rung 20, whose launcher requires both; kept correct). dst is
/// the chunk's first row for this head; HV = H V. Called between the barrier that completes sNdv and the next
/// chunk's first barrier (before which sNdv is not written again).
template <int BV, int LDV>
__device__ __forceinline__ void dv_new_rows_store(const bf16* sNdv, bf16* dst, std::int64_t HV, int Lc, int V, int v0,
                                                  int tid) {
  constexpr int OPR = BV / 8;  // octets per row
  static_assert(BV % 8 == 0 && LDV % 8 == 0, "16-byte octets in shared memory");
  const bool wide = V % 8 == 0 && (reinterpret_cast<std::uintptr_t>(dst) & 15) == 0 && HV % 8 == 0;
  for (int idx = tid; idx < 64 * OPR; idx += kThreads) {
    const int r = idx / OPR, c8 = (idx % OPR) * 8, col = v0 + c8;
    if (r >= Lc || col >= V) continue;
    bf16* d = dst + r * HV + col;
    const bf16* src = sNdv + r * LDV + c8;
    if (wide) {
      uint4 x = *reinterpret_cast<const uint4*>(src);
      x.x ^= 0x80008000u, x.y ^= 0x80008000u, x.z ^= 0x80008000u, x.w ^= 0x80008000u;  // both halves' sign bits
      __stwb(reinterpret_cast<uint4*>(d), x);
    } else {
      for (int e = 0; e < 8 && col + e < V; ++e) d[e] = __hneg(src[e]);
    }
  }
}

/// kOne (rung 23): one stage of the w_aux, Qg and Kd tiles instead of two (NS), so that two blocks fit an SM at KP = 128,
/// BV = 32 (107,520 bytes; two stages: 159,744, one block). P, do and exp(G_C) keep two stages.
/// kW2 (rung 30, with kOne and kB1Hi): w_aux and Qg in two stages again (NSW), Kd in one, in the bytes of the dS' lo tile
/// that kB1Hi no longer uses (sSl has no bytes): the same total (193,536 bytes at KP = BV = 128).
template <int KP, int BV, bool kOne = false, bool kW2 = false>
struct DsSmem {
  static constexpr int LDK = ldk(KP);
  static constexpr int LDV = BV + 8;
  static constexpr int tileK = 64 * LDK * 2;
  static constexpr int NS = kOne ? 1 : 2;               // stages of the three [64][LDK] tiles (kW2: of Kd)
  static constexpr int NSW = kW2 ? 2 : NS;              // stages of the w_aux and Qg tiles
  static constexpr int sW = 0;                          // [NSW] bf16 [64][LDK] w_aux
  static constexpr int sQg = sW + NSW * tileK;          // [NSW] bf16 [64][LDK] scale q . exp(G)
  static constexpr int sKd = sQg + NSW * tileK;         // [NS] bf16 [64][LDK] k . exp(G_C - G)
  static constexpr int sP = sKd + NS * tileK;           // [2] bf16 [64][72]
  static constexpr int sDo = sP + 2 * 64 * 72 * 2;      // [2] bf16 [64][LDV] do
  static constexpr int sgC = sDo + 2 * 64 * LDV * 2;    // [2] f32 [KP] exp(G_C)
  static constexpr int sSh = sgC + 2 * KP * 4;          // bf16 [KP][LDV] dS', hi part
  static constexpr int sSl = sSh + KP * LDV * 2;        // bf16 [KP][LDV] lo part (kW2: none)
  static constexpr int sNdv = sSl + (kW2 ? 0 : KP * LDV * 2);  // bf16 [64][LDV] -dv_new
  static constexpr int bytes = sNdv + 64 * LDV * 2;
};

/// kDsH (backward rung 19, bwd_v19_dsbf16.cu; DeltaNet): dS' is saved as its bf16 hi part into the first half of
/// ws.dS, viewed as bf16 [chunks, H, K, V], copied by rows from the hi tile sSh that the products read anyway
/// (state_hi_store_rows, 16-byte stores): the only operand G1' makes of dS', so G1' multiplies the same values with
/// half the bytes. The recurrence itself is unchanged (dS' in float32 registers, hi + lo products).
/// kDvH (backward rung 20, bwd_v20_dvbf16.cu; DeltaNet and GDN): dv_new is also saved as its bf16 hi part, into
/// the first half of ws.du0 viewed as bf16 [rows, V] (G2' writes du0 there only after G1' has read it), copied by
/// rows from the -dv_new tile sNdv that B3 reads anyway, sign flipped (dv_new_rows_store): bf16_rn(dv_new), the only
/// operand G1' makes of dv_new. The float32 dv_new is still stored (G2''s du0 takes its lo part too).
/// kOne (backward rung 23, bwd_v23_dsone.cu): w_aux, Qg and Kd in one stage (DsSmem), two blocks per SM; each chunk's
/// loads in two cp.async groups instead of one: Kd, P, do, exp(G_C) (issue_a, into the free stage of P, do, exp(G_C)
/// and into sKd once B1 has read it) and w_aux, Qg (issue_b, once B3 has read them; awaited before B3). The same
/// products in the same order, so the same values bit for bit; one barrier more per chunk.
/// kVFirst (session 22's trial, LINATTN_BWD3_VFIRST=1; launch_dstates): the grid is (value tiles, sequences, heads)
/// instead of (sequences, heads, value tiles), so that a head's value tiles run side by side and share their w_aux, Qg,
/// Kd, P reads through L2. A template parameter, so that the default kernels' code is untouched (ptx_identity.py).
/// kDvP (backward rung 27, bwd_v27_dvplanes.cu; DeltaNet, with kDsH and kDvH): dv_new is stored as its bf16 hi and lo
/// parts only (put_split's values: hi = bf16_rn(dv_new), lo = bf16_rn(dv_new - hi)), hi in ws.du0's first half where kDvH
/// puts it, lo in its second half, both viewed as bf16 [rows, V], from the fragments; no float32 dv_new, no row copy.
/// Rung 27's G2' reads both planes, G1' the hi plane as before. Requires V % 2 == 0 (the pair stores; its range has V % 8).
/// kB1Hi (backward rung 29, bwd_v29_b1hi.cu; DeltaNet, with kDvP): B1's product Kd dS' multiplies dS''s bf16 hi part
/// only (one MMA per k step instead of hi + lo, as fla's chunk_bwd_dhu multiplies b_dh.to(bf16)), so the lo tile is
/// neither written nor read. dS' itself stays float32 in registers (B3 accumulates it as before); only dv_new changes,
/// by at most 2^-9 of |Kd| |dS'| per term (not bit for bit with rung 28).
/// kW2 (backward rung 30, bwd_v30_dsw2.cu; with kOne and kB1Hi): w_aux and Qg in two stages (DsSmem), so that chunk
/// ci - 1's are copied from the start of chunk ci (right after its first barrier) and awaited with chunk ci - 1's other
/// tiles, instead of after chunk ci's B3 behind a third barrier and awaited before chunk ci - 1's B3: one barrier less
/// per chunk and the w_aux, Qg copies under a whole step instead of under B1. The same products in the same order on the
/// same values: bit for bit with kW2 = false.
template <int KP, int BV, bool kDsH = false, bool kDvH = false, bool kOne = false, bool kVFirst = false,
          bool kDvP = false, bool kB1Hi = false, bool kW2 = false>
__global__ void __launch_bounds__(kThreads) bwd3_dstates(KParams p, void* tcws, const bf16* do_,
                                                         const float* dht, float* dh0) {
  static_assert(!kW2 || (kOne && kB1Hi), "kW2 (rung 30) uses the lo tile's bytes: kOne and kB1Hi");
  using S = DsSmem<KP, BV, kOne, kW2>;
  constexpr int LDK = S::LDK, LDV = S::LDV;
  extern __shared__ __align__(16) char smem[];
  bf16* sSh = reinterpret_cast<bf16*>(smem + S::sSh);
  // kB1Hi: no lo tile is written or read (kW2: its bytes hold w_aux and Qg's second stage, and S::sSl is sNdv's offset)
  bf16* sSl = kB1Hi ? nullptr : reinterpret_cast<bf16*>(smem + S::sSl);
  bf16* sNdv = reinterpret_cast<bf16*>(smem + S::sNdv);
  const int K = p.K, V = p.V, H = p.H;
  const int n = kVFirst ? blockIdx.y : blockIdx.x, h = kVFirst ? blockIdx.z : blockIdx.y;
  const int v0 = (kVFirst ? blockIdx.x : blockIdx.z) * BV;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const BWs bw = bwd_ws(p);
  KParams pt = p;
  pt.ws = tcws;
  const V2Ws tw = v2_ws(pt, KP);
  const int t_begin = seq_begin(p, n), t_end = seq_end(p, n);
  const int nchunks = (t_end - t_begin + C - 1) / C;
  const int c_first = first_chunk(p, n);

  // dS' fragments as v2_state's S: m-tile sm (rows 16 sm..), n-tiles sn0 .. sn0 + SNT.
  constexpr int MT = KP / 16, NG = 8 / MT, SNT = BV / 8 / NG;
  static_assert(SNT >= 2 && SNT % 2 == 0, "BV = 32, 64 or 128");
  const int sm = warp % MT, sn0 = (warp / MT) * SNT;
  // Chunk-row products (64 x BV): m-tile wm, n-tiles wn0 .. wn0 + ONT.
  constexpr int ONT = BV / 16;
  static_assert(ONT % 2 == 0, "BV = 32, 64 or 128");
  const int wm = warp & 3, wn0 = (warp >> 2) * ONT;

  float st[SNT][4];
  const std::int64_t sbase = (std::int64_t(n) * H + h) * K * V;
  state_frag_load(st, dht, sbase, K, V, sm, sn0, v0, g8, t4);
  auto store_state_bf16 = [&]() {  // kB1Hi: the hi tile only (B1 reads no lo part)
    if constexpr (kB1Hi) state_frag_store_hi<LDV>(st, sSh, sm, sn0, g8, t4);
    else state_frag_store_hilo<LDV>(st, sSh, sSl, sm, sn0, g8, t4);
  };
  store_state_bf16();

  // kOne: one [64][LDK] tile of the workspace array a (w_aux, Qg or Kd) of block cw, as cp_async_wqk_tiles does each
  constexpr int PK = KP / 8, RS = kThreads / PK;
  auto issue_tile = [&](bf16* d, const bf16* a, std::int64_t cw) {
    const int d8 = (tid % PK) * 8, i0 = tid / PK;
#pragma unroll
    for (int it = 0; it < 64 / RS; ++it) cp_async16(d + (i0 + it * RS) * LDK + d8, a + (cw * 64 + i0 + it * RS) * KP + d8);
  };
  auto issue = [&](int ci) {  // chunk ci's tiles into stage ci & 1 (zero-filled outside the chunk); kOne: issue_a
    const int stg = ci & 1, tok0 = t_begin + ci * C, Lc = min(C, t_end - tok0);
    const std::int64_t cw = std::int64_t(c_first + ci) * H + h;
    bf16* dP = reinterpret_cast<bf16*>(smem + S::sP + stg * 64 * 72 * 2);
    bf16* dD = reinterpret_cast<bf16*>(smem + S::sDo + stg * 64 * LDV * 2);
    float* dG = reinterpret_cast<float*>(smem + S::sgC + stg * KP * 4);
    if constexpr (kOne) {
      issue_tile(reinterpret_cast<bf16*>(smem + S::sKd), tw.kd, cw);  // w_aux and Qg: issue_b
    } else {
      bf16* dW = reinterpret_cast<bf16*>(smem + S::sW + stg * S::tileK);
      bf16* dQ = reinterpret_cast<bf16*>(smem + S::sQg + stg * S::tileK);
      bf16* dK = reinterpret_cast<bf16*>(smem + S::sKd + stg * S::tileK);
      cp_async_wqk_tiles<KP, true>(dW, dQ, dK, tw, cw, tid);
    }
    cp_async_p_tile(dP, tw.P, cw, tid);
    cp_async_gc<KP>(dG, tw.gC, cw, tid);
    constexpr int PV = BV / 8, RV = kThreads / PV;  // a fixed column per thread, rows RV apart
    static_assert(kThreads % PV == 0 && 64 % RV == 0, "a fixed column per thread, whole sweeps");
    const int c8 = (tid % PV) * 8, col = v0 + c8, i0 = tid / PV;
    const std::int64_t src0 = (std::int64_t(tok0 + i0) * H + h) * V + col, step = std::int64_t(RV) * H * V;
#pragma unroll
    for (int it = 0; it < 64 / RV; ++it) {
      const int i = i0 + it * RV;
      const bool in = i < Lc && col < V;
      const std::int64_t src = src0 + it * step;
      if (V % 8 == 0) {
        cp_async16(dD + i * LDV + c8, in ? do_ + src : do_, in ? 16 : 0);
      } else {
        for (int e = 0; e < 8; ++e) dD[i * LDV + c8 + e] = (in && col + e < V) ? do_[src + e] : __float2bfloat16(0.f);
      }
    }
    cp_async_commit();
  };

  auto issue_b = [&](int ci) {  // kOne: chunk ci's w_aux and Qg tiles, one cp.async group (kW2: into stage ci & 1)
    const std::int64_t cw = std::int64_t(c_first + ci) * H + h;
    const int ws = kW2 ? (ci & 1) * S::tileK : 0;
    issue_tile(reinterpret_cast<bf16*>(smem + S::sW + ws), tw.w, cw);
    issue_tile(reinterpret_cast<bf16*>(smem + S::sQg + ws), tw.qg, cw);
    cp_async_commit();
  };

  if (nchunks > 0) issue(nchunks - 1);
  if (kOne && nchunks > 0) issue_b(nchunks - 1);
  for (int ci = nchunks - 1; ci >= 0; --ci) {
    const int stg = ci & 1, tok0 = t_begin + ci * C, Lc = min(C, t_end - tok0);
    // kOne: the groups in flight are issue(ci) then issue_b(ci); wait for the first only. kW2: issue_b(ci), issued a
    // chunk ago, and issue(ci): wait for both.
    if constexpr (kOne && !kW2) cp_async_wait<1>();
    else cp_async_wait<0>();
    __syncthreads();  // stage stg landed for every thread; the previous chunk fully done
    if (!kOne && ci > 0) issue(ci - 1);
    if (kW2 && ci > 0) issue_b(ci - 1);  // into stage (ci - 1) & 1, last read by chunk ci + 1's B3, before the barrier
    const int wst = kOne ? 0 : stg;  // the stage of w_aux, Qg, Kd (kW2: of Kd; w_aux and Qg in stage stg)
    const int wqs = kW2 ? stg : wst;
    const bf16* sW = reinterpret_cast<const bf16*>(smem + S::sW + wqs * S::tileK);
    const bf16* sQg = reinterpret_cast<const bf16*>(smem + S::sQg + wqs * S::tileK);
    const bf16* sKd = reinterpret_cast<const bf16*>(smem + S::sKd + wst * S::tileK);
    const bf16* sP = reinterpret_cast<const bf16*>(smem + S::sP + stg * 64 * 72 * 2);
    const bf16* sDo = reinterpret_cast<const bf16*>(smem + S::sDo + stg * 64 * LDV * 2);
    const float* sgC = reinterpret_cast<const float*>(smem + S::sgC + stg * KP * 4);

    // dS' of this chunk's exit state, for bwd_grads_tc (kDsH: its bf16 hi part, for rung 19's G1').
    if constexpr (kDsH) {  // sSh holds bf16_rn(dS') (store_state_bf16, before the barrier above): copied by rows
      bf16* dSout = reinterpret_cast<bf16*>(bw.dS) + (std::int64_t(c_first + ci) * H + h) * K * V;
      state_hi_store_rows<KP, BV, LDV>(sSh, dSout, K, V, v0, tid);
    } else {
      float* dSout = bw.dS + (std::int64_t(c_first + ci) * H + h) * K * V;
      state_frag_store_pairs(st, dSout, K, V, sm, sn0, v0, g8, t4);
    }

    // B1: dv_new = P^T do + Kd dS' (rows 16 wm.., columns of n-tiles wn0..).
    float dv[ONT][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < 64; k0 += 16) {
      if (k0 < 16 * wm) continue;  // (P^T)_ij = P_ji = 0 for j < i
      unsigned a[4];
      load_a_t(a, sP, 72, 16 * wm, k0);
      mma_acc_b(dv, a, sDo, LDV, k0, 8 * wn0);
    }
#pragma unroll
    for (int k0 = 0; k0 < KP; k0 += 16) {
      unsigned a[4];
      load_a(a, sKd, LDK, 16 * wm, k0);
      if constexpr (kB1Hi) mma_acc_b(dv, a, sSh, LDV, k0, 8 * wn0);  // Kd bf16_rn(dS') (rung 29)
      else mma_acc_two_b(dv, a, sSh, a, sSl, LDV, k0, 8 * wn0);      // Kd (dS' hi + lo)
    }
#pragma unroll
    for (int nt = 0; nt < ONT; ++nt) {
      const int i = 16 * wm + g8, col = 8 * (wn0 + nt) + 2 * t4;
      *reinterpret_cast<unsigned*>(sNdv + i * LDV + col) = pack_bf16(-dv[nt][0], -dv[nt][1]);
      *reinterpret_cast<unsigned*>(sNdv + (i + 8) * LDV + col) = pack_bf16(-dv[nt][2], -dv[nt][3]);
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {  // 8-byte stores where aligned (st_pair, tc_common.cuh)
        const int ii = i + hh * 8, cc = v0 + col;
        if constexpr (kDvP) {
          if (ii < Lc && cc < V) {  // hi and lo planes (V even: both columns in range)
            const std::int64_t off = (std::int64_t(tok0 + ii) * H + h) * V + cc;
            bf16* hi = reinterpret_cast<bf16*>(bw.du0);
            const float x0 = dv[nt][2 * hh], x1 = dv[nt][2 * hh + 1];
            const bf16 h0 = __float2bfloat16_rn(x0), h1 = __float2bfloat16_rn(x1);
            *reinterpret_cast<__nv_bfloat162*>(hi + off) = __halves2bfloat162(h0, h1);
            *reinterpret_cast<__nv_bfloat162*>(hi + std::int64_t(p.B) * p.T * H * V + off) = __halves2bfloat162(
                __float2bfloat16_rn(x0 - __bfloat162float(h0)), __float2bfloat16_rn(x1 - __bfloat162float(h1)));
          }
        } else {
          if (ii < Lc) st_pair(bw.dvn + (std::int64_t(tok0 + ii) * H + h) * V + cc, dv[nt][2 * hh], dv[nt][2 * hh + 1], cc, V);
        }
      }
    }
    if constexpr (kOne && !kW2) cp_async_wait<0>();  // issue_b(ci): w_aux, Qg, for B3 (kW2: awaited at the top)
    __syncthreads();  // -dv_new complete in sNdv; every read of sSh / sSl done (kOne: and of sKd; w_aux, Qg landed)
    if (kOne && ci > 0) issue(ci - 1);  // Kd into the tile B1 has read, P, do, exp(G_C) into the other stage

    // B3: dS = Diag(exp(G_C)) dS' + Qg^T do + w_aux^T (-dv_new) (rows 16 sm.., n-tiles sn0..).
    state_frag_decay(st, sgC, sm, g8);
#pragma unroll
    for (int k0 = 0; k0 < 64; k0 += 16) {
      unsigned aq[4], aw[4];
      load_a_t(aq, sQg, LDK, 16 * sm, k0);
      load_a_t(aw, sW, LDK, 16 * sm, k0);
      mma_acc_two_b(st, aq, sDo, aw, sNdv, LDV, k0, 8 * sn0);  // Qg^T do + w_aux^T (-dv_new)
    }
    store_state_bf16();  // read by the next chunk after its first barrier
    // kDvH: bf16_rn(dv_new) = -bf16_rn(-dv_new) (round to nearest even is odd-symmetric), rows < Lc. After B3's
    // products, not before them (session 19 call 2: copied before B3, dstates took 0.56 -> 0.67 ms); sNdv is not
    // written again before the next chunk's first barrier.
    if constexpr (kDvH && !kDvP)
      dv_new_rows_store<BV, LDV>(sNdv, reinterpret_cast<bf16*>(bw.du0) + (std::int64_t(tok0) * H + h) * V,
                                 std::int64_t(H) * V, Lc, V, v0, tid);
    if (kOne && !kW2 && ci > 0) {
      __syncthreads();  // every read of sW / sQg done
      issue_b(ci - 1);  // awaited after the next chunk's B1
    }
  }
  state_frag_store(st, dh0, sbase, K, V, sm, sn0, v0, g8, t4);
}

template <int KP, int BV, bool kDsH, bool kDvH, bool kOne, bool kVFirst, bool kDvP = false, bool kB1Hi = false,
          bool kW2 = false>
void launch_dstates_order(const BwdCall& c, void* tcws) {
  const KParams& p = c.p;
  constexpr int bytes = DsSmem<KP, BV, kOne, kW2>::bytes;
  static_assert(bytes <= 227 * 1024, "shared memory");
  static_assert(!kOne || KP != 128 || BV != 32 || 2 * (bytes + 1024) <= 228 * 1024, "kOne: two blocks per SM");
  static_assert(!kB1Hi || kDvP, "kB1Hi is rung 29's, with rung 27's planes");
  static_assert(!kW2 || DsSmem<KP, BV, kOne, kW2>::bytes == DsSmem<KP, BV, kOne>::bytes, "kW2: the lo tile's bytes");
  auto kern = bwd3_dstates<KP, BV, kDsH, kDvH, kOne, kVFirst, kDvP, kB1Hi, kW2>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const int nv = (p.V + BV - 1) / BV;
  // route.hpp: the block order and the value columns per block, e.g. "sequence-first/64"
  static const char* const names[2][3] = {{"sequence-first/32", "sequence-first/64", "sequence-first/128"},
                                          {"value-first/32", "value-first/64", "value-first/128"}};
  set_dstates_grid(names[kVFirst][BV == 32 ? 0 : BV == 64 ? 1 : 2]);
  kern<<<kVFirst ? dim3(nv, p.N, p.H) : dim3(p.N, p.H, nv), kThreads, bytes, c.stream>>>(
      p, tcws, static_cast<const bf16*>(c.do_), c.dht, c.dh0);
  LINATTN_CUDA_CHECK(cudaGetLastError());
}

/// The dstates kernel in its default block order, or (session 22's trial, off by default) with LINATTN_BWD3_VFIRST=1
/// the value tile first, as fla's dhu orders its programs, where the sequences fit grid y (at most 65,535) and the
/// kernel is not rung 23's kOne (which keeps its own order); the same blocks compute the same values in either order.
template <int KP, int BV, bool kDsH = false, bool kDvH = false, bool kOne = false, bool kDvP = false,
          bool kB1Hi = false, bool kW2 = false>
void launch_dstates(const BwdCall& c, void* tcws) {
  if constexpr (!kOne && !kDvP) {
    const char* env = std::getenv("LINATTN_BWD3_VFIRST");
    if (env && std::atoi(env) == 1 && c.p.N <= 65535)
      return launch_dstates_order<KP, BV, kDsH, kDvH, kOne, true>(c, tcws);
  }
  launch_dstates_order<KP, BV, kDsH, kDvH, kOne, false, kDvP, kB1Hi, kW2>(c, tcws);
}

/// launch_dstates at the key width KP (64 or 128: tc_pick_kp) and value tile bv (64 or 32, or 128 at KP = 128:
/// dstates_bv).
/// kDvP: rung 27's planes of dv_new (bwd3_dstates), in every kernel of the choice (not with LINATTN_BWD3_VFIRST).
/// kB1Hi: rung 29's B1 on dS''s hi part only (bwd3_dstates), with kDvP. kW2: rung 30's two stages of w_aux and Qg in the
/// 128-column kernel (the only kOne one here; the 32- and 64-column kernels have two stages of every tile already).
template <bool kDsH, bool kDvH, bool kOne = false, bool kDvP = false, bool kB1Hi = false, bool kW2 = false>
void launch_dstates_kp_bv(const BwdCall& c, void* tcws, int KP, int bv) {
  // 128 columns (session 22's LINATTN_BWD3_BV=128; rung 24's default where dstates_bv says, DsPick::wide): a head's
  // whole value range in one block, with rung 23's single stage of the w_aux, Qg, Kd tiles (193,536 bytes of shared
  // memory, one block per SM): at B=8 H=16 V=128 that is 128 blocks, one wave on 132 SMs, instead of 256 blocks of 64
  // columns in two waves, and each chunk's K-side tiles are read by one block instead of two. Each column's products
  // are the same, so the same values (session 23 call 1: 0.56-0.61 -> 0.55 ms for DeltaNet, 0.67-0.68 -> 0.53 for GDN).
  if (bv == 128 && KP == 128) return launch_dstates<128, 128, kDsH, kDvH, true, kDvP, kB1Hi, kW2>(c, tcws);
  if (KP == 64)
    bv == 64 ? launch_dstates<64, 64, kDsH, kDvH, kOne, kDvP, kB1Hi>(c, tcws)
             : launch_dstates<64, 32, kDsH, kDvH, kOne, kDvP, kB1Hi>(c, tcws);
  else
    bv == 64 ? launch_dstates<128, 64, kDsH, kDvH, kOne, kDvP, kB1Hi>(c, tcws)
             : launch_dstates<128, 32, kDsH, kDvH, kOne, kDvP, kB1Hi>(c, tcws);
}

/// Value columns per block of bwd3_dstates (DsPick, bwd_common.cuh): LINATTN_BWD3_BV when it is 32 or 64, or 128 at
/// KP = 128 (launch_dstates_kp_bv; any other value is ignored: the default applies). By default: two_stage 64 when that
/// still gives every SM a block, else 32 (as the forward's pick_bv, without its 16); one_stage (rung 23's kOne) 32 at
/// KP = 128; wide (rung 24) at KP = 128 the width of dstates_wide_pick (at the end of this file), else two_stage's
/// pick.
int dstates_bv(const KParams& p, DsPick ds = DsPick::two_stage) {
  const int KP = tc_pick_kp(p.K);
  if (const char* env = std::getenv("LINATTN_BWD3_BV")) {
    const int bv = std::atoi(env);
    if (bv == 32 || bv == 64 || (bv == 128 && KP == 128)) return bv;  // 128: launch_dstates_kp_bv
  }
  if (ds == DsPick::one_stage && KP == 128) return 32;  // rung 23 at KP = 128: two blocks per SM (DsSmem)
  if (ds == DsPick::wide && KP == 128)  // rung 24, on this device's SM count
    return cuda::dstates_wide_pick(long(p.N) * p.H, p.V, device_attr(cudaDevAttrMultiProcessorCount));
  return long(p.N) * p.H * ((p.V + 63) / 64) >= 132 ? 64 : 32;
}

/// Whether bwd3_extras_wide<Tg, .> may run this call: GDN2 only with per-channel gates (its mode 2), K a multiple of 4 and at most 128 (at most 8 rows per
/// thread), H K < 2^25 (32-bit offsets), and q, k (8 bytes), b and per-channel g (4 gate items), E,
/// Qg, Kd and per-channel G (16 bytes) aligned for the quads. Row strides are then multiples of 4
/// items, so every quad is aligned as its array.
template <class Tg>
bool extras_wide_ok(const KParams& p) {
  const BWs ws = bwd_ws(p);
  auto al = [](const void* a, std::uintptr_t n) { return reinterpret_cast<std::uintptr_t>(a) % n == 0; };
  const bool chan = p.gate == kGateChannel;
  return (!p.gdn2 || chan) && p.K % 4 == 0 && p.K <= 128 && std::int64_t(p.H) * p.K < (std::int64_t(1) << 25) && al(p.q, 8) &&
         al(p.k, 8) && (!p.gdn2 || al(p.b, 4 * sizeof(Tg))) && (!chan || al(p.g, 4 * sizeof(Tg))) &&
         al(ws.E, 16) && al(ws.Qg, 16) && al(ws.Kd, 16) && (!chan || al(ws.G, 16));
}

// ------------------------------------------------------------------------------------------------
// Rung 18's prepare for GDN (scalar gates): F1 alone, G_i = g_0 + ... + g_i in float64 per (chunk, head),
// summed in row order as bwd3_extras_wide's scan (so the same G bit for bit), into ws.G. E, Qg and Kd are
// not written: rung 18's G1' and G2' form them (bwd_v12_g1slab.cu, bwd_v11_wyfast.cu, kLean).
// ------------------------------------------------------------------------------------------------
template <class Tg>
__global__ void __launch_bounds__(C) bwd18_gcum(KParams p) {
  __shared__ double sg[C];
  const int h = blockIdx.y, tid = threadIdx.x;
  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const Tg* gb = rb.base_opt(static_cast<const Tg*>(p.g), 1);
  double* Gb = rb.base(bwd_ws(p).G, 1);
  if (tid < Lc) sg[tid] = double(ld(gb + tid * rb.HKG));
  __syncthreads();
  cumsum_log_decays(sg, 1, 1, Lc, tid, C);  // thread 0: acc += g_i in row order
  __syncthreads();
  if (tid < Lc) Gb[tid * rb.HKG] = sg[tid];
}

/// bwd3_extras, or with wide (rung 8) bwd3_extras_wide where extras_wide_ok holds.
template <class Tg>
void launch_extras(const BwdCall& c, bool wide) {
  const KParams& p = c.p;
  const int KG = gate_width(p);
  const int bytes = int(sizeof(double) * C * (KG ? KG : 1) + sizeof(float) * C);
  if (wide && extras_wide_ok<Tg>(p)) {
    const int mode = p.gdn2 ? 2 : (p.gate == kGateChannel ? 1 : 0);
    auto kern = mode == 2 ? bwd3_extras_wide<Tg, 2> : (mode == 1 ? bwd3_extras_wide<Tg, 1> : bwd3_extras_wide<Tg, 0>);
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    kern<<<dim3(p.num_chunks, p.H), kThreads, bytes, c.stream>>>(p);
  } else {
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(bwd3_extras<Tg>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    bwd3_extras<Tg><<<dim3(p.num_chunks, p.H), kThreads, bytes, c.stream>>>(p);
  }
  LINATTN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

std::size_t bwd_v3_workspace_bytes(const KParams& p) {
  return std::max(tc_offset(p) + tc_lean_workspace_bytes(p), bwd_v2_workspace_bytes(p));  // lean_g: rung 7's kA
}

std::size_t bwd_saved_workspace_bytes(const KParams& p) { return std::max(tc_offset(p), bwd_v2_workspace_bytes(p)); }

void bwd_saved_states_layout(const KParams& p, std::size_t& ws_bytes, std::size_t& a_off, std::size_t& s_off,
                             std::size_t& vn_off) {
  // Only what the backward reads from the forward: bwd_ws's v_new, A and S in KParams::keep's layout
  // (the backward's scratch is the process-wide workspace, as without states).
  ws_bytes = (bwd_keep_bytes(p) + 255) / 256 * 256;
  vn_off = 0, a_off = sizeof(float) * std::size_t(keep_a_off(p)), s_off = sizeof(float) * std::size_t(keep_s_off(p));
}

void bwdc::bwd_v3_front(const BwdCall& c, Profile& prof, bool levels_intra, bool wide_extras, bool extras,
                        bool g_only, bool ds_bf16, bool dv_bf16, DsPick ds, bool dv_planes) {
  const KParams& p = c.p;
  const BWs bw = bwd_ws(p);
  // A training forward's saved workspace (c.saved_ws: rung 4's intra outputs, written by rung 7's intra
  // kernel in its range, chunk_cuda.hpp SavedForward) replaces the backward's own tc region, whose intra launch is then skipped. With
  // c.saved_states the forward saved its states too (SavedForward with states): p.keep then points at
  // the saved object's v_new, A and S, which bwd_ws places there (bw.vn, bw.A, bw.S: the forward's
  // kernels wrote them), so neither A's copy nor the states kernel runs.
  if (c.saved_ws && !levels_intra)
    throw std::logic_error("linattn::cuda: bwd_v3_front: a saved forward holds rung 4's intra outputs, "
                           "but this prepare runs rung 3's (backward_device should have refused it)");
  void* tcws = c.saved_ws ? c.saved_ws : static_cast<char*>(p.ws) + tc_offset(p);
  Call fc;  // the forward's view of the call: its workspace, no o or ht
  fc.p = p;
  fc.p.ws = tcws;
  fc.p.o = nullptr;
  fc.p.ht = nullptr;
  fc.dtype = c.dtype, fc.gate_dtype = c.gate_dtype, fc.stream = c.stream;
  const int KP = tc_pick_kp(p.K);
  const bool saved_states = c.saved_states;
  if (c.s_bf16 && !(ds_bf16 && dv_bf16 && dv_planes && levels_intra))
    throw std::logic_error("linattn::cuda: bwd_v3_front: bf16 S (rung 28) goes with rung 27's front (ds_bf16, dv_bf16, "
                           "dv_planes, levels_intra)");
  if (saved_states != (p.keep != nullptr))
    throw std::logic_error("linattn::cuda: bwd_v3_front: saved states and KParams::keep go together");
  if (saved_states && (!c.saved_ws || c.saved_A))
    throw std::logic_error("linattn::cuda: bwd_v3_front: saved states need the saved tc region and no saved_A "
                           "(backward_device sets them together)");
  // Where forward `best` runs rung 9 (v9_in_best), the levels rungs recompute rung 9's lean states (session
  // 15), which its saving forward saves; rung 7's kA intra kernel writes the lean_g they read.
  const bool lean = levels_intra && v9_in_best(fc);
  if (p.num_chunks > 0) {
    if (saved_states) {
      // A is at bw.A already (the saving forward's intra kernel wrote it there)
    } else if (c.saved_ws)  // A as the saved intra kernel wrote it, where the later kernels read it (bw.A)
      LINATTN_CUDA_CHECK(cudaMemcpyAsync(bw.A, c.saved_A, sizeof(float) * std::size_t(p.B) * p.T * p.H * C,
                                         cudaMemcpyDeviceToDevice, c.stream));
    else if (levels_intra && (g_only || lean) && v7_in_range(fc)) v7_intra_launch_with_A(fc, bw.A);  // rung 18, lean
    else if (levels_intra) v4_intra_launch_with_A(fc, bw.A);
    else v3_intra_launch_with_A(fc, bw.A);
    if (!extras) {
      // rung 9: its grads kernel forms G, E, Qg, Kd (bwd_common.cuh, Mid::kNoExtras)
    } else if (g_only) {  // rung 18 (DeltaNet, GDN): G only, and only where there is a gate
      if (p.gate == kGateChannel || p.gdn2)
        throw std::logic_error("linattn::cuda: bwd_v3_front: g_only is for DeltaNet and GDN (scalar gates)");
      if (p.gate == kGateScalar) {
        if (c.gate_dtype == 0) bwd18_gcum<float><<<dim3(p.num_chunks, p.H), C, 0, c.stream>>>(p);
        else bwd18_gcum<bf16><<<dim3(p.num_chunks, p.H), C, 0, c.stream>>>(p);
        LINATTN_CUDA_CHECK(cudaGetLastError());
      }
    } else if (c.gate_dtype == 0) launch_extras<float>(c, wide_extras);
    else launch_extras<bf16>(c, wide_extras);
    prof.mark();
    // rung 28 (c.s_bf16): S stored as its bf16 hi part (v2_state_body's kSbf), for bwd_v28_g1
    if (!saved_states && lean) tc_state_bwd_lean_launch(fc, KP, bw.S, bw.vn, c.s_bf16);
    else if (!saved_states) tc_state_bwd_launch(fc, KP, bw.S, bw.vn, c.s_bf16);
    prof.mark();
  }
  const int bv = dstates_bv(p, ds);
  if (ds_bf16 && (p.gate != kGateNone || p.gdn2))
    throw std::logic_error("linattn::cuda: bwd_v3_front: ds_bf16 is for DeltaNet (GDN's dgamma needs float32 dS')");
  if (dv_bf16 && (p.gate == kGateChannel || p.gdn2))
    throw std::logic_error("linattn::cuda: bwd_v3_front: dv_bf16 is for DeltaNet and GDN (rung 20's G1')");
  // ds_bf16 (rung 19, DeltaNet): dS' as its bf16 hi part, which only G1' reads; dv_bf16 (rung 20): dv_new's too
  // DsPick::one_stage (rung 23): the single-stage kernel (kOne) for rung 21's three fronts. DsPick::wide (rung 24): bv
  // is 128 where dstates_bv picks the wide kernel, which launch_dstates_kp_bv runs for any front (it is kOne's)
  const bool ds_one = ds == DsPick::one_stage;
  if (c.ds_w2 && !c.ds_b1_hi)
    throw std::logic_error("linattn::cuda: bwd_v3_front: ds_w2 (rung 30) goes with ds_b1_hi (rung 29)");
  if (c.ds_b1_hi && !(dv_planes && !ds_one))
    throw std::logic_error("linattn::cuda: bwd_v3_front: ds_b1_hi (rung 29) goes with rung 27's dv_planes front");
  if (ds_one && ds_bf16 && dv_bf16)
    throw std::logic_error("linattn::cuda: bwd_v3_front: ds_one takes bf16 dS' or bf16 dv_new, not both (rung 21's fronts)");
  if (ds_one && ds_bf16) launch_dstates_kp_bv<true, false, true>(c, tcws, KP, bv);  // rung 23, DeltaNet
  else if (ds_one && dv_bf16) launch_dstates_kp_bv<false, true, true>(c, tcws, KP, bv);  // rung 23, GDN
  else if (ds_one) launch_dstates_kp_bv<false, false, true>(c, tcws, KP, bv);  // rung 23, GDN outside dv_bf16_ok
  else if (dv_planes) {  // rung 27, DeltaNet: dv_new as bf16 hi and lo planes only
    if (!(ds_bf16 && dv_bf16) || p.V % 2 != 0)
      throw std::logic_error("linattn::cuda: bwd_v3_front: dv_planes goes with ds_bf16 and dv_bf16, V even (rung 27)");
    if (c.ds_b1_hi && c.ds_w2) launch_dstates_kp_bv<true, true, false, true, true, true>(c, tcws, KP, bv);  // rung 30
    else if (c.ds_b1_hi) launch_dstates_kp_bv<true, true, false, true, true>(c, tcws, KP, bv);  // rung 29
    else launch_dstates_kp_bv<true, true, false, true>(c, tcws, KP, bv);
  } else if (dv_bf16 && ds_bf16) launch_dstates_kp_bv<true, true>(c, tcws, KP, bv);  // rung 20, DeltaNet
  else if (dv_bf16) launch_dstates_kp_bv<false, true>(c, tcws, KP, bv);       // rung 20, GDN (float32 dS': dgamma)
  else if (ds_bf16) launch_dstates_kp_bv<true, false>(c, tcws, KP, bv);       // rung 19
  else launch_dstates_kp_bv<false, false>(c, tcws, KP, bv);
  prof.mark();
}

void bwd_v3_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v2_launch(c);  // outside the range (file comment)
  Profile prof(c.stream, "bwd_v3");
  bwdc::bwd_v3_front(c, prof);
  if (p.num_chunks > 0) bwdc::bwd_v2_grads(c, prof);
}

}  // namespace linattn::cuda::detail

namespace linattn::cuda {

/// Rung 24's dstates width at key width 128 (DsPick::wide), for nh = N H (sequence, head) pairs of V value columns on
/// a device of `sms` SMs: the width w of 32, 64 and 128 with the least waves(w) x cost(w), where waves(w) =
/// ceil(nh ceil(V / w) / sms) (every width runs one block per SM at a time) and cost(w) is the time of one block of
/// w columns over a sequence relative to one of 32, measured on the H200 in session 23 (call 3, 2 x 16384, 32 blocks
/// to 128, one wave each: dstates 0.741 / 1.124 / 1.994 ms for DeltaNet, 0.838 / 1.282 / 2.032 for GDN) as 1, 1.52,
/// 2.6 (DeltaNet's; GDN's 2.4 picks the same at every shape measured). With these it predicts the measured order of
/// the three widths at all five shapes of that call (N H = 32, 64, 96, 128, 256: 32, 64, 128, 128, 128; e.g. 64 at
/// N H = 64: 2 / 1.52 / 2.6 against 0.411 / 0.320 / 0.533 ms measured). Ties go to the wider tile (fewer re-reads
/// of the K-side tiles). Rung 22's rule (two_stage) takes 32 at N H = 64, 0.08-0.09 ms slower there.
int dstates_wide_pick(long nh, int V, int sms) {  // declared in route.hpp
  const int widths[3] = {128, 64, 32};
  const double cost[3] = {2.6, 1.52, 1.0};
  int best = 128;
  double best_t = 0;
  for (int i = 0; i < 3; ++i) {
    const long blocks = nh * ((V + widths[i] - 1) / widths[i]);
    const double t = double((blocks + sms - 1) / sms) * cost[i];
    if (i == 0 || t < best_t) best = widths[i], best_t = t;
  }
  return best;
}

}  // namespace linattn::cuda
