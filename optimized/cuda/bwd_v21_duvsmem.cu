// optimized/cuda/bwd_v21_duvsmem.cu -- rung 21 of the CUDA backward ladder: rung 20 (bwd_v20_dvbf16.cu; for DeltaNet
// its rung 19 path) with the WY-side kernel G2' summing dbeta's <du0, v> terms on chip (issue 6; written in session
// 20).
//
// Why: G2' (bwd11_wy, bwd_v11_wyfast.cu) computed du0 = A^T dv_new per 64-column value slab, stored it to ws.du0 as
// float32 (dv = beta du0 is stored from the same fragments) and, at the end, read it back with v for dbeta =
// <de, k> + <du0, v> (B10). At K = V = 128 that is 32 KB written, 32 KB read and 16 KB of v read again per (chunk,
// head), of about 256 KB G2' moves in all: 671 MB at B=8 T=4096 H=16. G2' runs at about half the H200's memory
// bandwidth, so bytes it does not move are candidate time.
//
// What changes against rung 20 (KDA, GDN2 and every fallback run rung 20, i.e. 19 or 18):
//   G2'  bwd11_wy<.., kDuV = true> (bwd_v11_g2_duv): v is staged exactly (bf16) in the k slab's tile, which is free
//        until B9. In each value slab's epilogue every thread multiplies its du0 fragment by v and adds the products
//        into its own elements of a [64][72] float32 array (set by the first slab, added to by the next; 18,432 bytes
//        of shared memory more: 106,240, still 2 blocks per SM). Each lane's dbeta sum takes its de k terms, then that
//        array's columns lane and lane + 32, and the warp reduces as before. ws.du0 is neither written nor read.
//        (A first version summed each row in registers and by shuffles: 56 bytes of spills, never run.)
//        Inf / NaN: the padded columns c >= V (V % 64 != 0) add du0 x 0, which is NaN where A holds an Inf (rung 20
//        summed only c < V), so such a dbeta can be NaN where rung 20's is +-Inf; the host API refuses non-finite
//        inputs, and A of finite inputs is finite.
//   DeltaNet runs rung 19's front and G1' (bf16 dS'; rung 20's bf16 dv_new measured slower for it), GDN rung 20's
//   (bf16 dv_new in ws.du0's first half where bwdc::dv_bf16_ok holds, else rung 18's).
// Every gradient but dbeta is rung 20's bit for bit; dbeta is the same float32 terms summed in another order
// (proofs_tests/test_cuda_backward.cu, "CUDA v21 gradients equal v20 gradients bit for bit but dbeta within float32
// summation order", which also checks the route each call took: route.hpp).
//
// Range: rung 18's (bwdc::in_rung18_range); elsewhere rung 20. Workspace: rung 3's (ws.du0 unused by G2' now; GDN's
// dstates kernel still hands bf16 dv_new to G1' through its first half).
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {

std::size_t bwd_v21_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwdc::bwd_duv_split_launch(const BwdCall& c, const char* name, void (*g1_dn)(const BwdCall&, Profile&),
                                void (*g1_gdn_dvh)(const BwdCall&, Profile&),
                                void (*g1_gdn_lean)(const BwdCall&, Profile&), DsPick ds) {
  if (c.p.gate == kGateNone)  // DeltaNet: rung 19's front (bf16 dS')
    return bwd_split_launch(c, name, g1_dn, bwd_v11_g2_duv, /*g_only=*/true, /*ds_bf16=*/true, /*dv_bf16=*/false,
                            ds);
  if (dv_bf16_ok(c))  // GDN: rung 20's front (bf16 dv_new)
    return bwd_split_launch(c, name, g1_gdn_dvh, bwd_v11_g2_duv, /*g_only=*/true, /*ds_bf16=*/false,
                            /*dv_bf16=*/true, ds);
  // GDN elsewhere: rung 18's front
  bwd_split_launch(c, name, g1_gdn_lean, bwd_v11_g2_duv, /*g_only=*/true, /*ds_bf16=*/false, /*dv_bf16=*/false, ds);
}

void bwd_v21_launch(const BwdCall& c) {
  if (c.p.N == 0) return;
  // KDA, GDN2 and rung 18's fallbacks: rung 20 as it is
  if (!bwdc::in_rung18_range(c)) return bwd_v20_launch(c);
  // rung 19's G1' for DeltaNet (bf16 dS'), rung 20's for GDN (bf16 dv_new), else rung 18's
  bwdc::bwd_duv_split_launch(c, "bwd_v21", bwdc::bwd_v12_g1_dsh, bwdc::bwd_v12_g1_dvh, bwdc::bwd_v12_g1_lean);
}

}  // namespace linattn::cuda::detail
