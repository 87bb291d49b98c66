// optimized/cuda/bwd_v1_simple.cu -- rung 1 of the CUDA backward ladder: the chunked backward of
// DeltaNet, GDN, KDA and GDN2 (docs/derivation-backward.md, "Chunked backward"; the stages F1-F7
// and B1-B11 of optimized/cpu/chunk_backward.cpp) written as plainly as a kernel can be, in
// float32 FFMA (cumulative log-decays in float64, as the forward's v1), for every operator, dtype
// and size (K, V <= 256). The correctness anchor of faster rungs, not a fast path.
//
// Four kernels; only the two recurrences walk chunks in order, the rest is parallel over chunks:
//   bwd_prepare    (chunk, head): F1-F5 and the decay-scaled operands: G (float64), A = (I + L)^-1,
//                  w_aux = A E, u = A u0, P (scale included), and E = e (.) exp(G),
//                  Qg = scale q (.) exp(G), Kd = k (.) exp(G_last - G), all to the workspace.
//   bwd_states     (sequence, head, 32 value columns), chunks forward: saves the state S entering
//                  each chunk, v_new = u - w_aux S (F6, in place of u), S' = Diag(gamma) S + Kd^T v_new.
//   bwd_dstates    (sequence, head, 32 value columns), chunks in reverse, dS from dht: saves
//                  dS' (the gradient reaching each chunk's exit state), B1 dv_new = P^T do + Kd dS',
//                  B3 dS = Diag(gamma) dS' + Qg^T do - w_aux^T dv_new; dh0 = the final dS.
//                  Value columns are independent in both recurrences, hence the split.
//   bwd_grads      (chunk, head): with S, dS', v_new, dv_new known, B2 and B4-B11 are local to the
//                  chunk: dKd, dgamma, dQg, dw_aux, dP, dA, dL = -A^T dA A^T, [dE | du0] =
//                  A^T [dw_aux | dv_new], the pair sums (B9), dG and its reverse cumulative sum
//                  inside the chunk (B10, B11; G restarts at every chunk), then dq, dk, dv and
//                  the gate gradients.
// Every exponent is G_i - G_j (i >= j), G_last - G_j or G_i: never positive.
//
// Measured (H200, bf16 inputs, float32 gates, B=8 T=4096 H=16 K=V=128; RESULTS.md, "Backward"):
// 168 / 168 / 210 / 219 ms for DeltaNet / GDN / KDA / GDN2 (fla's forward + backward: 2.84 / -- /
// 9.62 / 11.10 ms), 60 to 20 times slower than fla. Per kernel (LINATTN_BWD_PROFILE), DeltaNet:
// prepare 23.7, states 8.0, dstates 24.5, grads 112.0 ms; GDN2: 53.7, 7.8, 24.0, 133.8 ms.
// bwd_grads dominates: every thread walks a row of S, dS', v_new or dv_new in global memory per
// output element (C x K x V and C x C x (K + V) FFMA chains fed from L1/L2, no reuse in registers
// or shared memory); per-channel gates add C x C x K exponentials in prepare and in B9. Gradients
// agree with fla's within 3e-3 to 6e-3 relative RMS (fla rounds intermediates to bf16).
#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {
namespace {

// Shared with rung 2 (bwd_common.cuh).
using bwdc::BV;
using bwdc::BWs;
using bwdc::BwdOut;
using bwdc::bwd_ws;
using bwdc::bwd_ws_bytes;
using bwdc::C;
using bwdc::first_chunk;
using bwdc::G_at;
using bwdc::gate_width;
using bwdc::kThreads;
using bwdc::LD;
using bwdc::Profile;

// ------------------------------------------------------------------------------------------------
// F1-F5: per (chunk, head), everything that does not depend on the state.
// kPadRows (rung 2, bwd_v2_tensorcore.cu): the shared rows of k and of per-channel G padded by one
// element, so that rows read by consecutive threads (sk[j], sG[j] with j = the thread's column of
// L or P) fall in different banks; unpadded (rung 1) those reads are a 32-way bank conflict.
// ------------------------------------------------------------------------------------------------
template <class Tin, class Tg, bool kPadRows>
__global__ void __launch_bounds__(kThreads) bwd_prepare(KParams p) {
  extern __shared__ double smemd[];
  const int K = p.K, V = p.V, H = p.H, h = blockIdx.y;
  const int KG = gate_width(p);
  const int KGs = KG ? KG : 1;
  const int SGs = kPadRows ? (KG > 1 ? KG + 1 : 1) : KGs, KS = kPadRows ? K + 1 : K;  // row strides
  double* sG = smemd;                                  // [C][SGs]
  float* sk = reinterpret_cast<float*>(sG + C * SGs);  // [C][KS]
  float* sL = sk + C * KS;                             // [C][LD]
  float* sA = sL + C * LD;                             // [C][LD]
  float* sbeta = sA + C * LD;                          // [C]
  const Tin* q = static_cast<const Tin*>(p.q);
  const Tin* k = static_cast<const Tin*>(p.k);
  const Tin* v = static_cast<const Tin*>(p.v);
  const Tg* g = static_cast<const Tg*>(p.g);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const Tg* bg = static_cast<const Tg*>(p.b);
  const Tg* wg = static_cast<const Tg*>(p.w);
  const BWs ws = bwd_ws(p);

  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
  const int tid = threadIdx.x, nt = blockDim.x;

  for (int idx = tid; idx < Lc * K; idx += nt) {
    const int i = idx / K, d = idx % K;
    sk[i * KS + d] = ld(k + row(i) * K + d);
  }
  for (int idx = tid; idx < Lc * KGs; idx += nt) {
    const int i = idx / KGs, d = idx % KGs;
    sG[i * SGs + d] = KG ? double(ld(g + row(i) * KG + d)) : 0.0;
  }
  for (int i = tid; i < C; i += nt) sbeta[i] = (!p.gdn2 && i < Lc) ? ld(beta + row(i)) : 0.f;
  __syncthreads();
  cumsum_log_decays(sG, SGs, KGs, Lc, tid, nt);  // F1
  __syncthreads();
  auto Gat = [&](int i, int d) { return p.gate == kGateChannel ? sG[i * SGs + d] : sG[i * SGs]; };
  auto e_at = [&](int i, int d) {  // F2: e_i = beta_i k_i (GDN2: b_i (.) k_i)
    return (p.gdn2 ? ld(bg + row(i) * K + d) : sbeta[i]) * sk[i * KS + d];
  };

  // F3: L_ij = sum_d e_id k_jd exp(G_id - G_jd), i > j.
  for (int idx = tid; idx < C * C; idx += nt) {
    const int i = idx / C, j = idx % C;
    float val = 0.f;
    if (i < Lc && j < i) {
      if (p.gate == kGateChannel) {
        for (int d = 0; d < K; ++d) val += e_at(i, d) * sk[j * KS + d] * expf(float(Gat(i, d) - Gat(j, d)));
      } else {
        for (int d = 0; d < K; ++d) val += e_at(i, d) * sk[j * KS + d];
        val *= expf(float(Gat(i, 0) - Gat(j, 0)));
      }
    }
    sL[i * LD + j] = val;
    sA[i * LD + j] = i == j ? 1.f : 0.f;
  }
  __syncthreads();
  // F4: A = (I + L)^-1 by forward substitution: A_ij = -L_ij - sum_{j<m<i} L_im A_mj (j < i).
  for (int i = 1; i < Lc; ++i) {
    for (int j = tid; j < i; j += nt) {
      float acc = -sL[i * LD + j];
      for (int m = j + 1; m < i; ++m) acc -= sL[i * LD + m] * sA[m * LD + j];
      sA[i * LD + j] = acc;
    }
    __syncthreads();
  }
  for (int idx = tid; idx < Lc * C; idx += nt) {
    const int i = idx / C, j = idx % C;
    ws.A[row(i) * C + j] = sA[i * LD + j];
  }
  // F2 scaled: E, Qg, Kd; F5: w_aux = A E.
  for (int idx = tid; idx < Lc * K; idx += nt) {
    const int i = idx / K, d = idx % K;
    const double Gi = Gat(i, d), Gl = Gat(Lc - 1, d);
    ws.E[row(i) * K + d] = e_at(i, d) * expf(float(Gi));
    ws.Qg[row(i) * K + d] = p.scale * ld(q + row(i) * K + d) * expf(float(Gi));
    ws.Kd[row(i) * K + d] = sk[i * KS + d] * expf(float(Gl - Gi));
    float acc = 0.f;
    for (int j = 0; j <= i; ++j) acc += sA[i * LD + j] * e_at(j, d) * expf(float(Gat(j, d)));
    ws.wa[row(i) * K + d] = acc;
  }
  // F5: u = A u0 (u0_j = beta_j v_j, GDN2: w_j (.) v_j).
  for (int idx = tid; idx < Lc * V; idx += nt) {
    const int i = idx / V, c = idx % V;
    float acc = 0.f;
    for (int j = 0; j <= i; ++j) {
      const float u0 = (p.gdn2 ? ld(wg + row(j) * V + c) : sbeta[j]) * ld(v + row(j) * V + c);
      acc += sA[i * LD + j] * u0;
    }
    ws.vn[row(i) * V + c] = acc;
  }
  // F3: P_ij = scale q_i . (k_j (.) exp(G_i - G_j)), j <= i (zero above).
  for (int idx = tid; idx < Lc * C; idx += nt) {
    const int i = idx / C, j = idx % C;
    float val = 0.f;
    if (j <= i) {
      if (p.gate == kGateChannel) {
        for (int d = 0; d < K; ++d)
          val += ld(q + row(i) * K + d) * sk[j * KS + d] * expf(float(Gat(i, d) - Gat(j, d)));
      } else {
        for (int d = 0; d < K; ++d) val += ld(q + row(i) * K + d) * sk[j * KS + d];
        val *= expf(float(Gat(i, 0) - Gat(j, 0)));
      }
      val *= p.scale;
    }
    ws.P[row(i) * C + j] = val;
  }
  for (int idx = tid; idx < Lc * KG; idx += nt) {
    const int i = idx / KG, d = idx % KG;
    ws.G[row(i) * KG + d] = sG[i * SGs + d];
  }
}

// ------------------------------------------------------------------------------------------------
// F6, F7: the states entering each chunk (saved), v_new (in place of u).
// ------------------------------------------------------------------------------------------------
__global__ void __launch_bounds__(kThreads) bwd_states(KParams p) {
  extern __shared__ float smem[];
  const int K = p.K, V = p.V, H = p.H;
  const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * BV;
  const int nv = min(BV, V - v0);
  float* sS = smem;           // [K][BV]
  float* svn = sS + K * BV;   // [C][BV]
  float* sgl = svn + C * BV;  // [K] gamma = exp(G_last)
  const BWs ws = bwd_ws(p);
  const int tid = threadIdx.x, nt = blockDim.x;
  const std::int64_t sbase = (std::int64_t(n) * H + h) * K * V;

  for (int idx = tid; idx < K * BV; idx += nt) {
    const int d = idx / BV, c = idx % BV;
    sS[idx] = (p.h0 && c < nv) ? p.h0[sbase + std::int64_t(d) * V + v0 + c] : 0.f;
  }
  __syncthreads();
  const int t0 = seq_begin(p, n), t1 = seq_end(p, n);
  int ch = first_chunk(p, n);
  for (int tok0 = t0; tok0 < t1; tok0 += C, ++ch) {
    const int Lc = min(C, t1 - tok0);
    auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
    float* Sout = ws.S + (std::int64_t(ch) * H + h) * K * V;
    for (int idx = tid; idx < K * BV; idx += nt) {
      const int d = idx / BV, c = idx % BV;
      if (c < nv) Sout[std::int64_t(d) * V + v0 + c] = sS[idx];
    }
    // F6: v_new = u - w_aux S
    for (int idx = tid; idx < Lc * BV; idx += nt) {
      const int i = idx / BV, c = idx % BV;
      float acc = 0.f;
      if (c < nv) {
        acc = ws.vn[row(i) * V + v0 + c];
        for (int d = 0; d < K; ++d) acc -= ws.wa[row(i) * K + d] * sS[d * BV + c];
        ws.vn[row(i) * V + v0 + c] = acc;
      }
      svn[i * BV + c] = acc;
    }
    for (int d = tid; d < K; d += nt) sgl[d] = expf(float(G_at(p, ws, row(Lc - 1), d)));
    __syncthreads();
    if (tok0 + C < t1) {  // F7: S' = Diag(gamma) S + Kd^T v_new (not needed after the last chunk)
      for (int idx = tid; idx < K * BV; idx += nt) {
        const int d = idx / BV, c = idx % BV;
        float acc = sgl[d] * sS[idx];
        for (int j = 0; j < Lc; ++j) acc += ws.Kd[row(j) * K + d] * svn[j * BV + c];
        sS[idx] = acc;
      }
    }
    __syncthreads();
  }
}

// ------------------------------------------------------------------------------------------------
// B1, B3: the state gradient, chunks in reverse; dv_new on the way.
// ------------------------------------------------------------------------------------------------
template <class Tin>
__global__ void __launch_bounds__(kThreads) bwd_dstates(KParams p, const Tin* do_, const float* dht,
                                                        float* dh0) {
  extern __shared__ float smem[];
  const int K = p.K, V = p.V, H = p.H;
  const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * BV;
  const int nv = min(BV, V - v0);
  float* sdS = smem;            // [K][BV]
  float* sdvn = sdS + K * BV;   // [C][BV]
  float* sdo = sdvn + C * BV;   // [C][BV]
  float* sgl = sdo + C * BV;    // [K]
  const BWs ws = bwd_ws(p);
  const int tid = threadIdx.x, nt = blockDim.x;
  const std::int64_t sbase = (std::int64_t(n) * H + h) * K * V;

  for (int idx = tid; idx < K * BV; idx += nt) {
    const int d = idx / BV, c = idx % BV;
    sdS[idx] = (dht && c < nv) ? dht[sbase + std::int64_t(d) * V + v0 + c] : 0.f;
  }
  __syncthreads();
  const int t0 = seq_begin(p, n), t1 = seq_end(p, n);
  const int nch = (t1 - t0 + C - 1) / C;
  for (int ci = nch - 1; ci >= 0; --ci) {
    const int tok0 = t0 + ci * C, Lc = min(C, t1 - tok0), ch = first_chunk(p, n) + ci;
    auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
    float* dSout = ws.dS + (std::int64_t(ch) * H + h) * K * V;
    for (int idx = tid; idx < K * BV; idx += nt) {
      const int d = idx / BV, c = idx % BV;
      if (c < nv) dSout[std::int64_t(d) * V + v0 + c] = sdS[idx];
    }
    for (int idx = tid; idx < C * BV; idx += nt) {
      const int i = idx / BV, c = idx % BV;
      sdo[idx] = (i < Lc && c < nv) ? ld(do_ + row(i) * V + v0 + c) : 0.f;
    }
    for (int d = tid; d < K; d += nt) sgl[d] = expf(float(G_at(p, ws, row(Lc - 1), d)));
    __syncthreads();
    // B1: dv_new_i = sum_{j >= i} P_ji do_j + sum_d Kd_id dS'_d
    for (int idx = tid; idx < Lc * BV; idx += nt) {
      const int i = idx / BV, c = idx % BV;
      float acc = 0.f;
      if (c < nv) {
        for (int j = i; j < Lc; ++j) acc += ws.P[row(j) * C + i] * sdo[j * BV + c];
        for (int d = 0; d < K; ++d) acc += ws.Kd[row(i) * K + d] * sdS[d * BV + c];
        ws.dvn[row(i) * V + v0 + c] = acc;
      }
      sdvn[i * BV + c] = acc;
    }
    __syncthreads();
    // B3: dS = Diag(gamma) dS' + Qg^T do - w_aux^T dv_new
    for (int idx = tid; idx < K * BV; idx += nt) {
      const int d = idx / BV, c = idx % BV;
      float acc = sgl[d] * sdS[idx];
      for (int i = 0; i < Lc; ++i)
        acc += ws.Qg[row(i) * K + d] * sdo[i * BV + c] - ws.wa[row(i) * K + d] * sdvn[i * BV + c];
      sdS[idx] = acc;
    }
    __syncthreads();
  }
  for (int idx = tid; idx < K * BV; idx += nt) {
    const int d = idx / BV, c = idx % BV;
    if (c < nv) dh0[sbase + std::int64_t(d) * V + v0 + c] = sdS[idx];
  }
}

// ------------------------------------------------------------------------------------------------
// B2, B4-B11: per (chunk, head), with S, dS', v_new and dv_new known.
// ------------------------------------------------------------------------------------------------
template <class Tin, class Tg>
__global__ void __launch_bounds__(kThreads) bwd_grads(KParams p, BwdOut out) {
  extern __shared__ float smem[];
  const int K = p.K, V = p.V, H = p.H, h = blockIdx.y;
  float* sA = smem;            // [C][LD]
  float* sdA = sA + C * LD;    // [C][LD] dA, then dL
  float* sT1 = sdA + C * LD;   // [C][LD] dA A^T
  float* sdP = sT1 + C * LD;   // [C][LD]
  float* sGam = sdP + C * LD;  // [C][LD] exp(G_i - G_j), scalar gates only
  float* sdgam = sGam + C * LD;  // [K] dgamma
  float* sbeta = sdgam + K;    // [C]
  const Tin* q = static_cast<const Tin*>(p.q);
  const Tin* k = static_cast<const Tin*>(p.k);
  const Tin* v = static_cast<const Tin*>(p.v);
  const Tin* dO = static_cast<const Tin*>(out.do_);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const Tg* bg = static_cast<const Tg*>(p.b);
  const Tg* wg = static_cast<const Tg*>(p.w);
  const BWs ws = bwd_ws(p);
  const int tid = threadIdx.x, nt = blockDim.x;

  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
  const float* S = ws.S + (std::int64_t(blockIdx.x) * H + h) * K * V;
  const float* dS = ws.dS + (std::int64_t(blockIdx.x) * H + h) * K * V;
  const bool chan = p.gate == kGateChannel;
  auto G = [&](int i, int d) { return G_at(p, ws, row(i), d); };
  auto k_at = [&](int i, int d) { return ld(k + row(i) * K + d); };
  auto e_at = [&](int i, int d) { return (p.gdn2 ? ld(bg + row(i) * K + d) : sbeta[i]) * k_at(i, d); };
  auto u0_at = [&](int j, int c) {
    return (p.gdn2 ? ld(wg + row(j) * V + c) : sbeta[j]) * ld(v + row(j) * V + c);
  };
  // Gam_ijd = exp(G_id - G_jd), i >= j
  auto Gam = [&](int i, int j, int d) { return chan ? expf(float(G(i, d) - G(j, d))) : sGam[i * LD + j]; };

  for (int i = tid; i < C; i += nt) sbeta[i] = (!p.gdn2 && i < Lc) ? ld(beta + row(i)) : 0.f;
  for (int idx = tid; idx < C * C; idx += nt) {
    const int i = idx / C, j = idx % C;
    sA[i * LD + j] = i < Lc ? ws.A[row(i) * C + j] : 0.f;
    if (!chan) sGam[i * LD + j] = (i < Lc && j <= i) ? expf(float(G(i, 0) - G(j, 0))) : 0.f;
  }
  // B2, B4: dKd = v_new dS'^T, dQg = do S^T, dw_aux = -dv_new S^T;  dgamma_d = sum_c S_dc dS'_dc
  for (int idx = tid; idx < Lc * K; idx += nt) {
    const int i = idx / K, d = idx % K;
    float aq = 0.f, ak = 0.f, aw = 0.f;
    for (int c = 0; c < V; ++c) {
      const float s = S[std::int64_t(d) * V + c], ds = dS[std::int64_t(d) * V + c];
      aq += ld(dO + row(i) * V + c) * s;
      ak += ws.vn[row(i) * V + c] * ds;
      aw -= ws.dvn[row(i) * V + c] * s;
    }
    ws.dQg[row(i) * K + d] = aq, ws.dKd[row(i) * K + d] = ak, ws.dwa[row(i) * K + d] = aw;
  }
  for (int d = tid; d < K; d += nt) {
    float acc = 0.f;
    for (int c = 0; c < V; ++c) acc += S[std::int64_t(d) * V + c] * dS[std::int64_t(d) * V + c];
    sdgam[d] = acc;
  }
  __syncthreads();
  // B5: dP = tril_incl(do v_new^T);  B6: dA = [dw_aux | du] [E | u0]^T, strictly lower (du = dv_new)
  for (int idx = tid; idx < C * C; idx += nt) {
    const int i = idx / C, j = idx % C;
    float dp = 0.f, da = 0.f;
    if (i < Lc && j <= i) {
      for (int c = 0; c < V; ++c) dp += ld(dO + row(i) * V + c) * ws.vn[row(j) * V + c];
      if (j < i) {
        for (int d = 0; d < K; ++d) da += ws.dwa[row(i) * K + d] * ws.E[row(j) * K + d];
        for (int c = 0; c < V; ++c) da += ws.dvn[row(i) * V + c] * u0_at(j, c);
      }
    }
    sdP[i * LD + j] = dp, sdA[i * LD + j] = da;
  }
  __syncthreads();
  // B7, first half: T1 = dA A^T, strictly lower: T1_ij = sum_{m <= j} dA_im A_jm
  for (int idx = tid; idx < C * C; idx += nt) {
    const int i = idx / C, j = idx % C;
    float acc = 0.f;
    if (j < i)
      for (int m = 0; m <= j; ++m) acc += sdA[i * LD + m] * sA[j * LD + m];
    sT1[i * LD + j] = acc;
  }
  __syncthreads();
  // B7: dL = -A^T T1, strictly lower: dL_ij = -sum_{a >= i} A_ai T1_aj (into sdA)
  for (int idx = tid; idx < C * C; idx += nt) {
    const int i = idx / C, j = idx % C;
    float acc = 0.f;
    if (j < i)
      for (int a = i; a < Lc; ++a) acc += sA[a * LD + i] * sT1[a * LD + j];
    sdA[i * LD + j] = -acc;
  }
  // B8: dE = A^T dw_aux, du0 = A^T dv_new: row j sums rows i >= j
  for (int idx = tid; idx < Lc * K; idx += nt) {
    const int j = idx / K, d = idx % K;
    float acc = 0.f;
    for (int i = j; i < Lc; ++i) acc += sA[i * LD + j] * ws.dwa[row(i) * K + d];
    ws.dE[row(j) * K + d] = acc;
  }
  for (int idx = tid; idx < Lc * V; idx += nt) {
    const int j = idx / V, c = idx % V;
    float acc = 0.f;
    for (int i = j; i < Lc; ++i) acc += sA[i * LD + j] * ws.dvn[row(i) * V + c];
    ws.du0[row(j) * V + c] = acc;
  }
  __syncthreads();
  // B9: de^L_r = sum_{j<r} dL_rj k_j Gam_rj;  dq^P_r = sum_{j<=r} dP_rj k_j Gam_rj;
  //     dk^{L,P}_r = sum_{i>r} dL_ir e_i Gam_ir + sum_{i>=r} dP_ir q~_i Gam_ir   (q~ = scale q)
  for (int idx = tid; idx < Lc * K; idx += nt) {
    const int r = idx / K, d = idx % K;
    float del = 0.f, dqp = 0.f, dk = 0.f;
    for (int j = 0; j <= r; ++j) {
      const float kg = k_at(j, d) * Gam(r, j, d);
      dqp += sdP[r * LD + j] * kg;
      if (j < r) del += sdA[r * LD + j] * kg;
    }
    for (int i = r; i < Lc; ++i) {
      const float gm = Gam(i, r, d);
      float src = sdP[i * LD + r] * p.scale * ld(q + row(i) * K + d);
      if (i > r) src += sdA[i * LD + r] * e_at(i, d);
      dk += src * gm;
    }
    ws.deL[row(r) * K + d] = del, ws.dqP[row(r) * K + d] = dqp, ws.dkLP[row(r) * K + d] = dk;
  }
  __syncthreads();
  // B10, B11 per channel d, tokens in reverse:
  //   dG_i = dE_i E_i + dQg_i Qg_i - dKd_i Kd_i + e_i de^L_i + q~_i dq^P_i - k_i dk^{L,P}_i,
  //   dG_last += sum_i dKd_i Kd_i + dgamma gamma;  dg_t = sum_{i >= t} dG_i.
  //   Then de = dE exp(G) + de^L, dq = scale (dQg exp(G) + dq^P),
  //   dk = dKd exp(G_last - G) + dk^{L,P} + (beta | b) de.
  Tin* dq = static_cast<Tin*>(out.dq);
  Tin* dk = static_cast<Tin*>(out.dk);
  for (int d = tid; d < K; d += nt) {
    float kdk = 0.f;
    for (int i = 0; i < Lc; ++i) kdk += ws.dKd[row(i) * K + d] * ws.Kd[row(i) * K + d];
    const double Gl = G(Lc - 1, d);
    float acc = 0.f;
    for (int i = Lc - 1; i >= 0; --i) {
      const std::int64_t x = row(i) * K + d;
      const double Gi = G(i, d);
      const float kk = k_at(i, d), ee = e_at(i, d), qs = p.scale * ld(q + x);
      float dG = ws.dE[x] * ws.E[x] + ws.dQg[x] * ws.Qg[x] - ws.dKd[x] * ws.Kd[x] +
                 ee * ws.deL[x] + qs * ws.dqP[x] - kk * ws.dkLP[x];
      if (i == Lc - 1) dG += kdk + sdgam[d] * expf(float(Gl));
      acc += dG;
      if (chan) st(static_cast<Tg*>(out.dg) + x, acc);
      else ws.dGc[x] = acc;
      const float eg = expf(float(Gi));
      const float de = ws.dE[x] * eg + ws.deL[x];
      st(dq + x, p.scale * (ws.dQg[x] * eg + ws.dqP[x]));
      const float gate = p.gdn2 ? ld(bg + x) : sbeta[i];
      st(dk + x, ws.dKd[x] * expf(float(Gl - Gi)) + ws.dkLP[x] + gate * de);
      if (p.gdn2) st(static_cast<Tg*>(out.db) + x, de * kk);
      else ws.deL[x] = de;
    }
  }
  // Through F2 to v (and w): dv = (beta | w) du0, dw = du0 (.) v
  for (int idx = tid; idx < Lc * V; idx += nt) {
    const int i = idx / V, c = idx % V;
    const std::int64_t x = row(i) * V + c;
    const float du0 = ws.du0[x];
    if (p.gdn2) {
      st(static_cast<Tin*>(out.dv) + x, ld(wg + x) * du0);
      st(static_cast<Tg*>(out.dw) + x, du0 * ld(v + x));
    } else {
      st(static_cast<Tin*>(out.dv) + x, sbeta[i] * du0);
    }
  }
  __syncthreads();
  // Per token: dbeta = sum_d de k + sum_c du0 v; scalar gates: dg = sum_d dg_d.
  for (int i = tid; i < Lc; i += nt) {
    if (!p.gdn2) {
      float acc = 0.f;
      for (int d = 0; d < K; ++d) acc += ws.deL[row(i) * K + d] * k_at(i, d);
      for (int c = 0; c < V; ++c) acc += ws.du0[row(i) * V + c] * ld(v + row(i) * V + c);
      st(static_cast<Tg*>(out.dbeta) + row(i), acc);
    }
    if (p.gate == kGateScalar) {
      float acc = 0.f;
      for (int d = 0; d < K; ++d) acc += ws.dGc[row(i) * K + d];
      st(static_cast<Tg*>(out.dg) + row(i), acc);
    }
  }
}

template <class Tin, class Tg>
void launch_front(const BwdCall& c, Profile& prof, unsigned stages = bwdc::kAllStages) {
  const KParams& p = c.p;
  const int KG = gate_width(p);
  const bool pad = stages & bwdc::kPreparePadded;  // bwd_prepare's kPadRows
  const std::size_t prep_smem = sizeof(double) * std::size_t(C) * (pad && KG > 1 ? KG + 1 : (KG ? KG : 1)) +
                                sizeof(float) * (std::size_t(C) * (pad ? p.K + 1 : p.K) + 2 * C * LD + C);
  const dim3 rec_grid(p.N, p.H, (p.V + BV - 1) / BV);
  const std::size_t st_smem = sizeof(float) * (std::size_t(p.K) * BV + C * BV + p.K);
  const std::size_t ds_smem = sizeof(float) * (std::size_t(p.K) * BV + 2 * C * BV + p.K);
  if (p.num_chunks > 0) {
    if (stages & (bwdc::kPrepare | bwdc::kPreparePadded)) {
      auto* kernel = pad ? bwd_prepare<Tin, Tg, true> : bwd_prepare<Tin, Tg, false>;
      LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(prep_smem)));
      kernel<<<dim3(p.num_chunks, p.H), kThreads, prep_smem, c.stream>>>(p);
      LINATTN_CUDA_CHECK(cudaGetLastError());
      prof.mark();
    }
    if (stages & bwdc::kStates) {
      LINATTN_CUDA_CHECK(cudaFuncSetAttribute(bwd_states, cudaFuncAttributeMaxDynamicSharedMemorySize, int(st_smem)));
      bwd_states<<<rec_grid, kThreads, st_smem, c.stream>>>(p);
      LINATTN_CUDA_CHECK(cudaGetLastError());
      prof.mark();
    }
  }
  if (stages & bwdc::kDstates) {
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(bwd_dstates<Tin>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(ds_smem)));
    bwd_dstates<Tin><<<rec_grid, kThreads, ds_smem, c.stream>>>(p, static_cast<const Tin*>(c.do_), c.dht, c.dh0);
    LINATTN_CUDA_CHECK(cudaGetLastError());
    prof.mark();
  }
}

