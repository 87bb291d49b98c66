/// reference/compare.hpp -- the verdict for C++ kernel authors: compare a kernel's outputs and gradients (or
/// any tensor) with the float64 reference by relative RMS error, with tolerances by precision and a readable
/// report. The C++ counterpart of Python's linattn.testing (docs/python.md), with the same defaults:
/// ~~~
///   rel_rms = ||got - want|| / ||want||          (the absolute RMS when want is all zero)
///   pass  <=>  shapes equal, got finite, and (rel_rms <= rtol_rms  or  rms(got - want) <= floor)
///   rtol_rms by the bytes of the computation's type: 8 -> 1e-10, 4 -> 1e-5 (gradients 1e-4), 2 -> 1e-2
///   floor: atol_rms (1e-14 / 1e-6 / 1e-3) times the case's magnitude, the largest RMS among the reference
///   arrays compared together; for dg at least the RMS of |q dq| + |k dk|, for dh0 rtol_rms times it
/// ~~~
/// (compare() alone applies tol.atol_rms as is, an absolute floor; compare_outputs and compare_gradients always
/// scale it, where Python treats an atol_rms given explicitly as absolute.)
/// Typical use (walkthroughs/check_your_kernel.cpp runs it on a correct and two wrong kernels):
/// ~~~
///   auto want = ref::naive_recurrent_gated_delta_rule(widen(q), widen(k), widen(v), widen(g), widen(beta), opt64);
///   auto got  = my_kernel(q, k, v, g, beta);                       // float, [B, T, H, V] and [N, H, K, V]
///   auto comps = ref::compare_outputs(got.o, got.final_state, want, ref::Tolerance::of<float>());
///   for (auto& c : comps) std::puts(c.report().c_str());  if (!ref::all_ok(comps)) ...
/// ~~~
/// @file
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "reference/recurrent.hpp"
#include "reference/recurrent_backward.hpp"
#include "reference/tensor.hpp"

namespace linattn::ref {

/// @addtogroup sequence
/// @{

/// The tolerance of a comparison: relative RMS bound, absolute RMS floor, and what chose them.
struct Tolerance {
  double rtol_rms = 1e-5;
  double atol_rms = 1e-6;
  std::string basis = "float32";

  /// The defaults for a computation whose narrowest type has `bytes` bytes (8, 4, 2 for bf16/fp16).
  static Tolerance for_bytes(int bytes) {
    if (bytes >= 8) return {1e-10, 1e-14, "float64"};
    if (bytes == 4) return {1e-5, 1e-6, "float32"};
    if (bytes == 2) return {1e-2, 1e-3, "16-bit"};
    throw Error("Tolerance::for_bytes: argument 'bytes' expected 8, 4 or 2 but got " + std::to_string(bytes));
  }
  /// The defaults for a computation in T (double, float; a 2-byte type such as a bf16 struct: 16-bit).
  template <class T>
  static Tolerance of() {
    return for_bytes(static_cast<int>(sizeof(T)));
  }
  /// The defaults for gradients computed in T: as of<T>() but float32's rtol_rms is 1e-4, the bound
  /// proofs_tests/test_chunk_backward.cpp holds the chunked CPU backward to.
  template <class T>
  static Tolerance grads_of() {
    Tolerance t = of<T>();
    if (sizeof(T) == 4) t.rtol_rms = 1e-4;
    t.basis += " gradients";
    return t;
  }
};

/// How far `got` is from `want`; report() explains it.
struct Comparison {
  std::string name;
  bool shape_ok = true;
  std::vector<index_t> got_shape, want_shape;
  double rel_rms = 0, abs_rms = 0, max_abs = 0, want_rms = 0;
  std::vector<index_t> max_at;         ///< index of the largest |got - want|
  index_t n_nonfinite = 0;             ///< NaN or Inf elements of got
  std::vector<index_t> first_nonfinite;
  Tolerance tol;

  bool ok() const {
    return shape_ok && n_nonfinite == 0 && (rel_rms <= tol.rtol_rms || abs_rms <= tol.atol_rms);
  }
  /// Passes only on the absolute floor (its relative error is above rtol_rms): worth a look unless
  /// the reference is (nearly) zero.
  bool floor_pass() const { return ok() && !(rel_rms <= tol.rtol_rms); }

