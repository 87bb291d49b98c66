// optimized/cuda/chunk_cuda.hpp -- host API of the CUDA chunked forward and backward kernels
// (SPEC section 4; the backward at the end of this file).
//
// DeltaNet, Gated DeltaNet (GDN), Kimi Delta Attention (KDA) and Gated DeltaNet-2 (GDN2) in the
// chunked UT-transform form with chunk C = 64, in the layout of SPEC section 1 (that of
// reference/recurrent.hpp and of flash-linear-attention):
//   q, k [B, T, H, K]; v, o [B, T, H, V]; g [B, T, H] (GDN) or [B, T, H, K] (KDA, GDN2), log-space;
//   beta [B, T, H] (DeltaNet, GDN, KDA); b [B, T, H, K], w [B, T, H, V] (GDN2);
//   initial / final state [N, H, K, V] in float32; packed batches via cu_seqlens (B = 1).
// K and V may be anything from 1 to 256 (64 and 128 are the tuned sizes). Inputs are float32 or
// bfloat16; accumulation, cumulative gates and the state are float32 always.
//
// Two levels:
//   * forward_device(): device pointers, any stream; what the benchmark and bindings call.
//   * chunk_forward() and the per-operator wrappers: host Tensor<float> in and out, validated with
//     the same checks (ref::validate_recurrent) and messages as the reference; for DType::bf16 the
//     inputs are rounded to bfloat16 on the way in (round_to_bf16 shows exactly how) and the output
//     comes back widened to float. Not a fast path: it allocates, copies and synchronises.
// The ladder of kernel versions (Version) is kept selectable so every rung stays tested; each
// version's file (v1_simple.cu, ...) says what it changes and what it measured.
//
// Training (issue 6): forward_device(args, version, &saved) is a forward that also keeps, in a
// SavedForward, what the backward's first kernel ("prepare": the forward's rung 4 intra-chunk
// kernel launched again with A, and the lean_g rung 9's state kernel reads) would recompute; backward_device(args, version, &saved) then skips
// that kernel (the rungs of saved_bwd_versions(): best and 5-33) and gives the same gradients bit for
// bit. See SavedForward below for what it holds, its memory (0.82 GiB at B=8 T=4096 H=16 K=V=128),
// its checks and its stream ordering.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reference/recurrent.hpp"
#include "reference/recurrent_backward.hpp"

