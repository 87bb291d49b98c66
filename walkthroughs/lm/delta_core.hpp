// walkthroughs/lm/delta_core.hpp -- the recurrence core of the linear mixers for training: a
// per-token forward and reverse-time backward of DeltaNet, GDN, KDA and GDN2 in the fla layout
// (q, k [B,T,H,K], v [B,T,H,V], log-decays g, beta / b / w; no initial state), on raw buffers,
// OpenMP-parallel over (batch, head), in float or double.
//
// Why a core here when reference/recurrent_backward.hpp exists: cross-layer routing (CLER, CLER-H;
// SPEC section 3) differentiates through the recurrence *trace* -- the error r = v - v_bar or the
// written vector -- and the reference backward takes cotangents of the output o (and the final
// state) only. This backward also takes cotangents dr and dwritten (as does the chunked
// optimized/cpu/chunk_backward.hpp, through dwritten and dv_bar: `--core chunk`). With dr = dwritten = 0 it equals the reference backward
// (proofs_tests/test_lm_mixers.cpp checks both that and finite differences).
//
// Every operator runs in the general GDN2 form of Eqs.21-24 (reference/delta_rules.hpp):
//   W~ = W_{t-1} D (D = Diag(alpha), alpha = exp(g))                   Eq.21
//   e = b (.) kappa, z = w (.) v                                         Eq.22
//   v_bar = W~ kappa, r = v - v_bar (the trace's paper error)            Eqs.25-26 (decayed read)
//   written = z - W~ e                                                   Eq.23
//   W_t = W~ + written kappa^T;  o_t = W_t (scale q_t)                   Eq.24, Eq.8
// with DeltaNet: alpha = 1, b = w = beta 1; GDN: alpha = exp(g) 1, b = w = beta 1; KDA: per-channel
// alpha, b = w = beta 1. W is the paper's d_v x d_phi memory (S = W^T in the kernel layout).
// The backward keeps every W_{t-1} from the forward (B*H*T*V*K values: fine at the sizes trained
// here; a chunked version would store one state per chunk).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "reference/recurrent.hpp"
#include "walkthroughs/lm/common.hpp"