  std::string report() const {
    std::ostringstream os;
    os.precision(3);
    os << name << ": ";
    if (!shape_ok) {
      os << "shape mismatch: got " << shape_str(got_shape) << " vs expected " << shape_str(want_shape);
      return os.str();
    }
    os << (ok() ? "ok" : "MISMATCH") << ": rel_rms = " << std::scientific << rel_rms << " (tolerance "
       << tol.rtol_rms << ", " << tol.basis << "), max |diff| = " << max_abs << " at " << index_str(max_at)
       << ", rms(expected) = " << want_rms << ", shape " << shape_str(got_shape);
    if (n_nonfinite)
      os << "\n  non-finite values in got: " << n_nonfinite << ", first at " << index_str(first_nonfinite);
    if (floor_pass())
      os << "\n  WARNING: passes only on the absolute floor: rms(diff) = " << abs_rms << " <= " << tol.atol_rms;
    return os.str();
  }

 private:
  static std::string index_str(const std::vector<index_t>& ix) {
    std::string s = "(";
    for (size_t i = 0; i < ix.size(); ++i) s += (i ? ", " : "") + std::to_string(ix[i]);
    return s + ")";
  }
};

/// An exact float64 copy of `t` (float, double, or any type convertible to double).
template <class T>
Tensor<double> widen(const Tensor<T>& t) {
  Tensor<double> out(t.shape());
  for (index_t i = 0; i < t.numel(); ++i) out.data()[i] = static_cast<double>(t.data()[i]);
  return out;
}

/// Compare `got` with `want` element by element (float64 arithmetic); NaN/Inf in got fail.
template <class A, class B>
Comparison compare(const std::string& name, const Tensor<A>& got, const Tensor<B>& want,
                   const Tolerance& tol = Tolerance::of<A>()) {
  Comparison c;
  c.name = name;
  c.tol = tol;
  c.got_shape = got.shape();
  c.want_shape = want.shape();
  c.shape_ok = got.shape() == want.shape();
  if (!c.shape_ok) return c;
  const index_t n = got.numel();
  auto unravel = [&](index_t flat) {
    std::vector<index_t> ix(got.shape().size());
    for (size_t d = ix.size(); d-- > 0;) {
      ix[d] = flat % got.shape()[d];
      flat /= got.shape()[d];
    }
    return ix;
  };
  double num = 0, den = 0, wsum = 0;
  index_t worst = -1;
  for (index_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got.data()[i]), w = static_cast<double>(want.data()[i]);
    wsum += w * w;
    if (!std::isfinite(g)) {
      if (c.n_nonfinite++ == 0) c.first_nonfinite = unravel(i);
      continue;
    }
    const double d = g - w;
    num += d * d;
    den += w * w;
    if (worst < 0 || std::abs(d) > c.max_abs) c.max_abs = std::abs(d), worst = i;
  }
  const double count = static_cast<double>(std::max<index_t>(n, 1));
  c.want_rms = std::sqrt(wsum / count);
  c.abs_rms = std::sqrt(num / count);
  c.rel_rms = den > 0 ? std::sqrt(num / den) : c.abs_rms;
  if (worst >= 0) c.max_at = unravel(worst);
  return c;
}

/// The largest RMS among the defined tensors given: the case's magnitude, which scales the floor.
template <class T>
double magnitude(const std::vector<const Tensor<T>*>& ts) {
  double m = 0;
  for (const Tensor<T>* t : ts) {
    if (!t || !t->defined() || t->numel() == 0) continue;
    double s = 0;
    for (index_t i = 0; i < t->numel(); ++i) s += static_cast<double>(t->data()[i]) * static_cast<double>(t->data()[i]);
    m = std::max(m, std::sqrt(s / static_cast<double>(t->numel())));
  }
  return m;
}