namespace linattn::cuda {

using ref::Op;

/// Element type of q, k, v, o (DType of the inputs) or of the gates g, beta, b, w.
enum class DType : int { f32 = 0, bf16 = 1 };

/// The rungs of the ladder. `best` picks the fastest version that supports the call: v10_pipeline for
/// bf16 inputs and 16 <= K <= 128 since session 13 (for DeltaNet and GDN rung 7's kernels, pipelined over
/// segments for one long sequence whose state kernel cannot fill the GPU; v4_levels' kernels for KDA and
/// GDN2; bit for bit with v4_levels; RESULTS.md "Rung 4", "Forward rung 7", "Forward rung 10"), except,
/// since session 15, v9_lean_overlap for DeltaNet and GDN where the state kernel takes 64-column value
/// tiles (many sequences and heads, e.g. B=8 T=4096 H=16 V=128; RESULTS.md "Session 15: rung 9 in best");
/// otherwise v1_simple.
enum class Version : int {
  best = 0,
  v1_simple = 1,      ///< two plain kernels (per-chunk UT transform; sequential state pass), FFMA
  v2_tensorcore = 2,  ///< bf16 tensor cores (mma.sync); bf16 inputs, K <= 128
  v3_async = 3,       ///< v2 with batched asynchronous loads in the intra-chunk kernel
  v4_levels = 4,      ///< v3 with per-channel-gate L and P on tensor cores (binary levels of reference rows)
                      ///< and A's off-diagonal blocks on tensor cores (revision 3). B=8 T=4096 H=16
                      ///< K=V=128, session 5 call 7: 0.919 / 0.953 / 1.734 / 1.745 ms for DeltaNet /
                      ///< GDN / KDA / GDN2 (fla, same run: 1.009 / 0.898 / 1.815 / 2.026)
  v5_split = 5,       ///< v4 with the state pass split from a parallel output kernel where v4's state
                      ///< kernel cannot fill the GPU (else v4); correct on the H200 but 12-20% slower
                      ///< where it splits (session 5 call 3), so not `best` (RESULTS.md, "Rung 5")
  v6_lean = 6,        ///< v4 for DeltaNet and GDN (bf16, 16 <= K <= 128) without the q~ / k~ workspace
                      ///< tiles: the state kernel reads q, k and applies the row factors; other calls
                      ///< run what `best` runs. Its tests pass; within noise of v4 (B=8: DeltaNet 0.915
                      ///< against 0.923 ms, GDN 0.953 against 0.968; session 8 call 1), so not `best`
                      ///< (RESULTS.md, "Forward rung 6")
  v7_overlap = 7,     ///< v4 for DeltaNet and GDN (bf16, 16 <= K <= 128) with the intra kernel's shared
                      ///< arrays overlapped by lifetime (73,216 B, 71,168 before session 14, instead of 113,664 at K = 128: 3 blocks
                      ///< per SM instead of 2); bit for bit with v4 by design; other calls run v4 or v1.
                      ///< `best` in sessions 11-12: B=8 T=4096 H=16 K=V=128, session 11 call 2,
                      ///< DeltaNet 0.916 against v4's 0.937 ms, GDN 0.953 against 0.976 (fla 1.009 /
                      ///< 0.849); intra kernel alone 0.405 / 0.439 against 0.444 / 0.483 (call 1)
                      ///< (RESULTS.md, "Forward rung 7")
  v8_wgmma = 8,       ///< v7 with the state kernel's w_aux S and q~ S products on wgmma (warpgroup MMA,
                      ///< sm_90a) instead of mma.sync; other calls run what v7 runs. Bit for bit with v7
                      ///< on the H200 but slower (state kernel 0.57-0.60 against 0.49 ms at B=8 T=4096
                      ///< H=16 K=V=128, session 12): the products were not what bounds it, so not `best`
                      ///< (RESULTS.md, "Forward rung 8")
  v9_lean_overlap = 9, ///< rung 7's intra kernel (3 blocks per SM) with rung 6's lean outputs (no q~ / k~
                      ///< tiles), then rung 6's lean state kernel: bit for bit with v6 by design; other
                      ///< calls run what v7 runs (RESULTS.md, "Forward rung 9")
  v10_pipeline = 10   ///< one long sequence whose state kernel cannot fill the GPU: rung 7's kernels over
                      ///< segments, the next segment's intra kernel beside this segment's state kernel
                      ///< (programmatic dependent launch), bit for bit with v7 by design; elsewhere v7
                      ///< (RESULTS.md, "Forward rung 10")
};

const char* version_name(Version v);

/// Largest K and V supported.
inline constexpr int kMaxDim = 256;
/// Chunk length of every version.
inline constexpr int kChunk = 64;

/// Arguments of one forward call on device memory. Tensors are contiguous in the layout above, and
/// every array with a K or V dimension (and the states) starts on a 16-byte boundary (else
/// linattn::Error naming it; cudaMalloc and torch allocations start on 256 bytes).
struct DeviceArgs {
  Op op = Op::delta_rule;
  DType dtype = DType::f32;       ///< of q, k, v and o
  DType gate_dtype = DType::f32;  ///< of g, beta, b, w
  std::int64_t B = 1, T = 0, H = 1, K = 1, V = 1;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* g = nullptr;     ///< GDN, KDA, GDN2 (log decays, <= 0)
  const void* beta = nullptr;  ///< DeltaNet, GDN, KDA
  const void* b = nullptr;     ///< GDN2
  const void* w = nullptr;     ///< GDN2
  void* o = nullptr;
  float scale = 0.f;                        ///< multiplies q (the caller resolves the default)
  const float* initial_state = nullptr;     ///< [N, H, K, V] or null (zeros)
  float* final_state = nullptr;             ///< [N, H, K, V] or null (not written)
  const std::int64_t* cu_seqlens = nullptr; ///< HOST array of N + 1 offsets, or null (N = B)
  std::int64_t num_seqs = 0;                ///< N when cu_seqlens is given
  void* stream = nullptr;                   ///< cudaStream_t (null: the default stream)
};

/// Run one forward call. Checks the sizes it depends on (not the values: those live on the
/// device) and throws linattn::Error for bad arguments, std::runtime_error for CUDA failures.
/// Uses a process-wide, grow-only workspace (not thread-safe).
void forward_device(const DeviceArgs& args, Version version = Version::best);

class SavedForward;
/// The training forward: forward_device, and `save` (not null) keeps the intra-chunk kernel's
/// workspace and A = (I + L)^-1 for backward_device (SavedForward). The forward runs rung 4's intra
/// outputs (v4_levels; rung 7's kernel writes them for DeltaNet and GDN) and the state kernel `best` runs
/// for the call (rung 9's lean one where v9_in_best, so `version` names the intra layout, not the state
/// kernel): `version` must be best or v4_levels and the call one v4_levels takes (bf16 inputs,
/// 16 <= K <= 128), else linattn::Error naming 'version' or 'save'. o and the final state are
/// those of forward_device(args, best) bit for bit, whichever of the two `version` names: rung 4's
/// values (rung 7's intra kernel gives them for DeltaNet and GDN), and since session 15, where best runs
/// rung 9 (DeltaNet and GDN with 64-column state tiles), rung 9's lean state kernel's. `save`'s memory is reused when large enough, else reallocated.
/// with_states (opt-in; SavedForward, "With states"): the forward's state kernel also stores the state
/// entering every chunk and v_new (float32) where the saved backward reads them, so that backward
/// skips its states kernel and A's copy; o and the final state are still best's bit for bit (where best
/// runs rung 9, S and v_new are its lean kernel's, which the backward's recompute computes there too).
/// with_states with a null `save` is a linattn::Error naming 'save'.
/// states_bf16 (with with_states; backward rung 28, bwd_v28_sbf16.cu): the state entering every chunk is kept as its
/// bf16 hi part (round to nearest even), the only part rung 28's DeltaNet G1' multiplies, where that rung's range
/// allows (DeltaNet, bf16 inputs, 16 <= K <= 128, K % 8 == 0, V % 8 == 0, H max(K, V, 64) < 2^25, num_chunks
/// ceil(K / 64) < 2^31, q, k, v 16-byte aligned: bwd_v28_keeps_s_bf16; SavedForward::states_bf16() says whether it
/// did; elsewhere float32 as without it). 268 MB less written at B=8 T=4096 H=16 K=V=128 (saving forward 1.049 -> 0.986 ms, and the
/// fastest backward: best). Such an object is read by backward rungs 28 to 33 (33 is `best` since session 32; bwd_reads_bf16_states) only:
/// backward_device refuses it for the others (linattn::Error naming 'saved').
/// states_bf16 without with_states is a linattn::Error naming 'states_bf16'.
void forward_device(const DeviceArgs& args, Version version, SavedForward* save, bool with_states = false,
                    bool states_bf16 = false);

/// True when a CUDA device can be used; otherwise `why` says what is missing.
bool device_available(std::string* why = nullptr);

/// Round a float to the nearest bfloat16 (ties to even) and widen it back: what DType::bf16 does
/// to every input on the way in. NaN stays NaN.
inline float round_to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return x;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}
inline Tensor<float> round_to_bf16(const Tensor<float>& x) {
  if (!x.defined()) return {};
  Tensor<float> y = x.clone();
  for (float& e : y) e = round_to_bf16(e);
  return y;
}

