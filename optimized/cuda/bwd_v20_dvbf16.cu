// optimized/cuda/bwd_v20_dvbf16.cu -- rung 20 of the CUDA backward ladder: rung 19 (bwd_v19_dsbf16.cu) with the
// gradient of v_new, dv_new, also handed from the dstates kernel to G1' in bf16: GDN by default, DeltaNet with
// LINATTN_BWD20_DN=1 (measured slower for it; below) (issue 6; written and run in session 19, `best` in session 19:
// for GDN a small gain, for DeltaNet rung 19 itself).
//
// Why: G1' (bwd12_g1, bwd_v12_g1slab.cu) multiplies only dv_new's bf16 hi part (dw_aux = -dv_new S^T, since rung
// 17), yet read it as float32 [rows, V], once per 64-channel slab of K: 2 x 268 MB at B=8 T=4096 H=16 K=V=128.
// Rung 19 showed G1' pays for such bytes: handing dS' over in bf16 (268 MB less) took it from 1.32 to 1.19 ms.
// The dstates kernel holds -dv_new rounded to bf16 in shared memory anyway (sNdv, B3's operand), and round to
// nearest even is odd-symmetric, so bf16_rn(dv_new) = -sNdv exactly: a row copy with the sign bits flipped.
//
// What changes against rung 19 (KDA, GDN2, DeltaNet without the knob and every fallback run rung 19):
//   dstates  bwd3_dstates<KP, BV, kDsH, kDvH = true> (bwd_v3_async.cu) copies sNdv's rows < Lc, sign flipped, into
//            ws.du0's first half as bf16 [rows, V] by 16-byte rows (dv_new_rows_store). du0 is G2''s, which
//            writes it only after G1' has read it (kernels in stream order). The float32 dv_new is still stored:
//            G2''s du0 = A^T dv_new takes its lo part as well (rung 17's kLoDu0).
//   G1'      bwd12_g1<.., kDvH = true> copies those bf16 values to its dv_new tile as they are: DeltaNet with bf16
//            dS' (rung 19's kDsH), GDN with float32 dS' (its dgamma needs it).
//   G2'      rung 18's (bwd11_wy, kLean), unchanged.
// Each tile holds the values rung 19's (and 18's) held, so every gradient equals rung 19's bit for bit
// (proofs_tests/test_cuda_backward.cu, "CUDA v20 gradients equal v19 gradients bit for bit", which also checks
// that each call took rung 20's own kernels or the fallback it should: route.hpp). Where dv_new holds a NaN the
// gradients are NaN in both rungs, not necessarily with the same bits (the sign flip of a canonical NaN).
// LINATTN_BWD19_DWA_BF16 (rung 19's knob) is ignored by rung 20's own kernels; its fallback to rung 19 honours it.
// Costs: the dstates kernel stores 134 MB more (bf16 dv_new beside the float32); G1' reads 268 MB less.
//
// Measured (H200, session 19 call 2, bench/logs_session19/; B=8 T=4096 H=16 K=V=128, one process per operator with
// rungs 19 and 20 (GDN: and 18; DeltaNet: and fla); the copy then ran between B1 and B3):
//   GDN      G1' 1.66-1.70 -> 1.55-1.56 ms, dstates 0.60-0.62 -> 0.66-0.67; backward 4.564 / 4.600 (rungs 18 / 19)
//            -> 4.494, saved with states 4.763 / 4.710 -> 4.674.
//   DeltaNet G1' no faster (1.16-1.22 -> 1.17-1.20), dstates 0.56-0.60 -> 0.66-0.70: backward 3.742 -> 3.874, saved
//            with states 3.914 -> 4.016 (fla 2.836 in the process).
// Call 3 (the copy moved after B3's products, where it now is; no fla; DeltaNet still on rung 20 by default then):
//   GDN      G1' 1.68-1.69 -> 1.57-1.58, dstates 0.60-0.61 -> 0.67-0.68; backward 4.560 -> 4.545, saving forward +
//            saved backward 5.133 -> 5.092, with states 4.767 -> 4.719: small, but faster on every path in both calls.
//   DeltaNet still slower: dstates 0.56-0.59 -> 0.64-0.66 (+0.07-0.08), G1' 1.13-1.19 -> 1.19-1.20; backward 3.780 -> 3.872,
//            with states 3.945 -> 4.029. The stores, not where they sit in the loop, cost dstates its time; DeltaNet's
//            G1' (bf16 dS' since rung 19) did not gain from the fewer bytes as GDN's did.
// So DeltaNet runs rung 19 unless LINATTN_BWD20_DN=1 (with it off, call 3: backward 3.801, with states 3.945, rung 19's
// figures); the bit test runs both settings.
//
// Range: rung 18's, with V % 8 == 0 and the workspace 16-byte aligned (bwdc::dv_bf16_ok: the 16-byte row stores and
// G1''s quad staging; GDN needs an even row count B T H for that); elsewhere rung 19. Workspace: rung 3's (du0 keeps
// its float32 slot, half of it holding bf16 dv_new between the two kernels).
#include <cstdlib>
#include <cstring>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v20_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v20_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  const bool dn = p.gate == kGateNone;  // DeltaNet: bf16 dS' too (rung 19's)
  // DeltaNet runs rung 19 unless LINATTN_BWD20_DN=1 (its own bf16 dv_new measured slower in session 19 calls 2
  // and 3; file comment). Read per call.
  const char* env = std::getenv("LINATTN_BWD20_DN");
  const bool dn_on = env && std::strcmp(env, "1") == 0;
  // KDA, GDN2, rung 18's fallbacks, V % 8 != 0, an unaligned workspace (GDN with an odd row count B T H): rung 19
  if (!bwdc::dv_bf16_ok(c) || (dn && !dn_on)) return bwd_v19_launch(c);
  bwdc::bwd_split_launch(c, "bwd_v20", dn ? bwdc::bwd_v12_g1_dsh_dvh : bwdc::bwd_v12_g1_dvh, bwdc::bwd_v11_g2_lean,
                         /*g_only=*/true, /*ds_bf16=*/dn, /*dv_bf16=*/true);
}

}  // namespace linattn::cuda::detail
