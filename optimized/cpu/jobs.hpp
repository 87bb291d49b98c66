// optimized/cpu/jobs.hpp -- how the CPU kernels cut a call into independent (sequence, head)
// jobs and run them on OpenMP threads, and the padded-row helpers they all use (internal header,
// shared by chunk.cpp, chunk_backward.cpp and fused_recurrent.cpp).
//
// A call in the fla layout (SPEC section 1) holds N sequences (the batch, or the packed
// sequences of cu_seqlens) times H heads; each pair is an independent recurrence. A HeadJob
// points at its first token and carries the row strides, so a kernel reads one head's rows
// straight from the [B, T, H, D] tensors (no copies of the inputs).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "optimized/cpu/simd.hpp"
#include "reference/recurrent.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace linattn::cpu {

template <class T>
struct ChunkStages;

namespace detail {

/// Load / store W lanes of a padded row (lengths are multiples of the vector width W).
template <class T, int W>
LINATTN_INLINE simd::vec<T, W> ld(const T* p) { return simd::load<T, W>(p); }
template <class T, int W>
LINATTN_INLINE void st(T* p, simd::vec<T, W> x) { simd::store<T, W>(p, x); }

/// x / sqrt(sum x^2 + 1e-6), as ref::l2_normalize.
template <class T>
LINATTN_INLINE void l2_normalize_row(T* x, index_t n) {
  T ss = 0;
  for (index_t d = 0; d < n; ++d) ss += x[d] * x[d];
  const T inv = T(1) / std::sqrt(ss + T(1e-6));
  for (index_t d = 0; d < n; ++d) x[d] *= inv;
}

/// How the state decays per token: not at all (DeltaNet), by a scalar (GDN), per key channel
/// (KDA, GDN2).
enum class Decay { none, scalar, channel };

inline Decay decay_of(ref::Op op) {
  if (op == ref::Op::kda || op == ref::Op::gdn2) return Decay::channel;
  return op == ref::Op::gated_delta_rule ? Decay::scalar : Decay::none;
}

/// One (sequence, head) of a call: pointers at (batch bb, first token t0, head h) and row strides.
template <class T>
struct HeadJob {
  ref::Op op = ref::Op::delta_rule;
  index_t len = 0, K = 0, V = 0;
  index_t C = 64;                      // chunk size (chunked kernel only)
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  index_t ld_k = 0, ld_v = 0;          // H*K, H*V
  const T* g = nullptr;                // null: no decay (DeltaNet)
  index_t ld_g = 0;                    // H (scalar gates) or H*K (per channel)
  const T* beta = nullptr;             // DeltaNet, GDN, KDA; row stride H
  index_t ld_beta = 0;
  const T *b = nullptr, *w = nullptr;  // GDN2; row strides ld_k, ld_v
  T scale = 1;
  bool l2norm = false;
  const T* s0 = nullptr;               // K x V initial state, or null (zeros)
  T* s_final = nullptr;                // K x V, or null
  T* o = nullptr;                      // row stride ld_v
  T *v_bar = nullptr, *r = nullptr, *written = nullptr;  // trace (row stride ld_v), or null
  std::vector<ChunkStages<T>>* record = nullptr;         // chunk_intermediates only
  index_t seq = 0, head = 0, t0 = 0;
};

/// Calls fn(n, h, t0, len, row) for the N x H (sequence n, head h) pairs of a validated call, in
/// that order: the sequence's first token t0 and length len, and row = the index of (batch, t0, h)
/// as a row of the [B*T*H, D] view of a [B, T, H, D] tensor. Packed (cu_seqlens non-empty):
/// batch 0, tokens cu_seqlens[n] .. cu_seqlens[n+1]; otherwise batch n, tokens 0 .. Tn.
template <class Fn>
void for_each_head(index_t N, index_t H, index_t Tn, const std::vector<index_t>& cu_seqlens,
                   Fn fn) {
  const bool packed = !cu_seqlens.empty();
  for (index_t n = 0; n < N; ++n)
    for (index_t h = 0; h < H; ++h) {
      const index_t bb = packed ? 0 : n, t0 = packed ? cu_seqlens[static_cast<size_t>(n)] : 0;
      const index_t t1 = packed ? cu_seqlens[static_cast<size_t>(n + 1)] : Tn;
      fn(n, h, t0, t1 - t0, (bb * Tn + t0) * H + h);
    }
}

/// Allocate the outputs of a call that validate_recurrent accepted (N sequences).
template <class T>
ref::RecurrentOutput<T> make_outputs(const Tensor<T>& q, const Tensor<T>& v,
                                     const ref::RecurrentOptions<T>& opt, index_t N) {
  const index_t B = q.size(0), Tn = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  ref::RecurrentOutput<T> out;
  out.o = Tensor<T>({B, Tn, H, V});
  if (opt.output_final_state) out.final_state = Tensor<T>({N, H, K, V});
  if (opt.return_trace) {
    out.v_bar = Tensor<T>({B, Tn, H, V});
    out.r = Tensor<T>({B, Tn, H, V});
    out.written = Tensor<T>({B, Tn, H, V});
  }
  return out;
}

/// The N x H jobs of a validated call, writing into `out` (from make_outputs).
template <class T>
std::vector<HeadJob<T>> make_jobs(ref::Op op, const Tensor<T>& q, const Tensor<T>& k,
                                  const Tensor<T>& v, const ref::Gates<T>& gates,
                                  const ref::RecurrentOptions<T>& opt, index_t N,
                                  ref::RecurrentOutput<T>& out) {
  const index_t Tn = q.size(1), H = q.size(2), K = q.size(3), V = v.size(3);
  const bool per_channel = decay_of(op) == Decay::channel;
  std::vector<HeadJob<T>> jobs;
  for_each_head(N, H, Tn, opt.cu_seqlens, [&](index_t n, index_t h, index_t t0, index_t len,
                                              index_t row) {
    HeadJob<T> j;
    j.op = op, j.len = len, j.K = K, j.V = V;
    j.q = q.data() + row * K, j.k = k.data() + row * K, j.v = v.data() + row * V;
    j.ld_k = H * K, j.ld_v = H * V;
    if (decay_of(op) != Decay::none) {
      j.g = gates.g.data() + row * (per_channel ? K : 1);
      j.ld_g = per_channel ? H * K : H;
    }
    if (op == ref::Op::gdn2) {
      j.b = gates.b.data() + row * K, j.w = gates.w.data() + row * V;
    } else {
      j.beta = gates.beta.data() + row, j.ld_beta = H;
    }
    j.scale = opt.scale ? *opt.scale : T(1) / std::sqrt(T(K));
    j.l2norm = opt.use_qk_l2norm;
    if (opt.initial_state.defined()) j.s0 = opt.initial_state.data() + (n * H + h) * K * V;
    if (opt.output_final_state) j.s_final = out.final_state.data() + (n * H + h) * K * V;
    j.o = out.o.data() + row * V;
    if (opt.return_trace) {
      j.v_bar = out.v_bar.data() + row * V;
      j.r = out.r.data() + row * V;
      j.written = out.written.data() + row * V;
    }
    j.seq = n, j.head = h, j.t0 = t0;
    jobs.push_back(j);
  });
  return jobs;
}

/// Runs fn(job, ws) for every job on OpenMP threads, dynamically scheduled one job at a time: at
/// most `num_threads` threads (0: OpenMP's default) and never more than there are jobs; each
/// thread owns one Workspace, prepared once by init(ws). With num_threads = 1 the jobs run in order.
template <class Workspace, class Job, class Init, class Fn>
void for_each_job(const std::vector<Job>& jobs, int num_threads, Init init, Fn fn) {
  const index_t njobs = static_cast<index_t>(jobs.size());
#ifdef _OPENMP
  const int nt = num_threads > 0 ? num_threads : omp_get_max_threads();
#pragma omp parallel num_threads(static_cast<int>(std::min<index_t>(nt, std::max<index_t>(njobs, 1))))
#else
  (void)num_threads;
#endif
  {
    Workspace ws;
    init(ws);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (index_t i = 0; i < njobs; ++i) fn(jobs[static_cast<size_t>(i)], ws);
  }
}

}  // namespace detail
}  // namespace linattn::cpu
