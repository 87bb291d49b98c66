// optimized/cuda/bwd_common.cuh -- what the rungs of the CUDA backward ladder share (moved out of
// bwd_v1_simple.cu): the float32 workspace of the chunked backward, the gate width, the chunk of a
// sequence, the gradient outputs of one call, the per-kernel profile (LINATTN_BWD_PROFILE), and
// the launcher of rung 1's first three kernels (prepare, states, state gradients; rung 2 reuses
// its states kernel as it is) and of rung 2's chunk-gradient kernel (reused by rung 3).
#pragma once

#include <cstdio>
#include <cstdlib>

#include "optimized/cuda/versions.cuh"

namespace linattn::cuda::detail::bwdc {

constexpr int C = 64;
constexpr int BV = 32;  // value columns per block of the two recurrences
constexpr int kThreads = 256;
constexpr int LD = C + 1;  // row stride of the C x C float32 shared matrices

__host__ __device__ inline int gate_width(const KParams& p) {
  return p.gate == kGateChannel ? p.K : (p.gate == kGateScalar ? 1 : 0);
}

/// The workspace, carved from p.ws. rows = B * T * H (row of token t, head h: t * H + h).
struct BWs {
  double* G;   // [rows, KG] cumulative log-decay inside the chunk (float64)
  float* wa;   // [rows, K] w_aux
  float* E;    // [rows, K] e (.) exp(G)
  float* Qg;   // [rows, K] scale q (.) exp(G)
  float* Kd;   // [rows, K] k (.) exp(G_last - G)
  float* vn;   // [rows, V] u, then v_new
  float* dvn;  // [rows, V] dL/dv_new
  float* P;    // [rows, C] intra-chunk read, row i of its chunk
  float* A;    // [rows, C] (I + L)^-1, row i of its chunk
  float* S;    // [chunks, H, K, V] state entering each chunk
  float* dS;   // [chunks, H, K, V] dL/d(state leaving each chunk)
  float* dQg;  // [rows, K]
  float* dKd;  // [rows, K]
  float* dwa;  // [rows, K]
  float* dE;   // [rows, K]
  float* deL;  // [rows, K] de^L, then de
  float* dqP;  // [rows, K]
  float* dkLP; // [rows, K]
  float* dGc;  // [rows, K] reverse cumulative sum of dG (scalar gates: summed over K afterwards)
  float* du0;  // [rows, V]
};

__host__ __device__ inline BWs bwd_ws(const KParams& p) {
  const std::int64_t rows = std::int64_t(p.B) * p.T * p.H;
  const std::int64_t st = std::int64_t(p.num_chunks) * p.H * p.K * p.V;
  BWs w;
  w.G = static_cast<double*>(p.ws);
  float* f = reinterpret_cast<float*>(w.G + rows * gate_width(p));
  auto take = [&](std::int64_t n) { float* r = f; f += n; return r; };
  w.wa = take(rows * p.K), w.E = take(rows * p.K), w.Qg = take(rows * p.K), w.Kd = take(rows * p.K);
  w.vn = take(rows * p.V), w.dvn = take(rows * p.V);
  w.P = take(rows * C), w.A = take(rows * C);
  w.S = take(st), w.dS = take(st);
  w.dQg = take(rows * p.K), w.dKd = take(rows * p.K), w.dwa = take(rows * p.K), w.dE = take(rows * p.K);
  w.deL = take(rows * p.K), w.dqP = take(rows * p.K), w.dkLP = take(rows * p.K), w.dGc = take(rows * p.K);
  w.du0 = take(rows * p.V);
  return w;
}

inline std::size_t bwd_ws_bytes(const KParams& p) {
  const std::size_t rows = std::size_t(p.B) * p.T * p.H;
  const std::size_t st = std::size_t(p.num_chunks) * p.H * p.K * p.V;
  return sizeof(double) * rows * gate_width(p) +
         sizeof(float) * (rows * (12 * std::size_t(p.K) + 3 * std::size_t(p.V) + 2 * C) + 2 * st);
}

/// First chunk (index in the chunk table) of sequence n.
__device__ __forceinline__ int first_chunk(const KParams& p, int n) {
  return p.seq_chunk0 ? p.seq_chunk0[n] : n * p.chunks_per_seq;
}

/// G of row i of the chunk at channel d (0 for DeltaNet).
__device__ __forceinline__ double G_at(const KParams& p, const BWs& ws, std::int64_t row, int d) {
  const int KG = gate_width(p);
  return KG == 0 ? 0.0 : ws.G[row * KG + (KG == 1 ? 0 : d)];
}

/// The gradient outputs of one call, by value for the kernels.
struct BwdOut {
  const void* do_;
  void *dq, *dk, *dv, *dg, *dbeta, *db, *dw;
};

/// With LINATTN_BWD_PROFILE set, each kernel is timed with CUDA events and the times are printed
/// (stderr) after a synchronisation: where the time of a rung goes.
struct Profile {
  bool on = std::getenv("LINATTN_BWD_PROFILE") != nullptr;
  cudaStream_t stream;
  const char* title;
  cudaEvent_t ev[5];
  int n = 0;
  Profile(cudaStream_t s, const char* t) : stream(s), title(t) {
    if (!on) return;
    for (auto& e : ev) LINATTN_CUDA_CHECK(cudaEventCreate(&e));
    mark();
  }
  void mark() {
    if (on) LINATTN_CUDA_CHECK(cudaEventRecord(ev[n++], stream));
  }
  ~Profile() {
    if (!on) return;
    cudaEventSynchronize(ev[n - 1]);
    const char* names[] = {"prepare", "states", "dstates", "grads"};
    std::fprintf(stderr, "%s kernels (ms):", title);
    for (int i = 1; i < n; ++i) {
      float ms = 0.f;
      cudaEventElapsedTime(&ms, ev[i - 1], ev[i]);
      std::fprintf(stderr, " %s %.3f", names[i - 1], ms);
    }
    std::fprintf(stderr, "\n");
    for (auto& e : ev) cudaEventDestroy(e);
  }
};

/// Stages of bwd_v1_front, as bits. kPreparePadded: bwd_prepare with its shared rows padded (rung 2's
/// choice, free of bank conflicts), in place of kPrepare.
enum : unsigned { kPrepare = 1, kStates = 2, kDstates = 4, kAllStages = 7, kPreparePadded = 8 };
/// Rung 1's bwd_prepare, bwd_states and bwd_dstates (bwd_v1_simple.cu), those named in `stages`,
/// in this order on c's stream, each followed by prof.mark(). After all three, the workspace holds
/// G, A, w_aux, E, Qg, Kd, P, v_new, the states S and dS', dv_new, and c.dh0 is written.
void bwd_v1_front(const BwdCall& c, Profile& prof, unsigned stages = kAllStages);
/// Rung 2's bwd_grads_tc (bwd_v2_tensorcore.cu; bf16 inputs), then prof.mark(): B2, B4-B11 from a
/// workspace holding G, A, E, Qg, Kd, v_new, dv_new, S and dS' (rung 3 reuses it as it is).
void bwd_v2_grads(const BwdCall& c, Profile& prof);

}  // namespace linattn::cuda::detail::bwdc
