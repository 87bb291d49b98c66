// optimized/cuda/bwd_common.cuh -- what the rungs of the CUDA backward ladder share (moved out of
// bwd_v1_simple.cu): the float32 workspace of the chunked backward, the gate width, the chunk of a
// sequence, the gradient outputs of one call, the per-kernel profile (LINATTN_BWD_PROFILE), and
// the launcher of rung 1's first three kernels (prepare, states, state gradients; rung 2 reuses
// its states kernel as it is) and of rung 2's chunk-gradient kernel (reused by rung 3), rung 3's
// first three stages (reused by rung 4), and rung 2's chunk-gradient kernel bwd_grads_tc itself with
// its bf16 tile helpers (a template over its B7 / B9 part, so that rung 4 reuses the rest).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "optimized/cuda/mma.cuh"
#include "optimized/cuda/versions.cuh"

namespace linattn::cuda::detail::bwdc {

constexpr int C = 64;
constexpr int BV = 32;  // value columns per block of the two recurrences
constexpr int kThreads = 256;
constexpr int LD = C + 1;  // row stride of the C x C float32 shared matrices

__host__ __device__ inline int gate_width(const KParams& p) {
  return p.gate == kGateChannel ? p.K : (p.gate == kGateScalar ? 1 : 0);
}

/// The workspace, carved from p.ws. rows = B * T * H (row of token t, head h: t * H + h).
struct BWs {
  double* G;   // [rows, KG] cumulative log-decay inside the chunk (float64)
  float* wa;   // [rows, K] w_aux
  float* E;    // [rows, K] e (.) exp(G)
  float* Qg;   // [rows, K] scale q (.) exp(G)
  float* Kd;   // [rows, K] k (.) exp(G_last - G)
  float* vn;   // [rows, V] u, then v_new
  float* dvn;  // [rows, V] dL/dv_new
  float* P;    // [rows, C] intra-chunk read, row i of its chunk
  float* A;    // [rows, C] (I + L)^-1, row i of its chunk
  float* S;    // [chunks, H, K, V] state entering each chunk
  float* dS;   // [chunks, H, K, V] dL/d(state leaving each chunk) (rung 19, DeltaNet: bf16 in its first half)
  float* dQg;  // [rows, K]
  float* dKd;  // [rows, K]
  float* dwa;  // [rows, K] (bf16 in its first half: rung 19 with LINATTN_BWD19_DWA_BF16=1, and rung 26)
  float* dE;   // [rows, K]
  float* deL;  // [rows, K] de^L, then de
  float* dqP;  // [rows, K]
  float* dkLP; // [rows, K]
  float* dGc;  // [rows, K] reverse cumulative sum of dG (scalar gates: summed over K afterwards)
  float* du0;  // [rows, V]
};

/// KParams::keep's layout (float elements from keep): v_new [rows, V] at 0, A [rows, C] at keep_a_off,
/// S [num_chunks H, K, V] at keep_s_off (rows = B T H).
__host__ __device__ inline std::int64_t keep_a_off(const KParams& p) { return std::int64_t(p.B) * p.T * p.H * p.V; }
__host__ __device__ inline std::int64_t keep_s_off(const KParams& p) {
  return keep_a_off(p) + std::int64_t(p.B) * p.T * p.H * C;
}

__host__ __device__ inline BWs bwd_ws(const KParams& p) {
  const std::int64_t rows = std::int64_t(p.B) * p.T * p.H;
  const std::int64_t st = std::int64_t(p.num_chunks) * p.H * p.K * p.V;
  BWs w;
  w.G = static_cast<double*>(p.ws);
  float* f = reinterpret_cast<float*>(w.G + rows * gate_width(p));
  auto take = [&](std::int64_t n) { float* r = f; f += n; return r; };
  w.wa = take(rows * p.K), w.E = take(rows * p.K), w.Qg = take(rows * p.K), w.Kd = take(rows * p.K);
  w.vn = take(rows * p.V), w.dvn = take(rows * p.V);
  w.P = take(rows * C), w.A = take(rows * C);
  w.S = take(st), w.dS = take(st);
  w.dQg = take(rows * p.K), w.dKd = take(rows * p.K), w.dwa = take(rows * p.K), w.dE = take(rows * p.K);
  w.deL = take(rows * p.K), w.dqP = take(rows * p.K), w.dkLP = take(rows * p.K), w.dGc = take(rows * p.K);
  w.du0 = take(rows * p.V);
  if (p.keep) {  // a saved forward with states: v_new, A and S where it stored them (their slots above unused)
    w.vn = p.keep, w.A = p.keep + keep_a_off(p), w.S = p.keep + keep_s_off(p);
  }
  return w;
}

/// The bytes of KParams::keep's arrays: what a saved forward with states keeps for the backward.
inline std::size_t bwd_keep_bytes(const KParams& p) {
  return sizeof(float) * std::size_t(keep_s_off(p) + std::int64_t(p.num_chunks) * p.H * p.K * p.V);
}

inline std::size_t bwd_ws_bytes(const KParams& p) {
  const std::size_t rows = std::size_t(p.B) * p.T * p.H;
  const std::size_t st = std::size_t(p.num_chunks) * p.H * p.K * p.V;
  return sizeof(double) * rows * gate_width(p) +
         sizeof(float) * (rows * (12 * std::size_t(p.K) + 3 * std::size_t(p.V) + 2 * C) + 2 * st);
}

/// First chunk (index in the chunk table) of sequence n.
__device__ __forceinline__ int first_chunk(const KParams& p, int n) {
  return p.seq_chunk0 ? p.seq_chunk0[n] : n * p.chunks_per_seq;
}

/// G of row i of the chunk at channel d (0 for DeltaNet).
__device__ __forceinline__ double G_at(const KParams& p, const BWs& ws, std::int64_t row, int d) {
  const int KG = gate_width(p);
  return KG == 0 ? 0.0 : ws.G[row * KG + (KG == 1 ? 0 : d)];
}

/// Rung 7's addressing of the grads kernel's [rows, W] arrays (Mid::kRowBase; issue 6): element
/// (row(i), d), row(i) = (tok0 + i) H + h, is base(a, W)[i * HW + d] with the 64-bit per-block base
/// a + (tok0 H + h) W formed once per tensor and a 32-bit offset per item, instead of rungs 2-6's
/// 64-bit row(i) * W + d per item (ncu, session 6: 10-15 integer instructions per loaded item, 62% of
/// the kernel's instructions integer / address arithmetic). i < 64 and d < W + 63 (the stagings form
/// the offsets of padding items too, without loading them), so every offset is below 64 H W + 63
/// <= 2^31 when H * max(K, V, C) < 2^25, which bwd_v7_launch checks (else it runs rung 6).
struct RowBase {
  std::int64_t r0;       // row(0) = tok0 H + h
  int H, HK, HV, HC, KG, HKG;  // H, H K, H V, H C, the gate width and H KG (32-bit row strides)
  const void* valid;     // q: a global array every call has (stands in for an operator's null arrays)
  __device__ __forceinline__ RowBase(const KParams& p, int tok0, int h)
      : r0(std::int64_t(tok0) * p.H + h), H(p.H), HK(p.H * p.K), HV(p.H * p.V), HC(p.H * C), KG(gate_width(p)),
        HKG(p.H * gate_width(p)), valid(p.q) {}
  /// Row(0) of the array a with W columns: a[row(i) * W + d] == base(a, W)[i * (H W) + d].
  /// a must be a global array (not null): q, k, v, do, the workspace's arrays, dq, dk, dv.
  template <class T>
  __device__ __forceinline__ T* base(T* a, int W) const {
    T* b = a + r0 * W;
    // An empty asm: b is one opaque value, so the compiler keeps (or re-forms) the base and addresses
    // an item with one IMAD.WIDE.U32 from the 32-bit offset, instead of folding r0 W back into a
    // 64-bit index per item (without it nvcc re-formed param + (r0 W + sext(offset)) per load).
    asm("" : "+l"(b));
    __builtin_assume(__isGlobal(b));
    return b;
  }
  /// base() for an array an operator may not have (null: b, w, db, dw, dg, dbeta, G). Such an array
  /// is never dereferenced; its base is formed from q instead, so that base()'s global-space
  /// assumption is only ever made of a pointer into global memory.
  template <class T>
  __device__ __forceinline__ T* base_opt(T* a, int W) const {
    return base(a ? a : static_cast<T*>(const_cast<void*>(valid)), W);
  }
  /// G of row i of the chunk at channel d (G_at's value), from Gb = base(ws.G, KG).
  __device__ __forceinline__ double G(const double* Gb, int i, int d) const {
    return KG == 0 ? 0.0 : Gb[i * HKG + (KG == 1 ? 0 : d)];
  }
};

/// RowBase's stand-in for rungs 2-6 (Mid::kRowBase false): nothing computed.
struct NoRowBase {
  __device__ __forceinline__ NoRowBase(const KParams&, int, int) {}
};

/// The gradient outputs of one call, by value for the kernels.
struct BwdOut {
  const void* do_;
  void *dq, *dk, *dv, *dg, *dbeta, *db, *dw;
};

/// With LINATTN_BWD_PROFILE set, each kernel is timed with CUDA events and the times are printed
/// (stderr) after a synchronisation: where the time of a rung goes.
struct Profile {
  bool on = std::getenv("LINATTN_BWD_PROFILE") != nullptr;
  cudaStream_t stream;
  const char* title;
  cudaEvent_t ev[6];
  int n = 0;
  Profile(cudaStream_t s, const char* t) : stream(s), title(t) {
    if (!on) return;
    for (auto& e : ev) LINATTN_CUDA_CHECK(cudaEventCreate(&e));
    mark();
  }
  void mark() {  // marks past the last event are dropped (review10: rung 16 uses all six)
    if (on && n < int(sizeof(ev) / sizeof(ev[0]))) LINATTN_CUDA_CHECK(cudaEventRecord(ev[n++], stream));
  }
  ~Profile() {
    if (!on) return;
    cudaEventSynchronize(ev[n - 1]);
    const char* names[] = {"prepare", "states", "dstates", "grads", "wy"};  // wy: rung 10's G2
    std::fprintf(stderr, "%s kernels (ms):", title);
    for (int i = 1; i < n; ++i) {
      float ms = 0.f;
      cudaEventElapsedTime(&ms, ev[i - 1], ev[i]);
      std::fprintf(stderr, " %s %.3f", names[i - 1], ms);
    }
    std::fprintf(stderr, "\n");
    for (auto& e : ev) cudaEventDestroy(e);
  }
};

/// Stages of bwd_v1_front, as bits. kPreparePadded: bwd_prepare with its shared rows padded (rung 2's
/// choice, free of bank conflicts), in place of kPrepare.
enum : unsigned { kPrepare = 1, kStates = 2, kDstates = 4, kAllStages = 7, kPreparePadded = 8 };
/// Rung 1's bwd_prepare, bwd_states and bwd_dstates (bwd_v1_simple.cu), those named in `stages`,
/// in this order on c's stream, each followed by prof.mark(). After all three, the workspace holds
/// G, A, w_aux, E, Qg, Kd, P, v_new, the states S and dS', dv_new, and c.dh0 is written.
void bwd_v1_front(const BwdCall& c, Profile& prof, unsigned stages = kAllStages);
/// Rung 2's bwd_grads_tc (bwd_v2_tensorcore.cu; bf16 inputs), then prof.mark(): B2, B4-B11 from a
/// workspace holding G, A, E, Qg, Kd, v_new, dv_new, S and dS' (rung 3 reuses it as it is).
void bwd_v2_grads(const BwdCall& c, Profile& prof);
/// Whether rung 3 (and every rung built on it, 4 to 7) takes this call: bf16 inputs and
/// 16 <= K <= 128, the range of the forward's tensor-core kernels it runs; other calls run rung 2.
inline bool in_rung3_range(const BwdCall& c) { return c.dtype == 1 && c.p.K >= 16 && c.p.K <= 128; }
/// Whether RowBase's per-block 32-bit offsets i * (H W) + d (i < 64, d < W + 63) hold for this call
/// (rungs 7 and up): H W < 2^25 for W = K, V and C = 64; other calls run rung 6.
inline bool in_rowbase_range(const KParams& p) {
  return std::int64_t(p.H) * std::max({std::int64_t(p.K), std::int64_t(p.V), std::int64_t(64)}) < (std::int64_t(1) << 25);
}
/// Whether a grid of one block per (64-channel slab of K, chunk) -- rungs 12 to 19's G1' and rung 14's
/// G1s -- fits its x extent, num_chunks * ceil(K / 64) < 2^31 (a signed int index in those kernels).
inline bool slab_grid_fits(const KParams& p) {
  return std::int64_t(p.num_chunks) * ((p.K + 63) / 64) < (std::int64_t(1) << 31);
}
/// Where rung 18 (bwd_v18_lean.cu) runs its own split kernels: DeltaNet and GDN inside rung 3's and RowBase's
/// range, G1''s grid fitting. Elsewhere rung 18 runs rung 17, and rung 19 (bwd_v19_dsbf16.cu) runs rung 18.
inline bool in_rung18_range(const BwdCall& c) {
  const KParams& p = c.p;
  return in_rung3_range(c) && in_rowbase_range(p) && p.gate != kGateChannel && !p.gdn2 && slab_grid_fits(p);
}
/// Where rung 20 (bwd_v20_dvbf16.cu) hands dv_new to G1' in bf16: rung 18's range, V % 8 == 0 and ws.du0 16-byte
/// aligned (the dstates kernel's 16-byte row stores; G1''s quads then load 8 aligned bytes), and G1''s quad staging
/// path taken (its wideV: the other arrays it stages aligned), so that bf16 dv_new is never staged by its item path
/// (unreachable with kDvH). Elsewhere rung 20 runs rung 19.
inline bool dv_bf16_ok(const BwdCall& c) {
  const BWs ws = bwd_ws(c.p);
  auto al = [](const void* a, std::uintptr_t n) { return reinterpret_cast<std::uintptr_t>(a) % n == 0; };
  return in_rung18_range(c) && c.p.V % 8 == 0 && al(ws.du0, 16) && al(ws.vn, 16) && al(ws.dvn, 16) && al(ws.S, 16) &&
         al(ws.dS, 16) && al(c.do_, 8) && al(c.p.v, 8);
}
/// Which dstates kernel (bwd3_dstates, bwd_v3_async.cu) bwd_v3_front launches; every choice computes the same values
/// bit for bit (proofs_tests/test_cuda_backward.cu). The value columns per block come from dstates_bv, where
/// LINATTN_BWD3_BV (32, 64, or 128 at key width 128) overrides every default.
///   two_stage  rung 3 to 22: two stages of the w_aux, Qg, Kd tiles, 64 value columns per block where that still
///              gives every SM a block, else 32;
///   one_stage  rung 23: one stage of those tiles (kOne), 32 columns at key width 128 (two blocks per SM);
///   wide       rung 24: at key width 128, 32, 64 or 128 columns by a wave-count model (bwd_v3_async.cu's
///              dstates_wide_pick; 128 is a head's whole value range on kOne's single stage, one block per SM);
///              elsewhere two_stage.
enum class DsPick { two_stage, one_stage, wide };
/// Rung 3's first three stages (bwd_v3_async.cu; bf16 inputs, 16 <= K <= 128, p.N > 0): prepare,
/// states, dstates on the forward's tensor-core kernels, each followed by prof.mark() (prepare and
/// states only when there are chunks). Afterwards the workspace holds what bwd_v2_grads reads and
/// c.dh0 is written; rung 4 reuses it as it is. levels_intra: prepare runs the forward's rung 4
/// intra kernel (v4_intra_launch_with_A) instead of rung 3's (the backward's rung 5). wide_extras:
/// bwd3_extras_wide (rung 8: quads, the same values bit for bit) where K % 4 == 0 and the arrays are
/// aligned, else bwd3_extras. extras false (rung 9): no extras kernel at all (G, E, Qg, Kd not written:
/// rung 9's grads kernel forms them). g_only (rung 18; DeltaNet and GDN): instead of the extras kernel,
/// G alone for GDN (bwd18_gcum, the same float64 values) and nothing for DeltaNet (E, Qg, Kd not written:
/// rung 18's G1' and G2' form them). ds_bf16 (rung 19; DeltaNet only, else std::logic_error): the dstates kernel
/// saves dS' as its bf16 hi part into ws.dS's first half (bwd3_dstates' kDsH), for bwd_v12_g1_dsh and
/// bwd_v12_g1_dsh_dwah. dv_bf16 (rung 20; DeltaNet and GDN, else std::logic_error): the dstates kernel also saves
/// dv_new's bf16 hi part into ws.du0's first half (bwd3_dstates' kDvH), for bwd_v12_g1_dvh / bwd_v12_g1_dsh_dvh;
/// the caller checks rung 20's alignment (bwdc::dv_bf16_ok). ds: which dstates kernel (DsPick), with ds_bf16 or
/// dv_bf16 or neither; each computes the same values. c.s_bf16 (rung 28; with ds_bf16, dv_bf16 and dv_planes, else
/// std::logic_error): ws.S holds S as its bf16 hi part; without saved states the states kernel stores it so (with
/// saved states the saving forward did).
void bwd_v3_front(const BwdCall& c, Profile& prof, bool levels_intra = false, bool wide_extras = false,
                  bool extras = true, bool g_only = false, bool ds_bf16 = false, bool dv_bf16 = false,
                  DsPick ds = DsPick::two_stage, bool dv_planes = false);
/// Rung 4's chunk-gradient kernel (bwd_v4_tc_tail.cu: bwd_grads_tc with B7 and B9 on tensor cores),
/// then prof.mark(); reads the workspace bwd_v3_front leaves. batch_loads: rung 5's variant (V5Mid:
/// stagings, tail and V4Mid's B9 slabs load in batches, the per-channel float32 B9 unrolled;
/// Mid::kBatchLoads, Mid::kUnrolledB9; the same operations in the same order).
void bwd_v4_grads(const BwdCall& c, Profile& prof, bool batch_loads = false);
/// Rung 6's chunk-gradient kernel (bwd_v4_tc_tail.cu's V6Mid: rung 5's, with B9 for per-channel
/// gates on tensor cores by levels, bwd_v6_tc_b9.cuh), then prof.mark(); reads what bwd_v3_front leaves.
void bwd_v6_grads(const BwdCall& c, Profile& prof);
/// Rung 7's chunk-gradient kernel (bwd_v4_tc_tail.cu's V7Mid: rung 6's, its [rows, W] arrays addressed
/// by per-block bases and 32-bit offsets, RowBase), then prof.mark(); requires
/// H * max(K, V, C) < 2^25 (bwd_v7_launch checks it).
void bwd_v7_grads(const BwdCall& c, Profile& prof);
/// Rung 8's chunk-gradient kernel (bwd_v4_tc_tail.cu's V8Mid: rung 7's, its global loads and stores at
/// full width, Mid::kWide), then prof.mark(); the same range as bwd_v7_grads.
void bwd_v8_grads(const BwdCall& c, Profile& prof);
/// Rung 9's chunk-gradient kernel (bwd_v4_tc_tail.cu's V9Mid: rung 8's, forming G, E, Qg, Kd itself,
/// Mid::kNoExtras), then prof.mark(); reads what bwd_v3_front(.., extras = false) leaves (no G, E, Qg,
/// Kd); the same range as bwd_v7_grads.
void bwd_v9_grads(const BwdCall& c, Profile& prof);
/// Rung 15's chunk-gradient kernel for KDA and GDN2 (bwd_v4_tc_tail.cu's V15Mid: rung 8's, Mid::kHiOnly:
/// every product with hi-only operands, one bf16 MMA each), then prof.mark(); the same range as bwd_v8_grads.
void bwd_v15_grads(const BwdCall& c, Profile& prof);
/// Rung 10's G1, the state side of the split chunk-gradient kernel (bwd_v4_tc_tail.cu's V10Mid: rung
/// 8's kernel with Mid::kSplit, DeltaNet and GDN only), then prof.mark(): B2, B4, B5, B9's P half; writes
/// dq, ws.dwa (dw_aux), ws.dkLP (dk_part) and, for GDN, ws.dGc (dG_part, dG_last folded into the last
/// row). Rung 10's G2 (bwd_v10_split.cu) does the rest. The same range as bwd_v7_grads.
void bwd_v10_g1(const BwdCall& c, Profile& prof);
/// Rung 10's G2, the WY side (bwd_v10_split.cu's bwd10_wy), then prof.mark(): reads what G1 (rung 10's
/// bwd_v10_g1 or rung 12's G1', bwd_v12_g1slab.cu) leaves; the same range as bwd_v7_grads.
void bwd_v10_g2(const BwdCall& c, Profile& prof);
/// Rung 11's G2', the faster WY side (bwd_v11_wyfast.cu's bwd11_wy), then prof.mark(): a drop-in for
/// bwd_v10_g2 (same inputs and outputs); rung 13 (bwd_v13_g1g2.cu) runs it after rung 12's G1'.
void bwd_v11_g2(const BwdCall& c, Profile& prof);
/// Rung 12's G1', one block per 64-channel slab of K (bwd_v12_g1slab.cu's bwd12_g1), then prof.mark():
/// a drop-in for bwd_v10_g1 (same outputs); requires num_chunks * ceil(K / 64) < 2^31 (the grid's x).
void bwd_v12_g1(const BwdCall& c, Profile& prof);
/// Rung 15's G1' and G2' (bwd_v15_hionly.cu): bwd_v12_g1 and bwd_v11_g2 with hi-only operands (kHi: one
/// bf16 MMA per product, float32 operands rounded to bf16, no lo tiles); the same inputs, outputs and ranges.
void bwd_v12_g1_hi(const BwdCall& c, Profile& prof);
void bwd_v11_g2_hi(const BwdCall& c, Profile& prof);
/// Rung 17's G1' and G2' (bwd_v17_hybrid.cu): rung 15's with the lo operands that
/// bench/models/bwd_v17_hybrid_model.py finds necessary kept: G1''s dP = do v_new^T takes v_new's lo
/// (kVnLo); G2''s du0 = A^T dv_new takes dv_new's lo (kLo = kLoDu0). Same ranges.
void bwd_v12_g1_hy(const BwdCall& c, Profile& prof);
void bwd_v11_g2_hy(const BwdCall& c, Profile& prof);
/// Rung 18's G1' and G2' (bwd_v18_lean.cu): rung 17's, with GDN's Qg, Kd (G1') and E (G2') formed from q,
/// k, beta and G by the extras kernel's expressions (kLean) instead of read from the workspace; they run
/// after bwd_v3_front(.., g_only = true). Same ranges.
void bwd_v12_g1_lean(const BwdCall& c, Profile& prof);
void bwd_v11_g2_lean(const BwdCall& c, Profile& prof);
/// Rung 19's G1' and G2' (bwd_v19_dsbf16.cu): rung 18's, with G1' reading dS' as the bf16 array that
/// bwd_v3_front(.., ds_bf16 = true) leaves (bwd12_g1's kDsH; DeltaNet: bwd_v12_g1_dsh), and with
/// LINATTN_BWD19_DWA_BF16=1 dw_aux handed from G1' to G2' as bf16 (bwd12_g1's and bwd11_wy's kDwaH; DeltaNet
/// bwd_v12_g1_dsh_dwah, GDN bwd_v12_g1_dwah; G2' bwd_v11_g2_dwah). Same ranges.
void bwd_v12_g1_dsh(const BwdCall& c, Profile& prof);
void bwd_v12_g1_dsh_dwah(const BwdCall& c, Profile& prof);
void bwd_v12_g1_dwah(const BwdCall& c, Profile& prof);
void bwd_v11_g2_dwah(const BwdCall& c, Profile& prof);
/// Rung 20's G1' (bwd_v20_dvbf16.cu): rung 19's, reading dv_new as the bf16 array that bwd_v3_front(.., dv_bf16 =
/// true) leaves in ws.du0's first half (bwd12_g1's kDvH): DeltaNet with bf16 dS' too (bwd_v12_g1_dsh_dvh), GDN with
/// float32 dS' (bwd_v12_g1_dvh). G2' is rung 18's (bwd_v11_g2_lean). Same ranges, and bwdc::dv_bf16_ok.
void bwd_v12_g1_dsh_dvh(const BwdCall& c, Profile& prof);
void bwd_v12_g1_dvh(const BwdCall& c, Profile& prof);
/// Rung 21's G2' (bwd_v21_duvsmem.cu): rung 18's (bwd_v11_g2_lean) with dbeta's <du0, v> terms summed on chip
/// (bwd11_wy's kDuV): ws.du0 neither written nor read, v not read again. Same range.
void bwd_v11_g2_duv(const BwdCall& c, Profile& prof);
/// Rung 22's G1' (bwd_v22_kq8.cu): rung 21's (bwd_v12_g1_dsh for DeltaNet, bwd_v12_g1_dvh or bwd_v12_g1_lean for GDN)
/// with B9's k and q slabs staged by 16-byte octets where K % 8 == 0 (bwd12_g1's kKq8). Same ranges.
void bwd_v12_g1_dsh_kq8(const BwdCall& c, Profile& prof);
void bwd_v12_g1_dvh_kq8(const BwdCall& c, Profile& prof);
void bwd_v12_g1_lean_kq8(const BwdCall& c, Profile& prof);
/// Rung 17's chunk-gradient kernel for KDA and GDN2 (bwd_v4_tc_tail.cu's V17Mid: rung 15's V15Mid with
/// kLoDpDu0, dP and du0 taking v_new's and dv_new's lo), then prof.mark(); rung 8's range.
void bwd_v17_grads(const BwdCall& c, Profile& prof);
/// Rungs 10-13, the split chunk-gradient kernel (bwd_v10_split.cu): outside rung 3's range rung 2 (via
/// rung 3), outside RowBase's range rung 6, KDA and GDN2 rung 8; else rung 8's front, then g1 (the state
/// side: bwd_v10_g1 or bwd_v12_g1) and g2 (the WY side: bwd_v10_g2 or bwd_v11_g2), profiled as `name`.
/// g_only: the front without the extras kernel (bwd_v3_front's g_only; rung 18's kLean g1 and g2).
/// ds_bf16: bwd_v3_front's (rung 19, DeltaNet; g1 must then read bf16 dS': bwd_v12_g1_dsh).
/// dv_bf16: bwd_v3_front's (rung 20, DeltaNet and GDN; g1 must then read bf16 dv_new: bwd_v12_g1_(dsh_)dvh).
/// ds: bwd_v3_front's (DsPick: rung 23's single-stage dstates kernel, rung 24's wide one).
/// dv_planes: bwd_v3_front's (rung 27, DeltaNet with ds_bf16 and dv_bf16: dv_new as bf16 hi and lo planes in ws.du0, no
/// float32 dv_new; g2 must then read the planes).
void bwd_split_launch(const BwdCall& c, const char* name, void (*g1)(const BwdCall&, Profile&),
                      void (*g2)(const BwdCall&, Profile&), bool g_only = false, bool ds_bf16 = false,
                      bool dv_bf16 = false, DsPick ds = DsPick::two_stage, bool dv_planes = false);
/// c.s_bf16 (rung 28) goes through to bwd_v3_front: its states kernel (without saved states) stores S as bf16.
/// Rungs 21 and 22's split route (bwd_v21_duvsmem.cu), for a call inside rung 18's range (the caller checks it): the
/// front without extras, then g1 and rung 21's G2' (bwd_v11_g2_duv), profiled as `name`. g1 is g1_dn for DeltaNet (with
/// bf16 dS': ds_bf16), g1_gdn_dvh for GDN where bwdc::dv_bf16_ok holds (with bf16 dv_new: dv_bf16), else g1_gdn_lean.
/// ds: the front's dstates kernel (bwd_v3_front's DsPick: rung 23's single-stage, rung 24's wide).
void bwd_duv_split_launch(const BwdCall& c, const char* name, void (*g1_dn)(const BwdCall&, Profile&),
                          void (*g1_gdn_dvh)(const BwdCall&, Profile&), void (*g1_gdn_lean)(const BwdCall&, Profile&),
                          DsPick ds = DsPick::two_stage);
/// Rung 25's G1' (bwd_v25_g1async.cu: DeltaNet, operands by cp.async a value slab ahead), then prof.mark(), where g1a_ok
/// holds (DeltaNet inside dv_bf16_ok's range, K % 8 == 0, do 16-byte aligned); after bwd_v3_front(.., g_only, ds_bf16,
/// dv_bf16). bwd_v25_g1_dwah: the same with dw_aux stored as bf16 into ws.dwa's first half (rung 26's G2' reads it).
bool g1a_ok(const BwdCall& c);
void bwd_v25_g1(const BwdCall& c, Profile& prof);
void bwd_v25_g1_dwah(const BwdCall& c, Profile& prof);
/// Rung 26's G2' (bwd_v26_wyasync.cu: DeltaNet, operands by cp.async ahead of their products; dw_aux as bwd_v25_g1_dwah
/// leaves it), then prof.mark(), where g1a_ok holds. bwd_v26_g2_planes: rung 27's, reading dv_new as the bf16 hi and lo
/// planes bwd_v3_front(.., dv_planes = true) leaves in ws.du0.
void bwd_v26_g2(const BwdCall& c, Profile& prof);
void bwd_v26_g2_planes(const BwdCall& c, Profile& prof);
/// Rung 28's G1' (bwd_v25_g1async.cu's kernel with kSh: S copied as its bf16 hi part straight into its tile; dw_aux as
/// bwd_v25_g1_dwah), then prof.mark(), where g1a_ok holds and c.s_bf16 (ws.S holds bf16: the front's states kernel or
/// the saving forward stored it so).
void bwd_v28_g1(const BwdCall& c, Profile& prof);
/// Rung 31's G1' and G2' (bwd_v31_dkbf16.cu): bwd_v31_g1 is bwd_v28_g1 and bwd_v31_g1_f32s bwd_v25_g1_dwah (float32
/// saved S) with dk_part stored as bf16 into ws.dkLP's first half; bwd_v31_g2 is bwd_v26_g2_planes reading that bf16
/// dk_part and only the hi plane of dv_new (B8's du0 = A^T bf16_rn(dv_new)). Where g1a_ok holds.
void bwd_v31_g1(const BwdCall& c, Profile& prof);
void bwd_v31_g1_f32s(const BwdCall& c, Profile& prof);
void bwd_v31_g2(const BwdCall& c, Profile& prof);
/// Rung 32's G1' (bwd_v32_g1stage.cu): bwd_v31_g1 and bwd_v31_g1_f32s with dq, dk_part and dw_aux staged in shared
/// memory and stored as 16-byte row segments (bwd25_g1's kStE); the same values.
void bwd_v32_g1(const BwdCall& c, Profile& prof);
void bwd_v32_g1_f32s(const BwdCall& c, Profile& prof);
/// Rung 33's G2' (bwd_v33_g2stage.cu): bwd_v31_g2 with dv and dk stored as 16-byte row segments through free shared
/// memory (bwd26_wy's kSt); the same values.
void bwd_v33_g2(const BwdCall& c, Profile& prof);
/// The DeltaNet route of rungs 31 to 33 (bwd_v31_dkbf16.cu), for a call inside rung 29's own range (the caller checks
/// it and falls back otherwise): rung 29's front (the dstates kernel's B1 on dS''s hi part, dv_new as planes; not rung
/// 30's two stages), then g1 where S is bf16 (the saving forward's, or the front's states kernel stores it so) or g1_f32s
/// where a saved forward kept float32 S, then g2; profiled as `name`.
void dn_b1hi_split_launch(const BwdCall& c0, const char* name, void (*g1)(const BwdCall&, Profile&),
                          void (*g1_f32s)(const BwdCall&, Profile&), void (*g2)(const BwdCall&, Profile&));

// ------------------------------------------------------------------------------------------------
// Rung 2's chunk-gradient kernel bwd_grads_tc (B2, B4-B11 per (chunk, head); bwd_v2_tensorcore.cu's
// header describes it), moved here so that rung 4 (bwd_v4_tc_tail.cu) reuses its products (B4-B6,
// B8), its float32 B9 for per-channel gates and its tail (B10, B11). The template parameter Mid
// chooses B7 and B9: NoMid is rung 2 (B7 and B9 in float32, the code below); rung 4's Mid runs B7
// (and B9 where it can) on tensor cores in Mid::run, and when that returns false it has left dL in
// sdA and dP in sdP of the float32 overlay for rung 2's B9 below.
// ------------------------------------------------------------------------------------------------
using bf16 = __nv_bfloat16;

constexpr int LT = 72;          // row stride (elements) of the bf16 64 x 64 tiles
constexpr int kTile = 64 * LT;  // elements of one tile
// The bf16 tiles, in order: A hi, lo; do; v_new hi, lo; dv_new hi, lo; u0 hi, lo; S hi, lo;
// dS' hi, lo; dw_aux hi, lo; E hi, lo.
constexpr int kTiles = 17;
constexpr std::size_t kTileBytes = sizeof(bf16) * std::size_t(kTiles) * kTile;
// After the products the same memory holds five float32 C x LD matrices and B9's slab
// (k, scale q, e in float32, G in float64; 64 x 64 each), later B10's dG [64][K <= 256].
constexpr std::size_t kOverlayBytes = sizeof(float) * (5 * C * LD + 3 * 64 * 64) + sizeof(double) * 64 * 64;
static_assert(sizeof(float) * 64 * 256 <= sizeof(float) * 3 * 64 * 64 + sizeof(double) * 64 * 64,
              "dG fits over the B9 slab");
constexpr std::size_t kSmemMain = kTileBytes > kOverlayBytes ? kTileBytes : kOverlayBytes;

__device__ __forceinline__ float bf(bf16 x) { return __bfloat162float(x); }

/// Store x as hi + lo at tile position (r, c).
__device__ __forceinline__ void put_split(bf16* hi, bf16* lo, int r, int c, float x) {
  const bf16 h = __float2bfloat16_rn(x);
  hi[r * LT + c] = h;
  lo[r * LT + c] = __float2bfloat16_rn(x - bf(h));
}

/// acc (this warp's 16 x 32 part of a 64 x 64 tile: rows m0.., columns n0..) += A B over k = 64.
/// A: ATRANS false: row-major tile [m][k]; true: A = X^T for a row-major tile X [k][m].
/// B: BKN false: stored as a row-major tile [n][k] (a product with a transpose, X Y^T);
///    true: row-major [k][n].
/// Each operand as hi (+ lo when not null): hi*hi + hi*lo + lo*hi.
template <bool ATRANS, bool BKN>
__device__ __forceinline__ void gemm64(float (&acc)[4][4], const bf16* Ah, const bf16* Al, const bf16* Bh,
                                       const bf16* Bl, int m0, int n0) {
#pragma unroll
  for (int k0 = 0; k0 < 64; k0 += 16) {
    unsigned ah[4], al[4];
    if (ATRANS) load_a_t(ah, Ah, LT, m0, k0);
    else load_a(ah, Ah, LT, m0, k0);
    if (Al) {
      if (ATRANS) load_a_t(al, Al, LT, m0, k0);
      else load_a(al, Al, LT, m0, k0);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int n = n0 + 16 * half;
      unsigned bh[4], bl[4];
      if (BKN) load_b_kn(bh, Bh, LT, k0, n);
      else load_b_nk(bh, Bh, LT, n, k0);
      mma_bf16(acc[2 * half], ah, bh[0], bh[1]);
      mma_bf16(acc[2 * half + 1], ah, bh[2], bh[3]);
      if (Bl) {
        if (BKN) load_b_kn(bl, Bl, LT, k0, n);
        else load_b_nk(bl, Bl, LT, n, k0);
        mma_bf16(acc[2 * half], ah, bl[0], bl[1]);
        mma_bf16(acc[2 * half + 1], ah, bl[2], bl[3]);
      }
      if (Al) {
        mma_bf16(acc[2 * half], al, bh[0], bh[1]);
        mma_bf16(acc[2 * half + 1], al, bh[2], bh[3]);
      }
    }
  }
}

__device__ __forceinline__ void zero(float (&acc)[4][4]) {
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b) acc[a][b] = 0.f;
}

