// optimized/cuda/v6_lean.cu -- rung 6 of the CUDA forward ladder (written in session 7; run in
// session 8: its tests pass, within noise of v4, not `best`): v4 for DeltaNet and GDN without the q~ / k~
// workspace tiles. Measured (session 8 call 1, B=8 T=4096 H=16 K=V=128, v4 / v6, ms): DeltaNet 0.923 /
// 0.915, GDN 0.968 / 0.953; at B=1 T=32768: 1.490 / 1.486, 1.508 / 1.529. The intra kernel moves 23%
// fewer bytes and is no faster (0.481 / 0.486 ms for GDN): it is not bandwidth-bound.
//
// What v4 left (H200, session 7; RESULTS.md "Forward rung 6"): GDN at B=8 T=4096 H=16 K=V=128 bf16
// takes 0.977 ms against fla's 0.854, intra kernel 0.497 + state kernel 0.487 ms; the state kernel is
// on par with fla's fwd_h + fwd_o, the intra kernel is the gap (DRAM 2.38 TB/s). Per (chunk, head)
// v4's intra kernel reads q, k, v and writes w_aux, q~ = scale q exp(G), k~ = k exp(G_C - G) (bf16,
// 64 x KP each), P, u (float32) and exp(G_C); the state kernel reads q~ and k~ back.
// For gate none (DeltaNet) and scalar (GDN) q~ and k~ are q and k times ONE number per row, so v6
//   1. intra: tc_common.cuh's intra_body with kLean (tci::intra_lean): v4's kernel for these gates
//      (L, P by tensor cores with exp(G_i - G_j); A = (I + L)^-1, the off-diagonal blocks on tensor
//      cores; w_aux, u), which writes G_i (cumulative log2 decay of row i, 64 floats per (chunk,
//      head); lean_g) instead of q~ and k~;
//   2. state: v2_tensorcore.cu's v2_state_body with kLean (v2_state_lean), which stages q and k rows
//      from the inputs and applies the row factors itself (SPEC section 4, step 3; the chunked form
//      of the paper's Eqs.14-17):
//        o_i = scale exp(G_i) (q_i S) + (P v_new)_i          (float32 factor on the q S accumulator)
//        S'  = exp(G_C) S + k^T diag(exp(G_C - G_i)) v_new   (factor on v_new before its bf16 tile)
//      with v_new = u - w_aux S as in v4 (P v_new keeps the unscaled bf16 v_new).
// Traffic per (chunk, head) at K = V = 128: the intra kernel writes 2 x 16 KB less (q~, k~) and 256
// bytes more (G); the state kernel reads q, k (same size as q~, k~) plus 256 bytes of G.
// Numerics: q and k enter the products exactly (bf16 inputs, no rounding of q exp(G) or k exp(G_C - G));
// the row factors are float32; v_new exp(G_C - G_i) is rounded to bf16 once, as v4 rounds v_new and
// k exp(G_C - G) each once: the same number of bf16 roundings per product term or fewer, so the bf16
// bound of the other rungs holds (test_cuda_forward.cu).
// Range: bf16 inputs, 16 <= K <= 128, gate none or scalar. Every other call (KDA, GDN2, float32
// inputs, other K) runs what `best` runs: v4 where v4 takes the call, else v1; so v6 takes every call.
#include <algorithm>
#include <string>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {
namespace {

/// The intra kernel's policy for gate none / scalar: v4's (V4Levels) settings; per-channel L and P
/// (lp) never run here (kLean rejects per-channel gates at compile time).
struct V6Lean {
  static constexpr int kt_rows = 64;
  static constexpr bool tc_inverse = true;  // A's off-diagonal blocks on tensor cores, as v4
  template <int KP, bool GDN2>
  __device__ static void lp(const tci::Tiles&, float, const KParams&) {}
};

bool in_lean_range(const Call& c) {
  return c.dtype == 1 && c.p.K >= 16 && c.p.K <= 128 && c.p.gate != kGateChannel;
}

template <int KP>
void launch_kp(const Call& c) {
  if (!skip_kernel("intra")) tci::launch_lean<V6Lean, KP>(c);
  tc_state_lean_launch(c, KP);
}

}  // namespace

std::size_t v6_workspace_bytes(const KParams& p) {
  return std::max(tc_lean_workspace_bytes(p), v1_workspace_bytes(p));
}

void v6_launch(Call c) {
  if (!in_lean_range(c)) {
    if (v4_supports(c, nullptr)) return v4_launch(c);
    return v1_launch(c);
  }
  if (tc_pick_kp(c.p.K) == 64) return launch_kp<64>(c);
  return launch_kp<128>(c);
}

}  // namespace linattn::cuda::detail
