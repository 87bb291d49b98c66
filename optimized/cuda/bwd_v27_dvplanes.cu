// optimized/cuda/bwd_v27_dvplanes.cu -- rung 27 of the CUDA backward ladder: rung 26 (bwd_v26_wyasync.cu) with DeltaNet's
// dv_new handed from the dstates kernel to both gradient kernels as two bf16 planes, hi and lo, instead of float32 plus
// a bf16 copy (issue 6; written in session 24, first run on the GPU in session 25; RESULTS.md "Rung 27").
//
// Why: since rung 25 the dstates kernel (bwd3_dstates, bwd_v3_async.cu) stores dv_new twice: float32 for G2' (which
// multiplies its hi and lo bf16 parts) and a bf16 copy of its hi part for G1' (rung 20's kDvH, so that G1' can copy it
// straight into its tile). That is 6 bytes per element written; session 24 calls 2-3 measured the dstates kernel 0.05
// ms slower for it (0.50-0.55 -> 0.55-0.64 ms at B=8 T=4096 H=16 K=V=128). The hi and lo parts as two bf16 planes are
// 4 bytes per element, serve both kernels, and are what G2' multiplies: 134 MB less written at that shape.
//
// What changes against rung 26: the front's dstates kernel with kDvP (stores bf16_rn(dv_new) into ws.du0's first half,
// where kDvH put it, and bf16_rn(dv_new - hi) into its second half, from the fragments; no float32 dv_new, no row copy),
// and G2' reading the two planes (bwd26_wy<.., kDvP>: copied by cp.async into its raw slab's bytes, then into the hi
// and lo tiles as they are, where rung 26 converted the float32 slab with put_split4: the same values). G1' is rung
// 26's (it reads the hi plane where it read the copy). So every gradient equals rung 26's bit for bit
// (proofs_tests/test_cuda_backward.cu, "CUDA v27 gradients equal v26 gradients bit for bit", with NaN-filled
// workspaces between the rungs: a stale float32 dv_new read would show).
//
// Range: rung 26's (bwdc::g1a_ok); elsewhere rung 26 (i.e. 24). Workspace: rung 3's (ws.dvn unused on this path).
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v27_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v27_launch(const BwdCall& c) {
  if (c.p.N == 0 || !bwdc::in_rung18_range(c) || !bwdc::g1a_ok(c)) return bwd_v26_launch(c);
  // DeltaNet: rung 26's front with dv_new as planes, rung 26's G1' (bf16 dw_aux), rung 26's G2' on the planes
  bwdc::bwd_split_launch(c, "bwd_v27_dvp", bwdc::bwd_v25_g1_dwah, bwdc::bwd_v26_g2_planes, /*g_only=*/true,
                         /*ds_bf16=*/true, /*dv_bf16=*/true, bwdc::DsPick::wide, /*dv_planes=*/true);
}

}  // namespace linattn::cuda::detail
