// walkthroughs/lm/modules.hpp -- the layers of the language model (SPEC section 5) as llm.c-style
// forward/backward pairs of plain functions on raw row-major buffers, templated on the scalar
// (float for training, double for the finite-difference gradient checks in
// proofs_tests/test_lm_modules.cpp).
//
// Conventions:
//  * Shapes are given in comments, e.g. `out (N, C)`; N is usually B*T (tokens), C a width.
//  * Forward functions overwrite their outputs. Backward functions ACCUMULATE (+=) into every
//    gradient buffer (llm.c's convention), so a tensor used twice gets the sum of both gradients;
//    the caller zeroes gradients before a backward pass. A null gradient pointer means "not
//    needed" where the comment says so.
//  * Weights are stored like PyTorch's: a linear layer's weight is (OC, C) and y = x W^T.
//  * Parallel loops give each output element to one thread (see common.hpp), so results are the
//    same for any number of threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "walkthroughs/lm/common.hpp"
#include "walkthroughs/lm/gemm.hpp"

namespace linattn::lm {

/// A per-thread scratch buffer of at least n elements (slot picks one of a few independent ones).
/// Contents are undefined on return; valid until the next call with the same slot on this thread.
template <class T>
T* scratch(size_t n, int slot) {
  thread_local std::vector<T> bufs[6];
  std::vector<T>& b = bufs[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// ---------------------------------------------------------------------------------------------
// Embedding: out[n] = wte[tokens[n]].
// ---------------------------------------------------------------------------------------------

/// out (N, C); tokens (N) in [0, vocab); wte (vocab, C).
template <class T>
void embedding_forward(T* out, const int* tokens, const T* wte, index_t N, index_t C) {
  LM_OMP("omp parallel for schedule(static) if(N * C > kParMin)")
  for (index_t n = 0; n < N; ++n) std::copy(wte + tokens[n] * C, wte + (tokens[n] + 1) * C, out + n * C);
}

/// dwte (vocab, C) += scatter of dout (N, C) by token. Serial: rows of dwte are shared by tokens.
template <class T>
void embedding_backward(T* dwte, const T* dout, const int* tokens, index_t N, index_t C) {
  for (index_t n = 0; n < N; ++n) {
    T* d = dwte + tokens[n] * C;
    const T* g = dout + n * C;
    for (index_t c = 0; c < C; ++c) d[c] += g[c];
  }
}

// ---------------------------------------------------------------------------------------------
// RMSNorm: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps), over the last dimension C.
// ---------------------------------------------------------------------------------------------

/// out (N, C), rstd (N) saved for backward, inp (N, C), weight (C).
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* weight, index_t N, index_t C, T eps) {
  LM_OMP("omp parallel for schedule(static) if(N * C > kParMin)")
  for (index_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    T ss = 0;
    for (index_t c = 0; c < C; ++c) ss += x[c] * x[c];
    const T r = T(1) / std::sqrt(ss / T(C) + eps);
    rstd[n] = r;
    T* y = out + n * C;
    for (index_t c = 0; c < C; ++c) y[c] = x[c] * r * weight[c];
  }
}

/// dinp (N, C) += r (w dy - x r^2 mean(w dy x)); dweight (C) += sum_n dy x r.
template <class T>
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight,
                      const T* rstd, index_t N, index_t C) {
  LM_OMP("omp parallel for schedule(static) if(N * C > kParMin)")
  for (index_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    const T r = rstd[n];
    T dot = 0;  // sum_c w dy x
    for (index_t c = 0; c < C; ++c) dot += weight[c] * dy[c] * x[c];
    const T k = r * r * dot / T(C);
    T* dx = dinp + n * C;
    for (index_t c = 0; c < C; ++c) dx[c] += r * (weight[c] * dy[c] - x[c] * k);
  }
  // pass 2: the weight gradient, a reduction over rows done in row order.
  for (index_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    const T r = rstd[n];
    for (index_t c = 0; c < C; ++c) dweight[c] += dy[c] * x[c] * r;
  }
}

// ---------------------------------------------------------------------------------------------
// Linear (no bias): out = inp W^T.
// ---------------------------------------------------------------------------------------------

/// out (N, OC) = inp (N, C) @ weight (OC, C)^T.
template <class T>
void linear_forward(T* out, const T* inp, const T* weight, index_t N, index_t C, index_t OC) {
  T* wt = scratch<T>(static_cast<size_t>(C * OC), 0);  // weight^T (C, OC)
  transpose(wt, weight, OC, C);
  gemm(N, OC, C, inp, C, wt, OC, out, OC, /*accumulate=*/false);
}

/// dinp (N, C) += dout (N, OC) @ weight (OC, C)   [dinp may be null];
/// dweight (OC, C) += dout^T @ inp.
template <class T>
void linear_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, index_t N,
                     index_t C, index_t OC) {
  if (dinp) gemm(N, C, OC, dout, OC, weight, C, dinp, C, /*accumulate=*/true);
  gemm(OC, C, N, dout, OC, inp, C, dweight, C, /*accumulate=*/true, /*trans_a=*/true);
}