/// Host convenience: validate (ref::validate_recurrent), copy to the device, run, copy back.
/// `dtype` is the element type q, k, v, o have on the device, `gate_dtype` that of the gates.
/// o and the final state are filled with NaN on the device before the launch, so an element a
/// kernel fails to write cannot pass for a value. use_qk_l2norm is applied on the host (float64)
/// before rounding; return_trace is not supported (linattn::Error).
ref::RecurrentOutput<float> chunk_forward(Op op, const Tensor<float>& q, const Tensor<float>& k,
                                          const Tensor<float>& v, const ref::Gates<float>& gates,
                                          const ref::RecurrentOptions<float>& opt,
                                          DType dtype = DType::f32, DType gate_dtype = DType::f32,
                                          Version version = Version::best);

/// DeltaNet (Eq.14), chunked (SPEC section 4).
ref::RecurrentOutput<float> chunk_delta_rule(const Tensor<float>& q, const Tensor<float>& k,
                                             const Tensor<float>& v, const Tensor<float>& beta,
                                             const ref::RecurrentOptions<float>& opt = {},
                                             DType dtype = DType::f32,
                                             Version version = Version::best);
/// Gated DeltaNet (Eqs.15-17), chunked.
ref::RecurrentOutput<float> chunk_gated_delta_rule(const Tensor<float>& q, const Tensor<float>& k,
                                                   const Tensor<float>& v, const Tensor<float>& g,
                                                   const Tensor<float>& beta,
                                                   const ref::RecurrentOptions<float>& opt = {},
                                                   DType dtype = DType::f32,
                                                   Version version = Version::best);
/// Kimi Delta Attention (Eqs.18-20), chunked.
ref::RecurrentOutput<float> chunk_kda(const Tensor<float>& q, const Tensor<float>& k,
                                      const Tensor<float>& v, const Tensor<float>& g,
                                      const Tensor<float>& beta,
                                      const ref::RecurrentOptions<float>& opt = {},
                                      DType dtype = DType::f32, Version version = Version::best);
/// Gated DeltaNet-2 (Eqs.21-24), chunked.
ref::RecurrentOutput<float> chunk_gdn2(const Tensor<float>& q, const Tensor<float>& k,
                                       const Tensor<float>& v, const Tensor<float>& g,
                                       const Tensor<float>& b, const Tensor<float>& w,
                                       const ref::RecurrentOptions<float>& opt = {},
                                       DType dtype = DType::f32, Version version = Version::best);

// ------------------------------------------------------------------------------------------------
// Backward (issue 6): the gradients of the forward above, chunked, recomputing what the forward
// does not keep (bwd_v1_simple.cu says how). Given dL/do and optionally dL/dS_T (dht), every input
// gets its gradient: dq, dk, dv; dg ([B,T,H] GDN, [B,T,H,K] KDA and GDN2); dbeta (DeltaNet, GDN,
// KDA) or db, dw (GDN2); dh0 [N,H,K,V] (always, also without an initial state). Arithmetic in
// float32 (cumulative log-decays in float64) whatever the input type.
// ------------------------------------------------------------------------------------------------

