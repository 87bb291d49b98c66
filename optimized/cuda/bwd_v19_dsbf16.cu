// optimized/cuda/bwd_v19_dsbf16.cu -- rung 19 of the CUDA backward ladder: rung 18 (bwd_v18_lean.cu) for
// DeltaNet with the state gradient dS' handed from the dstates kernel to G1' in bf16, because G1' multiplies only
// its bf16 hi part (issue 6; written in session 18, `best` since then).
//
// Why: since rung 17 the chunk-gradient kernels round most float32 operands to bf16 once (put_op4<true>, round
// to nearest even) and multiply that hi part alone. Two of those operands are float32 arrays written by one
// kernel only to be read once by the next, their low 16 bits never used:
//   dS'     [chunks, H, K, V] (537 MB at B=8 T=4096 H=16 K=V=128), bwd3_dstates -> G1' (dKd = v_new dS'^T).
//           B2's dgamma = sum_c S_dc dS'_dc needs it in float32, but only GDN (gated) forms dgamma.
//   dw_aux  [rows, K] (268 MB), G1' -> G2' (dA += dw_aux E^T, dE = A^T dw_aux).
//
// What changes against rung 18 (GDN, KDA, GDN2 and every fallback run rung 18 as it is):
//   dstates  DeltaNet: bwd3_dstates<KP, BV, kDsH = true> (bwd_v3_async.cu) copies dS''s hi tile, which the
//            recurrence's products read from shared memory anyway, into ws.dS's first half as bf16 [chunks, H,
//            K, V] by 16-byte rows (state_hi_store_rows, tc_common.cuh). The recurrence is untouched.
//   G1'      bwd12_g1<.., kDsH> (bwd_v12_g1slab.cu): DeltaNet copies those bf16 values to its dS' tile as they
//            are and skips dgamma.
// Off by default, LINATTN_BWD19_DWA_BF16=1 (measured no faster, below): dw_aux in bf16 as well, for DeltaNet and
// GDN: G1' (kDwaH) stores -dw_aux as bf16 pairs into ws.dwa's first half, G2' (bwd11_wy<.., kDwaH>,
// bwd_v11_wyfast.cu) copies that slab to its tile as it is.
// Each tile holds the values rung 18's held, so every gradient equals rung 18's bit for bit, with the knob and
// without (proofs_tests/test_cuda_backward.cu, "CUDA v19 gradients equal v18 gradients bit for bit").
//
// Measured (H200, session 18 calls 1-3, bench/logs_session18/; B=8 T=4096 H=16 K=V=128, one process with rung 18):
//   call 1, dS' only, stored from the fragments as 4-byte bf16 pairs: G1' 1.29-1.31 -> 1.17-1.20 ms, but dstates
//           0.60-0.67 -> 0.67-0.71 (a warp's pairs cover 16 bytes of each of 8 rows): hence the row copy above.
//   call 2, dS' by 16-byte rows and dw_aux in bf16 (DeltaNet; fla 2.844 in the process): dstates 0.601 / 0.604 /
//           0.652 -> 0.570 / 0.562 / 0.600, G1' 1.314 / 1.320 / 1.300 -> 1.163 / 1.165 / 1.193, G2' 1.147 / 1.152 /
//           1.152 -> 1.171 / 1.161 / 1.159 (plain / saved / saved with states); forward + backward 4.718 -> 4.579,
//           saved 4.499 -> 4.303, saved with states 4.118 -> 3.927.
//   call 3, GDN (dw_aux in bf16 alone): G1' unchanged (1.66-1.68), G2' 1.381-1.386 -> 1.405-1.411; backward 4.566
//           -> 4.585, saved with states 4.734 -> 4.752. So bf16 dw_aux did not help G2' (its 8-byte loads instead of
//           16-byte ones, G1''s 4-byte pair stores) and is off by default: LINATTN_BWD19_DWA_BF16=1 turns it on
//           (GDN then runs rung 19's G1' and G2' with it; without it GDN runs rung 18 as it is).
//
// Range: rung 18's. Workspace: rung 3's (dS' and dw_aux keep their float32 slots, half used).
#include <cstdlib>
#include <cstring>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v19_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v19_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  // LINATTN_BWD19_DWA_BF16=1: dw_aux in bf16 too (measured no faster; file comment). Read per call.
  const char* env = std::getenv("LINATTN_BWD19_DWA_BF16");
  const bool dwa = env && std::strcmp(env, "1") == 0;
  const bool dn = p.gate == kGateNone;  // GDN keeps float32 dS' (its dgamma)
  // KDA, GDN2, rung 18's own fallbacks and GDN without the knob: rung 18 as it is.
  if (!bwdc::in_rung18_range(c) || (!dn && !dwa)) return bwd_v18_launch(c);
  if (dn && !dwa)
    return bwdc::bwd_split_launch(c, "bwd_v19", bwdc::bwd_v12_g1_dsh, bwdc::bwd_v11_g2_lean, /*g_only=*/true,
                                  /*ds_bf16=*/true);
  bwdc::bwd_split_launch(c, "bwd_v19", dn ? bwdc::bwd_v12_g1_dsh_dwah : bwdc::bwd_v12_g1_dwah, bwdc::bwd_v11_g2_dwah,
                         /*g_only=*/true, /*ds_bf16=*/dn);
}

}  // namespace linattn::cuda::detail
