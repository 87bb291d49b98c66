// walkthroughs/lm/optim.hpp -- optimisers and learning-rate schedule of SPEC section 5.
//
//  * AdamW: betas (0.9, 0.95), eps 1e-8, bias-corrected, decoupled weight decay 0.1 applied as
//    p <- p (1 - lr wd) before the Adam step (PyTorch's order). In "adamw" mode every 2-D
//    parameter (hidden matrices, embedding, head) is decayed; vectors (norms, conv, gates) are not.
//  * Muon, NorMuon flavour, for the 2-D hidden matrices (ParamKind::matrix) in "muon" mode:
//      buf <- mu buf + (1 - mu) G;  U = (1 - mu) G + mu buf       (Nesterov, mu = 0.95)
//      X = U / (||U||_F + 1e-7);  X <- X^T if rows > cols
//      5 quintic Newton-Schulz steps X <- a X + (b A + c A^2) X, A = X X^T (per-step a, b, c)
//      O = sqrt(max(m, n)) X (transposed back)
//      v_i <- beta2 v_i + (1 - beta2) mean_j O_ij^2      per row i (beta2 0.95, no bias correction)
//      p <- p (1 - lr wd) - lr O_i / (sqrt(v_i) + eps)    (eps 1e-8, wd 0.1)
//    The lerp form of the momentum differs from the classical buf <- mu buf + G, U = G + mu buf
//    only by the factor (1 - mu), which the Frobenius normalisation removes.
//    Everything else (embedding, head, norms, ...) uses Adam (no weight decay) with its own
//    learning rate, constant after warm-up.
//  * Global-norm gradient clipping (max norm 1.0): if ||g|| > c, g <- g c / (||g|| + 1e-6)
//    (PyTorch's clip_grad_norm_).
//  * WSD schedule: linear warm-up, constant, then over the last 20% of the steps the
//    minus-square-root decay lr = lr_min + (lr_max - lr_min) (1 - sqrt(frac)) reaching
//    lr_min = lr_max / 10 at the last step. (SPEC writes lr_max (1 - sqrt(frac)) "down to lr_min";
//    this is the form that starts at lr_max and ends exactly at lr_min.)
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "walkthroughs/lm/gemm.hpp"
#include "walkthroughs/lm/params.hpp"

namespace linattn::lm {

// ---------------------------------------------------------------------------------------------
// Schedule
// ---------------------------------------------------------------------------------------------

struct Schedule {
  index_t steps = 1000;       ///< total optimiser steps N
  index_t warmup = 100;       ///< linear warm-up steps W
  double decay_frac = 0.2;    ///< the last decay_frac N steps decay
  double min_ratio = 0.1;     ///< lr_min / lr_max

  /// Number of decay steps D = round(decay_frac N); the decay starts at step N - D.
  index_t decay_steps() const { return static_cast<index_t>(std::llround(decay_frac * double(steps))); }
  index_t decay_start() const { return steps - decay_steps(); }

  void validate() const {
    const std::string fn = "Schedule";
    check_positive(fn, "steps", steps);
    if (warmup < 0) fail(fn, "warmup", "a non-negative number of steps", std::to_string(warmup));
    if (!(decay_frac >= 0 && decay_frac <= 1)) fail(fn, "decay_frac", "a value in [0, 1]", num_str(decay_frac));
    if (!(min_ratio >= 0 && min_ratio <= 1)) fail(fn, "min_ratio", "a value in [0, 1]", num_str(min_ratio));
    if (warmup > decay_start())
      fail(fn, "warmup", "at most the decay start " + std::to_string(decay_start()) + " (steps - decay steps)",
           std::to_string(warmup));
  }

  /// WSD multiplier of lr_max at step s (0-based; the update of step s uses it).
  double wsd(index_t s) const {
    if (s < warmup) return double(s + 1) / double(warmup);
    const index_t ds = decay_start(), D = decay_steps();
    if (s < ds || D == 0) return 1.0;
    const double frac = double(s - ds + 1) / double(D);  // (0, 1]; 1 at the last step
    return min_ratio + (1.0 - min_ratio) * (1.0 - std::sqrt(frac));
  }
  /// Warm-up then constant (the Adam group under Muon).
  double warmup_constant(index_t s) const { return s < warmup ? double(s + 1) / double(warmup) : 1.0; }
};

// ---------------------------------------------------------------------------------------------
// Clipping
// ---------------------------------------------------------------------------------------------

/// Global L2 norm of g (accumulated serially in double).
template <class T>
double global_norm(const std::vector<T>& g) {
  double s = 0;
  for (T x : g) s += double(x) * double(x);
  return std::sqrt(s);
}

/// Clip g to global norm max_norm (PyTorch's clip_grad_norm_). Returns the norm before clipping.
template <class T>
double clip_grad_norm(std::vector<T>& g, double max_norm) {
  const double norm = global_norm(g);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0)
    for (T& x : g) x = static_cast<T>(double(x) * coef);
  return norm;
}