/// The rungs of the backward ladder. `best` picks v33_g2stage since session 32 (earlier: v32_g1stage in sessions 27-31,
/// v29_b1hi in session 26,
/// v28_sbf16 in session 25, v26_wyasync in session 24, v24_dswide in session 23, v22_kq8 in sessions 21-22,
/// v21_duvsmem in session 20, v20_dvbf16 in session 19, v19_dsbf16 in session 18, v18_lean in sessions 11-17).
/// Its path: KDA and GDN2 run v17_hybrid (v8_wide's chunk-gradient kernel with one bf16 MMA per product except the
/// two products whose float32 operand keeps its lo part); GDN runs v24_dswide (v13_g1g2's split kernels forming E,
/// Qg, Kd themselves, dv_new handed over in bf16, the dstates kernel's value columns by a wave-count model);
/// DeltaNet runs the chain v25 -> v26 (cp.async operand loads), v27 -> v28 (dv_new and the chunk states as bf16
/// planes), v29 (B1 on dS''s bf16 hi part), v31 (dk_part in bf16, G2' on dv_new's hi plane), v32 (G1''s bf16
/// outputs stored as whole rows). Each rung's line below says what it changes and whether it is bit for bit with
/// the one it builds on. Like v3_async to v17, every rung runs v2_tensorcore outside its range: float32 inputs,
/// K < 16 or K > 128 (RESULTS.md, one section per rung, on the H200).
enum class BwdVersion : int {
  best = 0,
  v1_simple = 1,     ///< four plain FFMA kernels (prepare; states; state gradients; chunk gradients)
  v2_tensorcore = 2, ///< the chunk gradients' products on bf16 tensor cores, prepare and state
                     ///< gradients with staged shared memory (bf16 inputs; float32 inputs run v1);
                     ///< 3.6x faster than v1; float32 gate gradients and dh0 near float32
                     ///< accuracy (RESULTS.md, "Rung 2")
  v3_async = 3,      ///< v2 with prepare and both recurrences on the forward's tensor-core kernels
                     ///< (bf16 inputs, 16 <= K <= 128; other calls run v2); 2.2x faster than v2
                     ///< for DeltaNet (21.5 ms against 46.5 at B=8 T=4096 H=16 K=V=128);
                     ///< bf16-level error in every gradient (choose v2 for float32-accurate gate
                     ///< gradients and dh0) (RESULTS.md, "Rung 3")
  v4_tc_tail = 4,    ///< v3 with B7 and, for DeltaNet and GDN, B9 of the chunk gradients on bf16
                     ///< tensor cores (hi + lo operands); same range and bounds as v3; 1.31-1.32x
                     ///< faster than v3 for DeltaNet and GDN, 1.03-1.04x for KDA and GDN2;
                     ///< `best` in session 5 (RESULTS.md, "Rung 4")
  v5_levels_front = 5, ///< v4 with prepare on the forward's rung 4 intra kernel (v4_levels.cu:
                       ///< per-channel L and P by levels, A's off-diagonal blocks on tensor cores)
                       ///< and the chunk-gradient kernel's global loads batched (stagings, tail,
                       ///< V4Mid's B9 slabs) and its per-channel float32 B9 unrolled; same range and
                       ///< bounds; 1.44x faster than v4 for DeltaNet, 1.79-1.82x for KDA and GDN2
                       ///< (16.38 -> 11.38 ms, 30.65 -> 17.12 at B=8 T=4096; session 6 call 1)
  v6_tc_b9 = 6,        ///< v5 with B9 of the chunk gradients for per-channel gates (KDA, GDN2) on
                       ///< bf16 tensor cores by binary levels of reference rows (hi + lo operands,
                       ///< float32 factors and epilogue); same range and bounds; 1.10x faster than
                       ///< v5 for KDA (15.63 ms), 1.11x for GDN2 (15.92), 1.02x for DeltaNet and GDN
                       ///< (same code there; B=8 T=4096, session 6 call 1); `best`
  v7_rowbase = 7,      ///< v6 with the chunk-gradient kernel's global addresses as per-block bases
                       ///< and 32-bit offsets (same values and operations: v6's gradients bit for
                       ///< bit; H * max(K, V, 64) >= 2^25 runs v6); 1.10-1.15x faster than v6 (DeltaNet
                       ///< 9.67 ms; session 7 calls 1-3) (RESULTS.md, "Rung 7")
  v8_wide = 8,         ///< v7 with the chunk-gradient kernel's global loads and stores at full width
                       ///< (16- / 8-byte accesses where K, V and alignment allow; same values and
                       ///< operations: v7's gradients bit for bit; the same fallbacks as v7); 1.35x
                       ///< faster than v7 for DeltaNet (9.20 -> 6.82 ms), 1.27-1.38x for GDN, KDA,
                       ///< GDN2 (session 8 call 1); `best` in session 8 (RESULTS.md, "Rung 8")
  v9_noextras = 9,     ///< v8 without the prepare's extras kernel: the chunk-gradient kernel forms G
                       ///< (float64, per chunk) and E, Qg, Kd itself with the extras kernel's
                       ///< expressions (same values: v8's gradients bit for bit; the same fallbacks
                       ///< as v8); its tests pass, but slower than v8 for GDN, KDA, GDN2 (7.19 -> 7.68,
                       ///< 10.75 -> 11.35, 10.14 -> 10.94 ms; DeltaNet equal; session 8 call 4), so
                       ///< not `best` (RESULTS.md, "Rung 9")
  v10_split = 10,      ///< v8 with the chunk-gradient kernel split in two for DeltaNet and GDN: G1
                       ///< (state side: B2, B4, B5, B9's P half; dq, dk_part, dG_part) and G2 (WY
                       ///< side, 2 blocks per SM: B6-B8, B9's L half, the rest of B10, B11); KDA and
                       ///< GDN2 run v8; only float32 summation order differs from v8 (dq, dv, dh0 bit
                       ///< for bit); the same fallbacks as v8. Tests pass; DeltaNet 2.7% faster than
                       ///< v8, GDN 7% slower (G2 is slow; session 8 call 6): not `best`
                       ///< (RESULTS.md, "Rung 10")
  v11_wyfast = 11,     ///< v10 with a faster WY-side kernel G2: dE and de kept on chip instead of
                       ///< global round trips, 16-byte k and v loads, B10's loads batched before its
                       ///< stores; the same gradients as v10 bit for bit by design; KDA and GDN2 run
                       ///< v8; the same fallbacks as v10. Session 9 call 1: bit for bit with v10,
                       ///< G2 2.09 -> 1.45 ms (DeltaNet), 2.62 -> 1.91 (GDN) (RESULTS.md, "Rung 11")
  v12_g1slab = 12,     ///< v10 with its state-side kernel G1 retiled: one block per (64-channel slab
                       ///< of K, chunk, head), 128 registers, 84 KB shared memory, 2 blocks per SM
                       ///< (dP recomputed by each slab's block); the same gradients as v10 bit for
                       ///< bit by design; KDA and GDN2 run v8; the same fallbacks as v10. Session 9
                       ///< call 1: bit for bit with v10, G1 2.68 -> 1.54 ms (DeltaNet), 3.04 -> 2.04
                       ///< (GDN) (RESULTS.md, "Rung 12")
  v13_g1g2 = 13,       ///< v10 with both halves replaced: v12's G1' and v11's G2' (no kernel of its
                       ///< own); the same gradients as v10 bit for bit by design; KDA and GDN2 run
                       ///< v8; the union of v11 and v12's fallbacks. Session 9 call 1: bit for bit
                       ///< with v10; backward DeltaNet 6.84 -> 4.86 ms, GDN 7.10 -> 5.91 against v8
                       ///< (B=8 T=4096 H=16 K=V=128 bf16); `best` (RESULTS.md, "Rung 13")
  v14_pchan = 14,      ///< v13 for DeltaNet and GDN; for KDA and GDN2 the split of v10 with per-channel
                       ///< gates: G1 (v10's, its B9 P half by levels) and G2 (WY side, B9 L half by
                       ///< levels), instead of v8's one kernel; dk, dg differ from v8 by float32
                       ///< summation order only; the same fallbacks as v13. Session 9 calls 3-4: tests
                       ///< pass, mutants caught, but slower than v8 for KDA (backward 11.21 against
                       ///< 10.69 ms: the per-channel B9 levels built in both halves), not `best`
                       ///< (RESULTS.md, "Rung 14")
  v15_hionly = 15,     ///< v13 with one bf16 MMA per product (float32 operands rounded to bf16, no lo
                       ///< operands) in G1' and G2' for DeltaNet and GDN (51 / 88 KB shared memory
                       ///< instead of 84 / 106) and in v8's chunk-gradient kernel for KDA and GDN2;
                       ///< the same fallbacks as v13. On the H200 (session 10) 1.1-1.17x faster than
                       ///< v13 but outside rung 3's bounds on tiny cases with extreme gates (dk 1.9x,
                       ///< KDA dbeta 3x), which its float64 model had not drawn: not adopted; v17
                       ///< keeps the two lo operands needed (RESULTS.md, "Rung 15")
  v16_b9one = 16,      ///< v13 for DeltaNet and GDN; for KDA and GDN2 v14's split without B9 (G1s:
                       ///< B2, B4, B5; G2s: B6, B8, B7) and one B9 kernel: v8's B9 by levels (both
                       ///< halves in one pass per level), then B10 and B11; dP and A^T T1 handed
                       ///< over through the workspace (32 KiB per chunk and head); dq, dv, dw, dh0
                       ///< as v8's, dk, dg, db, dbeta up to float32 summation order; the same
                       ///< fallbacks as v14. Correct on the H200 (session 10) but slower than v8 for
                       ///< KDA and GDN2 (its B9 kernel alone 6.3-6.8 ms; RESULTS.md, "Rung 16")
  v17_hybrid = 17,     ///< v15 with the lo operand kept on two products (dP's v_new, du0's dv_new:
                       ///< bench/models/bwd_v17_hybrid_model.py finds them needed on the tests' small
                       ///< cases with extreme gates, where v15 failed rung 3's bounds) in G1' and
                       ///< G2' for DeltaNet and GDN and in v8's chunk-gradient kernel for KDA and
                       ///< GDN2; the same fallbacks as v15. `best` in session 10: within rung 3's
                       ///< bounds on the H200, backward 1.09-1.16x faster than v13 (RESULTS.md,
                       ///< "Rung 17")
  v18_lean = 18,       ///< v17 for DeltaNet and GDN without the extras kernel's E, Qg, Kd arrays: G1'
                       ///< and G2' form them from q, k, beta and G by the same expressions (GDN's
                       ///< prepare computes G alone); bit for bit with v17 by design; KDA, GDN2 and
                       ///< v17's fallbacks run v17. `best` since session 11: bit for bit with v17 on
                       ///< the H200, backward DeltaNet 4.47 -> 4.16, GDN 5.37 -> 4.88 ms (RESULTS.md,
                       ///< "Rung 18")
  v19_dsbf16 = 19,     ///< v18 for DeltaNet with dS' handed from the dstates kernel to G1' in bf16, the only
                       ///< part of it G1' multiplies (with LINATTN_BWD19_DWA_BF16=1 also dw_aux, G1' ->
                       ///< G2', DeltaNet and GDN: no faster); bit for bit with v18; GDN (without the knob),
                       ///< KDA, GDN2 and v18's fallbacks run v18. `best` in session 18 (DeltaNet's path of v20 since): DeltaNet
                       ///< backward 3.92 -> 3.79 ms (RESULTS.md, "Rung 19")
  v20_dvbf16 = 20,     ///< v19 with dv_new handed from the dstates kernel to G1' in bf16 as well (GDN; DeltaNet
                       ///< only with LINATTN_BWD20_DN=1, measured slower; V % 8 == 0), the only part of it G1'
                       ///< multiplies; bit for bit with v19; KDA, GDN2, DeltaNet and v19's fallbacks run v19.
                       ///< `best` since session 19: GDN backward 4.560 -> 4.545 ms (4.600 -> 4.494 with the copy
                       ///< placed earlier; RESULTS.md, "Rung 20")
  v21_duvsmem = 21,    ///< v20 (DeltaNet: v19) with G2' summing dbeta's <du0, v> terms on chip instead of storing
                       ///< du0 as float32 and reading it back with v; every gradient but dbeta bit for bit with
                       ///< v20, dbeta in another float32 summation order; KDA, GDN2 and v20's fallbacks run v20.
                       ///< `best` since session 20: DeltaNet backward 3.770 -> 3.601 ms, GDN 4.536 -> 4.447
                       ///< (RESULTS.md, "Rung 21")
  v22_kq8 = 22,        ///< v21 with G1' staging B9's k and q slabs by 16-byte octets (K % 8 == 0) instead of
                       ///< two-byte loads; bit for bit with v21. `best` since session 21: DeltaNet saved with states
                       ///< 3.800 -> 3.763 and 3.831 -> 3.777 ms, GDN 4.642 -> 4.590 and 4.675 -> 4.574 (RESULTS.md, "Rung 22")
  v23_dsone = 23,      ///< v22 with the dstates kernel holding one stage of its w_aux, Qg, Kd tiles (two blocks per
                       ///< SM at K > 64, value tiles of 32); bit for bit with v22; measured slower in session 21
                       ///< (dstates 0.568 -> 0.616-0.684 ms DeltaNet), not `best` (RESULTS.md, "Rung 23")
  v24_dswide = 24,     ///< v22 with the dstates kernel's value columns per block (32, 64 or a head's whole 128: one
                       ///< wave at B=8 H=16) picked at K > 64 by a wave-count model; bit for bit with v22. `best`
                       ///< since session 23: DeltaNet saved with states 3.76 -> 3.69-3.72 ms, GDN 4.57 -> 4.41-4.44 at
                       ///< B=8 T=4096 H=16 (RESULTS.md, "Rung 24")
  v25_g1async = 25,    ///< v24 with DeltaNet's state-side kernel G1' loading do, v_new, dv_new, S, dS' (and B9's k, q)
                       ///< by cp.async a value slab ahead of its products, double-buffered; bit for bit with v24
                       ///< (RESULTS.md, "Rung 25"); GDN, KDA and GDN2 run v24
  v26_wyasync = 26,    ///< v25 with DeltaNet's WY-side kernel G2' loading its operands by cp.async ahead of the
                       ///< products that need them (value slabs double-buffered, key slabs and B10's k resident) and
                       ///< dw_aux handed from G1' in bf16; bit for bit with v25. `best` since session 24 call 3:
                       ///< DeltaNet saved with states 3.47-3.49 -> 3.12-3.17 ms, G2' 1.00-1.06 -> 0.72-0.76 at B=8
                       ///< T=4096 H=16 K=V=128 (RESULTS.md, "Rung 26")
  v27_dvplanes = 27,   ///< v26 with DeltaNet's dv_new handed from the dstates kernel as bf16 hi and lo planes (no
                       ///< float32 dv_new, no bf16 copy); bit for bit with v26. Written in session 24, first run in
                       ///< session 25 (bwd_v27_dvplanes.cu; RESULTS.md "Rung 27")
  v28_sbf16 = 28,      ///< v27 with DeltaNet's state entering every chunk kept as its bf16 hi part (the backward's
                       ///< states kernel, or the saving forward with states_bf16) and copied by G1' straight into its
                       ///< tile; bit for bit with v27. `best` since session 25 call 2: DeltaNet with bf16 saved states
                       ///< 2.89-2.92 ms (rung 27 with float32 ones 3.02-3.05, fla 2.83) at B=8 T=4096 H=16 K=V=128
                       ///< (RESULTS.md, "Rung 28")
  v29_b1hi = 29,       ///< v28 with DeltaNet's dstates kernel multiplying dS''s bf16 hi part only in B1 (dv_new = P^T do
                       ///< + Kd bf16(dS'), as fla's dhu); not bit for bit with v28, held to rung 3's bounds. Reads
                       ///< v28's bf16 saved states. `best` since session 26: DeltaNet with bf16 saved states median
                       ///< 2.851 ms of 11 runs beside fla's 2.835 (bwd_v29_b1hi.cu, RESULTS.md "Rung 29")
  v30_dsw2 = 30,       ///< v29 with the 128-column dstates kernel keeping w_aux and Qg in two stages (in the lo tile's
                       ///< bytes): one barrier less per chunk; bit for bit with v29. Session 27: no faster than v29
                       ///< (three pairs, RESULTS.md "Rung 30"; bwd_v30_dsw2.cu)
  v31_dkbf16 = 31,     ///< v29 with DeltaNet's G1' storing dk_part as bf16 and G2' reading it and dv_new's hi plane
                       ///< only (as fla's dqkwg and wy_bwd); not bit for bit with v29, held to rung 3's bounds. Reads
                       ///< v28's bf16 saved states. Session 27: G2' 0.03 ms faster, G1' 0.02 slower (bwd_v31_dkbf16.cu)
  v32_g1stage = 32,    ///< v31 with G1''s bf16 outputs (dq, dk_part, dw_aux) staged in shared memory and stored as
                       ///< whole 128-byte rows; bit for bit with v31. `best` in sessions 27-31: DeltaNet with bf16
                       ///< saved states 2.715-2.829 ms over five runs against fla's 2.836-2.838 (bwd_v32_g1stage.cu,
                       ///< RESULTS.md "Rung 32")
  v33_g2stage = 33,    ///< v32 with G2''s dv and dk stored as whole rows too (through shared memory it leaves free); bit
                       ///< for bit with v32. Written in session 27; session 30: passes every test, DeltaNet with bf16
                       ///< saved states 2.640-2.652 ms against v32's 2.667-2.677 in one process (bwd_v33_g2stage.cu,
                       ///< RESULTS.md "Rung 33"); `best` since session 32
};