/// Calls f(r, c, value) for the 16 accumulator entries of this warp's part (see gemm64).
template <class F>
__device__ __forceinline__ void each_acc(const float (&acc)[4][4], int m0, int n0, F&& f) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) f(m0 + g + (e >= 2 ? 8 : 0), n0 + nt * 8 + 2 * t + (e & 1), acc[nt][e]);
}

// ------------------------------------------------------------------------------------------------
// Rung 8's full-width global accesses (Mid::kWide; issue 6; bwd_v8_wide.cu says why). Same values:
// a vector access moves the same bytes as the scalar ones it replaces, no arithmetic changes.
// ------------------------------------------------------------------------------------------------
/// d[0], d[1] = x0, x1 for columns col, col + 1 of a row of W columns: one 8-byte store when both are
/// in range and d is 8-byte aligned, else each in-range one by itself (tc_common.cuh's st_pair).
__device__ __forceinline__ void st_pair_w(float* d, float x0, float x1, int col, int W) {
  if (col + 1 < W && (reinterpret_cast<std::uintptr_t>(d) & 7) == 0) {
    *reinterpret_cast<float2*>(d) = make_float2(x0, x1);
  } else {
    if (col < W) d[0] = x0;
    if (col + 1 < W) d[1] = x1;
  }
}

