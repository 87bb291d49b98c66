// optimized/cuda/bwd_v13_g1g2.cu -- rung 13 of the CUDA backward ladder: rung 10 (bwd_v10_split.cu) with
// both halves of its split chunk-gradient kernel replaced, G1 by rung 12's G1' (bwd_v12_g1slab.cu,
// one block per 64-channel slab of K, 2 blocks per SM) and G2 by rung 11's G2' (bwd_v11_wyfast.cu,
// dE and de kept on chip); issue 6. Written in session 8; run in
// session 9 call 1: bit for bit with rung 10, backward DeltaNet 4.86 ms, GDN 5.91 (rung 8: 6.84, 7.10); `best`.
//
// No device code of its own: rung 10's front (rung 8's, bwd_v3_front with levels_intra and wide_extras),
// then bwdc::bwd_v12_g1 (G1', "grads" in the profile) and bwdc::bwd_v11_g2 (G2', "wy"), the two rungs'
// kernels unchanged behind host wrappers. G1' writes dq, ws.dwa, ws.dkLP and (GDN) ws.dGc exactly as
// rung 10's G1 does, and G2' reads exactly those, as rung 10's G2 does; each is rung 10's kernel bit for
// bit by design, so rung 13's gradients are rung 10's bit for bit (proofs_tests/test_cuda_backward.cu,
// "CUDA v13 gradients equal v10 gradients bit for bit", to be confirmed on a GPU).
//
// Range: the union of rungs 11 and 12's fallbacks. KDA and GDN2 run rung 8; calls outside rung 3's range
// run rung 2 (via rung 3); H * max(K, V, 64) >= 2^25 runs rung 6; num_chunks * ceil(K / 64) >= 2^31
// (G1''s grid) runs rung 11 (rung 10's G1, then G2'). Workspace: rung 3's. Requires log-decays <= 0, as
// rung 10 (the host API checks; the device API not).
#include <algorithm>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v13_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v13_launch(const BwdCall& c) {  // rung 12's G1', then rung 11's G2'
  // G1''s grid x extent (a signed int index in the kernel): else rung 11 (rung 10's G1, then G2').
  if (!bwdc::slab_grid_fits(c.p)) return bwd_v11_launch(c);
  bwdc::bwd_split_launch(c, "bwd_v13", bwdc::bwd_v12_g1, bwdc::bwd_v11_g2);
}

}  // namespace linattn::cuda::detail