/// Whether backward rung v reads a SavedForward whose states are bf16 (forward_device's states_bf16): rungs 28 to 33
/// and best (rung 33 since session 32). The others refuse such an object (backward_device).
bool bwd_reads_bf16_states(BwdVersion v);

const char* bwd_version_name(BwdVersion v);

/// Arguments of one backward call on device memory: the forward call's arguments (o and
/// final_state are not used) plus dL/do and the gradient outputs. do_, dq, dk, dv are in
/// fwd.dtype; dg, dbeta, db, dw in fwd.gate_dtype; dht and dh0 in float32.
struct DeviceBwdArgs {
  DeviceArgs fwd;
  const void* do_ = nullptr;   ///< [B, T, H, V]
  const float* dht = nullptr;  ///< [N, H, K, V] or null (zeros)
  void* dq = nullptr;          ///< [B, T, H, K]
  void* dk = nullptr;          ///< [B, T, H, K]
  void* dv = nullptr;          ///< [B, T, H, V]
  void* dg = nullptr;          ///< GDN [B, T, H]; KDA, GDN2 [B, T, H, K]
  void* dbeta = nullptr;       ///< DeltaNet, GDN, KDA [B, T, H]
  void* db = nullptr;          ///< GDN2 [B, T, H, K]
  void* dw = nullptr;          ///< GDN2 [B, T, H, V]
  float* dh0 = nullptr;        ///< [N, H, K, V], always written
};