/// bf16 pair (x0 at column col, x1 at col + 1, each rounded as st: to nearest even) by one 4-byte store when
/// both are in range and d is 4-byte aligned, else each in-range one by itself (moved from bwd_v11_wyfast.cu).
__device__ __forceinline__ void st_bf_pair(bf16* d, float x0, float x1, int col, int W) {
  if (col + 1 < W && (reinterpret_cast<std::uintptr_t>(d) & 3) == 0) {
    *reinterpret_cast<__nv_bfloat162*>(d) = __halves2bfloat162(__float2bfloat16_rn(x0), __float2bfloat16_rn(x1));
  } else {
    if (col < W) st(d, x0);
    if (col + 1 < W) st(d + 1, x1);
  }
}

/// each_acc by pairs: f(r, c, x(r, c), x(r, c + 1)) for the 8 column pairs (c even) this lane holds.
template <class F>
__device__ __forceinline__ void each_acc_pair(const float (&acc)[4][4], int m0, int n0, F&& f) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) f(m0 + g + 8 * hh, n0 + nt * 8 + 2 * t, acc[nt][2 * hh], acc[nt][2 * hh + 1]);
}

/// x0, x1 into d[0], d[1] by one 8-byte store when col < W, for a row of an even number W of
/// columns whose every even column is 8-byte aligned (col even): both columns in range or neither.
__device__ __forceinline__ void st_pair_even(float* d, float x0, float x1, int col, int W) {
  if (col < W) *reinterpret_cast<float2*>(d) = make_float2(x0, x1);
}

/// A fragment epilogue's float32 store by column pairs: element (r, c) of acc (each_acc's layout) to
/// base[r * HW + col0 + c] for r < Lc, col0 + c < W. even (W even and base 8-byte aligned, so every
/// pair is aligned and both or neither of its columns in range): st_pair_even, one bounds test and
/// one 8-byte store per pair; else st_pair_w's test per pair.
__device__ __forceinline__ void store_acc_pairs(float* base, int HW, int col0, int W, int Lc, bool even,
                                                const float (&acc)[4][4], int m0, int n0) {
  if (even) {
    each_acc_pair(acc, m0, n0, [&](int r, int c, float x0, float x1) {
      if (r < Lc) st_pair_even(base + r * HW + col0 + c, x0, x1, col0 + c, W);
    });
  } else {
    each_acc_pair(acc, m0, n0, [&](int r, int c, float x0, float x1) {
      if (r < Lc) st_pair_w(base + r * HW + col0 + c, x0, x1, col0 + c, W);
    });
  }
}

