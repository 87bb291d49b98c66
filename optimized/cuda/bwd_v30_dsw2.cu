// optimized/cuda/bwd_v30_dsw2.cu -- rung 30 of the CUDA backward ladder: rung 29 (bwd_v29_b1hi.cu) with the 128-column
// dstates kernel keeping DeltaNet's w_aux and Qg tiles in two stages (issue 6; written in session 26, first run in
// session 27: no faster).
//
// Why: at K = V = 128 the dstates kernel (bwd3_dstates, bwd_v3_async.cu) runs one block per (sequence, head) over all 128
// value columns (rung 24's width, the benchmark's), with rung 23's single stage of the w_aux, Qg and Kd tiles (193,536
// bytes of shared memory, one block per SM). Each chunk step then has three barriers, and chunk ci - 1's w_aux and Qg
// are copied only after chunk ci's B3 has read them (behind the third barrier) and awaited before chunk ci - 1's B3:
// their 32 KB land under B1 alone. Rung 29's B1 multiplies dS''s hi part only, so the 34,816-byte lo tile is free; two
// stages of w_aux and Qg need exactly that (2 x 17,408 more). bench/analysis_bwd_plan.md, "Session 26".
//
// What changes against rung 29: bwd3_dstates<128, 128, .., kB1Hi = true, kW2 = true> (BwdCall::ds_w2) copies chunk
// ci - 1's w_aux and Qg into the other stage right after chunk ci's first barrier and waits for them with chunk ci - 1's
// other tiles: two barriers per chunk, the copies under a whole step. The 32- and 64-column kernels (two stages of every
// tile already) and everything else are rung 29's. The same products in the same order on the same values, so every
// gradient equals rung 29's bit for bit (proofs_tests/test_cuda_backward.cu, "CUDA v30 gradients equal v29 gradients bit
// for bit", at every dstates width).
//
// Range: rung 29's; elsewhere rung 29 (i.e. 28, 27 or 24). Reads saved states as rung 29 does. Workspace: rung 29's.
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v30_workspace_bytes(const KParams& p) { return bwd_v29_workspace_bytes(p); }

void bwd_v30_launch(const BwdCall& c0) {
  // Rung 29 with the two-stage 128-column dstates kernel. Outside its own kernels rung 29 clears ds_w2 before falling
  // back (so no range test here); inside, the route is "bwd_v30_dsw" at every dstates width (at 32 and 64 columns the
  // kernels are rung 29's: kW2 exists only at 128).
  BwdCall c = c0;
  c.ds_w2 = true;
  bwd_v29_launch(c);
}

}  // namespace linattn::cuda::detail
