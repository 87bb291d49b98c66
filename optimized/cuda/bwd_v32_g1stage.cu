// optimized/cuda/bwd_v32_g1stage.cu -- rung 32 of the CUDA backward ladder: rung 31 (bwd_v31_dkbf16.cu) with DeltaNet's
// state-side kernel G1' writing its three bf16 outputs through shared memory as whole rows (issue 6; written in session
// 27).
//
// Why: rung 31 halved G1''s dk_part bytes (float32 -> bf16), yet G1' took 0.667-0.680 ms against rung 29's 0.650-0.655
// in the same processes (logs_session27/call2). Its outputs dq, dk_part and dw_aux leave from the MMA fragments as
// bf16 pairs: one store instruction of a warp writes 8 rows x 16 bytes, half a 32-byte sector per row (rung 29's
// float32 dk_part pairs wrote 8 rows x 32 bytes, whole sectors). Here G1' (bwd25_g1's kStE) puts the three outputs,
// bf16_rn as before, into three tiles of the value-slab set nothing reads any more (the last slab's), and copies them
// out as 16-byte row segments: a warp's instruction writes four whole 128-byte rows.
//
// What changes against rung 31: G1' is bwd_v32_g1 / bwd_v32_g1_f32s (rung 31's kernels with kStE); the rest is rung
// 31's. The same values in the same places: every gradient equals rung 31's bit for bit (proofs_tests/
// test_cuda_backward.cu, "CUDA v32 gradients equal v31 gradients bit for bit"). The 16-byte stores need dq 16-byte
// aligned, which backward_device requires of every gradient.
//
// Range: rung 31's; elsewhere rung 31 (i.e. 29, 28, ...). Reads rung 28's bf16 saved states and float32 ones.
// Workspace: rung 31's.
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v32_workspace_bytes(const KParams& p) { return bwd_v31_workspace_bytes(p); }

void bwd_v32_launch(const BwdCall& c0) {
  if (c0.p.N == 0 || !bwdc::in_rung18_range(c0) || !bwdc::g1a_ok(c0)) return bwd_v31_launch(c0);  // rung 31's fallbacks
  bwdc::dn_b1hi_split_launch(c0, "bwd_v32_g1s", bwdc::bwd_v32_g1, bwdc::bwd_v32_g1_f32s, bwdc::bwd_v31_g2);
}

}  // namespace linattn::cuda::detail