/// Whether a is aligned to `bytes` (a power of two).
template <class T>
__device__ __forceinline__ bool aligned(const T* a, int bytes) {
  return (reinterpret_cast<std::uintptr_t>(a) & std::uintptr_t(bytes - 1)) == 0;
}
/// x[0..3] = a[0..3] as floats by one 16-byte (float) or 8-byte (bf16) load; a aligned to that.
__device__ __forceinline__ void ld4(const float* a, float (&x)[4]) {
  const float4 v = *reinterpret_cast<const float4*>(a);
  x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
}
/// The four bf16 of an 8-byte word (element 0 at the lowest address) as floats.
__device__ __forceinline__ void unpack4(uint2 v, float (&x)[4]) {
  x[0] = bf(__ushort_as_bfloat16(v.x & 0xffffu)), x[1] = bf(__ushort_as_bfloat16(v.x >> 16));
  x[2] = bf(__ushort_as_bfloat16(v.y & 0xffffu)), x[3] = bf(__ushort_as_bfloat16(v.y >> 16));
}
__device__ __forceinline__ void ld4(const bf16* a, float (&x)[4]) { unpack4(*reinterpret_cast<const uint2*>(a), x); }
/// Four bf16 as one 8-byte word (element 0 at the lowest address).
__device__ __forceinline__ uint2 pack4(bf16 a, bf16 b, bf16 c, bf16 d) {
  return make_uint2(unsigned(__bfloat16_as_ushort(a)) | (unsigned(__bfloat16_as_ushort(b)) << 16),
                    unsigned(__bfloat16_as_ushort(c)) | (unsigned(__bfloat16_as_ushort(d)) << 16));
}
/// a[0..3] = x[0..3] by one 16-byte (float) or 8-byte (bf16, each rounded as st) store; a aligned.
__device__ __forceinline__ void st4(float* a, const float (&x)[4]) {
  *reinterpret_cast<float4*>(a) = make_float4(x[0], x[1], x[2], x[3]);
}
__device__ __forceinline__ void st4(bf16* a, const float (&x)[4]) {
  *reinterpret_cast<uint2*>(a) = pack4(__float2bfloat16_rn(x[0]), __float2bfloat16_rn(x[1]),
                                       __float2bfloat16_rn(x[2]), __float2bfloat16_rn(x[3]));
}
/// put_split of 4 consecutive columns c..c+3 (c a multiple of 4): the same hi and lo values, stored
/// as one 8-byte word per tile.
__device__ __forceinline__ void put_split4(bf16* hi, bf16* lo, int r, int c, const float (&x)[4]) {
  bf16 h[4], l[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) h[e] = __float2bfloat16_rn(x[e]), l[e] = __float2bfloat16_rn(x[e] - bf(h[e]));
  *reinterpret_cast<uint2*>(hi + r * LT + c) = pack4(h[0], h[1], h[2], h[3]);
  *reinterpret_cast<uint2*>(lo + r * LT + c) = pack4(l[0], l[1], l[2], l[3]);
}

/// Rung 15 (kHi: hi-only operands; issue 6): put_split when !kHi; when kHi only the hi tile, x rounded
/// to bf16 (no lo computed or stored).
template <bool kHi>
__device__ __forceinline__ void put_op(bf16* hi, bf16* lo, int r, int c, float x) {
  if constexpr (kHi) hi[r * LT + c] = __float2bfloat16_rn(x);
  else put_split(hi, lo, r, c, x);
}
/// put_op of 4 consecutive columns: put_split4 when !kHi; when kHi the hi tile's 8-byte word only.
template <bool kHi>
__device__ __forceinline__ void put_op4(bf16* hi, bf16* lo, int r, int c, const float (&x)[4]) {
  if constexpr (kHi) {
    *reinterpret_cast<uint2*>(hi + r * LT + c) =
        pack4(__float2bfloat16_rn(x[0]), __float2bfloat16_rn(x[1]), __float2bfloat16_rn(x[2]), __float2bfloat16_rn(x[3]));
  } else {
    put_split4(hi, lo, r, c, x);
  }
}
/// A gemm64 lo operand: lo when !kHi; nullptr when kHi (gemm64 then does hi*hi only, one MMA per product).
template <bool kHi>
__device__ __forceinline__ const bf16* lo_op(const bf16* lo) {
  return kHi ? nullptr : lo;
}

/// Rung 8's staging of a 64 x 64 float32 tile by quads into its hi / lo bf16 tiles (put_split4): item
/// (i, d) is base[i * HW + col0 + d] for i < Lc and col0 + d < W, else 0; quad qd = tid + t * kThreads
/// (t < 4) holds row qd >> 4, columns 4 (qd & 15) .. + 3, one 16-byte load each. Requires base 16-byte
/// aligned and HW, col0, W multiples of 4 (a quad is wholly in range or wholly out). A (col0 = 0, W = C)
/// and each K slab of E use it. kHi (rung 15): the hi tile only (put_op4).
/// Its two halves: load_quads, and put_quads for callers that issue other global loads before the stores
/// (bwd_v11_wyfast.cu: rung 18's G2' loads a slab's every operand before its first shared store).
__device__ __forceinline__ void load_quads(float (&x)[4][4], const float* base, int HW, int col0, int W, int Lc,
                                           int tid) {
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int qd = tid + t * kThreads, i = qd >> 4, d = 4 * (qd & 15);
    if (i < Lc && col0 + d < W) ld4(base + i * HW + col0 + d, x[t]);
    else x[t][0] = x[t][1] = x[t][2] = x[t][3] = 0.f;
  }
}
template <bool kHi = false>
__device__ __forceinline__ void put_quads(bf16* hi, bf16* lo, const float (&x)[4][4], int tid) {
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int qd = tid + t * kThreads;
    put_op4<kHi>(hi, lo, qd >> 4, 4 * (qd & 15), x[t]);
  }
}
template <bool kHi = false>
__device__ __forceinline__ void stage_quads(bf16* hi, bf16* lo, const float* base, int HW, int col0, int W, int Lc,
                                            int tid) {
  float x[4][4];
  load_quads(x, base, HW, col0, W, Lc, tid);
  put_quads<kHi>(hi, lo, x, tid);
}

// ------------------------------------------------------------------------------------------------
// Rung 9 (Mid::kNoExtras; issue 6; bwd_v9_noextras.cu says why): bwd_grads_tc forms F1 (G, float64)
// and F2's scaled E, Qg, Kd itself instead of reading what the prepare's extras kernel wrote, with
// bwd3_extras' expressions (bwd_v3_async.cu), so the same float32 values bit for bit.
// ------------------------------------------------------------------------------------------------
// The products are __fmul_rn (PTX mul.rn.f32): the value of bwd3_extras' plain product (no sum follows
// it there, so nothing was fused), and never fused here into a following add by nvcc or ptxas (a plain
// mul.f32 may be: e.g. E - bf16(E) in put_split's lo part, which would then differ from rung 8's).
/// F2: E_id = (e_i k_id) exp(G_id), e = beta_i (b_id for GDN2); bwd3_extras' `gate * kv * eg`, eg = expf(float(G_id)).
__device__ __forceinline__ float form_E_eg(float gate, float kv, float eg) { return __fmul_rn(__fmul_rn(gate, kv), eg); }
__device__ __forceinline__ float form_E(float gate, float kv, double Gi) { return form_E_eg(gate, kv, expf(float(Gi))); }
/// F2: Qg_id = (scale q_id) exp(G_id); bwd3_extras' `p.scale * q * eg`.
__device__ __forceinline__ float form_Qg(float scale, float qv, double Gi) {
  return __fmul_rn(__fmul_rn(scale, qv), expf(float(Gi)));
}
/// F2: Kd_id = k_id exp(G_last,d - G_id), the difference in float64; bwd3_extras' `kv * expf(float(Gl - Gi))`.
__device__ __forceinline__ float form_Kd(float kv, double Gi, double Gl) { return __fmul_rn(kv, expf(float(Gl - Gi))); }

/// Rung 2's choice of B7 and B9: both in float32 in bwd_grads_tc itself (run is never called).
struct NoMid {
  static constexpr bool kOwn = false;
  static constexpr bool kBatchLoads = false;  // stagings load and store item by item (see below)
  static constexpr bool kUnrolledB9 = false;  // the float32 B9 with the gate kind a run-time test
  static constexpr bool kRowBase = false;     // 64-bit row(i) * W + d per item (rung 7's V7Mid sets it)
  static constexpr bool kWide = false;        // 4-byte global accesses (rung 8's V8Mid sets it; needs kRowBase)
  static constexpr bool kNoExtras = false;    // E, Qg, Kd, G read from the workspace (rung 9's V9Mid forms them)
  static constexpr bool kSplit = false;       // the whole chunk gradient (rung 10's V10Mid: G1, the state side)
  static constexpr bool kHiOnly = false;      // hi + lo operands (rung 15's V15Mid: hi only, one MMA per product)
  template <class Tg>
  static __device__ bool run(const KParams&, const BWs&, unsigned char*, int, int, const float*, const float (&)[4][4],
                             const float (&)[4][4]) {
    return false;
  }
};

/// Mid::kHiOnly where Mid declares it (rung 15's V15Mid: true), else false (Mids written before it).
template <class Mid, class = void>
struct HiOnlyOf : std::false_type {};
template <class Mid>
struct HiOnlyOf<Mid, std::void_t<decltype(Mid::kHiOnly)>> : std::bool_constant<Mid::kHiOnly> {};
/// Mid::kLoDpDu0 where Mid declares it (rung 17's V17Mid: true, with kHiOnly: dP = do v_new^T and du0 =
/// A^T dv_new keep v_new's and dv_new's lo, every other product hi only), else false.
template <class Mid, class = void>
struct LoDpDu0Of : std::false_type {};
template <class Mid>
struct LoDpDu0Of<Mid, std::void_t<decltype(Mid::kLoDpDu0)>> : std::bool_constant<Mid::kLoDpDu0> {};