/// Run one backward call: the forward's size checks, then the gradient pointers (values in device
/// memory are not read here: log-decays must be finite and <= 0, SPEC section 4, which the host
/// functions below check; rungs 6 and up, `best` among them, clamp exp(G_i - G_j) at 1 where they are not); throws
/// linattn::Error for bad arguments, std::runtime_error for CUDA failures. Its own process-wide,
/// grow-only workspace (about (12 K + 3 V + 128) floats per token and head plus two K x V states
/// per chunk and head; not thread-safe).
void backward_device(const DeviceBwdArgs& args, BwdVersion version = BwdVersion::best);

/// What a training forward keeps for its backward (issue 6; optimized/cuda/README.md, "Saved
/// forward"). Move-only; owns device memory (freed by the destructor or release()):
///   * the forward's tensor-core workspace (tc_common.cuh's chunk-major V2Ws: w_aux, q~ = scale q
///     exp(G), k~ = k exp(G_C - G), P, u, exp(G_C)) exactly as rung 4's intra kernel writes it (written
///     by rung 7's intra kernel where that one runs, DeltaNet and GDN: the same values bit for bit), and
///     after it lean_g (G_i, NC H 64 float32; written by rung 7's kernel, read by rung 9's lean kernels);
///   * A = (I + L)^-1 of every chunk, float32 [B * T * H, 64] (the intra kernel's a_out).
/// Bytes, with NC chunks (sum over sequences of ceil(T_n / 64)), KP = 64 for K <= 64 else 128 and
/// VP = V rounded up to a multiple of 64:
///   align256(NC H (384 KP + 8192 + 256 VP + 4 KP + 256) + 256) + 256 B T H
/// (the first term is tc_lean_workspace_bytes); at B=8 T=4096 H=16 K=V=128: 744,489,216 + 134,217,728 =
/// 878,706,944 bytes (838.0 MiB) per call (876,609,792 before session 15's lean_g).
/// It also records the call it belongs to: op, dtype, gate dtype, B, T, H, K, V, scale, the
/// sequences (N and a copy of cu_seqlens), the device pointers the operator reads (q, k, v; g
/// unless DeltaNet; beta unless GDN2; b and w for GDN2; with states also initial_state, where the
/// saved states start), the intra rung (4) and KP.
/// backward_device(args, version, &saved) checks every one of them against its call (and that
/// `version` is one of saved_bwd_versions()) and throws a linattn::Error naming 'saved' that says
/// what was expected and what differs; an empty (moved-from, released or never filled) object is
/// refused the same way. It cannot see whether the VALUES behind the same pointers changed since
/// the forward: the caller must not modify q, k, v, the gates (or, with states, the initial state)
/// between the two calls.
/// Streams: the object holds two CUDA events. The saving forward records one on its stream after
/// its last launch, and every backward reading the object waits for it on the backward's stream
/// (cudaStreamWaitEvent), so the forward and the backward may run on different streams without a
/// synchronisation between them. Each backward records the other after its last launch (having
/// waited for the previous record), and a refill waits for it before writing (release() and the
/// destructor synchronise on both before freeing), so a refill on another stream does not overwrite
/// what a queued backward still reads. The events order only the calls on this object: two backward
/// (or two forward) calls share their process-wide workspace, so the caller must still order those
/// on different streams, and concurrent calls from several host threads are unsafe (forward_device).
/// With states (forward_device(args, version, &saved, true); optimized/cuda/RESULTS.md "Saved
/// states"): the buffer holds v_new ([B * T * H, V] float32), A ([B * T * H, 64]) and the state
/// entering every chunk ([num_chunks, H, K, V] float32), in that order (KParams::keep's layout), then
/// the tc workspace. The forward's intra kernel writes A, and its state kernel (v2_state's kSave mode:
/// the forward kernel plus kBwd's stores, the same S and v_new bit for bit; where `best` runs rung 9,
/// v2_state_lean_save, rung 9's lean kernel plus the same stores) writes S and v_new.
/// backward_device reads them there (bwd_ws places its A, S, vn at KParams::keep) and keeps its scratch
/// in the process-wide workspace, as without states: no A copy, no states kernel, the same gradients
/// bit for bit. Bytes:
///   align256(4 (B T H (V + 64) + num_chunks H K V)) + tc_lean_workspace_bytes
/// (at B=8 T=4096 H=16 K=V=128: 939,524,096 + 744,489,216 = 1,684,013,312 bytes for every operator,
/// 805 MB more than without states (878,706,944); until session 12 the object held a whole backward
/// workspace, 6.1-6.9 GB). Neither the forward nor the backward writes into the kept arrays after
/// the saving forward, so several backward calls may read one object, one after another (the events
/// order them).
class SavedForward {
 public:
  SavedForward() = default;
  ~SavedForward();
  SavedForward(SavedForward&& o) noexcept;
  SavedForward& operator=(SavedForward&& o) noexcept;
  SavedForward(const SavedForward&) = delete;
  SavedForward& operator=(const SavedForward&) = delete;

