// optimized/cuda/bwd_v22_kq8.cu -- rung 22 of the CUDA backward ladder: rung 21 (bwd_v21_duvsmem.cu) with the state-side
// kernel G1' staging B9's k and q slabs by 16-byte octets (issue 6; written in session 20, first run on the GPU in
// session 21, `best` in sessions 21-22; RESULTS.md "Rung 22").
//
// Why: G1' (bwd12_g1, bwd_v12_g1slab.cu) stages its 64 x 64 slabs of k and q for B9's P half (dq^P = M2 k, dk^P =
// scale M2^T q) by two-byte loads: 16 per array and thread, in two batches of 8, so two dependent global round trips
// between two barriers, while the block's tensor cores wait. Rung 21 showed that a phase of dependent loads in one of
// these kernels costs time out of proportion to its bytes (G2''s du0 read-back: 0.15 ms for DeltaNet). Here one batch
// of four 16-byte loads per thread (two of k, two of q) replaces them where K % 8 == 0 and k, q are 16-byte aligned;
// elsewhere rung 21's staging runs.
//
// What changes against rung 21: G1' only (bwd12_g1<.., kKq8 = true>: DeltaNet bwd_v12_g1_dsh_kq8, GDN
// bwd_v12_g1_dvh_kq8 or bwd_v12_g1_lean_kq8), the same values into the same tiles. So every gradient equals rung 21's
// bit for bit (proofs_tests/test_cuda_backward.cu, "CUDA v22 gradients equal v21 gradients bit for bit", which also
// checks each call's route: route.hpp). KDA, GDN2 and every fallback run rung 21.
//
// Range: rung 18's (bwdc::in_rung18_range), as rung 21. Workspace: rung 3's.
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v22_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v22_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung18_range(c)) return bwd_v21_launch(c);  // KDA, GDN2 and rung 18's fallbacks: rung 21 (i.e. 20)
  // The route's name says which staging G1' takes: octets where K % 8 == 0 (q and k are 16-byte aligned: both APIs
  // require it, chunk_cuda.cu), else rung 21's two-byte loads inside rung 22's kernel (route.hpp; the test checks it).
  // rung 21's routing with the kKq8 G1's
  bwdc::bwd_duv_split_launch(c, p.K % 8 == 0 ? "bwd_v22_kq8" : "bwd_v22", bwdc::bwd_v12_g1_dsh_kq8,
                             bwdc::bwd_v12_g1_dvh_kq8, bwdc::bwd_v12_g1_lean_kq8);
}

}  // namespace linattn::cuda::detail
