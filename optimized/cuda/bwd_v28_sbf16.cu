// optimized/cuda/bwd_v28_sbf16.cu -- rung 28 of the CUDA backward ladder: rung 27 (bwd_v27_dvplanes.cu) with DeltaNet's
// state entering every chunk kept as its bf16 hi part, the only part the state-side kernel G1' multiplies (issue 6;
// written in session 25).
//
// Why: since rung 15 DeltaNet's G1' multiplies only S's hi part (bf16_rn of the float32 state: dQg = do S^T and dw_aux
// = -dv_new S^T), and nothing else on this path reads S. Yet S is written as float32 (the backward's states kernel, or
// the saving forward with states) and read as float32 by G1' (rung 25: a 16 KB float32 slab per value slab, converted
// on chip). At B=8 T=4096 H=16 K=V=128 S is 537 MB in float32: keeping the hi part alone halves it, 268 MB less
// written by the forward's state kernel and 268 MB less read by G1', and G1' copies S by cp.async straight into a bf16
// tile (no slab, no conversion). bench/analysis_bwd_plan.md ("Session 22", item 1, change (a)) proposed it.
//
// What changes against rung 27:
//   * the states kernel (v2_state_body's kBwd / kSave stores, its kSbf instantiations v2_state_*_sbf) writes S's bf16
//     hi part from its own bf16 hi tile (bf16_rn of that very state, which its products read: the rounding G1''s
//     put_op4<true> applied to the float32 value it loaded) by 16-byte rows (tc_common.cuh, state_hi_store_rows) into
//     ws.S's first half: in the backward's own recompute (bwd_v3_front with BwdCall::s_bf16), and in the saving forward
//     when the caller asks for it (forward_device(.., with_states = true, states_bf16 = true) where
//     bwd_v28_keeps_s_bf16 holds; SavedForward::states_bf16()). (Session 25 call 1 ran a first form that stored the
//     fragments by 4-byte pairs: its recompute kernel spilled and took 0.73-0.78 ms against 0.48; the row stores take
//     0.43-0.45, and the saving forward 0.986 against the float32 states' 1.049: RESULTS.md, "Rung 28".)
//   * G1' is bwd25_g1<kDwaH = true, kSh = true> (bwd_v25_g1async.cu): S's bf16 slab goes by cp.async into a fourth
//     tile of each double-buffered set, beside do, dS' and dv_new; only v_new is still converted on chip. 108,544 bytes
//     of shared memory (rung 25's 115,712 less the S slab and the single S tile, plus two S tiles).
// G2' and the dstates kernel are rung 27's. So every gradient equals rung 27's bit for bit (proofs_tests/
// test_cuda_backward.cu, "CUDA v28 gradients equal v27 gradients bit for bit"; test_cuda_saved.cu for the saving
// forward's bf16 states).
//
// Range: rung 27's (bwdc::g1a_ok), elsewhere rung 27 (i.e. 24). With a saved forward that kept float32 S (states_bf16
// not asked, or outside bwd_v28_keeps_s_bf16), rung 27 reads it. A saved forward with bf16 S is read by this rung (and
// `best`) only: backward_device refuses it for the others (linattn::Error naming 'saved'). Workspace: rung 3's (ws.S's
// second half unused).
#include <stdexcept>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v28_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

bool bwd_v28_keeps_s_bf16(const Call& c) {
  const KParams& p = c.p;
  auto al16 = [](const void* a) { return reinterpret_cast<std::uintptr_t>(a) % 16 == 0; };
  // g1a_ok's conditions that the forward can see: rung 18's range (which reads only the parameters and the dtype) for
  // DeltaNet, K % 8 == V % 8 == 0, q, k, v 16-byte aligned. The workspace's alignments follow for DeltaNet (no G array;
  // every array a multiple of rows x 8 floats), and backward_device requires do 16-byte aligned.
  BwdCall b;
  b.p = p, b.dtype = c.dtype;
  return bwdc::in_rung18_range(b) && p.gate == kGateNone && p.K % 8 == 0 && p.V % 8 == 0 && al16(p.q) && al16(p.k) &&
         al16(p.v);
}

void bwd_v28_launch(const BwdCall& c0) {
  if (c0.p.N == 0 || !bwdc::in_rung18_range(c0) || !bwdc::g1a_ok(c0)) {
    if (c0.s_bf16)
      throw std::logic_error("linattn::cuda: bwd_v28: a saved forward kept bf16 S for a call outside rung 28's G1' "
                             "range (bwd_v28_keeps_s_bf16 should imply bwdc::g1a_ok)");
    return bwd_v27_launch(c0);
  }
  if (c0.saved_states && !c0.s_bf16) return bwd_v27_launch(c0);  // the saved forward kept float32 S: rung 27 reads it
  BwdCall c = c0;
  c.s_bf16 = true;  // without saved states: the front's states kernel stores S as bf16
  // DeltaNet: rung 27's front (dv_new as planes) with bf16 S, rung 28's G1' (bf16 dw_aux), rung 27's G2'
  bwdc::bwd_split_launch(c, "bwd_v28_sbf", bwdc::bwd_v28_g1, bwdc::bwd_v26_g2_planes, /*g_only=*/true,
                         /*ds_bf16=*/true, /*dv_bf16=*/true, bwdc::DsPick::wide, /*dv_planes=*/true);
}

}  // namespace linattn::cuda::detail