  /// True until a training forward fills it, and again after a move from it or release(), and
  /// after a training forward that failed once it had started on the object (allocation, memset,
  /// launch): the old content is then gone. A training forward refused by the argument checks
  /// leaves the object as it was, still valid for its previous call.
  bool empty() const { return !filled_; }
  /// Device bytes held (the allocation, which may exceed bytes_needed after reuse).
  std::size_t bytes() const { return bytes_; }
  /// The bytes a training forward of these arguments needs (formula above). Validates the arguments
  /// as forward_device does (linattn::Error), but not whether forward rung 4 takes the call.
  static std::size_t bytes_needed(const DeviceArgs& args, bool with_states = false);
  /// True when filled by a forward with_states (the backward then skips its states kernel).
  bool has_states() const { return filled_ && states_; }
  /// True when filled with states kept as bf16 (forward_device's states_bf16, where rung 28's range allows): only
  /// backward rung 28 reads it.
  bool states_bf16() const { return filled_ && states_ && s_bf16_; }
  /// Frees the device memory once the calls using it are done (the events stay until the destructor);
  /// the object becomes empty.
  void release();
  /// One line naming the call it was filled for (or "empty"), for messages.
  std::string describe() const;

 private:
  friend void forward_device(const DeviceArgs&, Version, SavedForward*, bool, bool);
  friend void backward_device(const DeviceBwdArgs&, BwdVersion, const SavedForward*);
  void* buf_ = nullptr;          // device: the tc workspace, then A at a_offset_
  std::size_t bytes_ = 0, a_offset_ = 0;
  bool filled_ = false;
  bool states_ = false;         // with states: buf_ is a backward workspace, the tc workspace at tc_offset_
  bool s_bf16_ = false;         // with states: S kept as bf16 in its slot's first half (rung 28)
  std::size_t tc_offset_ = 0;
  // The call it was filled for.
  Op op_ = Op::delta_rule;
  DType dtype_ = DType::f32, gate_dtype_ = DType::f32;
  std::int64_t B_ = 0, T_ = 0, H_ = 0, K_ = 0, V_ = 0, N_ = 0;
  float scale_ = 0.f;
  std::vector<std::int64_t> cu_seqlens_;
  const void *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *g_ = nullptr, *beta_ = nullptr, *b_ = nullptr,
             *w_ = nullptr;
  const float* h0_ = nullptr;  // initial_state: with states, the saved S starts from it (checked by the backward)
  int intra_rung_ = 0, kp_ = 0;
  // cudaEvent_t (created by the first fill with cudaEventDisableTiming, destroyed by the destructor):
  // the saving forward's end, and the end of the last backward that read the object.
  void *fwd_done_ = nullptr, *bwd_done_ = nullptr;
};