template <class Tin, class Tg>
void launch_typed(const BwdCall& c) {
  const KParams& p = c.p;
  const std::size_t grad_smem = sizeof(float) * (std::size_t(5) * C * LD + p.K + C);
  Profile prof(c.stream, "bwd_v1");
  launch_front<Tin, Tg>(c, prof);
  if (p.num_chunks > 0) {
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(bwd_grads<Tin, Tg>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, int(grad_smem)));
    BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
    bwd_grads<Tin, Tg><<<dim3(p.num_chunks, p.H), kThreads, grad_smem, c.stream>>>(p, o);
    LINATTN_CUDA_CHECK(cudaGetLastError());
    prof.mark();
  }
}

}  // namespace

std::size_t bwd_v1_workspace_bytes(const KParams& p) { return bwd_ws_bytes(p); }

void bwdc::bwd_v1_front(const BwdCall& c, Profile& prof, unsigned stages) {
  if (c.dtype == 0 && c.gate_dtype == 0) return launch_front<float, float>(c, prof, stages);
  if (c.dtype == 0 && c.gate_dtype == 1) return launch_front<float, __nv_bfloat16>(c, prof, stages);
  if (c.dtype == 1 && c.gate_dtype == 0) return launch_front<__nv_bfloat16, float>(c, prof, stages);
  return launch_front<__nv_bfloat16, __nv_bfloat16>(c, prof, stages);
}

void bwd_v1_launch(const BwdCall& c) {
  if (c.p.N == 0) return;
  if (c.dtype == 0 && c.gate_dtype == 0) return launch_typed<float, float>(c);
  if (c.dtype == 0 && c.gate_dtype == 1) return launch_typed<float, __nv_bfloat16>(c);
  if (c.dtype == 1 && c.gate_dtype == 0) return launch_typed<__nv_bfloat16, float>(c);
  return launch_typed<__nv_bfloat16, __nv_bfloat16>(c);
}

}  // namespace linattn::cuda::detail