/// B2, B4-B11 per (chunk, head), with S, dS', v_new and dv_new known (bwd_v1_front). Dynamic shared
/// memory: kSmemMain + sizeof(float) * (2 * 256 + C) bytes.
template <class Tg, class Mid>
__global__ void __launch_bounds__(kThreads) bwd_grads_tc(KParams p, BwdOut out) {
  constexpr bool kHi = HiOnlyOf<Mid>::value;  // rung 15 (V15Mid): hi-only operands
  constexpr bool kHiV = kHi && !LoDpDu0Of<Mid>::value;  // v_new, dv_new hi only (rung 17's V17Mid: with lo)
  using Tin = bf16;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  bf16 *sAh = tiles, *sAl = tiles + kTile, *sdo = tiles + 2 * kTile;
  bf16 *svnh = tiles + 3 * kTile, *svnl = tiles + 4 * kTile;
  bf16 *sdvnh = tiles + 5 * kTile, *sdvnl = tiles + 6 * kTile;
  bf16 *su0h = tiles + 7 * kTile, *su0l = tiles + 8 * kTile;
  bf16 *sSh = tiles + 9 * kTile, *sSl = tiles + 10 * kTile;
  bf16 *sdSh = tiles + 11 * kTile, *sdSl = tiles + 12 * kTile;
  bf16 *sdwh = tiles + 13 * kTile, *sdwl = tiles + 14 * kTile;
  bf16 *sEh = tiles + 15 * kTile, *sEl = tiles + 16 * kTile;
  // dgamma in two partial sums, one per half (32 value columns) of a staged row: each slot gets
  // one add per value slab, in slab order, so the result is bitwise reproducible (one shared
  // slot updated by both halves' warps with atomicAdd was not: (x + a) + b != (x + b) + a).
  float* sdgam = reinterpret_cast<float*>(smem_raw + kSmemMain);   // [2][256] dgamma halves
  float* sbeta = sdgam + 2 * 256;                                   // [C]
  // float32 matrices of B7 and B9, overlaid on the tiles once the products are done.
  float* sA = reinterpret_cast<float*>(smem_raw);  // [C][LD]
  float* sdA = sA + C * LD;                         // [C][LD] dA, then dL
  float* sT1 = sdA + C * LD;                        // [C][LD] dA A^T
  float* sdP = sT1 + C * LD;                        // [C][LD]
  float* sGam = sdP + C * LD;                       // [C][LD] exp(G_i - G_j), scalar gates only

  const int K = p.K, V = p.V, H = p.H, h = blockIdx.y;
  const Tin* q = static_cast<const Tin*>(p.q);
  const Tin* k = static_cast<const Tin*>(p.k);
  const Tin* v = static_cast<const Tin*>(p.v);
  const Tin* dO = static_cast<const Tin*>(out.do_);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const Tg* bg = static_cast<const Tg*>(p.b);
  const Tg* wg = static_cast<const Tg*>(p.w);
  const BWs ws = bwd_ws(p);
  const int tid = threadIdx.x, nt = blockDim.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = (warp & 3) * 16, n0 = (warp >> 2) * 32;

  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
  // Mid::kRowBase (rung 7): the [rows, W] arrays through per-block bases and 32-bit offsets (RowBase).
  const std::conditional_t<Mid::kRowBase, RowBase, NoRowBase> rb(p, tok0, h);
  const float* S = ws.S + (std::int64_t(blockIdx.x) * H + h) * K * V;
  const float* dS = ws.dS + (std::int64_t(blockIdx.x) * H + h) * K * V;
  const bool chan = p.gate == kGateChannel;

  for (int i = tid; i < C; i += nt) sbeta[i] = (!p.gdn2 && i < Lc) ? ld(beta + row(i)) : 0.f;
  for (int d = tid; d < 2 * 256; d += nt) sdgam[d] = 0.f;
  if constexpr (Mid::kNoExtras) {
    // Rung 9: F1 of this (chunk, head) here instead of in the prepare's extras kernel: G_i = g_0 + ...
    // + g_i in float64, per channel in row order from acc = 0 (bwd3_extras' cumsum_log_decays, the
    // same adds), written to ws.G, from which the rest of the kernel reads it as in rung 8. The
    // 64 x K float64 G (64 KB at K = 128) does not fit beside the kernel's 167,424 + 1,024 (static)
    // bytes of shared memory under 227 KB, so it goes through ws.G, block-private: written and read by
    // this block only.
    // The g items are staged in float64 over the tiles (free until A's staging below).
    static_assert(Mid::kRowBase, "kNoExtras addresses through RowBase");
    const int KG = rb.KG;
    if (KG) {
      double* sGx = reinterpret_cast<double*>(smem_raw);  // [Lc][KG]
      const Tg* gb = rb.base_opt(static_cast<const Tg*>(p.g), KG);
      const int R = kThreads / KG, i0 = tid / KG, d = tid - i0 * KG;  // KG <= 128: R >= 2 rows per pass
      if (i0 < R) {
#pragma unroll 8
        for (int i = i0; i < Lc; i += R) sGx[i * KG + d] = double(ld(gb + i * rb.HKG + d));
      }
      __syncthreads();
      if (tid < KG) {  // one thread per channel: acc += g_i in row order, 8 rows' loads ahead of their adds
        double* Gb = rb.base(ws.G, KG);
        double acc = 0.0;
        int i = 0;
        for (; i + 8 <= Lc; i += 8) {
          double gi[8];
#pragma unroll
          for (int e = 0; e < 8; ++e) gi[e] = sGx[(i + e) * KG + tid];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc += gi[e], Gb[(i + e) * rb.HKG + tid] = acc;
        }
        for (; i < Lc; ++i) acc += sGx[i * KG + tid], Gb[i * rb.HKG + tid] = acc;
      }
      __syncthreads();  // the scratch read before the tiles are written; G written for the whole block
    }
  }
  // Mid::kBatchLoads (the backward's rung 5): the stagings below issue the global loads of several
  // items before storing any, so a thread waits one memory latency per batch instead of one per item
  // (optimized/cuda/bench/analysis_bwd_grads.md: the item-by-item loops were not unrolled and each
  // iteration waited a full global round trip, 358 per warp for DeltaNet). Same values, same order
  // of every floating-point operation as the item-by-item loops (so the same gradients, bit for bit:
  // test_cuda_backward's "CUDA v5 grads kernel after rung 3 prepare gives rung 4 gradients bit for
  // bit"). Requires blockDim.x == kThreads, as every launch of this kernel has.
  constexpr int kItems = C * C / kThreads;  // 16 items of a 64 x 64 staging per thread
  static_assert(C * C % kThreads == 0, "whole items per thread");
  // Mid::kWide (rung 8): where the arrays' alignment allows (K, V multiples of 4 and the workspace and
  // inputs aligned, as cudaMalloc and torch give), the stagings below load 4 consecutive columns of a
  // row per thread by one 16-byte (float32) or 8-byte (bf16) load instead of 4 items of 4 or 2 bytes,
  // and the fragment epilogues store column pairs by 8 bytes (st_pair_w); else rung 7's code. The
  // same values and floating-point operations in the same order.
  bool wideV = false, wideK = false, evenK = false, evenV = false;
  if constexpr (Mid::kWide) {
    static_assert(Mid::kRowBase, "kWide addresses through RowBase");
    wideV = V % 4 == 0 && aligned(ws.vn, 16) && aligned(ws.dvn, 16) && aligned(ws.S, 16) && aligned(ws.dS, 16) &&
            aligned(dO, 8) && aligned(v, 8) && (!p.gdn2 || aligned(wg, int(4 * sizeof(Tg))));
    if constexpr (Mid::kNoExtras)  // rung 9: E formed from k, beta | b and G by quads
      wideK = K % 4 == 0 && aligned(k, 8) && (!p.gdn2 || aligned(bg, int(4 * sizeof(Tg)))) && (!chan || aligned(ws.G, 16));
    else
      wideK = K % 4 == 0 && aligned(ws.E, 16);
    // Column pairs: the workspace's float32 arrays are 8-byte aligned (cudaMalloc'ed, after 8-byte G
    // items and whole float rows), so an even row width makes every pair aligned; checked anyway.
    evenK = K % 2 == 0 && aligned(ws.dQg, 8) && aligned(ws.dKd, 8) && aligned(ws.dwa, 8) && aligned(ws.dE, 8);
    evenV = V % 2 == 0 && aligned(ws.du0, 8);
  }
  bool a_wide = false;
  if constexpr (Mid::kSplit) {
    static_assert(Mid::kWide && !Mid::kNoExtras, "rung 10's G1 is rung 8's kernel (kWide, kRowBase) cut short");
    a_wide = true;  // rung 10's G1 never reads A (B7, B8 are G2's): nothing staged
  } else if constexpr (Mid::kWide) {
    if (aligned(ws.A, 16)) {
      a_wide = true;  // rung 8: by quads
      stage_quads<kHi>(sAh, sAl, rb.base(ws.A, C), rb.HC, 0, C, Lc, tid);
    }
  }
  if (a_wide) {
    // staged above (rung 8)
  } else if (Mid::kBatchLoads) {
    float a[kItems];
#pragma unroll
    for (int t = 0; t < kItems; ++t) {
      const int idx = tid + t * kThreads, i = idx >> 6, j = idx & 63;
      if constexpr (Mid::kRowBase) a[t] = i < Lc ? rb.base(ws.A, C)[i * rb.HC + j] : 0.f;
      else a[t] = i < Lc ? ws.A[row(i) * C + j] : 0.f;
    }
#pragma unroll
    for (int t = 0; t < kItems; ++t) {
      const int idx = tid + t * kThreads;
      put_op<kHi>(sAh, sAl, idx >> 6, idx & 63, a[t]);
    }
  } else {
    for (int idx = tid; idx < C * C; idx += nt) {
      const int i = idx >> 6, j = idx & 63;
      put_op<kHi>(sAh, sAl, i, j, i < Lc ? ws.A[row(i) * C + j] : 0.f);
    }
  }

  float accP[4][4], accA[4][4];
  zero(accP), zero(accA);
  for (int kk = 0; kk < K; kk += 64) {
    float accQ[4][4], accK[4][4], accW[4][4];
    zero(accQ), zero(accK), zero(accW);
    for (int vv = 0; vv < V; vv += 64) {
      __syncthreads();  // the previous slab's tiles are read
      if constexpr (Mid::kWide) {
        if (wideV) {
          // Rung 8: quad qd = tid + t * kThreads (t < 4) holds row i = qd >> 4, columns c .. c + 3,
          // c = 4 (qd & 15); 2 quads per batch (each 4 to 6 vector loads). dgamma: the butterfly of
          // the item-by-item code below, by columns: lanes xor 4, 2, 1 hold columns xor 16, 8, 4 of
          // the same half row (the same element), then the thread's own columns xor 2, then xor 1.
          constexpr int kQ = C * C / 4 / kThreads, kQB = 2;
#pragma unroll 1
          for (int t0 = 0; t0 < kQ; t0 += kQB) {
            uint2 rdo[kQB];
            float rvn[kQB][4], rdvn[kQB][4], ru[kQB][4], rv[kQB][4], rs[kQB][4], rds[kQB][4];
#pragma unroll
            for (int b = 0; b < kQB; ++b) {
              const int qd = tid + (t0 + b) * kThreads, i = qd >> 4, cc = vv + 4 * (qd & 15), d = kk + i;
              const bool in = i < Lc && cc < V, ins = d < K && cc < V;
              const int x = i * rb.HV + cc;
#pragma unroll
              for (int e = 0; e < 4; ++e) rvn[b][e] = rdvn[b][e] = ru[b][e] = rv[b][e] = rs[b][e] = rds[b][e] = 0.f;
              rdo[b] = make_uint2(0u, 0u);
              if (in) {
                rdo[b] = *reinterpret_cast<const uint2*>(rb.base(dO, V) + x);
                ld4(rb.base(ws.vn, V) + x, rvn[b]);
                ld4(rb.base(ws.dvn, V) + x, rdvn[b]);
                if (!Mid::kSplit && kk == 0) {  // u0 (B6's operand; not G1's)
                  if (p.gdn2) ld4(rb.base_opt(wg, V) + x, ru[b]);
                  ld4(rb.base(v, V) + x, rv[b]);
                }
              }
              if (ins) ld4(S + std::int64_t(d) * V + cc, rs[b]), ld4(dS + std::int64_t(d) * V + cc, rds[b]);
            }
#pragma unroll
            for (int b = 0; b < kQB; ++b) {
              const int qd = tid + (t0 + b) * kThreads, i = qd >> 4, c = 4 * (qd & 15), cc = vv + c, d = kk + i;
              const bool in = i < Lc && cc < V;
              *reinterpret_cast<uint2*>(sdo + i * LT + c) = rdo[b];
              put_op4<kHiV>(svnh, svnl, i, c, rvn[b]);
              put_op4<kHiV>(sdvnh, sdvnl, i, c, rdvn[b]);
              if (!Mid::kSplit && kk == 0) {
                float u0[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) u0[e] = in ? (p.gdn2 ? ru[b][e] : sbeta[i]) * rv[b][e] : 0.f;
                put_op4<kHi>(su0h, su0l, i, c, u0);
              }
              put_op4<kHi>(sSh, sSl, i, c, rs[b]);
              put_op4<kHi>(sdSh, sdSl, i, c, rds[b]);
              float pr[4];
#pragma unroll
              for (int e = 0; e < 4; ++e) pr[e] = rs[b][e] * rds[b][e];
#pragma unroll
              for (int o = 4; o > 0; o >>= 1)
#pragma unroll
                for (int e = 0; e < 4; ++e) pr[e] += __shfl_xor_sync(0xffffffffu, pr[e], o);
              const float prod = (pr[0] + pr[2]) + (pr[1] + pr[3]);
              if ((lane & 7) == 0 && d < K) sdgam[(c >> 5) * 256 + d] += prod;  // one writer per half row
            }
          }
        }
      }
      if (Mid::kWide && wideV) {
        // staged above (rung 8)
      } else if (Mid::kBatchLoads) {
        constexpr int kB = 4;  // items per batch: 4 x 6 loads in flight per thread
#pragma unroll 1
        for (int t0 = 0; t0 < kItems; t0 += kB) {
          bf16 rdo[kB];
          float rvn[kB], rdvn[kB], ru[kB], rv[kB], rs[kB], rds[kB];
#pragma unroll
          for (int b = 0; b < kB; ++b) {
            const int idx = tid + (t0 + b) * kThreads, i = idx >> 6, cc = vv + (idx & 63), d = kk + i;
            const bool in = i < Lc && cc < V, ins = d < K && cc < V;
            if constexpr (Mid::kRowBase) {
              const int x = i * rb.HV + cc;
              rdo[b] = in ? rb.base(dO, V)[x] : __float2bfloat16_rn(0.f);
              rvn[b] = in ? rb.base(ws.vn, V)[x] : 0.f;
              rdvn[b] = in ? rb.base(ws.dvn, V)[x] : 0.f;
              if (kk == 0) {
                ru[b] = in && p.gdn2 ? ld(rb.base_opt(wg, V) + x) : 0.f;
                rv[b] = in ? ld(rb.base(v, V) + x) : 0.f;
              }
            } else {
            rdo[b] = in ? dO[row(i) * V + cc] : __float2bfloat16_rn(0.f);
            rvn[b] = in ? ws.vn[row(i) * V + cc] : 0.f;
            rdvn[b] = in ? ws.dvn[row(i) * V + cc] : 0.f;
            if (kk == 0) {
              ru[b] = in && p.gdn2 ? ld(wg + row(i) * V + cc) : 0.f;
              rv[b] = in ? ld(v + row(i) * V + cc) : 0.f;
            }
            }
            rs[b] = ins ? S[std::int64_t(d) * V + cc] : 0.f;
            rds[b] = ins ? dS[std::int64_t(d) * V + cc] : 0.f;
          }
#pragma unroll
          for (int b = 0; b < kB; ++b) {
            const int idx = tid + (t0 + b) * kThreads, i = idx >> 6, c = idx & 63, cc = vv + c, d = kk + i;
            const bool in = i < Lc && cc < V;
            sdo[i * LT + c] = rdo[b];
            put_op<kHiV>(svnh, svnl, i, c, rvn[b]);
            put_op<kHiV>(sdvnh, sdvnl, i, c, rdvn[b]);
            if (kk == 0) put_op<kHi>(su0h, su0l, i, c, in ? (p.gdn2 ? ru[b] : sbeta[i]) * rv[b] : 0.f);
            put_op<kHi>(sSh, sSl, i, c, rs[b]);
            put_op<kHi>(sdSh, sdSl, i, c, rds[b]);
            float prod = rs[b] * rds[b];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) prod += __shfl_xor_sync(0xffffffffu, prod, o);
            if (lane == 0 && d < K) sdgam[(c >> 5) * 256 + d] += prod;  // as below
          }
        }
      } else
      for (int idx = tid; idx < 64 * 64; idx += nt) {
        const int i = idx >> 6, c = idx & 63, cc = vv + c;
        const bool in = i < Lc && cc < V;
        sdo[i * LT + c] = in ? dO[row(i) * V + cc] : __float2bfloat16_rn(0.f);
        put_op<kHiV>(svnh, svnl, i, c, in ? ws.vn[row(i) * V + cc] : 0.f);
        put_op<kHiV>(sdvnh, sdvnl, i, c, in ? ws.dvn[row(i) * V + cc] : 0.f);
        if (kk == 0) {
          const float u0 = in ? (p.gdn2 ? ld(wg + row(i) * V + cc) : sbeta[i]) * ld(v + row(i) * V + cc) : 0.f;
          put_op<kHi>(su0h, su0l, i, c, u0);
        }
        // S and dS' rows d = kk + i: dgamma_d = sum_c S_dc dS'_dc (a warp holds 32 columns of one row)
        const int d = kk + i;
        const bool ins = d < K && cc < V;
        const float s = ins ? S[std::int64_t(d) * V + cc] : 0.f, ds = ins ? dS[std::int64_t(d) * V + cc] : 0.f;
        put_op<kHi>(sSh, sSl, i, c, s);
        put_op<kHi>(sdSh, sdSl, i, c, ds);
        float prod = s * ds;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) prod += __shfl_xor_sync(0xffffffffu, prod, o);
        if (lane == 0 && d < K) sdgam[(c >> 5) * 256 + d] += prod;  // the only writer of this slot in this slab
      }
      __syncthreads();
      // B4: dQg = do S^T, dKd = v_new dS'^T, dw_aux = -dv_new S^T (negated below)
      gemm64<false, false>(accQ, sdo, nullptr, sSh, lo_op<kHi>(sSl), m0, n0);
      gemm64<false, false>(accK, svnh, lo_op<kHi>(svnl), sdSh, lo_op<kHi>(sdSl), m0, n0);
      gemm64<false, false>(accW, sdvnh, lo_op<kHi>(sdvnl), sSh, lo_op<kHi>(sSl), m0, n0);
      if (kk == 0) {
        // B5: dP = do v_new^T;  B6: dA = dv_new u0^T (+ dw_aux E^T below);  B8: du0 = A^T dv_new
        gemm64<false, false>(accP, sdo, nullptr, svnh, lo_op<kHiV>(svnl), m0, n0);
        if constexpr (Mid::kSplit) continue;  // rung 10's G1: B6 and B8 are G2's (the last statement of the slab)
        gemm64<false, false>(accA, sdvnh, lo_op<kHi>(sdvnl), su0h, lo_op<kHi>(su0l), m0, n0);
        float accU[4][4];
        zero(accU);
        gemm64<true, true>(accU, sAh, lo_op<kHi>(sAl), sdvnh, lo_op<kHiV>(sdvnl), m0, n0);
        if constexpr (Mid::kWide) {
          store_acc_pairs(rb.base(ws.du0, V), rb.HV, vv, V, Lc, evenV, accU, m0, n0);
        } else
        each_acc(accU, m0, n0, [&](int j, int c, float x) {
          if constexpr (Mid::kRowBase) {
            if (j < Lc && vv + c < V) rb.base(ws.du0, V)[j * rb.HV + vv + c] = x;
          } else if (j < Lc && vv + c < V) ws.du0[row(j) * V + vv + c] = x;
        });
      }
    }
    // This K slab of dQg, dKd, dw_aux is complete.
    if constexpr (Mid::kWide) {
      store_acc_pairs(rb.base(ws.dQg, K), rb.HK, kk, K, Lc, evenK, accQ, m0, n0);
      store_acc_pairs(rb.base(ws.dKd, K), rb.HK, kk, K, Lc, evenK, accK, m0, n0);
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) accW[a][b] = -accW[a][b];
      store_acc_pairs(rb.base(ws.dwa, K), rb.HK, kk, K, Lc, evenK, accW, m0, n0);
      if constexpr (!Mid::kSplit)
      each_acc(accW, m0, n0, [&](int i, int d, float x) {
        put_op<kHi>(sdwh, sdwl, i, d, x);  // zero outside (the staged operands were)
      });
    } else {
    each_acc(accQ, m0, n0, [&](int i, int d, float x) {
      if constexpr (Mid::kRowBase) {
        if (i < Lc && kk + d < K) rb.base(ws.dQg, K)[i * rb.HK + kk + d] = x;
      } else if (i < Lc && kk + d < K) ws.dQg[row(i) * K + kk + d] = x;
    });
    each_acc(accK, m0, n0, [&](int i, int d, float x) {
      if constexpr (Mid::kRowBase) {
        if (i < Lc && kk + d < K) rb.base(ws.dKd, K)[i * rb.HK + kk + d] = x;
      } else if (i < Lc && kk + d < K) ws.dKd[row(i) * K + kk + d] = x;
    });
    each_acc(accW, m0, n0, [&](int i, int d, float x) {
      x = -x;
      if constexpr (Mid::kRowBase) {
        if (i < Lc && kk + d < K) rb.base(ws.dwa, K)[i * rb.HK + kk + d] = x;
      } else if (i < Lc && kk + d < K) ws.dwa[row(i) * K + kk + d] = x;
      put_op<kHi>(sdwh, sdwl, i, d, x);  // zero outside (the staged operands were)
    });
    }
    // Rung 10's G1: dw_aux is stored (G2 reads it); B6's dw_aux E^T and B8's dE are G2's.
    if constexpr (Mid::kSplit) continue;
    bool e_wide = false;
    if constexpr (Mid::kWide) {
      if (wideK) {
        e_wide = true;  // rung 8: quads as A's staging
        if constexpr (Mid::kNoExtras) {
          // Rung 9: stage_quads' quads, each formed as bwd3_extras forms E (form_E) instead of loaded.
          const Tin* kb = rb.base(k, K);
          const Tg* bgb = rb.base_opt(bg, K);
          const double* Gb = rb.base_opt(ws.G, rb.KG);
          float xe[4][4];
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            const int qd = tid + t * kThreads, i = qd >> 4, d = kk + 4 * (qd & 15), x = i * rb.HK + d;
            if (i < Lc && d < K) {
              float kf[4], gf[4], eg[4];
              ld4(kb + x, kf);
              if (p.gdn2) ld4(bgb + x, gf);
              else gf[0] = gf[1] = gf[2] = gf[3] = sbeta[i];
              if (chan) {
                const double2 a = *reinterpret_cast<const double2*>(Gb + i * rb.HKG + d);
                const double2 b = *reinterpret_cast<const double2*>(Gb + i * rb.HKG + d + 2);
                eg[0] = expf(float(a.x)), eg[1] = expf(float(a.y)), eg[2] = expf(float(b.x)), eg[3] = expf(float(b.y));
              } else {  // one G per row: one expf per quad (the same value for its 4 channels)
                eg[0] = eg[1] = eg[2] = eg[3] = expf(float(rb.G(Gb, i, 0)));
              }
#pragma unroll
              for (int e = 0; e < 4; ++e) xe[t][e] = form_E_eg(gf[e], kf[e], eg[e]);
            } else {
              xe[t][0] = xe[t][1] = xe[t][2] = xe[t][3] = 0.f;
            }
          }
#pragma unroll
          for (int t = 0; t < 4; ++t) {
            const int qd = tid + t * kThreads;
            put_op4<kHi>(sEh, sEl, qd >> 4, 4 * (qd & 15), xe[t]);
          }
        } else
        stage_quads<kHi>(sEh, sEl, rb.base(ws.E, K), rb.HK, kk, K, Lc, tid);
      }
    }
    if (e_wide) {
      // staged above (rung 8)
    } else if (Mid::kBatchLoads) {
      float e[kItems];
#pragma unroll
      for (int t = 0; t < kItems; ++t) {
        const int idx = tid + t * kThreads, i = idx >> 6, d = idx & 63;
        if constexpr (Mid::kNoExtras) {  // rung 9: formed (form_E)
          const int x = i * rb.HK + kk + d;
          e[t] = (i < Lc && kk + d < K) ? form_E(p.gdn2 ? ld(rb.base_opt(bg, K) + x) : sbeta[i], ld(rb.base(k, K) + x),
                                                 rb.G(rb.base_opt(ws.G, rb.KG), i, kk + d))
                                        : 0.f;
        } else if constexpr (Mid::kRowBase) e[t] = (i < Lc && kk + d < K) ? rb.base(ws.E, K)[i * rb.HK + kk + d] : 0.f;
        else e[t] = (i < Lc && kk + d < K) ? ws.E[row(i) * K + kk + d] : 0.f;
      }
#pragma unroll
      for (int t = 0; t < kItems; ++t) {
        const int idx = tid + t * kThreads;
        put_op<kHi>(sEh, sEl, idx >> 6, idx & 63, e[t]);
      }
    } else {
      for (int idx = tid; idx < 64 * 64; idx += nt) {
        const int i = idx >> 6, d = idx & 63;
        put_op<kHi>(sEh, sEl, i, d, (i < Lc && kk + d < K) ? ws.E[row(i) * K + kk + d] : 0.f);
      }
    }
    __syncthreads();
    // B6: dA += dw_aux E^T;  B8: dE = A^T dw_aux
    gemm64<false, false>(accA, sdwh, lo_op<kHi>(sdwl), sEh, lo_op<kHi>(sEl), m0, n0);
    float accE[4][4];
    zero(accE);
    gemm64<true, true>(accE, sAh, lo_op<kHi>(sAl), sdwh, lo_op<kHi>(sdwl), m0, n0);
    if constexpr (Mid::kWide) {
      store_acc_pairs(rb.base(ws.dE, K), rb.HK, kk, K, Lc, evenK, accE, m0, n0);
    } else
    each_acc(accE, m0, n0, [&](int j, int d, float x) {
      if constexpr (Mid::kRowBase) {
        if (j < Lc && kk + d < K) rb.base(ws.dE, K)[j * rb.HK + kk + d] = x;
      } else if (j < Lc && kk + d < K) ws.dE[row(j) * K + kk + d] = x;
    });
  }
  __syncthreads();  // every tile read: the float32 matrices overlay them now
  bool b9_done = false;
  if (Mid::kOwn) {
    // Mid's B7 (and B9 when it returns true); on false it has left dL in sdA and dP in sdP.
    b9_done = Mid::template run<Tg>(p, ws, smem_raw, tok0, Lc, sbeta, accP, accA);
  } else {
    // B5: dP lower triangle with the diagonal; B6: dA strictly lower.
    each_acc(accP, m0, n0, [&](int i, int j, float x) { sdP[i * LD + j] = (i < Lc && j <= i) ? x : 0.f; });
    each_acc(accA, m0, n0, [&](int i, int j, float x) { sdA[i * LD + j] = (i < Lc && j < i) ? x : 0.f; });
    for (int idx = tid; idx < C * C; idx += nt) {
      const int i = idx / C, j = idx % C;
      sA[i * LD + j] = i < Lc ? ws.A[row(i) * C + j] : 0.f;
      if (!chan) sGam[i * LD + j] = (i < Lc && j <= i) ? expf(float(G_at(p, ws, row(i), 0) - G_at(p, ws, row(j), 0))) : 0.f;
    }
    __syncthreads();
  }

  // From here on as rung 1's bwd_grads, in float32.
  auto G = [&](int i, int d) { return G_at(p, ws, row(i), d); };
  auto k_at = [&](int i, int d) { return ld(k + row(i) * K + d); };
  auto e_at = [&](int i, int d) { return (p.gdn2 ? ld(bg + row(i) * K + d) : sbeta[i]) * k_at(i, d); };
  if (!Mid::kOwn) {
    // B7, first half: T1 = dA A^T, strictly lower: T1_ij = sum_{m <= j} dA_im A_jm
    for (int idx = tid; idx < C * C; idx += nt) {
      const int i = idx / C, j = idx % C;
      float acc = 0.f;
      if (j < i)
        for (int m = 0; m <= j; ++m) acc += sdA[i * LD + m] * sA[j * LD + m];
      sT1[i * LD + j] = acc;
    }
    __syncthreads();
    // B7: dL = -A^T T1, strictly lower: dL_ij = -sum_{a >= i} A_ai T1_aj (into sdA)
    for (int idx = tid; idx < C * C; idx += nt) {
      const int i = idx / C, j = idx % C;
      float acc = 0.f;
      if (j < i)
        for (int a = i; a < Lc; ++a) acc += sA[a * LD + i] * sT1[a * LD + j];
      sdA[i * LD + j] = -acc;
    }
    __syncthreads();
  }
  // B9: de^L_r = sum_{j<r} dL_rj k_j Gam_rj;  dq^P_r = sum_{j<=r} dP_rj k_j Gam_rj;
  //     dk^{L,P}_r = sum_{i>r} dL_ir e_i Gam_ir + sum_{i>=r} dP_ir q~_i Gam_ir   (q~ = scale q),
  // per 64-channel slab with k, q~, e (and per-channel G, float64) staged in shared memory.
  float* sk = sGam + C * LD;  // [64][64] (B9 slab, after the float32 matrices)
  float* sq = sk + 64 * 64;   // [64][64] scale q
  float* se = sq + 64 * 64;   // [64][64] e
  double* sGd = reinterpret_cast<double*>(se + 64 * 64);  // [64][64] G, per-channel gates only
  if (!b9_done && Mid::kUnrolledB9 && chan) {
    // The backward's rung 5, per-channel gates (the only B9 a rung 4 / 5 Mid leaves here: V4Mid's run
    // does DeltaNet's and GDN's on tensor cores): the same sums in the same order as the loop below,
    // with the gate kind fixed (so the j and i loops unroll by 4 and their exp chains overlap), G_r
    // read once per row, and the slab staged with 4 items' loads in flight (bench/analysis_bwd_grads.md:
    // rung 2's loop was a 156-clock dependency chain per term for KDA).
    for (int kk = 0; kk < K; kk += 64) {
      __syncthreads();  // the previous slab is read
      constexpr int kB = 4;
#pragma unroll 1
      for (int t0 = 0; t0 < kItems; t0 += kB) {
        float rk[kB], rq[kB], re[kB];
        double rg[kB];
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const int idx = tid + (t0 + b) * kThreads, j = idx >> 6, d = kk + (idx & 63);
          const bool in = j < Lc && d < K;
          rk[b] = in ? k_at(j, d) : 0.f;
          rq[b] = in ? p.scale * ld(q + row(j) * K + d) : 0.f;
          re[b] = in ? e_at(j, d) : 0.f;
          rg[b] = in ? G(j, d) : 0.0;
        }
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const int idx = tid + (t0 + b) * kThreads;
          sk[idx] = rk[b], sq[idx] = rq[b], se[idx] = re[b], sGd[idx] = rg[b];
        }
      }
      __syncthreads();
      for (int idx = tid; idx < Lc * 64; idx += kThreads) {
        const int r = idx >> 6, dd = idx & 63, d = kk + dd;
        if (d >= K) continue;
        const double Gr = sGd[r * 64 + dd];
        float del = 0.f, dqp = 0.f, dkk = 0.f;
#pragma unroll 4
        for (int j = 0; j <= r; ++j) {
          const float kg = sk[j * 64 + dd] * expf(float(Gr - sGd[j * 64 + dd]));
          dqp += sdP[r * LD + j] * kg;
          if (j < r) del += sdA[r * LD + j] * kg;
        }
#pragma unroll 4
        for (int i = r; i < Lc; ++i) {
          float src = sdP[i * LD + r] * sq[i * 64 + dd];
          if (i > r) src += sdA[i * LD + r] * se[i * 64 + dd];
          dkk += src * expf(float(sGd[i * 64 + dd] - Gr));
        }
        ws.deL[row(r) * K + d] = del, ws.dqP[row(r) * K + d] = dqp, ws.dkLP[row(r) * K + d] = dkk;
      }
    }
  } else if (!b9_done) {
    for (int kk = 0; kk < K; kk += 64) {
      __syncthreads();  // the previous slab is read
      for (int idx = tid; idx < 64 * 64; idx += nt) {
        const int j = idx >> 6, d = kk + (idx & 63);
        const bool in = j < Lc && d < K;
        sk[idx] = in ? k_at(j, d) : 0.f;
        sq[idx] = in ? p.scale * ld(q + row(j) * K + d) : 0.f;
        se[idx] = in ? e_at(j, d) : 0.f;
        if (chan) sGd[idx] = in ? G(j, d) : 0.0;
      }
      __syncthreads();
      for (int idx = tid; idx < Lc * 64; idx += nt) {
        const int r = idx >> 6, dd = idx & 63, d = kk + dd;
        if (d >= K) continue;
        auto gam = [&](int i, int j) { return chan ? expf(float(sGd[i * 64 + dd] - sGd[j * 64 + dd])) : sGam[i * LD + j]; };
        float del = 0.f, dqp = 0.f, dkk = 0.f;
        for (int j = 0; j <= r; ++j) {
          const float kg = sk[j * 64 + dd] * gam(r, j);
          dqp += sdP[r * LD + j] * kg;
          if (j < r) del += sdA[r * LD + j] * kg;
        }
        for (int i = r; i < Lc; ++i) {
          float src = sdP[i * LD + r] * sq[i * 64 + dd];
          if (i > r) src += sdA[i * LD + r] * se[i * 64 + dd];
          dkk += src * gam(i, r);
        }
        ws.deL[row(r) * K + d] = del, ws.dqP[row(r) * K + d] = dqp, ws.dkLP[row(r) * K + d] = dkk;
      }
    }
  }
  __syncthreads();
  if constexpr (Mid::kSplit) {
    // Rung 10's G1 tail (DeltaNet, GDN; bwd_v10_split.cu): the state side's share of B10 and B11.
    // Per (token i, channel d), with dq^P in ws.dqP and dk^P = scale (M2^T q) in ws.dkLP (V10Mid's B9):
    //   dq      = scale (dQg exp(G_i) + dq^P)                           (final; rung 8's expression)
    //   dk_part = dKd exp(G_last - G_i) + dk^P                          -> ws.dkLP (read, then overwritten)
    //   dG_part = dQg Qg - dKd Kd + q~ dq^P - k dk^P                    -> ws.dGc (GDN only)
    // and per channel dG_last = sum_i dKd_i Kd_i + dgamma gamma (B10), added to the last row of dG_part
    // (B11's reverse sum starts there, so G2's sum from the last row up includes it exactly once).
    float* sdG = reinterpret_cast<float*>(smem_raw) + 5 * C * LD;  // [Lc][K], over the B9 tiles (read)
    static_assert(sizeof(float) * (5 * C * LD + C * 128) <= kSmemMain, "G1's dG_part fits");
    const bool gated = p.gate != kGateNone;
    const double* Gb = rb.base_opt(ws.G, rb.KG);
    const Tin *kb = rb.base(k, K), *qb = rb.base(q, K);
    const float *dQgb = rb.base(ws.dQg, K), *dKdb = rb.base(ws.dKd, K), *dqPb = rb.base(ws.dqP, K);
    const float *Qgb = rb.base(ws.Qg, K), *Kdb = rb.base(ws.Kd, K);
    float* dkLPb = rb.base(ws.dkLP, K);
    Tin* dqb = rb.base(static_cast<Tin*>(out.dq), K);
    const int n = Lc * K, HK = rb.HK;
    constexpr int kB = 4;
#pragma unroll 1
    for (int i0 = tid; i0 < n; i0 += kB * kThreads) {
      double rGi[kB], rGl[kB];
      float rk[kB], rq[kB], rdQg[kB], rdKd[kB], rdqP[kB], rdkP[kB], rQg[kB], rKd[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= n) break;
        const int i = idx / K, d = idx % K, x = i * HK + d;
        rGi[b] = rb.G(Gb, i, d), rGl[b] = rb.G(Gb, Lc - 1, d);
        rk[b] = ld(kb + x), rq[b] = p.scale * ld(qb + x);
        rdQg[b] = dQgb[x], rdKd[b] = dKdb[x], rdqP[b] = dqPb[x], rdkP[b] = dkLPb[x];
        if (gated) rQg[b] = Qgb[x], rKd[b] = Kdb[x];
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= n) break;
        const int i = idx / K, d = idx % K, x = i * HK + d;
        const float dQg = rdQg[b], dKd = rdKd[b], dqP = rdqP[b], dkP = rdkP[b];
        if (gated) sdG[idx] = dQg * rQg[b] - dKd * rKd[b] + rq[b] * dqP - rk[b] * dkP;
        const float eg = expf(float(rGi[b]));
        st(dqb + x, p.scale * (dQg * eg + dqP));
        dkLPb[x] = dKd * expf(float(rGl[b] - rGi[b])) + dkP;
      }
    }
    if (gated) {
      __syncthreads();
      float* dGcb = rb.base(ws.dGc, K);
      for (int d = tid; d < K; d += kThreads) {
        float kdk = 0.f;
        for (int i = 0; i < Lc; ++i) kdk += dKdb[i * HK + d] * Kdb[i * HK + d];
        const float last = kdk + (sdgam[d] + sdgam[256 + d]) * expf(float(rb.G(Gb, Lc - 1, d)));
        for (int i = 0; i < Lc - 1; ++i) dGcb[i * HK + d] = sdG[i * K + d];
        dGcb[(Lc - 1) * HK + d] = sdG[(Lc - 1) * K + d] + last;
      }
    }
    return;
  }
  // B10, B11, in three passes (rung 1 runs one thread per channel through the tokens):
  //   (a) every (token, channel) at once:
  //       dG_i = dE_i E_i + dQg_i Qg_i - dKd_i Kd_i + e_i de^L_i + q~_i dq^P_i - k_i dk^{L,P}_i (kept),
  //       de = dE exp(G) + de^L, dq = scale (dQg exp(G) + dq^P),
  //       dk = dKd exp(G_last - G) + dk^{L,P} + (beta | b) de;
  //   (b) per channel, tokens in reverse: dg_t = sum_{i >= t} dG_i, dG_last += sum_i dKd_i Kd_i + dgamma gamma;
  //   (c) per token (one warp each): dbeta = sum_d de k + sum_c du0 v; scalar gates: dg = sum_d dg_d.
  float* sdG = sk;  // [Lc][K], over the B9 slab
  // Rung 9 (kNoExtras, K <= 128): Kd as (a) formed it, [Lc][K] after dG's largest extent at K = 128,
  // for (b)'s sum (read from here, not formed twice).
  float* sKd9 = sdG + C * 128;
  static_assert(sizeof(float) * (5 * C * LD + 2 * C * 128) <= kSmemMain, "rung 9's Kd beside dG");
  Tin* dq = static_cast<Tin*>(out.dq);
  Tin* dk = static_cast<Tin*>(out.dk);
  if constexpr (Mid::kRowBase) {
    // Rung 7: rung 5's batched (a) and dv pass (the next branch) with every [rows, W] array read and written
    // through its per-block base and a 32-bit offset x (RowBase); the same values and operations.
    const double* Gb = rb.base_opt(ws.G, rb.KG);
    const Tin *kb = rb.base(k, K), *qb = rb.base(q, K);
    const Tg* bgb = rb.base_opt(bg, K);
    const float *dEb = rb.base(ws.dE, K), *dQgb = rb.base(ws.dQg, K), *dKdb = rb.base(ws.dKd, K);
    const float *dqPb = rb.base(ws.dqP, K), *dkLPb = rb.base(ws.dkLP, K);
    const float *Eb = rb.base(ws.E, K), *Qgb = rb.base(ws.Qg, K), *Kdb = rb.base(ws.Kd, K);
    float* deLb = rb.base(ws.deL, K);
    Tin *dqb = rb.base(dq, K), *dkb = rb.base(dk, K);
    Tg* dbb = rb.base_opt(static_cast<Tg*>(out.db), K);
    constexpr int kB = 4;
    const int n = Lc * K, HK = rb.HK;
    bool t_wide = false;
    if constexpr (Mid::kWide) {
      if (K % 4 == 0 && aligned(k, 8) && aligned(q, 8) && (!p.gdn2 || aligned(bg, int(4 * sizeof(Tg)))) &&
          aligned(ws.dE, 16) && aligned(ws.dQg, 16) && aligned(ws.dKd, 16) && aligned(ws.deL, 16) &&
          aligned(ws.dqP, 16) && aligned(ws.dkLP, 16) &&
          (Mid::kNoExtras || (aligned(ws.E, 16) && aligned(ws.Qg, 16) && aligned(ws.Kd, 16))) && aligned(dq, 8) && aligned(dk, 8) &&
          (!p.gdn2 || aligned(static_cast<Tg*>(out.db), int(4 * sizeof(Tg))))) {
        // Rung 8: (a) by quads (row i, channels d .. d + 3), one vector load or store per array; per
        // channel the same expressions as the item-by-item loop below.
        t_wide = true;
        const int K4 = K / 4, nq = Lc * K4;
#pragma unroll 1
        for (int qd = tid; qd < nq; qd += kThreads) {
          const int i = qd / K4, d = 4 * (qd % K4), x = i * HK + d;
          double rGi[4], rGl[4];
          float rk[4], rq[4], rgate[4], rdE[4], rdQg[4], rdKd[4], rdeL[4], rdqP[4], rdkLP[4], rE[4], rQg[4], rKd[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) rGi[e] = rb.G(Gb, i, d + e), rGl[e] = rb.G(Gb, Lc - 1, d + e);
          ld4(kb + x, rk), ld4(qb + x, rq);
          if (p.gdn2) ld4(bgb + x, rgate);
          else rgate[0] = rgate[1] = rgate[2] = rgate[3] = sbeta[i];
          ld4(dEb + x, rdE), ld4(dQgb + x, rdQg), ld4(dKdb + x, rdKd), ld4(deLb + x, rdeL), ld4(dqPb + x, rdqP);
          ld4(dkLPb + x, rdkLP);
          if constexpr (Mid::kNoExtras) {  // rung 9: E, Qg, Kd formed as bwd3_extras forms them
#pragma unroll
            for (int e = 0; e < 4; ++e)
              rE[e] = form_E(rgate[e], rk[e], rGi[e]), rQg[e] = form_Qg(p.scale, rq[e], rGi[e]),
              rKd[e] = form_Kd(rk[e], rGi[e], rGl[e]);
          } else {
            ld4(Eb + x, rE), ld4(Qgb + x, rQg), ld4(Kdb + x, rKd);
          }
          float odq[4], odk[4], ode[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float kk = rk[e], ee = rgate[e] * rk[e], qs = p.scale * rq[e];
            const float dE = rdE[e], dQg = rdQg[e], dKd = rdKd[e], deL = rdeL[e], dqP = rdqP[e], dkLP = rdkLP[e];
            sdG[i * K + d + e] = dE * rE[e] + dQg * rQg[e] - dKd * rKd[e] + ee * deL + qs * dqP - kk * dkLP;
            if constexpr (Mid::kNoExtras) sKd9[i * K + d + e] = rKd[e];
            const float eg = expf(float(rGi[e]));
            const float de = dE * eg + deL;
            odq[e] = p.scale * (dQg * eg + dqP);
            odk[e] = dKd * expf(float(rGl[e] - rGi[e])) + dkLP + rgate[e] * de;
            ode[e] = p.gdn2 ? de * kk : de;
          }
          st4(dqb + x, odq), st4(dkb + x, odk);
          if (p.gdn2) st4(dbb + x, ode);
          else st4(deLb + x, ode);
        }
      }
    }
#pragma unroll 1
    for (int i0 = t_wide ? n : tid; i0 < n; i0 += kB * kThreads) {
      double rGi[kB], rGl[kB];
      float rk[kB], re[kB], rq[kB], rdE[kB], rdQg[kB], rdKd[kB], rdeL[kB], rdqP[kB], rdkLP[kB], rE[kB], rQg[kB], rKd[kB],
          rgate[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= n) break;
        const int i = idx / K, d = idx % K;
        const int x = i * HK + d;
        rGi[b] = rb.G(Gb, i, d), rGl[b] = rb.G(Gb, Lc - 1, d);
        rk[b] = ld(kb + x), re[b] = (p.gdn2 ? ld(bgb + x) : sbeta[i]) * ld(kb + x), rq[b] = p.scale * ld(qb + x);
        rdE[b] = dEb[x], rdQg[b] = dQgb[x], rdKd[b] = dKdb[x], rdeL[b] = deLb[x], rdqP[b] = dqPb[x], rdkLP[b] = dkLPb[x];
        if constexpr (Mid::kNoExtras) {  // rung 9: formed as bwd3_extras forms them
          rE[b] = form_E(p.gdn2 ? ld(bgb + x) : sbeta[i], ld(kb + x), rGi[b]);
          rQg[b] = form_Qg(p.scale, ld(qb + x), rGi[b]);
          rKd[b] = form_Kd(ld(kb + x), rGi[b], rGl[b]);
        } else {
          rE[b] = Eb[x], rQg[b] = Qgb[x], rKd[b] = Kdb[x];
        }
        rgate[b] = p.gdn2 ? ld(bgb + x) : sbeta[i];
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= n) break;
        const int i = idx / K, d = idx % K;
        const int x = i * HK + d;
        const float kk = rk[b], ee = re[b], qs = rq[b];
        const float dE = rdE[b], dQg = rdQg[b], dKd = rdKd[b], deL = rdeL[b], dqP = rdqP[b], dkLP = rdkLP[b];
        sdG[idx] = dE * rE[b] + dQg * rQg[b] - dKd * rKd[b] + ee * deL + qs * dqP - kk * dkLP;
        if constexpr (Mid::kNoExtras) sKd9[idx] = rKd[b];
        const float eg = expf(float(rGi[b]));
        const float de = dE * eg + deL;
        st(dqb + x, p.scale * (dQg * eg + dqP));
        st(dkb + x, dKd * expf(float(rGl[b] - rGi[b])) + dkLP + rgate[b] * de);
        if (p.gdn2) st(dbb + x, de * kk);
        else deLb[x] = de;
      }
    }
    const float* du0b = rb.base(ws.du0, V);
    const Tg* wgb = rb.base_opt(wg, V);
    const Tin* vb = rb.base(v, V);
    Tin* dvb = rb.base(static_cast<Tin*>(out.dv), V);
    Tg* dwb = rb.base_opt(static_cast<Tg*>(out.dw), V);
    constexpr int kBv = 8;
    const int nv = Lc * V, HV = rb.HV;
    bool v_wide = false;
    if constexpr (Mid::kWide) {
      if (V % 4 == 0 && aligned(ws.du0, 16) && aligned(v, 8) && aligned(static_cast<Tin*>(out.dv), 8) &&
          (!p.gdn2 || (aligned(wg, int(4 * sizeof(Tg))) && aligned(static_cast<Tg*>(out.dw), int(4 * sizeof(Tg)))))) {
        // Rung 8: the dv pass by quads, 2 per batch (8 items, as below); per column the same products.
        v_wide = true;
        constexpr int kQB = 2;
        const int V4 = V / 4, nq = Lc * V4;
#pragma unroll 1
        for (int q0 = tid; q0 < nq; q0 += kQB * kThreads) {
          float rdu[kQB][4], rw[kQB][4], rv[kQB][4];
#pragma unroll
          for (int b = 0; b < kQB; ++b) {
            const int qd = q0 + b * kThreads;
            if (qd >= nq) break;
            const int x = (qd / V4) * HV + 4 * (qd % V4);
            ld4(du0b + x, rdu[b]);
            if (p.gdn2) ld4(wgb + x, rw[b]), ld4(vb + x, rv[b]);
          }
#pragma unroll
          for (int b = 0; b < kQB; ++b) {
            const int qd = q0 + b * kThreads;
            if (qd >= nq) break;
            const int i = qd / V4;
            const int x = i * HV + 4 * (qd % V4);
            float o1[4], o2[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              o1[e] = p.gdn2 ? rw[b][e] * rdu[b][e] : sbeta[i] * rdu[b][e];
              o2[e] = p.gdn2 ? rdu[b][e] * rv[b][e] : 0.f;
            }
            st4(dvb + x, o1);
            if (p.gdn2) st4(dwb + x, o2);
          }
        }
      }
    }
