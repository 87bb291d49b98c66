// proofs_tests/fd_check.hpp -- the finite-difference scaffolding of the language-model gradient
// tests (test_lm_modules.cpp, test_lm_mixers.cpp, test_lm_gradcheck.cpp), in float64:
//  * random vectors, dot products, the central-difference gradient of a scalar function;
//  * the two error measures of those files (max-abs scaled and relative L2);
//  * the whole-model checks: every coordinate (model_fd_error) or one random direction per named
//    parameter (model_directional_errors), for a tiny Model<double> whose weights are first
//    enlarged so that every path carries a visible gradient.
// Central differences: truncation error ~h^2 f''' (three points) or ~h^4 f^(5) (five points),
// rounding ~1e-16 |f| / h; each test states its step and bound.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "walkthroughs/lm/model.hpp"

namespace linattn::lm::fd {

using Vd = std::vector<double>;

inline Vd randn(std::mt19937_64& rng, index_t n, double sd = 1.0) {
  std::normal_distribution<double> nd(0.0, sd);
  Vd x(static_cast<size_t>(n));
  for (double& v : x) v = nd(rng);
  return x;
}

inline double dot(const Vd& a, const Vd& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// Central-difference gradient of `loss` with respect to x (x is perturbed in place and restored).
inline Vd numeric_grad(Vd& x, const std::function<double()>& loss, double h = 1e-5) {
  Vd g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss();
    x[i] = x0 - h;
    const double lm = loss();
    x[i] = x0;
    g[i] = (lp - lm) / (2 * h);
  }
  return g;
}

/// max |a - n| / max(1, max |n|).
inline double grad_err(const Vd& analytic, const Vd& numeric) {
  double diff = 0, scale = 1;
  for (size_t i = 0; i < analytic.size(); ++i) {
    diff = std::max(diff, std::abs(analytic[i] - numeric[i]));
    scale = std::max(scale, std::abs(numeric[i]));
  }
  return diff / scale;
}

/// ||a - b|| / ||b|| (b = 0: ||a||).
inline double rel_err(const Vd& a, const Vd& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// A tiny model ready for a gradient check: initialised with `seed`, then every parameter that is
/// not a vector (and every CLER Gamma) redrawn from N(0, sd^2) -- larger than the training init,
/// and Gamma, P or U away from 0, so that every path (routing included) carries gradient -- with
/// random tokens and targets.
struct FdProblem {
  Model<double> m;
  std::vector<int> tok, tgt;
  index_t B, T;
  FdProblem(const ModelConfig& cfg, std::uint64_t seed, index_t B_, index_t T_, double sd = 0.3)
      : m(cfg), B(B_), T(T_) {
    m.init(seed);
    std::mt19937_64 rng(seed + 1);
    std::normal_distribution<double> nd(0.0, sd);
    for (const ParamSpec& s : m.ps.specs)
      if (s.kind != ParamKind::vector || s.name.find("Gamma") != std::string::npos)
        for (index_t i = 0; i < s.numel(); ++i) m.ps.data[s.offset + i] = nd(rng);
    std::uniform_int_distribution<int> u(0, int(cfg.vocab) - 1);
    tok.resize(static_cast<size_t>(B * T)), tgt.resize(static_cast<size_t>(B * T));
    for (int& t : tok) t = u(rng);
    for (int& t : tgt) t = u(rng);
  }
  double loss() { return m.forward(tok.data(), tgt.data(), B, T); }
  /// The analytic gradient of the mean loss (Model::backward).
  Vd gradient() {
    m.ps.zero_grad();
    loss();
    m.backward();
    return Vd(m.ps.grad.begin(), m.ps.grad.end());
  }
};

/// Every coordinate: ||analytic - numeric|| / ||numeric|| over all parameters.
inline double model_fd_error(FdProblem& p, double h = 1e-5) {
  const Vd analytic = p.gradient();
  const Vd numeric = numeric_grad(p.m.ps.data, [&] { return p.loss(); }, h);
  return rel_err(analytic, numeric);
}

/// One named parameter's directional check.
struct DirectionalError {
  std::string name;
  double analytic = 0, numeric = 0, err = 0;
};

/// For each named parameter slice: a random unit direction u inside that slice, the directional
/// derivative g . u from the analytic gradient against the five-point central difference
/// (8 (L(+h) - L(-h)) - (L(+2h) - L(-2h))) / 12h of L(theta + s u) (truncation error O(h^4): the
/// tiny models with enlarged weights are strongly curved -- L2 normalisation of short q, k -- and
/// the three-point rule's O(h^2) error was measured at up to 1e-4 relative with h = 1e-5).
/// err = |analytic - numeric| / max(|numeric|, floor): a wrong gradient anywhere in a slice
/// changes g . u for almost every u, at 4 loss evaluations per slice instead of 2 per coordinate.
inline std::vector<DirectionalError> model_directional_errors(FdProblem& p, std::uint64_t seed, double h = 1e-5,
                                                              double floor = 1e-3) {
  const Vd g = p.gradient();
  std::mt19937_64 rng(seed);
  std::vector<DirectionalError> out;
  std::vector<double>& x = p.m.ps.data;
  for (const ParamSpec& s : p.m.ps.specs) {
    Vd u = randn(rng, s.numel());
    const double nu = std::sqrt(dot(u, u));
    for (double& v : u) v /= nu;
    DirectionalError e;
    e.name = s.name;
    for (index_t i = 0; i < s.numel(); ++i) e.analytic += g[s.offset + i] * u[i];
    const Vd x0(x.begin() + s.offset, x.begin() + s.offset + s.numel());
    auto at = [&](double step) {
      for (index_t i = 0; i < s.numel(); ++i) x[s.offset + i] = x0[i] + step * u[i];
      return p.loss();
    };
    const double d1 = at(h) - at(-h), d2 = at(2 * h) - at(-2 * h);
    std::copy(x0.begin(), x0.end(), x.begin() + s.offset);
    e.numeric = (8 * d1 - d2) / (12 * h);
    e.err = std::abs(e.analytic - e.numeric) / std::max(std::abs(e.numeric), floor);
    out.push_back(e);
  }
  return out;
}

}  // namespace linattn::lm::fd