// ---------------------------------------------------------------------------------------------
// Newton-Schulz orthogonalisation
// ---------------------------------------------------------------------------------------------

/// The per-step quintic coefficients (a, b, c) of SPEC section 5.
inline constexpr double kNewtonSchulz[5][3] = {{4.0848, -6.8946, 2.9270},
                                                {3.9505, -6.3029, 2.6377},
                                                {3.7418, -5.5913, 2.3037},
                                                {2.8769, -3.1427, 1.2046},
                                                {2.8366, -3.0525, 1.2012}};

/// out (m, n) = NS5(G / ||G||_F), the approximately orthogonal factor of G (m, n) (without the
/// sqrt(max(m, n)) scale). Works on the wide orientation (transposes when m > n), so A = X X^T
/// is min(m, n) square. Its singular values are p(sigma_i(G) / ||G||_F) with p the composition of
/// the five quintics (proofs_tests/test_lm_optim.cpp).
template <class T>
void newton_schulz(T* out, const T* G, index_t m, index_t n) {
  const bool tr = m > n;
  const index_t r = tr ? n : m, c = tr ? m : n;  // X is r x c, r <= c
  std::vector<T> X(static_cast<size_t>(r * c)), A(static_cast<size_t>(r * r)),
      A2(static_cast<size_t>(r * r)), Y(static_cast<size_t>(r * c));
  if (tr)
    transpose(X.data(), G, m, n);
  else
    std::copy(G, G + m * n, X.begin());
  double ss = 0;
  for (T x : X) ss += double(x) * double(x);
  const T inv = static_cast<T>(1.0 / (std::sqrt(ss) + 1e-7));
  for (T& x : X) x *= inv;
  std::vector<T> Xt(static_cast<size_t>(c * r));
  for (const auto& abc : kNewtonSchulz) {
    const T a = T(abc[0]), b = T(abc[1]), cc = T(abc[2]);
    transpose(Xt.data(), X.data(), r, c);
    gemm(r, r, c, X.data(), c, Xt.data(), r, A.data(), r, false);   // A = X X^T
    gemm(r, r, r, A.data(), r, A.data(), r, A2.data(), r, false);   // A^2
    for (index_t i = 0; i < r * r; ++i) A2[i] = b * A[i] + cc * A2[i];  // B = b A + c A^2
    gemm(r, c, r, A2.data(), r, X.data(), c, Y.data(), c, false);   // B X
    for (index_t i = 0; i < r * c; ++i) X[i] = a * X[i] + Y[i];
  }
  if (tr)
    transpose(out, X.data(), r, c);
  else
    std::copy(X.begin(), X.end(), out);
}

// ---------------------------------------------------------------------------------------------
// The optimiser
// ---------------------------------------------------------------------------------------------

struct OptimConfig {
  std::string name = "adamw";  ///< adamw | muon
  double lr = 3e-3;            ///< peak lr: of every parameter (adamw) or of the Muon matrices (muon)
  double adam_lr = 3e-3;       ///< muon mode: the constant (after warm-up) lr of the Adam group
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double clip = 1.0;           ///< global-norm clip; 0 disables (train_lm refuses a negative --clip)
  double muon_momentum = 0.95, muon_beta2 = 0.95, muon_eps = 1e-8;

  void validate() const {
    const std::string fn = "OptimConfig";
    if (name != "adamw" && name != "muon") fail(fn, "optimizer", "adamw or muon", name);
    if (!(lr > 0)) fail(fn, "lr", "a positive value", num_str(lr));
    if (!(adam_lr > 0)) fail(fn, "adam_lr", "a positive value", num_str(adam_lr));
    if (!(weight_decay >= 0)) fail(fn, "weight_decay", "a non-negative value", num_str(weight_decay));
  }
};

/// Optimiser state for one ParamStore layout, plus the step.
template <class T>
struct Optimizer {
  OptimConfig cfg;
  Schedule sched;
  std::vector<T> m, v;          ///< Adam moments (every element; unused for Muon matrices)
  std::vector<T> mom;           ///< Muon momentum buffers (matrix elements; others unused)
  std::vector<T> rowv;          ///< NorMuon per-row second moments, indexed by row_offset
  std::vector<index_t> row_offset;  ///< per parameter: its first row in rowv (-1: none)
  index_t t = 0;                ///< number of steps taken

