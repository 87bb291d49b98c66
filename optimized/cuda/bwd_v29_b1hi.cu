// optimized/cuda/bwd_v29_b1hi.cu -- rung 29 of the CUDA backward ladder: rung 28 (bwd_v28_sbf16.cu) with DeltaNet's
// dstates kernel multiplying only the bf16 hi part of dS' in B1 (issue 6; written in session 26).
//
// Why: the dstates kernel (bwd3_dstates, bwd_v3_async.cu) runs the reverse recurrence one chunk after another; its
// time is the chain of 64 chunk steps per sequence at T = 4096 (8.1 us per step at 128 value columns: "Session 23" of
// bench/analysis_bwd_plan.md), not its bytes (rung 27 removed 134 MB of its stores and gained nothing). Per step each
// warp issues about 290 MMAs: B1 = P^T do (<= 32) + Kd dS' as hi + lo (128), B3 = Qg^T do + w_aux^T (-dv_new) (128),
// and the lo tile of dS' costs a split, a shared-memory store and half of B1's B-operand loads. fla's chunk_bwd_dhu
// multiplies b_dh.to(bf16) (one MMA; its dh accumulator stays float32, as our dS' does). Rung 29 does the same in B1:
// Kd bf16_rn(dS'), 64 MMAs instead of 128 per warp and step, no lo tile.
//
// What changes against rung 28: bwd_v3_front launches bwd3_dstates<.., kDvP = true, kB1Hi = true> (BwdCall::ds_b1_hi).
// G1', G2', the states kernel and the saving forward (bf16 states) are rung 28's.
// Numerics: dS' is still accumulated in float32 (B3) and its hi part is what G1' reads (as in rung 28); dv_new =
// P^T do + Kd dS' now sees dS' rounded to bf16 (relative 2^-9 per element), where rung 28 kept about 16 bits. Every
// gradient downstream of dv_new changes at bf16 level: not bit for bit with rung 28. proofs_tests/test_cuda_backward.cu
// holds rung 29 to rung 3's bounds against the float64 reference (the property tests rung 28 passes).
//
// Range: rung 28's, elsewhere rung 28 (i.e. 27 or 24). A saved forward with bf16 S (rung 28's states_bf16) is read by
// this rung as by rung 28; with float32 S, by rung 27's G1' (which rounds S on chip to the same bf16 values) beside
// rung 29's dstates kernel, so the gradients do not depend on how the states were saved.
// Workspace: rung 28's.
#include <stdexcept>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v29_workspace_bytes(const KParams& p) { return bwd_v28_workspace_bytes(p); }

void bwd_v29_launch(const BwdCall& c0) {
  BwdCall c = c0;
  if (c0.p.N == 0 || !bwdc::in_rung18_range(c0) || !bwdc::g1a_ok(c0)) {  // rung 28, which says what runs there
    c.ds_b1_hi = c.ds_w2 = false;  // (rung 30's flag too: no fallback's front may see them)
    return bwd_v28_launch(c);
  }
  c.ds_b1_hi = true;  // the dstates kernel's B1 on dS''s hi part (bwd3_dstates' kB1Hi); rung 30 sets c0.ds_w2 too
  // With float32 saved S (a saving forward without states_bf16): rung 27's G1', which rounds S to bf16 on chip, the
  // values rung 28's G1' copies (bit for bit: "CUDA v28 gradients equal v27 gradients bit for bit"). Else bf16 S:
  // without saved states the front's states kernel stores it so (rung 28).
  const bool f32_saved = c0.saved_states && !c0.s_bf16;
  if (!f32_saved) c.s_bf16 = true;
  bwdc::bwd_split_launch(c, c.ds_w2 ? "bwd_v30_dsw" : "bwd_v29_b1h", f32_saved ? bwdc::bwd_v25_g1_dwah : bwdc::bwd_v28_g1,
                         bwdc::bwd_v26_g2_planes, /*g_only=*/true, /*ds_bf16=*/true, /*dv_bf16=*/true,
                         bwdc::DsPick::wide, /*dv_planes=*/true);
}

}  // namespace linattn::cuda::detail