/// The backward rungs that accept a SavedForward: those whose prepare writes forward rung 4's intra
/// outputs (rung 4's intra kernel, or rung 7's for rungs 18 to 27 in their range and wherever v9_in_best; rung 7's
/// kA kernel also writes lean_g) and, where v9_in_best, recomputes rung 9's lean states (best, v5_levels_front, v6_tc_b9, v7_rowbase, v8_wide, v9_noextras, v10_split, v11_wyfast, v12_g1slab, v13_g1g2, v14_pchan, v15_hionly, v16_b9one, v17_hybrid, v18_lean, v19_dsbf16, v20_dvbf16, v21_duvsmem, v22_kq8, v23_dsone, v24_dswide, v25_g1async, v26_wyasync, v27_dvplanes, v28_sbf16, v29_b1hi, v30_dsw2, v31_dkbf16, v32_g1stage, v33_g2stage). Any other
/// rung, and rung 5 with LINATTN_BWD5_V3_FRONT set (rung 3's intra kernel), is refused.
const std::vector<BwdVersion>& saved_bwd_versions();

/// The backward of a training forward: backward_device, with the prepare's intra-chunk kernel
/// skipped and its outputs read from `saved` (the workspace in place; A copied into the backward's
/// workspace with one device-to-device copy, since the later kernels address it there). `saved`
/// must be a SavedForward filled by forward_device(args.fwd, ., &saved) for this very call and
/// `version` one of saved_bwd_versions(); else linattn::Error naming 'saved'. The gradients equal
/// backward_device(args, version)'s bit for bit. The saved buffer is only read: several backward
/// calls, one after another, may use it (the events are recorded, not the buffer written). The
/// backward's stream waits for the saving forward (SavedForward, Streams).
void backward_device(const DeviceBwdArgs& args, BwdVersion version, const SavedForward* saved);

/// Test hook: fills the process-wide workspaces of forward_device and backward_device with NaN bits
/// (0xff bytes) and synchronises, so that a kernel that reads what no kernel of the next call wrote
/// fails instead of finding the previous call's values.
void poison_device_workspaces();

/// Host convenience, the counterpart of chunk_forward and of cpu::chunk_backward: validates as the
/// CPU backward does (ref::validate_recurrent, then do_ and dht: shape and finiteness), copies to
/// the device (rounding to bf16 as chunk_forward does), fills every gradient buffer with NaN,
/// runs, copies back. use_qk_l2norm: the kernels see the normalised q, k and the chain rule
/// through the normalisation is applied on the host in float64.
ref::RecurrentGrads<float> chunk_backward(Op op, const Tensor<float>& q, const Tensor<float>& k,
                                          const Tensor<float>& v, const ref::Gates<float>& gates,
                                          const Tensor<float>& do_, const Tensor<float>& dht,
                                          const ref::RecurrentOptions<float>& opt,
                                          DType dtype = DType::f32, DType gate_dtype = DType::f32,
                                          BwdVersion version = BwdVersion::best);

/// Backward of chunk_delta_rule (Eq.14): dq, dk, dv, dbeta, dh0.
ref::RecurrentGrads<float> chunk_delta_rule_backward(const Tensor<float>& q, const Tensor<float>& k,
                                                     const Tensor<float>& v, const Tensor<float>& beta,
                                                     const Tensor<float>& do_, const Tensor<float>& dht,
                                                     const ref::RecurrentOptions<float>& opt = {},
                                                     DType dtype = DType::f32,
                                                     BwdVersion version = BwdVersion::best);
/// Backward of chunk_gated_delta_rule (Eqs.15-17): dq, dk, dv, dg [B,T,H], dbeta, dh0.
ref::RecurrentGrads<float> chunk_gated_delta_rule_backward(
    const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, const Tensor<float>& g,
    const Tensor<float>& beta, const Tensor<float>& do_, const Tensor<float>& dht,
    const ref::RecurrentOptions<float>& opt = {}, DType dtype = DType::f32,
    BwdVersion version = BwdVersion::best);
/// Backward of chunk_kda (Eqs.18-20): dq, dk, dv, dg [B,T,H,K], dbeta, dh0.
ref::RecurrentGrads<float> chunk_kda_backward(const Tensor<float>& q, const Tensor<float>& k,
                                              const Tensor<float>& v, const Tensor<float>& g,
                                              const Tensor<float>& beta, const Tensor<float>& do_,
                                              const Tensor<float>& dht,
                                              const ref::RecurrentOptions<float>& opt = {},
                                              DType dtype = DType::f32,
                                              BwdVersion version = BwdVersion::best);
/// Backward of chunk_gdn2 (Eqs.21-24): dq, dk, dv, dg [B,T,H,K], db, dw, dh0.
ref::RecurrentGrads<float> chunk_gdn2_backward(const Tensor<float>& q, const Tensor<float>& k,
                                               const Tensor<float>& v, const Tensor<float>& g,
                                               const Tensor<float>& b, const Tensor<float>& w,
                                               const Tensor<float>& do_, const Tensor<float>& dht,
                                               const ref::RecurrentOptions<float>& opt = {},
                                               DType dtype = DType::f32,
                                               BwdVersion version = BwdVersion::best);

}  // namespace linattn::cuda