/// A kernel's o (and final state, when `final_state` is defined) against the reference's output
/// `want` (a float64 naive_recurrent_<op> with output_final_state). The floor of `tol` is multiplied
/// by the case's magnitude (the larger RMS of want.o and want.final_state), so that a kernel returning
/// zeros or 2 o fails however small the inputs are scaled; pass scale_floor = false to use it as is.
template <class A>
std::vector<Comparison> compare_outputs(const Tensor<A>& o, const Tensor<A>& final_state,
                                        const RecurrentOutput<double>& want, Tolerance tol = Tolerance::of<A>(),
                                        bool scale_floor = true) {
  if (final_state.defined() && !want.final_state.defined())
    throw Error("compare_outputs: argument 'want' expected a final state (call the reference with "
                "output_final_state = true) but got none");
  if (scale_floor) tol.atol_rms *= magnitude<double>({&want.o, final_state.defined() ? &want.final_state : nullptr});
  std::vector<Comparison> out{compare("o", o, want.o, tol)};
  if (final_state.defined()) out.push_back(compare("final_state", final_state, want.final_state, tol));
  return out;
}

/// A kernel's gradients against the reference backward's `want` (a float64 naive_recurrent_<op>_backward on the
/// same inputs and cotangents); q and k are those inputs, widened (they scale dg's floor). Every gradient that
/// `want` holds is compared and must be in `got` (dh0 is compared only when got.dh0 is defined). The floor of
/// `tol` is multiplied by the case's magnitude (the largest RMS among the wanted gradients compared); for dg by
/// at least the RMS of the terms it is summed from, |q dq| + |k dk| (summed over K for a scalar gate [B, T, H]);
/// for dh0, the state gradient carried back through every token, which can shrink far below the values it is
/// computed from, the floor is rtol_rms times the magnitude (as test_chunk_backward.cpp bounds it).
template <class A>
std::vector<Comparison> compare_gradients(const RecurrentGrads<A>& got, const RecurrentGrads<double>& want,
                                          const Tensor<double>& q, const Tensor<double>& k,
                                          const Tolerance& tol = Tolerance::grads_of<A>()) {
  struct Item {
    const char* name;
    const Tensor<A>* got;
    const Tensor<double>* want;
  };
  const std::vector<Item> items = {{"dq", &got.dq, &want.dq},       {"dk", &got.dk, &want.dk},
                                   {"dv", &got.dv, &want.dv},       {"dg", &got.dg, &want.dg},
                                   {"dbeta", &got.dbeta, &want.dbeta}, {"db", &got.db, &want.db},
                                   {"dw", &got.dw, &want.dw},       {"dh0", &got.dh0, &want.dh0}};
  std::vector<const Tensor<double>*> compared;
  for (const Item& it : items) {
    if (!it.want->defined()) continue;
    if (std::string(it.name) == "dh0" && !it.got->defined()) continue;
    if (!it.got->defined())
      throw Error(std::string("compare_gradients: argument 'got' expected a gradient ") + it.name +
                  " (the reference has one) but got none");
    compared.push_back(it.want);
  }
  const double mag = magnitude<double>(compared);
  std::vector<Comparison> out;
  for (const Item& it : items) {
    if (!it.want->defined() || !it.got->defined()) continue;
    Tolerance t = tol;
    const std::string name = it.name;
    double scale = mag;
    if (name == "dg" && q.shape() == want.dq.shape() && k.shape() == want.dk.shape()) {
      const bool scalar = it.want->dim() == 3;
      const index_t K = q.size(-1);
      Tensor<double> terms(it.want->shape());
      for (index_t i = 0; i < q.numel(); ++i) {
        const double term = std::abs(q.data()[i] * want.dq.data()[i]) + std::abs(k.data()[i] * want.dk.data()[i]);
        terms.data()[scalar ? i / K : i] += term;
      }
      scale = std::max(mag, magnitude<double>({&terms}));
    }
    t.atol_rms = (name == "dh0" ? tol.rtol_rms : tol.atol_rms) * scale;
    out.push_back(compare(name, *it.got, *it.want, t));
  }
  return out;
}

/// True when every comparison passes.
inline bool all_ok(const std::vector<Comparison>& cs) {
  return std::all_of(cs.begin(), cs.end(), [](const Comparison& c) { return c.ok(); });
}

/// @}

}  // namespace linattn::ref