#pragma unroll 1
    for (int i0 = v_wide ? nv : tid; i0 < nv; i0 += kBv * kThreads) {
      float rdu[kBv], rw[kBv], rv[kBv];
#pragma unroll
      for (int b = 0; b < kBv; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= nv) break;
        const int x = (idx / V) * HV + idx % V;
        rdu[b] = du0b[x];
        if (p.gdn2) rw[b] = ld(wgb + x), rv[b] = ld(vb + x);
      }
#pragma unroll
      for (int b = 0; b < kBv; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= nv) break;
        const int i = idx / V;
        const int x = i * HV + idx % V;
        if (p.gdn2) {
          st(dvb + x, rw[b] * rdu[b]);
          st(dwb + x, rdu[b] * rv[b]);
        } else {
          st(dvb + x, sbeta[i] * rdu[b]);
        }
      }
    }
  } else if (Mid::kBatchLoads) {
    // Rung 5: (a) and the dv pass below with the loads of 4 (a) or 8 (dv) items per thread issued
    // before any item's arithmetic and stores; per item the same expressions as the loops after.
    constexpr int kB = 4;
    const int n = Lc * K;
#pragma unroll 1
    for (int i0 = tid; i0 < n; i0 += kB * kThreads) {
      double rGi[kB], rGl[kB];
      float rk[kB], re[kB], rq[kB], rdE[kB], rdQg[kB], rdKd[kB], rdeL[kB], rdqP[kB], rdkLP[kB], rE[kB], rQg[kB], rKd[kB],
          rgate[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= n) break;
        const int i = idx / K, d = idx % K;
        const std::int64_t x = row(i) * K + d;
        rGi[b] = G(i, d), rGl[b] = G(Lc - 1, d);
        rk[b] = k_at(i, d), re[b] = e_at(i, d), rq[b] = p.scale * ld(q + x);
        rdE[b] = ws.dE[x], rdQg[b] = ws.dQg[x], rdKd[b] = ws.dKd[x], rdeL[b] = ws.deL[x], rdqP[b] = ws.dqP[x],
        rdkLP[b] = ws.dkLP[x];
        rE[b] = ws.E[x], rQg[b] = ws.Qg[x], rKd[b] = ws.Kd[x];
        rgate[b] = p.gdn2 ? ld(bg + x) : sbeta[i];
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= n) break;
        const int i = idx / K, d = idx % K;
        const std::int64_t x = row(i) * K + d;
        const float kk = rk[b], ee = re[b], qs = rq[b];
        const float dE = rdE[b], dQg = rdQg[b], dKd = rdKd[b], deL = rdeL[b], dqP = rdqP[b], dkLP = rdkLP[b];
        sdG[idx] = dE * rE[b] + dQg * rQg[b] - dKd * rKd[b] + ee * deL + qs * dqP - kk * dkLP;
        const float eg = expf(float(rGi[b]));
        const float de = dE * eg + deL;
        st(dq + x, p.scale * (dQg * eg + dqP));
        st(dk + x, dKd * expf(float(rGl[b] - rGi[b])) + dkLP + rgate[b] * de);
        if (p.gdn2) st(static_cast<Tg*>(out.db) + x, de * kk);
        else ws.deL[x] = de;
      }
    }
    constexpr int kBv = 8;
    const int nv = Lc * V;
