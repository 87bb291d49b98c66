// optimized/cuda/bwd_v24_dswide.cu -- rung 24 of the CUDA backward ladder: rung 22 (bwd_v22_kq8.cu) with the dstates
// kernel's value columns per block (32, 64, or a head's whole 128) picked by a wave-count model at key width 128
// (issue 6; written and measured in session 23).
//
// Why: the dstates kernel (bwd3_dstates, bwd_v3_async.cu: the reverse recurrence B1, B3 over a sequence's chunks, one
// block per (sequence, head, value tile)) needs 188,416 bytes of shared memory at key width 128 and 64 value columns,
// so one block per SM: at B=8 T=4096 H=16 V=128 its 256 blocks run in 1.94 waves on the H200's 132 SMs, and each
// chunk's w_aux, Qg, Kd and P tiles are read by a head's two blocks, in different waves. With 128 columns (rung 23's
// single stage of the w_aux, Qg, Kd tiles, kOne: 193,536 bytes, 207 registers for DeltaNet and 236 for GDN, no spill)
// the 128 blocks run in one wave and each chunk's K-side tiles are read once per head. Session 22 wrote that kernel
// behind LINATTN_BWD3_BV=128; session 23 call 1 measured it (bench/logs_session23/call1/): dstates 0.56-0.61 -> 0.55 ms
// for DeltaNet and 0.67-0.68 -> 0.53 ms for GDN; forward + backward with saved states 3.74 -> 3.68 ms (DeltaNet) and
// 4.56 -> 4.41 ms (GDN), the knob set between two unset runs in one process. Putting the value tile first in the grid
// instead (LINATTN_BWD3_VFIRST=1, the other trial) measured nothing (3.75 against 3.74-3.78; dstates 0.61).
//
// When (bwd_v3_async.cu's dstates_wide_pick, DsPick::wide): at key width 128 (65 <= K <= 128), the width w of 32, 64
// and 128 with the least ceil(N H ceil(V / w) / SMs) x cost(w), cost = 1, 1.52, 2.6: the time of one block of w
// columns over a sequence relative to one of 32 (session 23 call 3, measured with one wave of each). A wider block
// walks the same chain of chunks with more work per step, so it pays only where it saves a wave. Session 23 call 3
// timed all three widths at N H = 32, 64, 96, 128 and 256 (bench/logs_session23/call3/): the model's pick was the
// fastest at each (32, 64, 128, 128, 128), where rung 22's rule took 32, 32, 64, 64, 64. At key width 64 rung 22's
// pick stays (not measured). LINATTN_BWD3_BV (32, 64, 128) overrides it.
//
// What changes against rung 22: the dstates kernel's width only (bwd_v3_front's DsPick::wide); every column's products
// are the same at any width, so every gradient equals rung 22's bit for bit (proofs_tests/test_cuda_backward.cu, "CUDA
// v24 gradients equal v22 gradients bit for bit", which also checks the width each call launched). G1' and G2' are
// rung 22's. KDA, GDN2 and every fallback run rung 21 (i.e. 20), as rung 22. Range: rung 18's
// (bwdc::in_rung18_range). Workspace: rung 3's.
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v24_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v24_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung18_range(c)) return bwd_v21_launch(c);  // KDA, GDN2 and rung 18's fallbacks: rung 21 (i.e. 20)
  // rung 22's routing, G1' and G2' (its route named for G1''s staging, as rung 22's); the front's dstates kernel at 128
  // value columns where dstates_bv's DsPick::wide says so
  bwdc::bwd_duv_split_launch(c, p.K % 8 == 0 ? "bwd_v24_kq8" : "bwd_v24", bwdc::bwd_v12_g1_dsh_kq8,
                             bwdc::bwd_v12_g1_dvh_kq8, bwdc::bwd_v12_g1_lean_kq8, bwdc::DsPick::wide);
}

}  // namespace linattn::cuda::detail