// ---------------------------------------------------------------------------------------------
// Low-rank linear: out = (inp D^T) U^T = inp (U D)^T, never forming U D (the low-rank P_l of
// Eq.29; reference/routing.hpp's residual_inject with U, D).
// ---------------------------------------------------------------------------------------------

/// t (N, r) = inp (N, C) @ D (r, C)^T;  out (N, OC) = t @ U (OC, r)^T.
template <class T>
void lowrank_forward(T* out, T* t, const T* inp, const T* U, const T* D, index_t N, index_t C, index_t r,
                     index_t OC) {
  linear_forward(t, inp, D, N, C, r);
  linear_forward(out, t, U, N, r, OC);
}

/// dinp (N, C) += dout U D; dU (OC, r) += dout^T t; dD (r, C) += (dout U)^T inp. t from the forward.
template <class T>
void lowrank_backward(T* dinp, T* dU, T* dD, const T* dout, const T* t, const T* inp, const T* U, const T* D,
                      index_t N, index_t C, index_t r, index_t OC) {
  std::vector<T> dt(static_cast<size_t>(N * r), T(0));
  linear_backward(dt.data(), dU, dout, t, U, N, r, OC);
  linear_backward(dinp, dD, dt.data(), inp, D, N, C, r);
}

// ---------------------------------------------------------------------------------------------
// SwiGLU: out = SiLU(a) * b (the gated MLP's nonlinearity; the MLP is W2 (SiLU(W1 x) * W3 x)).
// ---------------------------------------------------------------------------------------------

/// out (n) = SiLU(a) * b, elementwise.
template <class T>
void swiglu_forward(T* out, const T* a, const T* b, index_t n) {
  LM_OMP("omp parallel for schedule(static) if(n > kParMin)")
  for (index_t i = 0; i < n; ++i) out[i] = silu(a[i]) * b[i];
}