namespace linattn::lm {

using ref::Op;

/// Raw gate buffers of one call; which are used depends on the operator (as ref::Gates).
template <class T>
struct CoreGates {
  const T* g = nullptr;     ///< GDN [B,T,H]; KDA, GDN2 [B,T,H,K]; log-decays <= 0
  const T* beta = nullptr;  ///< DeltaNet, GDN, KDA [B,T,H]
  const T* b = nullptr;     ///< GDN2 [B,T,H,K]
  const T* w = nullptr;     ///< GDN2 [B,T,H,V]
};

/// Gradient buffers (accumulated +=); null where the operator has no such input.
template <class T>
struct CoreGrads {
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  T *dg = nullptr, *dbeta = nullptr, *db = nullptr, *dw = nullptr;
};

struct CoreDims {
  index_t B = 1, T = 1, H = 1, K = 1, V = 1;
};

namespace detail {
/// One token's GDN2-form gates: alpha (K), b (K), w (V).
template <class T>
void core_gates(Op op, const CoreGates<T>& gt, const CoreDims& d, index_t bth, T* alpha, T* b, T* w) {
  const index_t K = d.K, V = d.V;
  const T beta = (op == Op::gdn2) ? T(0) : gt.beta[bth];
  for (index_t i = 0; i < K; ++i) {
    alpha[i] = op == Op::delta_rule ? T(1)
               : op == Op::gated_delta_rule ? std::exp(gt.g[bth])
                                            : std::exp(gt.g[bth * K + i]);
    b[i] = op == Op::gdn2 ? gt.b[bth * K + i] : beta;
  }
  for (index_t j = 0; j < V; ++j) w[j] = op == Op::gdn2 ? gt.w[bth * V + j] : beta;
}
}  // namespace detail

/// Forward. o [B,T,H,V]; optional trace r, written [B,T,H,V] (null: not wanted); Wprev, if not
/// null, receives W_{t-1} for every (b, h, t): [B, H, T, V, K] (needed by core_backward).
template <class T>
void core_forward(Op op, const CoreDims& d, const T* q, const T* k, const T* v,
                  const CoreGates<T>& gt, T scale, T* o, T* r, T* written, T* Wprev) {
  const index_t B = d.B, Tn = d.T, H = d.H, K = d.K, V = d.V;
  LM_OMP("omp parallel for schedule(static) if(B * H * Tn * K * V > kParMin)")
  for (index_t bh = 0; bh < B * H; ++bh) {
    const index_t bb = bh / H, h = bh % H;
    std::vector<T> W(static_cast<size_t>(V * K), T(0)), alpha(K), be(K), we(V), vbar(V), wr(V);
    for (index_t t = 0; t < Tn; ++t) {
      const index_t bth = (bb * Tn + t) * H + h;
      const T* kt = k + bth * K;
      const T* vt = v + bth * V;
      const T* qt = q + bth * K;
      if (Wprev) std::copy(W.begin(), W.end(), Wprev + ((bh * Tn) + t) * V * K);
      detail::core_gates(op, gt, d, bth, alpha.data(), be.data(), we.data());
      for (index_t i = 0; i < V; ++i) {  // W~ = W D; v_bar = W~ kappa; written = z - W~ e
        T* wi = W.data() + i * K;
        T vb = 0, we_ = 0;
        for (index_t j = 0; j < K; ++j) {
          wi[j] *= alpha[j];
          vb += wi[j] * kt[j];
          we_ += wi[j] * be[j] * kt[j];
        }
        vbar[i] = vb;
        wr[i] = we[i] * vt[i] - we_;
      }
      for (index_t i = 0; i < V; ++i) {  // W_t = W~ + written kappa^T; o = W_t (scale q)
        T* wi = W.data() + i * K;
        T acc = 0;
        for (index_t j = 0; j < K; ++j) {
          wi[j] += wr[i] * kt[j];
          acc += wi[j] * qt[j];
        }
        o[bth * V + i] = acc * scale;
        if (r) r[bth * V + i] = vt[i] - vbar[i];
        if (written) written[bth * V + i] = wr[i];
      }
    }
  }
}

/// Backward: accumulates into grads the gradient of a loss with cotangents do_ (of o), and
/// optionally dr (of the trace r) and dwritten (of the trace written) [B,T,H,V] (null: zero).
/// Wprev from core_forward.
template <class T>
void core_backward(Op op, const CoreDims& d, const T* q, const T* k, const T* v,
                   const CoreGates<T>& gt, T scale, const T* do_, const T* dr, const T* dwritten,
                   const T* Wprev, const CoreGrads<T>& gr) {
  const index_t B = d.B, Tn = d.T, H = d.H, K = d.K, V = d.V;
  LM_OMP("omp parallel for schedule(static) if(B * H * Tn * K * V > kParMin)")
  for (index_t bh = 0; bh < B * H; ++bh) {
    const index_t bb = bh / H, h = bh % H;
    std::vector<T> dW(static_cast<size_t>(V * K), T(0)), Wd(static_cast<size_t>(V * K));
    std::vector<T> alpha(K), be(K), we(V), e(K), wr(V), dwr(V), dk(K), de(K), dgv(K);
    for (index_t t = Tn - 1; t >= 0; --t) {
      const index_t bth = (bb * Tn + t) * H + h;
      const T* kt = k + bth * K;
      const T* vt = v + bth * V;
      const T* qt = q + bth * K;
      const T* dot = do_ + bth * V;
      const T* Wp = Wprev + ((bh * Tn) + t) * V * K;
      detail::core_gates(op, gt, d, bth, alpha.data(), be.data(), we.data());
      // recompute: W~ = W_{t-1} D, e, written
      for (index_t j = 0; j < K; ++j) e[j] = be[j] * kt[j];
      for (index_t i = 0; i < V; ++i) {
        T acc = 0;
        for (index_t j = 0; j < K; ++j) {
          Wd[i * K + j] = Wp[i * K + j] * alpha[j];
          acc += Wd[i * K + j] * e[j];
        }
        wr[i] = we[i] * vt[i] - acc;
      }
      std::fill(dk.begin(), dk.end(), T(0));
      std::fill(de.begin(), de.end(), T(0));
      // read o = W_t x, x = scale q, W_t = W~ + written kappa^T: dW_t += do x^T, dq = scale W_t^T do
      for (index_t j = 0; j < K; ++j) {
        T acc = 0;
        for (index_t i = 0; i < V; ++i) acc += (Wd[i * K + j] + wr[i] * kt[j]) * dot[i];
        gr.dq[bth * K + j] += scale * acc;
      }
      for (index_t i = 0; i < V; ++i)
        for (index_t j = 0; j < K; ++j) dW[i * K + j] += dot[i] * scale * qt[j];
      // Eq.24: dwritten = dW_t kappa (+ the trace cotangent), dkappa = dW_t^T written
      for (index_t i = 0; i < V; ++i) {
        T acc = dwritten ? dwritten[bth * V + i] : T(0);
        for (index_t j = 0; j < K; ++j) acc += dW[i * K + j] * kt[j];
        dwr[i] = acc;
      }
      for (index_t j = 0; j < K; ++j) {
        T acc = 0;
        for (index_t i = 0; i < V; ++i) acc += dW[i * K + j] * wr[i];
        dk[j] += acc;
      }
      // Eq.23: written = z - W~ e: dz = dwritten, de = -W~^T dwritten, dW~ -= dwritten e^T
      // trace: r = v - W~ kappa: dv += dr, dkappa -= W~^T dr, dW~ -= dr kappa^T
      const T* drt = dr ? dr + bth * V : nullptr;
      for (index_t j = 0; j < K; ++j) {
        T a = 0, c = 0;
        for (index_t i = 0; i < V; ++i) {
          a += Wd[i * K + j] * dwr[i];
          if (drt) c += Wd[i * K + j] * drt[i];
        }
        de[j] -= a;
        dk[j] -= c;
      }
      for (index_t i = 0; i < V; ++i)
        for (index_t j = 0; j < K; ++j)
          dW[i * K + j] -= dwr[i] * e[j] + (drt ? drt[i] * kt[j] : T(0));
      // Eq.22: z = w (.) v, e = b (.) kappa
      T sum_db = 0, sum_dw = 0;
      for (index_t i = 0; i < V; ++i) {
        gr.dv[bth * V + i] += dwr[i] * we[i] + (drt ? drt[i] : T(0));
        const T dwi = dwr[i] * vt[i];
        if (op == Op::gdn2) gr.dw[bth * V + i] += dwi;
        sum_dw += dwi;
      }
      for (index_t j = 0; j < K; ++j) {
        const T dbj = de[j] * kt[j];
        if (op == Op::gdn2) gr.db[bth * K + j] += dbj;
        sum_db += dbj;
        dk[j] += de[j] * be[j];
        gr.dk[bth * K + j] += dk[j];
      }
      if (op != Op::gdn2) gr.dbeta[bth] += sum_db + sum_dw;
      // Eq.21: W~ = W_{t-1} D: dg_j = sum_i dW~_ij W~_ij; dW_{t-1} = dW~ D
      std::fill(dgv.begin(), dgv.end(), T(0));
      for (index_t i = 0; i < V; ++i)
        for (index_t j = 0; j < K; ++j) {
          dgv[j] += dW[i * K + j] * Wd[i * K + j];
          dW[i * K + j] *= alpha[j];
        }
      if (op == Op::gated_delta_rule) {
        T s = 0;
        for (index_t j = 0; j < K; ++j) s += dgv[j];
        gr.dg[bth] += s;
      } else if (op == Op::kda || op == Op::gdn2) {
        for (index_t j = 0; j < K; ++j) gr.dg[bth * K + j] += dgv[j];
      }
    }
  }
}

}  // namespace linattn::lm
