// optimized/cuda/bwd_v19_dsbf16.cu -- rung 19 of the CUDA backward ladder: rung 18 (bwd_v18_lean.cu) with two
// float32 hand-overs between kernels made bf16, because their consumer multiplies only the bf16 hi part
// (issue 6; written in session 18).
//
// Why: since rung 17 the chunk-gradient kernels round most float32 operands to bf16 once (put_op4<true>, round
// to nearest even) and multiply that hi part alone. Two of those operands are float32 arrays written by one
// kernel only to be read once by the next, their low 16 bits never used:
//   dS'     [chunks, H, K, V] (537 MB at B=8 T=4096 H=16 K=V=128), bwd3_dstates -> G1' (dKd = v_new dS'^T).
//           B2's dgamma = sum_c S_dc dS'_dc needs it in float32, but only GDN (gated) forms dgamma.
//   dw_aux  [rows, K] (268 MB), G1' -> G2' (dA += dw_aux E^T, dE = A^T dw_aux).
//
// What changes against rung 18 (KDA, GDN2 and every fallback run rung 18 as it is):
//   dstates  DeltaNet: bwd3_dstates<KP, BV, kDsH = true> (bwd_v3_async.cu) copies dS''s hi tile, which the
//            recurrence's products read from shared memory anyway, into ws.dS's first half as bf16 [chunks, H,
//            K, V] by 16-byte rows (state_hi_store_rows, tc_common.cuh). The recurrence is untouched.
//   G1'      bwd12_g1<.., kDsH, kDwaH> (bwd_v12_g1slab.cu): DeltaNet (kDsH) copies those bf16 values to its
//            dS' tile as they are and skips dgamma; DeltaNet and GDN (kDwaH) store -dw_aux as bf16 pairs into
//            ws.dwa's first half.
//   G2'      bwd11_wy<.., kDwaH> (bwd_v11_wyfast.cu) copies the bf16 dw_aux slab to its tile as it is.
// Each tile holds the values rung 18's held, so every gradient equals rung 18's bit for bit
// (proofs_tests/test_cuda_backward.cu, "CUDA v19 gradients equal v18 gradients bit for bit").
//
// Measured (H200, session 18 call 1, bench/logs_session18/; B=8 T=4096 H=16 K=V=128, DeltaNet, one process with
// rung 18 and fla): the first version (dS' only, stored from the fragments as 4-byte bf16 pairs) took G1'
// 1.29-1.31 -> 1.17-1.20 ms, while dstates went 0.60-0.67 -> 0.67-0.71 (its pairs cover 16 bytes of each of 8
// rows per warp store: hence the 16-byte row copy above, not yet measured). Saving forward with states + saved
// backward 4.290 -> 4.025 ms (fla 2.838 in that process).
//
// Range: rung 18's. Workspace: rung 3's (dS' and dw_aux keep their float32 slots, half used).
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v19_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v19_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  // KDA, GDN2 and rung 18's own fallbacks: rung 18 as it is.
  if (!bwdc::in_rung3_range(c) || !bwdc::in_rowbase_range(p) || p.gate == kGateChannel || p.gdn2 ||
      !bwdc::slab_grid_fits(p))
    return bwd_v18_launch(c);
  const bool dn = p.gate == kGateNone;  // GDN keeps float32 dS' (its dgamma)
  bwdc::bwd_split_launch(c, "bwd_v19", dn ? bwdc::bwd_v12_g1_dsh : bwdc::bwd_v12_g1_dwah, bwdc::bwd_v11_g2_dwah,
                         /*g_only=*/true, /*ds_bf16=*/dn);
}

}  // namespace linattn::cuda::detail
