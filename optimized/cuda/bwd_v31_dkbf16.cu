// optimized/cuda/bwd_v31_dkbf16.cu -- rung 31 of the CUDA backward ladder: rung 29 (bwd_v29_b1hi.cu) with DeltaNet's two
// gradient kernels handing over bf16 where fla's do (issue 6; written in session 27).
//
// Why: after rung 29 the dstates chain is at 0.50-0.56 ms and the two parallel kernels G1' (0.66-0.72 ms against fla's
// chunk_bwd_dqkwg at 0.47) and G2' (0.70-0.77 against fla's prepare_wy_repr_bwd + dk add at 0.59) are bound by bytes
// at B=8 T=4096 H=16 K=V=128: G1' moves about 1.9 GB (2.8 TB/s at 0.67 ms). Two of their arrays are wider than fla's:
//   dk_part (G1' -> G2', [B T H, K]) is float32: 268 MB written and 268 MB read, where fla's dqkwg stores its dk in
//     bf16 and adds wy_bwd's part to it;
//   dv_new's lo plane (the dstates kernel -> G2', [B T H, V] bf16): 134 MB read for B8's du0 = A^T dv_new on hi + lo,
//     where fla's prepare_wy_repr_bwd multiplies its bf16 dv.
// Rung 31 stores dk_part as bf16 (G1': bwd25_g1's kDkH, round to nearest even) and reads it so in G2' (bwd26_wy's kR31),
// and G2' copies and multiplies dv_new's hi plane only: about 400 MB less traffic (an estimate of bytes, not a
// measurement). The dstates kernel still writes the lo plane (its time is its chain of chunk steps, not its stores:
// rung 27 removed 134 MB of them and gained nothing).
//
// What changes against rung 29: G1' is bwd_v31_g1 (rung 28's, or with float32 saved S rung 27's, with kDkH), G2' is
// bwd_v31_g2 (rung 27's with kR31); the front (dstates with B1 on dS''s hi part, dv_new as planes) and the states kernel
// are rung 29's.
// Numerics: dk = bf16_rn(dk_part) + dk^L + beta de, then rounded to bf16 (one more rounding of one summand: relative
// 2^-9 of |dk_part|), and du0 = A^T bf16_rn(dv_new) (dv = beta du0, dbeta's <du0, v> and every gradient through du0 see
// dv_new rounded to bf16, as fla's do). Not bit for bit with rung 29: proofs_tests/test_cuda_backward.cu holds rung 31
// to rung 3's bounds against the float64 reference (properties; fixed cases beside rung 29 at every dstates width).
//
// Range: rung 29's own (DeltaNet inside rung 18's range with bwdc::g1a_ok); elsewhere rung 29, which says what runs
// there (rung 28's, i.e. 27's or 24's kernels). Reads rung 28's bf16 saved states, and float32 ones through
// bwd_v31_g1_f32s. Workspace: rung 29's (dk_part in ws.dkLP's first half).
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v31_workspace_bytes(const KParams& p) { return bwd_v29_workspace_bytes(p); }

void bwdc::dn_b1hi_split_launch(const BwdCall& c0, const char* name, void (*g1)(const BwdCall&, Profile&),
                                void (*g1_f32s)(const BwdCall&, Profile&), void (*g2)(const BwdCall&, Profile&)) {
  BwdCall c = c0;
  c.ds_b1_hi = true;  // rung 29's dstates kernel (B1 on dS''s hi part)
  c.ds_w2 = false;    // not rung 30's two-stage variant (it measured no faster: RESULTS.md, "Rung 30")
  // As rung 29: float32 saved S (a saving forward without states_bf16) is read by g1_f32s (rung 27's S handling), else
  // S is bf16 (the saving forward's, or the front's states kernel stores it so).
  const bool f32_saved = c0.saved_states && !c0.s_bf16;
  if (!f32_saved) c.s_bf16 = true;
  bwd_split_launch(c, name, f32_saved ? g1_f32s : g1, g2, /*g_only=*/true, /*ds_bf16=*/true, /*dv_bf16=*/true,
                   DsPick::wide, /*dv_planes=*/true);
}

void bwd_v31_launch(const BwdCall& c0) {
  if (c0.p.N == 0 || !bwdc::in_rung18_range(c0) || !bwdc::g1a_ok(c0)) return bwd_v29_launch(c0);  // rung 29's fallbacks
  bwdc::dn_b1hi_split_launch(c0, "bwd_v31_dkh", bwdc::bwd_v31_g1, bwdc::bwd_v31_g1_f32s, bwdc::bwd_v31_g2);
}

}  // namespace linattn::cuda::detail
