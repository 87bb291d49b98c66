// optimized/cuda/bwd_v33_g2stage.cu -- rung 33 of the CUDA backward ladder: rung 32 (bwd_v32_g1stage.cu) with DeltaNet's
// WY-side kernel G2' writing dv and dk as whole rows too (issue 6; written in session 27, first run in session 30).
//
// Why: rung 32's whole-row stores took G1' from 0.65-0.71 to 0.58-0.61 ms (bench/logs_session27/, calls 3-4): its bf16
// outputs had left the MMA fragments as pairs, half a 32-byte sector per row and store instruction. G2' (0.68-0.72
// against fla's wy_bwd + dk add at 0.59) stores its two bf16 outputs, dv (per value slab) and dk (per key slab), the
// same way. Here (bwd26_wy's kSt) each goes through shared memory that is free at that point, so no tile is added and
// no barrier: dv of value slab s into the dv_new lo tile (unused since rung 31's hi-only B8), copied out after the next
// barrier; dk of key slab ks as float32 over that slab's dE entries (each thread overwrites what it has just read),
// copied out after the slab's de barrier, rounded to bf16 as before.
//
// What changes against rung 32: G2' is bwd_v33_g2 (rung 31's with kSt); the rest is rung 32's. The same values in the
// same places: every gradient equals rung 32's bit for bit (proofs_tests/test_cuda_backward.cu, "CUDA v33 gradients
// equal v32 gradients bit for bit").
//
// Range: rung 32's; elsewhere rung 32 (i.e. 31, 29, ...). Reads rung 28's bf16 saved states and float32 ones.
// Workspace: rung 32's.
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v33_workspace_bytes(const KParams& p) { return bwd_v32_workspace_bytes(p); }

void bwd_v33_launch(const BwdCall& c0) {
  if (c0.p.N == 0 || !bwdc::in_rung18_range(c0) || !bwdc::g1a_ok(c0)) return bwd_v32_launch(c0);  // rung 32's fallbacks
  bwdc::dn_b1hi_split_launch(c0, "bwd_v33_g2s", bwdc::bwd_v32_g1, bwdc::bwd_v32_g1_f32s, bwdc::bwd_v33_g2);
}

}  // namespace linattn::cuda::detail
