// optimized/cuda/bwd_v8_wide.cu -- rung 8 of the CUDA backward ladder: rung 7 (bwd_v7_rowbase.cu) with
// the global loads and stores of the chunk-gradient kernel and of the prepare's extras kernel at full
// width (issue 6). Written in session 7.
// Run in session 8 (calls 1-3): every test passes, bit for bit with rung 7; backward 1.27-1.38x faster
// than rung 7 (DeltaNet 9.20 -> 6.82 ms, KDA 13.50 -> 10.67); `best` (RESULTS.md, Status).
//
// What changes: only the width of global accesses (the grads kernel and, below, the prepare's extras
// kernel). The grads kernel is bwd_grads_tc<Tg, V8Mid>
// (bwd_v4_tc_tail.cu; V8Mid = V7Mid with Mid::kWide, bwd_common.cuh):
//   - every float32 output of a fragment epilogue (dQg, dKd, dw_aux, du0, dE in bwd_grads_tc; de^L,
//     dq^P, dk^{L,P} in V4Mid::run_impl and b9_levels) is stored by column pairs: the two adjacent
//     columns a lane holds as one 8-byte store. Chosen per block (store_acc_pairs): with an even row
//     width and an 8-byte aligned array every pair is aligned and in range or out as a whole, so one
//     bounds test and one store (st_pair_even); else per pair, 8 bytes where aligned and both in
//     range, else one by one (st_pair_w);
//   - the stagings of A, of the slab (do, v_new, dv_new, w, v, S, dS') and of E, the tail's (a)
//     (k, q, b, dE, dQg, dKd, de^L, dq^P, dk^{L,P}, E, Qg, Kd; stores dq, dk, db / de^L) and its dv
//     pass (du0, w, v; stores dv, dw), and b9_levels' slab staging for per-channel gates (k, q, b, G)
//     work on quads, 4 consecutive columns of one row per thread:
//     one 16-byte load / store per float32 array, one 8-byte per bf16 one, and the bf16 hi / lo
//     tiles written by 8-byte shared stores (put_split4). Taken when K (tail (a), E) or V (slab, dv
//     pass) is a multiple of 4 and the arrays are aligned (cudaMalloc'ed workspace, PyTorch tensors);
//     otherwise rung 7's item-by-item code runs (e.g. K = 36 takes the quads, V = 20 too, K = 17 not).
//   - The slab staging also forms dgamma_d = sum_c S_dc dS'_dc by a butterfly over the 32 columns of
//     a half row. Rung 7 adds columns xor 16, 8, 4, 2, 1 (one column per lane); rung 8 adds the same
//     pairs in the same order: lanes xor 4, 2, 1 hold columns xor 16, 8, 4 (same element of the quad),
//     then the quad's own columns xor 2 and xor 1 -- the same tree, so the same sums bit for bit.
// The same values and the same floating-point operations in the same order as rung 7, so rung 7's
// gradients bit for bit (test_cuda_backward: "CUDA v8 chunked backward gives rung 7 gradients bit for
// bit"). States and dstates are rung 7's. Prepare is rung 7's (bwd_v3_front with the levels intra
// kernel) except for its extras kernel (F1 in float64, E, Qg, Kd), which rung 8 asks at full width
// (bwd_v3_front's wide_extras): bwd3_extras_wide<Tg, kMode> (bwd_v3_async.cu) where K % 4 == 0 and
// q, k, b, g, E, Qg, Kd, G are aligned for quads (cudaMalloc'ed / PyTorch arrays; GDN with an odd
// row count B T H leaves E unaligned), else rung 7's bwd3_extras. Quads of 4 channels of one row
// per thread, one division per block instead of one per element, the per-channel gates' loads and
// then every q, k, b load issued before the scan, 16-byte E, Qg, Kd and G stores at RowBase offsets;
// the same floating-point operations per element and the float64 scan in row order. Static (K =
// 128, Lc = 64, per block): about 30k -> 7.5k executed warp instructions for DeltaNet and 52k ->
// 14k for KDA; global memory instructions per warp 160 -> 40 (DeltaNet), 224 -> 64 (KDA); bytes
// moved unchanged. 64 / 80 / 127 registers (DeltaNet-GDN / KDA / GDN2, float gates), no spill.
// Measured before (session 7): bwd3_extras 0.431 ms DeltaNet, 1.281 ms KDA (B=8 T=4096 H=16 K=V=128).
//
// Why (measured on the H200, session 7 call 3, ncu of bwd_grads_tc<float, V7Mid>, DeltaNet B=8 T=4096
// H=16 K=V=128: bench/logs_session7/call3/grads7_dn.*): the kernel is 7.2 of the backward's 9.6 ms;
// 1.41 G executed warp instructions at IPC ~1, one block of 8 warps per SM, IMAD 22%. STG.E (4-byte
// stores) 21.5 M executed, 143 M L2 sectors of which 67 M excess (each float32 output stored one
// float per lane, two adjacent columns as two 4-byte stores); LDG.E (4-byte loads) 57.9 M executed
// (the stagings loaded one float per item, each with its own address arithmetic). The same change
// on the backward's states / state-gradient kernels (st_pair, commit e1e2f97) took them from 0.673 /
// 0.851 ms to 0.49 / 0.65 ms.
//
// Static counts (nvcc 13.0 sm_90a, nvdisasm 13.5, no GPU; RESULTS.md "Rung 8" has the commands and the
// per-region table): bwd_grads_tc<float, V8Mid> 238 registers (bf16 gates 237; V7Mid 255), no spill,
// no stack; 11,864 SASS instructions against 8,984 (it keeps rung 7's item-by-item code as the
// fallback of each quad path); IMAD 2,138 against 1,736; STG 409 (201 STG.E, 180 STG.E.64, 4
// STG.E.128, 24 STG.E.U16) against 225 (201 / 0 / 0 / 24); LDG 434 (248 LDG.E, 38 LDG.E.128, 38
// LDG.E.64, 110 LDG.E.U16) against 376 (248 / 0 / 18 / 110). Every access stays ld.global / st.global
// in the PTX. Taken path, loop bodies (V7 -> V8): slab staging 444 x 4 trips -> 495 x 2 per slab,
// tail (a) 574 -> 321, dv pass 536 -> 233 (same trips), b9_levels' staging 173 x 4 -> 178 x 2, A 258
// -> 120, E 193 -> 129. Estimated executed instructions at K = V = 128, Lc = 64 (bodies x trips,
// rung 7's method): about 6.8k fewer per warp for DeltaNet and 7.6k for KDA (-54k / -61k per block;
// rung 7's estimate 25.7k / 56.3k per warp), and global memory instructions about 1,490 -> 420 per
// warp (DeltaNet). PTX of every rung 1-7 kernel unchanged.
// Time: NOT measured; the L2-sector excess and the instruction count both fall, by how much in ms is
// for the H200 (bench_backward.py --bwd-versions 7,8; LINATTN_BWD_PROFILE=1 for prepare and grads).
//
// Range: rung 7's. Calls outside rung 3's range (float32 inputs, K < 16 or K > 128) run rung 2 through
// bwd_v3_launch; calls with H * max(K, V, 64) >= 2^25 (32-bit offsets) run rung 6, as rung 7 does.
// Workspace: rung 3's. Requires log-decays <= 0, as rung 6 (the host API checks; the device API not).
#include <algorithm>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v8_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v8_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);  // outside the range: rung 2 (via rung 3)
  // RowBase's 32-bit offsets, as rung 7; else rung 6.
  if (!bwdc::in_rowbase_range(p)) return bwd_v6_launch(c);
  bwdc::Profile prof(c.stream, "bwd_v8");
  bwdc::bwd_v3_front(c, prof, /*levels_intra=*/true, /*wide_extras=*/true);  // rung 7's front, wide extras
  if (p.num_chunks > 0) bwdc::bwd_v8_grads(c, prof);
}

}  // namespace linattn::cuda::detail
