// optimized/cuda/bwd_v15_hionly.cu -- rung 15 of the CUDA backward ladder: rung 13 (bwd_v13_g1g2.cu) with
// one bf16 MMA per product in its chunk-gradient kernels (G1' and G2' for DeltaNet and GDN, rung 8's
// kernel for KDA and GDN2; issue 6). Written in session 9; run in session 10 (RESULTS.md "Rung 15"): 1.1-1.17x
// faster than rung 13, but its properties failed rung 3's bounds on tiny cases with extreme gates (T = 1, 2;
// dk up to 1.9x, KDA dbeta 3x), where a few large terms cancel: not adopted. Rung 17 (bwd_v17_hybrid.cu)
// keeps the lo operands of the two products those cases need. The prediction below was made before the run.
//
// Why: rungs 4-14 multiply float32 operands (S, dS', v_new, dv_new, A, dA, T1, M1, M1b, M2, u0, E,
// dw_aux) as hi + lo bf16 pairs, three MMAs per product (hi*hi + hi*lo + lo*hi), staging and splitting
// both halves. fla does one bf16 MMA with bf16 intermediates, and its gradients agree with ours to
// 2.5e-3 .. 6e-3 relative RMS (RESULTS.md, session 9 call 3); our rung 3 bounds are bf16-level (about
// 1e-2). Rung 15 drops the lo operands: each float32 operand is rounded to bf16 (round to nearest even)
// and every product is hi*hi only, float32 accumulation, G in float64 and every other stage unchanged.
//
// Kernels (each an existing kernel with the compile-time flag kHi: lo tiles neither staged, split nor
// multiplied, bwdc::put_op / put_op4 / lo_op / stage_quads<kHi> / level_kstep<.., kHi>; the kHi = false
// instantiations, rungs 4-14, compile to the same PTX as before: optimized/cuda/bench/ptx_identity.py):
//   DeltaNet, GDN: rung 12's G1' (bwd12_g1<true>, bwd_v12_g1slab.cu) and rung 11's G2' (bwd11_wy<Tg,
//     true>, bwd_v11_wyfast.cu) after rung 10's front.
//     G1': 5 bf16 tiles instead of 9; the float32 overlay (dG_part, dKd, Kd) then sets the size: 51,200
//          bytes of shared memory instead of 84,224; 128 registers, no spill; 96 HMMA in SASS (224).
//     G2': A, X, Y hi only: 87,808 bytes instead of 106,240; 126 registers, no spill; 128 HMMA (352).
//     Both stay at 2 blocks per SM: __launch_bounds__(256, 2) caps them at 128 registers, which bounds
//     the blocks per SM before shared memory does.
//   KDA, GDN2: rung 8's front and chunk-gradient kernel bwd_grads_tc<Tg, V15Mid> (bwd_v4_tc_tail.cu:
//     V8Mid with kHiOnly; its B7 in run_impl and its per-channel B9 by levels, bwd_v6_tc_b9.cuh, hi-only
//     too): 231 registers (237), no spill, 288 HMMA (768); rung 8's shared-memory layout (167,424
//     bytes, the lo tiles left unused), 1 block per SM as rung 8.
// Numerics: bf16-level (each float32 operand rounded to bf16, relative 2^-9 at worst); the float64 model
// bench/models/bwd_v15_hionly_model.py predicts the error against the float64 reference before any GPU
// run (RESULTS.md "Rung 15"); proofs_tests/test_cuda_backward.cu holds rung 15 to rung 3's bounds.
//
// Range: rung 13's. Calls outside rung 3's range run rung 2 (via rung 3); H * max(K, V, 64) >= 2^25
// runs rung 6; DeltaNet and GDN with num_chunks * ceil(K / 64) >= 2^31 (G1''s grid) run rung 11 (hi +
// lo). Workspace: rung 3's. Requires log-decays <= 0, as rung 10 (the host API checks; the device API not).
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v15_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v15_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);  // outside the range: rung 2 (via rung 3)
  if (!bwdc::in_rowbase_range(p)) return bwd_v6_launch(c);  // RowBase's 32-bit offsets, as rungs 7-14
  if (p.gate == kGateChannel || p.gdn2) {  // KDA, GDN2: rung 8's front and kernel, hi-only (V15Mid)
    bwdc::Profile prof(c.stream, "bwd_v15");
    bwdc::bwd_v3_front(c, prof, /*levels_intra=*/true, /*wide_extras=*/true);
    if (p.num_chunks > 0) bwdc::bwd_v15_grads(c, prof);
    return;
  }
  // DeltaNet, GDN: rung 12's G1', then rung 11's G2', both hi-only. G1''s grid x extent (a signed int
  // index in the kernel): else rung 11 (rung 10's G1, then G2', hi + lo).
  if (!bwdc::slab_grid_fits(p)) return bwd_v11_launch(c);
  bwdc::bwd_split_launch(c, "bwd_v15", bwdc::bwd_v12_g1_hi, bwdc::bwd_v11_g2_hi);
}

}  // namespace linattn::cuda::detail
