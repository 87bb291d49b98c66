// optimized/cuda/versions.cuh -- the entry points of each rung of the kernel ladder, called by the
// dispatcher in chunk_cuda.cu. Each version reports the workspace it needs, whether it supports a
// call (and why not), and launches on a stream.
#pragma once

#include <string>

#include "optimized/cuda/common.cuh"

namespace linattn::cuda::detail {

/// dtype / gate_dtype: 0 = float32, 1 = bfloat16 (DType).
struct Call {
  KParams p;
  int dtype = 0;
  int gate_dtype = 0;
  cudaStream_t stream = nullptr;
};

// v1_simple.cu
std::size_t v1_workspace_bytes(const KParams& p);
void v1_launch(Call c);

// v2_tensorcore.cu
bool v2_supports(const Call& c, std::string* why);
std::size_t v2_workspace_bytes(const KParams& p);
void v2_launch(Call c);

// v3_async.cu
bool v3_supports(const Call& c, std::string* why);
std::size_t v3_workspace_bytes(const KParams& p);
void v3_launch(Call c);

// v4_levels.cu
bool v4_supports(const Call& c, std::string* why);
std::size_t v4_workspace_bytes(const KParams& p);
void v4_launch(Call c);
/// v4's intra-chunk kernel alone (tc_common.cuh's workspace; KP = tc_pick_kp(K)), for v5.
void v4_intra_launch(const Call& c, int KP);

// v5_split.cu (correct on the H200; 12-20% slower than v4 where it splits, so not `best`)
bool v5_supports(const Call& c, std::string* why);
std::size_t v5_workspace_bytes(const KParams& p);
void v5_launch(Call c);
/// Whether v5 splits the state pass from the output for this call (otherwise it runs v4).
bool v5_splits(const KParams& p);

// v6_lean.cu (session 7; tests pass, within noise of v4, not `best`): v4 for DeltaNet and GDN without the q~ / k~
// workspace tiles (bf16 inputs, 16 <= K <= 128, gate none or scalar); every other call runs what
// `best` runs (v4, else v1), so it takes every call.
std::size_t v6_workspace_bytes(const KParams& p);
void v6_launch(Call c);

// v7_overlap.cu (session 10; `best` in sessions 11-12, 2-4% faster than v4 on the H200): v4 for DeltaNet and GDN (bf16 inputs, 16 <= K <= 128,
// gate none or scalar) with the intra kernel's shared arrays overlapped by lifetime (73,216 B at KP = 128 since
// session 14, 71,168 before; 3 blocks per SM); bit for bit with v4 by design. Every other call runs what `best` runs (v4, else v1).
std::size_t v7_workspace_bytes(const KParams& p);
void v7_launch(Call c);
/// cudaOccupancyMaxActiveBlocksPerMultiprocessor of rung 7's intra kernel (KP = 64 or 128), the fewest over
/// every instantiation that runs (rungs 7, 9, 10 and the kA one of the saving forward), for the tests.
int v7_intra_blocks_per_sm(int KP);
/// Whether rung 7 runs its own kernels for the call (else it runs rung 4 or rung 1).
bool v7_in_range(const Call& c);
/// Rung 7's intra kernel alone (KP = tc_pick_kp(K)), for rung 8.
void v7_intra_launch(const Call& c, int KP);
/// Rung 7's intra kernel with rung 6's lean outputs (no q~, k~; G_i to lean_g), for rung 9.
void v7_intra_lean_launch(const Call& c, int KP);
/// Rung 7's intra kernel launched as a programmatic dependent of the stream's previous kernel, block (0, 0)
/// ending with griddepcontrol.wait (kPdlWait), for rung 10.
void v7_intra_pdl_launch(const Call& c, int KP);
/// Rung 7's intra kernel's dynamic shared memory at KP (64 or 128).
std::size_t v7_intra_smem_bytes(int KP);
/// Registers per thread of rung 7's kPdlWait intra kernel at KP (the most over its gate instantiations).
int v7_intra_pdl_regs(int KP);

// v8_wgmma.cu (session 12): rung 7 with a state kernel whose w_aux S and q~ S products run on wgmma
// (sm_90a warpgroup MMA from shared memory) instead of mma.sync; rung 7's range, else what rung 7 runs.
std::size_t v8_workspace_bytes(const KParams& p);
void v8_launch(Call c);

// v9_lean_overlap.cu (session 13): rung 7's intra kernel with rung 6's lean outputs, then rung 6's lean
// state kernel; bit for bit with rung 6 by design; rung 7's range, else what rung 7 runs.
std::size_t v9_workspace_bytes(const KParams& p);
void v9_launch(Call c);
/// Whether `best` runs rung 9 for the call (session 15): rung 7's range where the state kernel takes 64-column
/// value tiles (tc_pick_bv; B=8 T=4096 H=16 V=128: rung 9 0.870 ms against rung 7's 0.903 for GDN, session 15
/// call 1). The saving forward (lean state kernels) and the backward's recompute (lean states kernel) follow
/// the same predicate, so that the training forward's o, S and v_new stay the plain forward's and the
/// recompute's bit for bit.
bool v9_in_best(const Call& c);

// v10_pipeline.cu (session 13; `best` since, except where v9_in_best since session 15): one long sequence whose state kernel cannot fill the GPU (rung
// 7's range, B = 1, no cu_seqlens, one wave of 16-column value tiles) runs rung 7's kernels over segments of
// the sequence, the next segment's intra kernel beside this segment's state kernel (programmatic dependent
// launch); bit for bit with rung 7 by design; every other call runs rung 7.
std::size_t v10_workspace_bytes(const KParams& p);
void v10_launch(Call c);
/// Segments of the last v10_launch that pipelined (0: it did not pipeline); a test hook, not thread-safe.
int v10_last_segments();
/// The state kernel's cluster size in the last v10_launch that pipelined (1: v2_state_pdl, no cluster; >1:
/// v2_state_mc; 0: it did not pipeline); a test hook, not thread-safe.
int v10_last_cluster();

/// One backward call: the forward's parameters (o and ht unused) plus dL/do, dL/dS_T and the
/// gradient outputs (q, k, v, do and their gradients in `dtype`; gates and theirs in `gate_dtype`;
/// states float32).
struct BwdCall {
  KParams p;
  const void* do_ = nullptr;
  const float* dht = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  void *dg = nullptr, *dbeta = nullptr, *db = nullptr, *dw = nullptr;
  float* dh0 = nullptr;
  int dtype = 0;
  int gate_dtype = 0;
  cudaStream_t stream = nullptr;
  /// A training forward's saved outputs of rung 4's intra kernel (chunk_cuda.hpp, SavedForward; written by
  /// rung 7's intra kernel, the same values, for DeltaNet and GDN since session 14).
  /// When set, bwd_v3_front (levels_intra) reads this tc workspace and copies saved_A to its A
  /// instead of launching the intra kernel (backward_device checked that they belong to this call);
  /// null: the usual intra launch.
  void* saved_ws = nullptr;
  const float* saved_A = nullptr;
  /// Saved states (SavedForward with states; saved_ws set, saved_A null, p.keep set): p.keep holds what
  /// the saving forward already wrote, A, the state entering every chunk and v_new (bwd_ws places its
  /// A, S, vn there), so bwd_v3_front neither copies A nor runs the states kernel.
  bool saved_states = false;
  /// Rung 28 (bwd_v28_sbf16.cu): the state entering every chunk is kept as its bf16 hi part in ws.S's first half (with
  /// saved states: the saving forward stored it so, SavedForward's states_bf16; without: bwd_v3_front's states kernel
  /// does, where rung 28 sets this). Only rung 28's G1' reads S then; backward_device refuses other rungs.
  bool s_bf16 = false;
  /// Rung 29 (bwd_v29_b1hi.cu): the dstates kernel's B1 multiplies dS''s bf16 hi part only (bwd3_dstates' kB1Hi); set by
  /// rung 29's launcher, read by bwd_v3_front with rung 27's planes front.
  bool ds_b1_hi = false;
  /// Rung 30 (bwd_v30_dsw2.cu; with ds_b1_hi): the 128-column dstates kernel keeps w_aux and Qg in two stages
  /// (bwd3_dstates' kW2); set by rung 30's launcher.
  bool ds_w2 = false;
};

// bwd_v1_simple.cu
std::size_t bwd_v1_workspace_bytes(const KParams& p);
void bwd_v1_launch(const BwdCall& c);

// bwd_v2_tensorcore.cu (float32 inputs: bwd_v1_launch)
std::size_t bwd_v2_workspace_bytes(const KParams& p);
void bwd_v2_launch(const BwdCall& c);

// bwd_v3_async.cu (calls outside its range -- float32 inputs, K < 16 or K > 128 -- run bwd_v2_launch)
std::size_t bwd_v3_workspace_bytes(const KParams& p);
void bwd_v3_launch(const BwdCall& c);
/// The workspace of a backward rung whose prepare reads a saved forward (BwdCall::saved_ws set): the
/// bwd_ws arrays without the tc region after them, which bwd_v3_front then never touches.
std::size_t bwd_saved_workspace_bytes(const KParams& p);
/// The bytes a saved forward with states keeps for the backward (bwd_ws's v_new, A and S, KParams::keep's
/// layout, rounded up to 256), and the byte offsets in it of A, S and vn (chunk_cuda.cu, SavedForward).
void bwd_saved_states_layout(const KParams& p, std::size_t& ws_bytes, std::size_t& a_off, std::size_t& s_off,
                             std::size_t& vn_off);

// bwd_v4_tc_tail.cu (calls outside rung 3's range run bwd_v3_launch)
std::size_t bwd_v4_workspace_bytes(const KParams& p);
void bwd_v4_launch(const BwdCall& c);

// bwd_v5_levels_front.cu (rung 4 with the forward's rung 4 intra kernel in prepare and a grads kernel
// with batched loads and an unrolled per-channel B9; calls outside
// rung 3's range run bwd_v3_launch)
std::size_t bwd_v5_workspace_bytes(const KParams& p);
void bwd_v5_launch(const BwdCall& c);

// bwd_v6_tc_b9.cu (rung 5 with B9 for per-channel gates on tensor cores by levels; `best` in
// session 6; calls outside rung 3's range run bwd_v3_launch)
std::size_t bwd_v6_workspace_bytes(const KParams& p);
void bwd_v6_launch(const BwdCall& c);

// bwd_v7_rowbase.cu (rung 6 with the chunk-gradient kernel's [rows, W] arrays addressed by per-block
// bases and 32-bit offsets; `best` since session 7; calls outside rung 3's range
// run bwd_v3_launch, calls with H * max(K, V, 64) >= 2^25 run bwd_v6_launch)
std::size_t bwd_v7_workspace_bytes(const KParams& p);
void bwd_v7_launch(const BwdCall& c);

// bwd_v8_wide.cu (rung 7 with the chunk-gradient kernel's global loads and stores at full width;
// `best` since session 8; the same fallbacks as rung 7)
std::size_t bwd_v8_workspace_bytes(const KParams& p);
void bwd_v8_launch(const BwdCall& c);

// bwd_v9_noextras.cu (rung 8 without the prepare's extras kernel: the chunk-gradient kernel forms G,
// E, Qg, Kd itself; session 8: bit for bit with rung 8 but slower for gated operators, not `best`; the same fallbacks as rung 8)
std::size_t bwd_v9_workspace_bytes(const KParams& p);
void bwd_v9_launch(const BwdCall& c);

// bwd_v10_split.cu (rung 8 with the chunk-gradient kernel split into G1, the state side, and G2, the WY
// side, for DeltaNet and GDN; KDA and GDN2 run bwd_v8_launch; otherwise the same fallbacks as rung 8;
// session 8: tests pass, not `best`)
std::size_t bwd_v10_workspace_bytes(const KParams& p);
void bwd_v10_launch(const BwdCall& c);

// bwd_v12_g1slab.cu (rung 10 with its state-side kernel G1 retiled by 64-channel slabs of K, 2 blocks per
// SM; the same gradients as rung 10 bit for bit by design; KDA and GDN2 run bwd_v8_launch; otherwise the
// same fallbacks as rung 10; session 9: bit for bit with rung 10, G1 1.7x faster)
std::size_t bwd_v12_workspace_bytes(const KParams& p);
void bwd_v12_launch(const BwdCall& c);

// bwd_v11_wyfast.cu (rung 10 with a faster G2, the WY side: dE and de kept on chip, 16-byte k and v
// loads; the same gradients as rung 10 bit for bit by design; KDA and GDN2 run bwd_v8_launch; otherwise
// the same fallbacks as rung 10; session 9: bit for bit with rung 10, G2 1.4x faster)
std::size_t bwd_v11_workspace_bytes(const KParams& p);
void bwd_v11_launch(const BwdCall& c);

// bwd_v13_g1g2.cu (rung 10's front, then rung 12's G1' and rung 11's G2'; the same gradients as rung 10
// bit for bit by design; KDA and GDN2 run bwd_v8_launch; otherwise the union of rungs 11 and 12's
// fallbacks; session 9: bit for bit with rung 10; `best`)
std::size_t bwd_v13_workspace_bytes(const KParams& p);
void bwd_v13_launch(const BwdCall& c);

// bwd_v14_pchan.cu (DeltaNet, GDN: bwd_v13_launch; KDA, GDN2: rung 8's front, then the split chunk
// gradient with per-channel gates, G1 with B9's P half and G2 with B9's L half by levels; otherwise
// rung 13's fallbacks; written in session 9; session 9: correct, slower than rung 8 for KDA, not `best`)
std::size_t bwd_v14_workspace_bytes(const KParams& p);
void bwd_v14_launch(const BwdCall& c);

// bwd_v15_hionly.cu (rung 13 with hi-only operands: one bf16 MMA per product, no lo tiles, in G1' and
// G2' for DeltaNet and GDN and in rung 8's chunk-gradient kernel for KDA and GDN2; bf16-level
// gradients; otherwise rung 13's fallbacks; session 10: fast, but outside rung 3's bounds on tiny
// extreme-gate cases, not `best`)
std::size_t bwd_v15_workspace_bytes(const KParams& p);
void bwd_v15_launch(const BwdCall& c);

// bwd_v16_b9one.cu (DeltaNet, GDN: bwd_v13_launch; KDA, GDN2: rung 8's front, then rung 14's split without
// B9 (G1s: B2, B4, B5; G2s: B6, B8, B7) and one B9 kernel (rung 8's b9_levels, both halves in one pass per
// level, then B10, B11); dP and A^T T1 handed over through the workspace; otherwise rung 14's fallbacks;
// session 10: correct, slower than rung 8 for KDA and GDN2, not `best`). With a saved forward its workspace is
// bwd_v16_saved_workspace_bytes (the hand-over lies where the rung's own tensor-core region would).
std::size_t bwd_v16_workspace_bytes(const KParams& p);
std::size_t bwd_v16_saved_workspace_bytes(const KParams& p);
void bwd_v16_launch(const BwdCall& c);

// bwd_v17_hybrid.cu (rung 15 with the lo operand kept where bench/models/bwd_v17_hybrid_model.py finds it
// needed: dP's v_new, du0's dv_new, in G1' and G2' for DeltaNet and GDN and in rung 8's kernel for KDA and GDN2;
// otherwise rung 13's fallbacks; session 10: within rung 3's bounds, 1.09-1.16x faster than rung 13; `best`
// in session 10)
std::size_t bwd_v17_workspace_bytes(const KParams& p);
void bwd_v17_launch(const BwdCall& c);

// bwd_v18_lean.cu (rung 17 for DeltaNet and GDN without the extras kernel's E, Qg, Kd: G1' and G2' form
// them; bit for bit with rung 17; KDA, GDN2 and rung 17's fallbacks run rung 17; session 11: `best`)
std::size_t bwd_v18_workspace_bytes(const KParams& p);
void bwd_v18_launch(const BwdCall& c);

// bwd_v19_dsbf16.cu (rung 18 for DeltaNet with dS' handed from the dstates kernel to G1' in bf16, the only
// part of it G1' multiplies; bit for bit with rung 18; every other operator and fallback runs rung 18)
std::size_t bwd_v19_workspace_bytes(const KParams& p);
void bwd_v19_launch(const BwdCall& c);

// bwd_v20_dvbf16.cu (rung 19 with dv_new handed from the dstates kernel to G1' in bf16 too, DeltaNet and GDN, the
// only part of it G1' multiplies; bit for bit with rung 19; every other operator and fallback runs rung 19)
std::size_t bwd_v20_workspace_bytes(const KParams& p);
void bwd_v20_launch(const BwdCall& c);

// bwd_v21_duvsmem.cu (rung 20 with G2' summing dbeta's <du0, v> on chip instead of through ws.du0: every gradient
// but dbeta bit for bit with rung 20 (DeltaNet: rung 19), dbeta in another float32 order; KDA, GDN2 and the
// fallbacks run rung 20)
std::size_t bwd_v21_workspace_bytes(const KParams& p);
void bwd_v21_launch(const BwdCall& c);

// bwd_v22_kq8.cu (rung 21 with G1' staging B9's k and q slabs by 16-byte octets: bit for bit with rung 21; KDA, GDN2
// and the fallbacks run rung 21)
std::size_t bwd_v22_workspace_bytes(const KParams& p);
void bwd_v22_launch(const BwdCall& c);

// bwd_v23_dsone.cu (rung 22 with the dstates kernel holding one stage of its w_aux, Qg, Kd tiles, two blocks per SM:
// bit for bit with rung 22; KDA, GDN2 and the fallbacks run rung 21)
std::size_t bwd_v23_workspace_bytes(const KParams& p);
void bwd_v23_launch(const BwdCall& c);

// bwd_v24_dswide.cu (rung 22 with the dstates kernel's value columns per block, 32, 64 or a head's whole 128, picked
// by a wave-count model at key width 128: bit for bit with rung 22; KDA, GDN2 and the fallbacks run rung 21)
std::size_t bwd_v24_workspace_bytes(const KParams& p);
void bwd_v24_launch(const BwdCall& c);

// bwd_v25_g1async.cu (rung 24 with DeltaNet's state-side kernel G1' loading its operands by cp.async a value slab
// ahead of its products: bit for bit with rung 24; GDN, KDA, GDN2 and the fallbacks run rung 24)
std::size_t bwd_v25_workspace_bytes(const KParams& p);
void bwd_v25_launch(const BwdCall& c);

// bwd_v26_wyasync.cu (rung 25 with DeltaNet's WY-side kernel G2' loading its operands by cp.async ahead of the products
// that need them, and dw_aux handed from G1' in bf16: bit for bit with rung 25; GDN, KDA, GDN2 and the fallbacks run
// rung 25, i.e. 24)
std::size_t bwd_v26_workspace_bytes(const KParams& p);
void bwd_v26_launch(const BwdCall& c);

// bwd_v27_dvplanes.cu (rung 26 with DeltaNet's dv_new handed from the dstates kernel as bf16 hi and lo planes instead of
// float32 and a bf16 copy: bit for bit with rung 26; GDN, KDA, GDN2 and the fallbacks run rung 26, i.e. 24)
std::size_t bwd_v27_workspace_bytes(const KParams& p);
void bwd_v27_launch(const BwdCall& c);

// bwd_v28_sbf16.cu (rung 27 with DeltaNet's state entering every chunk kept as its bf16 hi part, the only part G1'
// multiplies: stored so by the backward's states kernel or by the saving forward (states_bf16), copied by G1' straight
// into its tile: bit for bit with rung 27; GDN, KDA, GDN2 and the fallbacks run rung 27, i.e. 24).
std::size_t bwd_v28_workspace_bytes(const KParams& p);
void bwd_v28_launch(const BwdCall& c);
/// Whether a saving forward with states_bf16 keeps this call's S as bf16 (rung 28's range as the forward can see it:
/// DeltaNet, bf16, 16 <= K <= 128, K % 8 == 0, V % 8 == 0, RowBase's range and G1''s grid; q, k, v 16-byte aligned).
/// Rung 28's backward reads such an object wherever backward_device takes it (do 16-byte aligned).
bool bwd_v28_keeps_s_bf16(const Call& c);

// bwd_v29_b1hi.cu (rung 28 with the dstates kernel's B1 product Kd dS' on dS''s bf16 hi part only, as fla's dhu: DeltaNet
// only, not bit for bit; GDN, KDA, GDN2 and the fallbacks run rung 28, i.e. 24). Reads rung 28's bf16 saved states.
std::size_t bwd_v29_workspace_bytes(const KParams& p);
void bwd_v29_launch(const BwdCall& c);

// bwd_v30_dsw2.cu (rung 29 with the 128-column dstates kernel keeping w_aux and Qg in two stages, in the lo tile's bytes:
// one barrier less per chunk; bit for bit with rung 29. Elsewhere rung 29).
std::size_t bwd_v30_workspace_bytes(const KParams& p);
void bwd_v30_launch(const BwdCall& c);

// bwd_v31_dkbf16.cu (rung 29 with G1' storing dk_part as bf16 and G2' reading it and only dv_new's hi plane, as fla's
// dqkwg and wy_bwd hand over: DeltaNet only, not bit for bit; elsewhere rung 29). Reads rung 28's bf16 saved states.
std::size_t bwd_v31_workspace_bytes(const KParams& p);
void bwd_v31_launch(const BwdCall& c);

// bwd_v32_g1stage.cu (rung 31 with G1''s bf16 outputs staged in shared memory and stored as whole rows; bit for bit with
// rung 31; elsewhere rung 31).
std::size_t bwd_v32_workspace_bytes(const KParams& p);
void bwd_v32_launch(const BwdCall& c);

// bwd_v33_g2stage.cu (rung 32 with G2''s dv and dk stored as whole rows through free shared memory; bit for bit with
// rung 32; elsewhere rung 32).
std::size_t bwd_v33_workspace_bytes(const KParams& p);
void bwd_v33_launch(const BwdCall& c);

// Reused by the backward's rung 3 from the forward's tensor-core rungs (bf16 inputs, 16 <= K <= 128;
// c.p.ws is the tensor-core workspace of tc_common.cuh, V2Ws):
/// v3_async.cu: v3's intra-chunk kernel, which also writes A = (I + L)^-1 of every chunk to a_out
/// ([B * T * H, 64] float32, row (token * H + head), rows past a ragged chunk's end not written).
void v3_intra_launch_with_A(const Call& c, float* a_out);
/// v4_levels.cu: the same with rung 4's intra kernel (per-channel L and P by levels, A's
/// off-diagonal blocks on tensor cores); used by the backward's rung 5.
void v4_intra_launch_with_A(const Call& c, float* a_out);
/// v7_overlap.cu: the same with rung 7's intra kernel (v4's values bit for bit, workspace and A alike; 3
/// blocks per SM), for calls in rung 7's range (v7_in_range); used by the saving forward and by backward
/// rung 18's prepare there (session 14).
void v7_intra_launch_with_A(const Call& c, float* a_out);
/// v2_tensorcore.cu (declared in tc_common.cuh too): rungs 2-7's state kernel (o, and ht where set) over the
/// tensor-core workspace; the saving forward without states runs it after its intra kernel.
void tc_state_launch(const Call& c, int KP);
/// v2_tensorcore.cu: v2's state kernel in its backward mode: instead of o, it writes the state
/// entering every chunk to s_out ([num_chunks, H, K, V] float32) and v_new to vn_out ([B * T * H, V]
/// float32); ht is not written.
void tc_state_bwd_launch(const Call& c, int KP, float* s_out, float* vn_out, bool s_bf16 = false);
/// v2_tensorcore.cu: the saving forward's state kernel with states (v2_state_body's kSave): the
/// forward's (o, and ht where set) that also writes what tc_state_bwd_launch writes, the same values.
void tc_state_save_launch(const Call& c, int KP, float* s_out, float* vn_out, bool s_bf16 = false);
/// v2_tensorcore.cu: rung 9's lean state kernel (tc_state_lean_launch: q, k from the inputs, G_i from the
/// workspace's lean_g), as above: with kSave's stores (o, ht and s_out, vn_out; the saving forward where
/// v9_in_best), and in kBwd's mode (s_out, vn_out only; the backward's recompute there). Both give the lean
/// chain's S and v_new bit for bit; for DeltaNet these equal tc_state_bwd_launch's.
void tc_state_lean_save_launch(const Call& c, int KP, float* s_out, float* vn_out, bool s_bf16 = false);
void tc_state_bwd_lean_launch(const Call& c, int KP, float* s_out, float* vn_out, bool s_bf16 = false);
/// v2_tensorcore.cu: forward rung 6's state kernel (v2_state's kLean: q, k from the inputs, row factors from
/// lean_g; o, ht); bf16 inputs, gate none or scalar, KP = 64 or 128. Also the saving forward's without states
/// where v9_in_best.
void tc_state_lean_launch(const Call& c, int KP);
/// v2_tensorcore.cu: tc_workspace_bytes plus lean_g's region (what rung 6's and rung 7's kLean and kA intra
/// kernels write).
std::size_t tc_lean_workspace_bytes(const KParams& p);
/// The same kernel for the forward's rung 5 (v5_split.cu): s_out and vn_out as above, and the final
/// state to c.p.ht (when not null).
void tc_state_split_launch(const Call& c, int KP, float* s_out, float* vn_out);

}  // namespace linattn::cuda::detail