/// da += dout b SiLU'(a); db += dout SiLU(a).
template <class T>
void swiglu_backward(T* da, T* db, const T* dout, const T* a, const T* b, index_t n) {
  LM_OMP("omp parallel for schedule(static) if(n > kParMin)")
  for (index_t i = 0; i < n; ++i) {
    da[i] += dout[i] * b[i] * silu_grad(a[i]);
    db[i] += dout[i] * silu(a[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Output gate: out = x * act(z), act = sigmoid (gated attention, KDA) or SiLU (GDN, GDN2).
// ---------------------------------------------------------------------------------------------

enum class GateAct { sigmoid, silu };

template <class T>
inline T gate_act(GateAct g, T z) {
  return g == GateAct::sigmoid ? sigmoid(z) : silu(z);
}
template <class T>
inline T gate_act_grad(GateAct g, T z) {
  if (g == GateAct::silu) return silu_grad(z);
  const T s = sigmoid(z);
  return s * (T(1) - s);
}

/// out (n) = x * act(z), elementwise.
template <class T>
void gate_forward(T* out, const T* x, const T* z, index_t n, GateAct g) {
  LM_OMP("omp parallel for schedule(static) if(n > kParMin)")
  for (index_t i = 0; i < n; ++i) out[i] = x[i] * gate_act(g, z[i]);
}

/// dx += dout act(z); dz += dout x act'(z).
template <class T>
void gate_backward(T* dx, T* dz, const T* dout, const T* x, const T* z, index_t n, GateAct g) {
  LM_OMP("omp parallel for schedule(static) if(n > kParMin)")
  for (index_t i = 0; i < n; ++i) {
    dx[i] += dout[i] * gate_act(g, z[i]);
    dz[i] += dout[i] * x[i] * gate_act_grad(g, z[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy with a fused softmax: losses[n] = -log softmax(logits[n])[targets[n]].
// ---------------------------------------------------------------------------------------------

/// losses (N), probs (N, V) saved for backward, logits (N, V), targets (N) in [0, V).
template <class T>
void crossentropy_forward(T* losses, T* probs, const T* logits, const int* targets, index_t N,
                          index_t V) {
  LM_OMP("omp parallel for schedule(static) if(N * V > kParMin)")
  for (index_t n = 0; n < N; ++n) {
    const T* l = logits + n * V;
    T* p = probs + n * V;
    T m = -std::numeric_limits<T>::infinity();
    for (index_t v = 0; v < V; ++v) m = std::max(m, l[v]);
    T z = 0;
    for (index_t v = 0; v < V; ++v) z += (p[v] = std::exp(l[v] - m));
    for (index_t v = 0; v < V; ++v) p[v] /= z;
    losses[n] = -(l[targets[n]] - m - std::log(z));  // log-sum-exp form: exact for tiny p
  }
}

/// dlogits (N, V) += dloss (probs - onehot(target)); dloss is d(total loss)/d(losses[n]) for
/// every n (1/N for the mean).
template <class T>
void crossentropy_backward(T* dlogits, const T* probs, const int* targets, T dloss, index_t N,
                           index_t V) {
  LM_OMP("omp parallel for schedule(static) if(N * V > kParMin)")
  for (index_t n = 0; n < N; ++n) {
    const T* p = probs + n * V;
    T* d = dlogits + n * V;
    for (index_t v = 0; v < V; ++v) d[v] += dloss * (p[v] - (v == targets[n] ? T(1) : T(0)));
  }
}

// ---------------------------------------------------------------------------------------------
// RoPE (rotary position embedding, "rotate half" form): for i < D/2, with angle t theta^(-2i/D),
// (x_i, x_{i+D/2}) -> (x_i cos - x_{i+D/2} sin, x_i sin + x_{i+D/2} cos). Position t = token index
// within its sequence.
// ---------------------------------------------------------------------------------------------

namespace detail {
/// cos/sin table (T, D/2), angles computed in double.
template <class T>
void rope_table(std::vector<T>& cs, std::vector<T>& sn, index_t Tn, index_t D, double theta) {
  const index_t half = D / 2;
  cs.resize(static_cast<size_t>(Tn * half));
  sn.resize(static_cast<size_t>(Tn * half));
  for (index_t t = 0; t < Tn; ++t)
    for (index_t i = 0; i < half; ++i) {
      const double ang = double(t) * std::pow(theta, -2.0 * double(i) / double(D));
      cs[t * half + i] = static_cast<T>(std::cos(ang));
      sn[t * half + i] = static_cast<T>(std::sin(ang));
    }
}
}  // namespace detail

/// out (B, T, nh, D) = rope(inp (B, T, nh, D)); D even. out may equal inp (in place).
template <class T>
void rope_forward(T* out, const T* inp, index_t B, index_t Tn, index_t nh, index_t D, double theta) {
  if (D % 2) fail("rope_forward", "D", "an even head dimension", std::to_string(D));
  std::vector<T> cs, sn;
  detail::rope_table(cs, sn, Tn, D, theta);
  const index_t half = D / 2;
  LM_OMP("omp parallel for schedule(static) if(B * Tn * nh * D > kParMin)")
  for (index_t bt = 0; bt < B * Tn; ++bt) {
    const index_t t = bt % Tn;
    for (index_t h = 0; h < nh; ++h) {
      const T* x = inp + (bt * nh + h) * D;
      T* y = out + (bt * nh + h) * D;
      for (index_t i = 0; i < half; ++i) {
        const T c = cs[t * half + i], s = sn[t * half + i], a = x[i], b = x[i + half];
        y[i] = a * c - b * s;
        y[i + half] = a * s + b * c;
      }
    }
  }
}

/// dinp += rope^T(dout): the inverse rotation (angle -t theta^(-2i/D)).
template <class T>
void rope_backward(T* dinp, const T* dout, index_t B, index_t Tn, index_t nh, index_t D,
                   double theta) {
  std::vector<T> cs, sn;
  detail::rope_table(cs, sn, Tn, D, theta);
  const index_t half = D / 2;
  LM_OMP("omp parallel for schedule(static) if(B * Tn * nh * D > kParMin)")
  for (index_t bt = 0; bt < B * Tn; ++bt) {
    const index_t t = bt % Tn;
    for (index_t h = 0; h < nh; ++h) {
      const T* dy = dout + (bt * nh + h) * D;
      T* dx = dinp + (bt * nh + h) * D;
      for (index_t i = 0; i < half; ++i) {
        const T c = cs[t * half + i], s = sn[t * half + i], a = dy[i], b = dy[i + half];
        dx[i] += a * c + b * s;
        dx[i + half] += -a * s + b * c;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Causal softmax attention with grouped-query attention (Eq.1): query head h reads key/value head
// h / (H / Hkv); scale 1/sqrt(D). Per (batch, head) it is three small matrix products, done by
// gemm on blocks of query rows (a block of rows i0..i1 only needs keys 0..i1: causal saving).
// ---------------------------------------------------------------------------------------------

/// out (B, T, H, D); probs (B, H, T, T) saved for backward (zero above the diagonal);
/// q (B, T, H, D); k, v (B, T, Hkv, D).
template <class T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, index_t B, index_t Tn,
                       index_t H, index_t Hkv, index_t D) {
  if (Hkv <= 0 || H % Hkv) fail("attention_forward", "Hkv", "a divisor of H = " + std::to_string(H), std::to_string(Hkv));
  const index_t group = H / Hkv, RB = 64;
  const T scale = T(1) / std::sqrt(T(D));
  LM_OMP("omp parallel for schedule(static) if(B * H * Tn * Tn * D > kParMinMac)")
  for (index_t bh = 0; bh < B * H; ++bh) {
    const index_t b = bh / H, h = bh % H, hk = h / group;
    const T* qh = q + (b * Tn * H + h) * D;        // (T, D), row stride H*D
    const T* kh = k + (b * Tn * Hkv + hk) * D;     // (T, D), row stride Hkv*D
    const T* vh = v + (b * Tn * Hkv + hk) * D;
    T* oh = out + (b * Tn * H + h) * D;
    T* P = probs + bh * Tn * Tn;                   // (T, T)
    T* kt = scratch<T>(static_cast<size_t>(D * Tn), 1);  // k^T (D, T)
    for (index_t t = 0; t < Tn; ++t)
      for (index_t d = 0; d < D; ++d) kt[d * Tn + t] = kh[t * Hkv * D + d];
    for (index_t i0 = 0; i0 < Tn; i0 += RB) {
      const index_t i1 = std::min(Tn, i0 + RB);
      // pass 1: scores S[i0:i1, 0:i1] = q k^T
      gemm(i1 - i0, i1, D, qh + i0 * H * D, H * D, kt, Tn, P + i0 * Tn, Tn, false);
      // pass 2: causal softmax of each row (max-subtracted)
      for (index_t i = i0; i < i1; ++i) {
        T* p = P + i * Tn;
        T m = -std::numeric_limits<T>::infinity();
        for (index_t j = 0; j <= i; ++j) m = std::max(m, p[j] *= scale);
        T z = 0;
        for (index_t j = 0; j <= i; ++j) z += (p[j] = std::exp(p[j] - m));
        const T inv = T(1) / z;
        for (index_t j = 0; j <= i; ++j) p[j] *= inv;
        for (index_t j = i + 1; j < Tn; ++j) p[j] = 0;
      }
      // pass 3: out[i0:i1] = P[i0:i1, 0:i1] v[0:i1]
      gemm(i1 - i0, D, i1, P + i0 * Tn, Tn, vh, Hkv * D, oh + i0 * H * D, H * D, false);
    }
  }
}

/// dq (B, T, H, D) +=, dk, dv (B, T, Hkv, D) +=, from dout (B, T, H, D) and the saved probs.
/// dP = dout v^T; dS = P (dP - rowsum(P dP)); dq = scale dS k; dk = scale dS^T q; dv = P^T dout.
/// Parallel over (batch, kv head); the heads of a group add into dk, dv in ascending order.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q, const T* k,
                        const T* v, index_t B, index_t Tn, index_t H, index_t Hkv, index_t D) {
  const index_t group = H / Hkv, RB = 64;
  const T scale = T(1) / std::sqrt(T(D));
  LM_OMP("omp parallel for schedule(static) if(B * H * Tn * Tn * D > kParMinMac)")
  for (index_t bk = 0; bk < B * Hkv; ++bk) {
    const index_t b = bk / Hkv, hk = bk % Hkv;
    const T* kh = k + (b * Tn * Hkv + hk) * D;
    const T* vh = v + (b * Tn * Hkv + hk) * D;
    T* dkh = dk + (b * Tn * Hkv + hk) * D;
    T* dvh = dv + (b * Tn * Hkv + hk) * D;
    T* vt = scratch<T>(static_cast<size_t>(D * Tn), 1);    // v^T (D, T)
    T* dS = scratch<T>(static_cast<size_t>(Tn * Tn), 2);   // (T, T)
    for (index_t t = 0; t < Tn; ++t)
      for (index_t d = 0; d < D; ++d) vt[d * Tn + t] = vh[t * Hkv * D + d];
    for (index_t h = hk * group; h < (hk + 1) * group; ++h) {
      const T* qh = q + (b * Tn * H + h) * D;
      const T* doh = dout + (b * Tn * H + h) * D;
      T* dqh = dq + (b * Tn * H + h) * D;
      const T* P = probs + (b * H + h) * Tn * Tn;
      for (index_t i0 = 0; i0 < Tn; i0 += RB) {  // blocks of query rows, keys 0..i1 only
        const index_t i1 = std::min(Tn, i0 + RB);
        // pass 1: dP = dout v^T, then dS = scale P (dP - sum_j P dP)
        gemm(i1 - i0, i1, D, doh + i0 * H * D, H * D, vt, Tn, dS + i0 * Tn, Tn, false);
        for (index_t i = i0; i < i1; ++i) {
          const T* p = P + i * Tn;
          T* ds = dS + i * Tn;
          T dot = 0;
          for (index_t j = 0; j <= i; ++j) dot += p[j] * ds[j];
          for (index_t j = 0; j <= i; ++j) ds[j] = p[j] * (ds[j] - dot) * scale;
          for (index_t j = i + 1; j < Tn; ++j) ds[j] = 0;
        }
        // pass 2: dq += (scale dS) k
        gemm(i1 - i0, D, i1, dS + i0 * Tn, Tn, kh, Hkv * D, dqh + i0 * H * D, H * D, true);
      }
      // pass 3: dk += (scale dS)^T q
      gemm(Tn, D, Tn, dS, Tn, qh, H * D, dkh, Hkv * D, true, /*trans_a=*/true);
      // pass 4: dv += P^T dout
      gemm(Tn, D, Tn, P, Tn, doh, H * D, dvh, Hkv * D, true, /*trans_a=*/true);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Causal depthwise short convolution (kernel KW, 4 in the model) followed by SiLU, per channel:
// pre[b,t,c] = sum_j w[c,j] x[b, t-(KW-1)+j, c] (zero before the sequence start), out = SiLU(pre).
// ---------------------------------------------------------------------------------------------

/// out, pre (B, T, C) (pre saved for backward); x (B, T, C); w (C, KW).
template <class T>
void shortconv_forward(T* out, T* pre, const T* x, const T* w, index_t B, index_t Tn, index_t C,
                       index_t KW) {
  LM_OMP("omp parallel for schedule(static) if(B * Tn * C * KW > kParMin)")
  for (index_t bt = 0; bt < B * Tn; ++bt) {
    const index_t b = bt / Tn, t = bt % Tn;
    for (index_t c = 0; c < C; ++c) {
      T acc = 0;
      for (index_t j = 0; j < KW; ++j) {
        const index_t s = t - (KW - 1) + j;
        if (s >= 0) acc += w[c * KW + j] * x[(b * Tn + s) * C + c];
      }
      pre[bt * C + c] = acc;
      out[bt * C + c] = silu(acc);
    }
  }
}

/// dx (B, T, C) +=; dw (C, KW) +=. dpre = dout SiLU'(pre).
template <class T>
void shortconv_backward(T* dx, T* dw, const T* dout, const T* pre, const T* x, const T* w,
                        index_t B, index_t Tn, index_t C, index_t KW) {
  T* dpre = scratch<T>(static_cast<size_t>(B * Tn * C), 4);
  LM_OMP("omp parallel for schedule(static) if(B * Tn * C > kParMin)")
  for (index_t i = 0; i < B * Tn * C; ++i) dpre[i] = dout[i] * silu_grad(pre[i]);
  // pass 1: dx[s] = sum_j w[c,j] dpre[s + (KW-1) - j]
  LM_OMP("omp parallel for schedule(static) if(B * Tn * C * KW > kParMin)")
  for (index_t bs = 0; bs < B * Tn; ++bs) {
    const index_t b = bs / Tn, s = bs % Tn;
    for (index_t c = 0; c < C; ++c) {
      T acc = 0;
      for (index_t j = 0; j < KW; ++j) {
        const index_t t = s + (KW - 1) - j;
        if (t < Tn) acc += w[c * KW + j] * dpre[(b * Tn + t) * C + c];
      }
      dx[bs * C + c] += acc;
    }
  }
  // pass 2: dw[c,j] = sum_{b,t} dpre[b,t,c] x[b, t-(KW-1)+j, c], parallel over channel blocks
  constexpr index_t CB = 16;
  LM_OMP("omp parallel for schedule(static) if(B * Tn * C * KW > kParMin)")
  for (index_t c0 = 0; c0 < C; c0 += CB) {
    const index_t c1 = std::min(C, c0 + CB);
    for (index_t bt = 0; bt < B * Tn; ++bt) {
      const index_t b = bt / Tn, t = bt % Tn;
      for (index_t j = 0; j < KW; ++j) {
        const index_t s = t - (KW - 1) + j;
        if (s < 0) continue;
        for (index_t c = c0; c < c1; ++c) dw[c * KW + j] += dpre[bt * C + c] * x[(b * Tn + s) * C + c];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// L2 normalisation per row of D (per head): y = x / sqrt(||x||^2 + eps) (eps 1e-6, SPEC section 5).
// ---------------------------------------------------------------------------------------------

/// out (N, D), rnorm (N) = 1/sqrt(||x||^2 + eps) saved for backward; x (N, D).
template <class T>
void l2norm_forward(T* out, T* rnorm, const T* x, index_t N, index_t D, T eps) {
  LM_OMP("omp parallel for schedule(static) if(N * D > kParMin)")
  for (index_t n = 0; n < N; ++n) {
    T ss = 0;
    for (index_t d = 0; d < D; ++d) ss += x[n * D + d] * x[n * D + d];
    const T r = T(1) / std::sqrt(ss + eps);
    rnorm[n] = r;
    for (index_t d = 0; d < D; ++d) out[n * D + d] = x[n * D + d] * r;
  }
}

/// dx += r (dy - y (y . dy)), with y the forward output.
template <class T>
void l2norm_backward(T* dx, const T* dout, const T* out, const T* rnorm, index_t N, index_t D) {
  LM_OMP("omp parallel for schedule(static) if(N * D > kParMin)")
  for (index_t n = 0; n < N; ++n) {
    const T* y = out + n * D;
    const T* dy = dout + n * D;
    T dot = 0;
    for (index_t d = 0; d < D; ++d) dot += y[d] * dy[d];
    for (index_t d = 0; d < D; ++d) dx[n * D + d] += rnorm[n] * (dy[d] - y[d] * dot);
  }
}

// ---------------------------------------------------------------------------------------------
// Per-head RMSNorm with output gate (the linear mixers' output, SPEC section 5):
// out[n,h] = RMSNorm_D(x[n,h]) * weight * act(z[n,h]), weight (D) shared by the heads.
// A composition of rmsnorm over rows of D and the gate; `normed` is saved for backward.
// ---------------------------------------------------------------------------------------------

/// out, normed (N, H, D); rstd (N*H); x, z (N, H, D); weight (D).
template <class T>
void head_norm_gate_forward(T* out, T* normed, T* rstd, const T* x, const T* z, const T* weight,
                            index_t N, index_t H, index_t D, T eps, GateAct g) {
  rmsnorm_forward(normed, rstd, x, weight, N * H, D, eps);
  gate_forward(out, normed, z, N * H * D, g);
}

/// dx, dz (N, H, D) +=; dweight (D) +=.
template <class T>
void head_norm_gate_backward(T* dx, T* dz, T* dweight, const T* dout, const T* normed,
                             const T* rstd, const T* x, const T* z, const T* weight, index_t N,
                             index_t H, index_t D, GateAct g) {
  const index_t n = N * H * D;
  T* dnormed = scratch<T>(static_cast<size_t>(n), 5);
  std::fill(dnormed, dnormed + n, T(0));
  gate_backward(dnormed, dz, dout, normed, z, n, g);
  rmsnorm_backward(dx, dweight, dnormed, x, weight, rstd, N * H, D);
}

}  // namespace linattn::lm