  Optimizer(const OptimConfig& c, const Schedule& s, const ParamStore<T>& ps) : cfg(c), sched(s) {
    cfg.validate();
    sched.validate();
    m.assign(ps.data.size(), T(0));
    v.assign(ps.data.size(), T(0));
    index_t rows = 0;
    for (const ParamSpec& sp : ps.specs) {
      if (uses_muon(sp)) {
        row_offset.push_back(rows);
        rows += sp.rows;
      } else {
        row_offset.push_back(-1);
      }
    }
    if (cfg.name == "muon") mom.assign(ps.data.size(), T(0));
    rowv.assign(static_cast<size_t>(rows), T(0));
  }

  bool uses_muon(const ParamSpec& sp) const { return cfg.name == "muon" && sp.kind == ParamKind::matrix; }

  /// The learning rates of step t: {Muon/AdamW group, Adam group under Muon}.
  double lr_main() const { return cfg.lr * sched.wsd(t); }
  double lr_adam_group() const { return cfg.name == "muon" ? cfg.adam_lr * sched.warmup_constant(t) : lr_main(); }

  /// One step with the gradients in ps.grad (clipped first if cfg.clip > 0). Returns the
  /// gradient norm before clipping.
  double step(ParamStore<T>& ps) {
    const double norm = cfg.clip > 0 ? clip_grad_norm(ps.grad, cfg.clip) : global_norm(ps.grad);
    const double lr = lr_main(), lr_a = lr_adam_group();
    ++t;
    const double bc1 = 1.0 - std::pow(cfg.beta1, double(t)), bc2 = 1.0 - std::pow(cfg.beta2, double(t));
    for (size_t id = 0; id < ps.specs.size(); ++id) {
      const ParamSpec& sp = ps.specs[id];
      T* p = ps.data.data() + sp.offset;
      T* g = ps.grad.data() + sp.offset;
      if (uses_muon(sp)) {
        muon_update(p, g, mom.data() + sp.offset, rowv.data() + row_offset[id], sp.rows, sp.cols, lr);
        continue;
      }
      const bool muon_mode = cfg.name == "muon";
      const double plr = muon_mode ? lr_a : lr;
      const double wd = (!muon_mode && sp.kind != ParamKind::vector) ? cfg.weight_decay : 0.0;
      adamw_update(p, g, m.data() + sp.offset, v.data() + sp.offset, sp.numel(), plr, wd, bc1, bc2);
    }
    return norm;
  }

  /// AdamW on n elements: p <- p (1 - lr wd); p <- p - lr mhat / (sqrt(vhat) + eps).
  void adamw_update(T* p, const T* g, T* m1, T* v1, index_t n, double lr, double wd, double bc1,
                    double bc2) const {
    const double b1 = cfg.beta1, b2 = cfg.beta2;
    for (index_t i = 0; i < n; ++i) {
      const double gi = g[i];
      const double mi = b1 * double(m1[i]) + (1 - b1) * gi;
      const double vi = b2 * double(v1[i]) + (1 - b2) * gi * gi;
      m1[i] = static_cast<T>(mi), v1[i] = static_cast<T>(vi);
      double pi = double(p[i]) * (1.0 - lr * wd);
      pi -= lr * (mi / bc1) / (std::sqrt(vi / bc2) + cfg.eps);
      p[i] = static_cast<T>(pi);
    }
  }

  /// NorMuon on one (rows x cols) matrix (see the file comment).
  void muon_update(T* p, const T* g, T* buf, T* rv, index_t rows, index_t cols, double lr) const {
    const index_t n = rows * cols;
    const T mu = T(cfg.muon_momentum);
    std::vector<T> U(static_cast<size_t>(n)), O(static_cast<size_t>(n));
    for (index_t i = 0; i < n; ++i) {
      buf[i] = mu * buf[i] + (T(1) - mu) * g[i];
      U[i] = (T(1) - mu) * g[i] + mu * buf[i];
    }
    newton_schulz(O.data(), U.data(), rows, cols);
    const double scale = std::sqrt(double(std::max(rows, cols)));
    const double b2 = cfg.muon_beta2;
    for (index_t i = 0; i < rows; ++i) {
      T* o = O.data() + i * cols;
      double ms = 0;
      for (index_t j = 0; j < cols; ++j) {
        o[j] = static_cast<T>(double(o[j]) * scale);
        ms += double(o[j]) * double(o[j]);
      }
      ms /= double(cols);
      rv[i] = static_cast<T>(b2 * double(rv[i]) + (1 - b2) * ms);
      const double denom = std::sqrt(double(rv[i])) + cfg.muon_eps;
      T* pr = p + i * cols;
      for (index_t j = 0; j < cols; ++j)
        pr[j] = static_cast<T>(double(pr[j]) * (1.0 - lr * cfg.weight_decay) - lr * double(o[j]) / denom);
    }
  }
};

}  // namespace linattn::lm
