// optimized/cuda/bwd_v15_hionly.cu -- rung 15 of the CUDA backward ladder: rung 13 (bwd_v13_g1g2.cu) with
// one bf16 MMA per product in its chunk-gradient kernels G1' and G2' (issue 6). WRITTEN IN SESSION 9,
// NOT YET RUN ON A GPU.
//
// Why: rungs 4-14 multiply float32 operands (S, dS', v_new, dv_new, A, dA, T1, M1, M1b, M2, u0, E,
// dw_aux) as hi + lo bf16 pairs, three MMAs per product (hi*hi + hi*lo + lo*hi), staging and splitting
// both halves. fla does one bf16 MMA with bf16 intermediates, and its gradients agree with ours to
// 2.5e-3 .. 6e-3 relative RMS (RESULTS.md, session 9 call 3); our rung 3 bounds are bf16-level (about
// 1e-2). Rung 15 drops the lo operands: each float32 operand is rounded to bf16 (round to nearest even)
// and every product is hi*hi only, float32 accumulation, G in float64 and every other stage unchanged.
//
// Kernels: rung 12's G1' (bwd12_g1<true>, bwd_v12_g1slab.cu) and rung 11's G2' (bwd11_wy<Tg, true>,
// bwd_v11_wyfast.cu), the same code with the compile-time flag kHi: lo tiles neither staged, split nor
// multiplied (bwdc::put_op / put_op4 / lo_op); the kHi = false instantiations (rungs 11-14) compile to
// the same PTX as before (optimized/cuda/bench/ptx_identity.py, RESULTS.md "Rung 15").
//   G1': 5 bf16 tiles instead of 9; the float32 overlay (dG_part, dKd, Kd) then sets the size: 51,200
//        bytes of shared memory instead of 84,224; per K-step 4 MMA pairs instead of 10 in B2/B4/B5,
//        2 instead of 4 in B9's P half.
//   G2': A, X, Y hi only: 87,808 bytes instead of 106,240; 1 MMA instead of 3 in B6, B8, B7 (x6
//        products), 1 instead of 2 in B9's L half (x2).
// Numerics: bf16-level (each float32 operand rounded to bf16, relative 2^-9 at worst); the float64 model
// bench/models/bwd_v15_hionly_model.py predicts the error against the float64 reference before any GPU run
// (RESULTS.md "Rung 15"); proofs_tests/test_cuda_backward.cu holds rung 15 to rung 3's bounds.
//
// Range: rung 13's. KDA and GDN2 run rung 8 (hi + lo: rung 8's kernel is not given the flag in this
// rung); calls outside rung 3's range run rung 2 (via rung 3); H * max(K, V, 64) >= 2^25 runs rung 6;
// num_chunks * ceil(K / 64) >= 2^31 (G1''s grid) runs rung 11 (hi + lo). Workspace: rung 3's. Requires
// log-decays <= 0, as rung 10 (the host API checks; the device API not).
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v15_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v15_launch(const BwdCall& c) {  // rung 12's G1', then rung 11's G2', both hi-only
  // G1''s grid x extent (a signed int index in the kernel): else rung 11 (rung 10's G1, then G2').
  if (std::int64_t(c.p.num_chunks) * ((c.p.K + 63) / 64) >= (std::int64_t(1) << 31)) return bwd_v11_launch(c);
  bwdc::bwd_split_launch(c, "bwd_v15", bwdc::bwd_v12_g1_hi, bwdc::bwd_v11_g2_hi);
}

}  // namespace linattn::cuda::detail