#pragma unroll 1
    for (int i0 = tid; i0 < nv; i0 += kBv * kThreads) {
      float rdu[kBv], rw[kBv], rv[kBv];
#pragma unroll
      for (int b = 0; b < kBv; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= nv) break;
        const std::int64_t x = row(idx / V) * V + idx % V;
        rdu[b] = ws.du0[x];
        if (p.gdn2) rw[b] = ld(wg + x), rv[b] = ld(v + x);
      }
#pragma unroll
      for (int b = 0; b < kBv; ++b) {
        const int idx = i0 + b * kThreads;
        if (idx >= nv) break;
        const int i = idx / V;
        const std::int64_t x = row(i) * V + idx % V;
        if (p.gdn2) {
          st(static_cast<Tin*>(out.dv) + x, rw[b] * rdu[b]);
          st(static_cast<Tg*>(out.dw) + x, rdu[b] * rv[b]);
        } else {
          st(static_cast<Tin*>(out.dv) + x, sbeta[i] * rdu[b]);
        }
      }
    }
  } else {
  for (int idx = tid; idx < Lc * K; idx += nt) {
    const int i = idx / K, d = idx % K;
    const std::int64_t x = row(i) * K + d;
    const double Gi = G(i, d), Gl = G(Lc - 1, d);
    const float kk = k_at(i, d), ee = e_at(i, d), qs = p.scale * ld(q + x);
    const float dE = ws.dE[x], dQg = ws.dQg[x], dKd = ws.dKd[x], deL = ws.deL[x], dqP = ws.dqP[x], dkLP = ws.dkLP[x];
    sdG[idx] = dE * ws.E[x] + dQg * ws.Qg[x] - dKd * ws.Kd[x] + ee * deL + qs * dqP - kk * dkLP;
    const float eg = expf(float(Gi));
    const float de = dE * eg + deL;
    st(dq + x, p.scale * (dQg * eg + dqP));
    const float gate = p.gdn2 ? ld(bg + x) : sbeta[i];
    st(dk + x, dKd * expf(float(Gl - Gi)) + dkLP + gate * de);
    if (p.gdn2) st(static_cast<Tg*>(out.db) + x, de * kk);
    else ws.deL[x] = de;
  }
  // Through F2 to v (and w): dv = (beta | w) du0, dw = du0 (.) v
  for (int idx = tid; idx < Lc * V; idx += nt) {
    const int i = idx / V, c = idx % V;
    const std::int64_t x = row(i) * V + c;
    const float du0 = ws.du0[x];
    if (p.gdn2) {
      st(static_cast<Tin*>(out.dv) + x, ld(wg + x) * du0);
      st(static_cast<Tg*>(out.dw) + x, du0 * ld(v + x));
    } else {
      st(static_cast<Tin*>(out.dv) + x, sbeta[i] * du0);
    }
  }
  }
  __syncthreads();
  if constexpr (Mid::kRowBase) {
    // Rung 7: (b) and (c) through per-block bases and 32-bit offsets (RowBase); the same operations
    // as rungs 2-6's code in the else branch.
    const double* Gb = rb.base_opt(ws.G, rb.KG);
    const float *dKdb = rb.base(ws.dKd, K), *Kdb = rb.base(ws.Kd, K);
    Tg* dgb = rb.base_opt(static_cast<Tg*>(out.dg), K);
    const int HK = rb.HK;
    for (int d = tid; d < K; d += nt) {
      float kdk = 0.f;
      if constexpr (Mid::kNoExtras) {  // rung 9: Kd as (a) formed it (form_Kd), from shared memory
        for (int i = 0; i < Lc; ++i) kdk += dKdb[i * HK + d] * sKd9[i * K + d];
      } else
      for (int i = 0; i < Lc; ++i) kdk += dKdb[i * HK + d] * Kdb[i * HK + d];
      float acc = kdk + (sdgam[d] + sdgam[256 + d]) * expf(float(rb.G(Gb, Lc - 1, d)));
      for (int i = Lc - 1; i >= 0; --i) {
        acc += sdG[i * K + d];
        if (chan) st(dgb + i * HK + d, acc);
        else sdG[i * K + d] = acc;
      }
    }
    __syncthreads();
    const float *deLb = rb.base(ws.deL, K), *du0b = rb.base(ws.du0, V);
    const Tin *kb = rb.base(k, K), *vb = rb.base(v, V);
    Tg* dbetab = rb.base_opt(static_cast<Tg*>(out.dbeta), 1);
    Tg* dg1b = rb.base_opt(static_cast<Tg*>(out.dg), 1);
    const int HV = rb.HV, Hh = rb.H;
    for (int i = warp; i < Lc; i += nt / 32) {
      if (!p.gdn2) {
        float acc = 0.f;
        for (int d = lane; d < K; d += 32) acc += deLb[i * HK + d] * ld(kb + i * HK + d);
        for (int c = lane; c < V; c += 32) acc += du0b[i * HV + c] * ld(vb + i * HV + c);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) st(dbetab + i * Hh, acc);
      }
      if (p.gate == kGateScalar) {
        float acc = 0.f;
        for (int d = lane; d < K; d += 32) acc += sdG[i * K + d];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) st(dg1b + i * Hh, acc);
      }
    }
  } else {
  for (int d = tid; d < K; d += nt) {
    float kdk = 0.f;
    for (int i = 0; i < Lc; ++i) kdk += ws.dKd[row(i) * K + d] * ws.Kd[row(i) * K + d];
    float acc = kdk + (sdgam[d] + sdgam[256 + d]) * expf(float(G(Lc - 1, d)));
    for (int i = Lc - 1; i >= 0; --i) {
      acc += sdG[i * K + d];
      if (chan) st(static_cast<Tg*>(out.dg) + row(i) * K + d, acc);
      else sdG[i * K + d] = acc;
    }
  }
  __syncthreads();
  for (int i = warp; i < Lc; i += nt / 32) {
    if (!p.gdn2) {
      float acc = 0.f;
      for (int d = lane; d < K; d += 32) acc += ws.deL[row(i) * K + d] * k_at(i, d);
      for (int c = lane; c < V; c += 32) acc += ws.du0[row(i) * V + c] * ld(v + row(i) * V + c);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (lane == 0) st(static_cast<Tg*>(out.dbeta) + row(i), acc);
    }
    if (p.gate == kGateScalar) {
      float acc = 0.f;
      for (int d = lane; d < K; d += 32) acc += sdG[i * K + d];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (lane == 0) st(static_cast<Tg*>(out.dg) + row(i), acc);
    }
  }
  }
}

}  // namespace linattn::cuda::detail::bwdc
