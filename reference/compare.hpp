/// reference/compare.hpp -- the verdict for C++ kernel authors: compare a kernel's outputs and gradients (or
/// any tensor) with the float64 reference by relative RMS error, with tolerances by precision and a readable
/// report. The C++ counterpart of Python's linattn.testing (docs/python.md), with the same defaults:
/// ~~~
///   rel_rms = ||got - want|| / ||want||          (the absolute RMS when want is all zero)
///   pass  <=>  shapes equal, got finite, and (rel_rms <= rtol_rms  or  rms(got - want) <= floor)
///   rtol_rms by the bytes of the computation's type: 8 -> 1e-10, 4 -> 1e-5 (gradients 1e-4), 2 -> 1e-2;
///     float64 and float32 grow with the longest sequence: max(that, T_max u), u = 2^-53 or 2^-24;
///     outputs computed in float32 and stored in 16 bits add only the storage's rounding (bf16 5e-3, fp16 1e-3)
///   floor: atol_rms (1e-14 / 1e-6 / 1e-3) times the size the compared array's error is relative to:
///     o            max(rms(o), scale rms_t(||q_t||) S)   (o_t = scale q_t^T S_t)
///     final_state  S = max(rms(final_state), rms(h0), rms_t(rms(k_t) rms(v_t)))   (the state's size; the last
///                  term, one write k_t v_t^T, because a final state can cancel far below the states before it)
///     gradients    the largest RMS among the reference gradients compared; for dg at least the RMS of
///                  |q dq| + |k dk|; for dh0 the gradient table's rtol (1e-10 / 1e-4 / 1e-2, not grown
///                  with T nor by a 16-bit storage) times it
/// ~~~
/// compare() alone applies `tol` as given (an absolute floor, no growth with T: see Tolerance::for_length);
/// compare_outputs and compare_gradients scale the floor as above (compare_outputs: unless scale_floor = false)
/// and grow rtol_rms with T_max. A final state and dh0 are required unless told otherwise. Typical use
/// (walkthroughs/check_your_kernel.cpp runs it on a correct per-token kernel, linattn's chunked CPU kernel,
/// two wrong kernels, and a correct and a wrongly fed backward):
/// ~~~
///   auto want = ref::naive_recurrent_gated_delta_rule(widen(q), widen(k), widen(v), widen(g), widen(beta), opt64);
///   auto got  = my_kernel(q, k, v, g, beta);                       // float, [B, T, H, V] and [N, H, K, V]
///   auto comps = ref::compare_outputs(got.o, got.final_state, want, widen(q), widen(k), widen(v), opt64);
///   for (auto& c : comps) std::puts(c.report().c_str());  if (!ref::all_ok(comps)) ...
/// ~~~
/// @file
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
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
  /// The unit roundoff of a float32 or float64 computation (2^-24, 2^-53), by which for_length grows rtol_rms
  /// with the sequence length; 0 (a 16-bit computation, or a tolerance built by hand): rtol_rms stays as is.
  double unit_roundoff = 0;
  /// dh0's floor as a fraction of the gradients' magnitude: the gradient table's rtol of the computation's
  /// precision (1e-10 / 1e-4 / 1e-2), not grown with T_max nor loosened by a 16-bit storage, as Python's
  /// _DEFAULT_ATOL_GRAD; < 0 (a tolerance built by hand): rtol_rms.
  double floor_rtol = -1;

  /// The defaults for a computation whose narrowest type has `bytes` bytes (8, 4, 2 for bf16/fp16).
  static Tolerance for_bytes(int bytes) {
    if (bytes >= 8) return {1e-10, 1e-14, "float64", 0x1p-53, 1e-10};
    if (bytes == 4) return {1e-5, 1e-6, "float32", 0x1p-24, 1e-4};
    if (bytes == 2) return {1e-2, 1e-3, "16-bit", 0, 1e-2};
    throw Error("Tolerance::for_bytes: argument 'bytes' expected 8, 4 or 2 but got " + std::to_string(bytes));
  }
  /// The defaults for gradients computed in `bytes`: as for_bytes but float32's rtol_rms is 1e-4, the bound
  /// proofs_tests/test_chunk_backward.cpp holds the chunked CPU backward to.
  static Tolerance grads_for_bytes(int bytes) {
    Tolerance t = for_bytes(bytes);
    if (bytes == 4) t.rtol_rms = 1e-4;
    t.basis += " gradients";
    return t;
  }
  /// `computed` for results stored in a 16-bit type: only the storage's rounding is added (as a relative RMS
  /// bound, with room: bf16 5e-3, fp16 1e-3), so that the output's type cannot loosen the computation's bound.
  static Tolerance stored_as(Tolerance computed, bool bf16) {
    computed.rtol_rms = std::max(computed.rtol_rms, bf16 ? 5e-3 : 1e-3);
    computed.basis += bf16 ? ", stored as bf16" : ", stored as fp16";
    return computed;
  }
  /// The defaults for outputs of type T: for double and float, a computation in T; for a 2-byte floating type,
  /// a float32 computation stored in T (fp16's rounding for _Float16, bf16's, the larger, for any other 2-byte
  /// type). A computation genuinely in 16 bits (inputs in bf16/fp16): Tolerance::for_bytes(2).
  template <class T>
  static Tolerance of() {
    static_assert(!std::is_integral_v<T>, "Tolerance::of<T>: T must be a floating type (an integer type would be "
                                          "compared as raw bit patterns: convert bf16 bits to float first)");
    if constexpr (sizeof(T) == 2) return stored_as(for_bytes(4), !is_fp16<T>());
    return for_bytes(static_cast<int>(sizeof(T)));
  }
  /// The defaults for gradients of type T: as of<T>() with grads_for_bytes.
  template <class T>
  static Tolerance grads_of() {
    static_assert(!std::is_integral_v<T>, "Tolerance::grads_of<T>: T must be a floating type");
    if constexpr (sizeof(T) == 2) return stored_as(grads_for_bytes(4), !is_fp16<T>());
    return grads_for_bytes(static_cast<int>(sizeof(T)));
  }
  /// This tolerance for sequences of at most `T_max` tokens: rtol_rms = max(rtol_rms, T_max unit_roundoff). A
  /// float32 kernel's rounding of each token's decay exp(g) is a bias that compounds along the sequence (a correct
  /// per-token float32 GDN kernel is 1.5e-5 off at T = 2048, g = -1e-4, beta = 0.1, K = V = 128).
  Tolerance for_length(index_t T_max) const {
    Tolerance t = *this;
    const double grown = static_cast<double>(T_max) * unit_roundoff;
    if (grown > t.rtol_rms) t.rtol_rms = grown, t.basis += ", T_max = " + std::to_string(T_max);
    return t;
  }

 private:
  template <class T>
  static constexpr bool is_fp16() {
#ifdef __FLT16_MAX__
    if constexpr (std::is_same_v<std::remove_cv_t<T>, _Float16>) return true;
#endif
    return std::numeric_limits<T>::is_specialized && std::numeric_limits<T>::digits == 11;
  }
};

/// How far `got` is from `want`; report() explains it.
struct Comparison {
  std::string name;
  bool compared = true;  ///< false: an output not required that the kernel did not give ("not compared")
  std::string note;      ///< why not compared
  bool shape_ok = true;
  std::vector<index_t> got_shape, want_shape;
  double rel_rms = 0, abs_rms = 0, max_abs = 0, want_rms = 0;
  std::vector<index_t> max_at;         ///< index of the largest |got - want|
  index_t n_nonfinite = 0;             ///< NaN or Inf elements of got
  std::vector<index_t> first_nonfinite;
  Tolerance tol;

  /// True when it passes (or was not compared).
  bool ok() const {
    if (!compared) return true;
    return shape_ok && n_nonfinite == 0 && (rel_rms <= tol.rtol_rms || abs_rms <= tol.atol_rms);
  }
  /// Passes only on the absolute floor (its relative error is above rtol_rms): worth a look unless
  /// the reference is (nearly) zero.
  bool floor_pass() const { return compared && ok() && !(rel_rms <= tol.rtol_rms); }

  std::string report() const {
    std::ostringstream os;
    os.precision(3);
    os << name << ": ";
    if (!compared) return os.str() + "not compared (" + note + ")";
    if (!shape_ok) {
      os << "shape mismatch: got " << shape_str(got_shape) << " vs expected " << shape_str(want_shape);
      return os.str();
    }
    os << (ok() ? "ok" : "MISMATCH") << ": rel_rms = " << std::scientific << rel_rms << " (tolerance "
       << tol.rtol_rms << ", " << tol.basis << "), max |diff| = " << max_abs << " at " << index_str(max_at)
       << ", rms(expected) = " << want_rms << ", shape " << shape_str(got_shape);
    if (n_nonfinite)
      os << "\n  non-finite values in got: " << n_nonfinite << ", first at " << index_str(first_nonfinite);
    else if (!ok())
      os << "\n  rms(diff) = " << abs_rms << " is above the floor " << tol.atol_rms << " too";
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

/// A sum of squares kept as m^2 ss, m the largest |x| so far (as hypot): no overflow at 1e200, no underflow at
/// 1e-200, so the relative RMS of float64 data is right at any magnitude (Python's compare() scales likewise).
struct SumSq {
  double m = 0, ss = 0;
  void add(double x) {
    x = std::abs(x);
    if (x > m) ss = 1 + ss * (m / x) * (m / x), m = x;
    else if (x > 0) ss += (x / m) * (x / m);
  }
  double norm() const { return m * std::sqrt(ss); }                                     ///< sqrt(sum x^2)
  double rms(double count) const { return count > 0 ? m * std::sqrt(ss / count) : 0.0; }  ///< sqrt(sum x^2 / count)
};

/// Compare `got` with `want` element by element (float64 arithmetic); NaN/Inf in got fail. Both must be
/// defined tensors and `want` finite (a linattn::Error otherwise).
template <class A, class B>
Comparison compare(const std::string& name, const Tensor<A>& got, const Tensor<B>& want,
                   const Tolerance& tol = Tolerance::of<A>()) {
  if (!got.defined()) throw Error("compare: argument 'got' (" + name + ") expected a tensor but got an undefined one");
  if (!want.defined())
    throw Error("compare: argument 'want' (" + name + ") expected a tensor but got an undefined one");
  auto unravel = [](index_t flat, const std::vector<index_t>& shape) {
    std::vector<index_t> ix(shape.size());
    for (size_t d = ix.size(); d-- > 0;) {
      ix[d] = flat % shape[d];
      flat /= shape[d];
    }
    return ix;
  };
  index_t bad_want = 0, first_bad_want = 0;
  for (index_t i = 0; i < want.numel(); ++i)
    if (!std::isfinite(static_cast<double>(want.data()[i])) && bad_want++ == 0) first_bad_want = i;
  if (bad_want) {
    std::string at;
    for (index_t x : unravel(first_bad_want, want.shape())) at += (at.empty() ? "" : ", ") + std::to_string(x);
    throw Error("compare: argument 'want' (" + name + ") expected finite values but got " + std::to_string(bad_want) +
                " NaN/Inf, first at (" + at + ")");
  }
  Comparison c;
  c.name = name;
  c.tol = tol;
  c.got_shape = got.shape();
  c.want_shape = want.shape();
  c.shape_ok = got.shape() == want.shape();
  if (!c.shape_ok) return c;
  const index_t n = got.numel();
  SumSq num, den, wsum;
  index_t worst = -1;
  for (index_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got.data()[i]), w = static_cast<double>(want.data()[i]);
    wsum.add(w);
    if (!std::isfinite(g)) {
      if (c.n_nonfinite++ == 0) c.first_nonfinite = unravel(i, got.shape());
      continue;
    }
    const double d = g - w;
    num.add(d);
    den.add(w);
    if (worst < 0 || std::abs(d) > c.max_abs) c.max_abs = std::abs(d), worst = i;
  }
  const double count = static_cast<double>(std::max<index_t>(n, 1));
  c.want_rms = wsum.rms(count);
  c.abs_rms = num.rms(count);
  c.rel_rms = den.m > 0 ? (num.m / den.m) * std::sqrt(num.ss / den.ss) : c.abs_rms;
  if (worst >= 0) c.max_at = unravel(worst, got.shape());
  return c;
}

/// The largest RMS among the defined tensors given: the case's magnitude, which scales the floor.
template <class T>
double magnitude(const std::vector<const Tensor<T>*>& ts) {
  double m = 0;
  for (const Tensor<T>* t : ts) {
    if (!t || !t->defined() || t->numel() == 0) continue;
    SumSq s;
    for (index_t i = 0; i < t->numel(); ++i) s.add(static_cast<double>(t->data()[i]));
    m = std::max(m, s.rms(static_cast<double>(t->numel())));
  }
  return m;
}

/// The longest sequence of a [B, T, ...] batch: T, or the longest of cu_seqlens' segments when given.
inline index_t longest_sequence(index_t T, const std::vector<index_t>& cu_seqlens) {
  if (cu_seqlens.size() < 2) return T;
  index_t m = 0;
  for (size_t i = 1; i < cu_seqlens.size(); ++i) m = std::max(m, cu_seqlens[i] - cu_seqlens[i - 1]);
  return m;
}

/// A kernel's o and final state against the reference's output `want` (a float64 naive_recurrent_<op> with
/// output_final_state), where `q`, `k`, `v` and `opt` are the reference's q [B, T, H, K], k [B, T, H, K],
/// v [B, T, H, V] and options (widened; they give the state's size S, o's natural size scale ||q_t|| S, and the
/// longest sequence). rtol_rms grows with T_max (Tolerance::for_length); the floor of `tol` is multiplied, per
/// output, by the size of the file comment (pass scale_floor = false to use it as is). S counts one write
/// k_t v_t^T (k_t normalised under use_qk_l2norm, as the reference reads it): a float32 chunked kernel's rounding
/// is relative to the states it goes through, and a final state can cancel to 1e-4 of them (test_compare.cpp).
/// Both sizes scale with the inputs as o and the state do, so zero or doubled outputs fail however q, k, v and
/// h0 are scaled together (proofs_tests/test_compare.cpp: down to 1e-7); only an o under atol_rms of its natural
/// size (q nearly orthogonal to the state) can pass on the floor. A missing final state throws unless
/// require_final_state = false, which reports it "not compared".
template <class A>
std::vector<Comparison> compare_outputs(const Tensor<A>& o, const Tensor<A>& final_state,
                                        const RecurrentOutput<double>& want, const Tensor<double>& q,
                                        const Tensor<double>& k, const Tensor<double>& v,
                                        const RecurrentOptions<double>& opt, Tolerance tol = Tolerance::of<A>(),
                                        bool require_final_state = true, bool scale_floor = true) {
  if (!want.o.defined() || want.o.dim() != 4)
    throw Error("compare_outputs: argument 'want' expected the reference's output with o [B, T, H, V] but got o " +
                std::string(want.o.defined() ? shape_str(want.o.shape()) : "undefined"));
  if (!o.defined()) throw Error("compare_outputs: argument 'o' expected the kernel's o but got an undefined tensor");
  if (!q.defined() || q.dim() != 4 || q.size(0) != want.o.size(0) || q.size(1) != want.o.size(1) ||
      q.size(2) != want.o.size(2))
    throw Error("compare_outputs: argument 'q' expected the reference's q [B, T, H, K] with B, T, H of want.o " +
                shape_str(want.o.shape()) + " but got " + (q.defined() ? shape_str(q.shape()) : "undefined"));
  if (!k.defined() || k.shape() != q.shape())
    throw Error("compare_outputs: argument 'k' expected the reference's k [B, T, H, K] of q's shape " +
                shape_str(q.shape()) + " but got " + (k.defined() ? shape_str(k.shape()) : "undefined"));
  if (!v.defined() || v.shape() != want.o.shape())
    throw Error("compare_outputs: argument 'v' expected the reference's v [B, T, H, V] of want.o's shape " +
                shape_str(want.o.shape()) + " but got " + (v.defined() ? shape_str(v.shape()) : "undefined"));
  if ((final_state.defined() || require_final_state) && !want.final_state.defined())
    throw Error("compare_outputs: argument 'want' expected a final state (call the reference with "
                "output_final_state = true) but got none");
  if (!final_state.defined() && require_final_state)
    throw Error("compare_outputs: argument 'final_state' expected the kernel's final state but got an undefined "
                "tensor (pass require_final_state = false to compare o alone)");
  tol = tol.for_length(longest_sequence(want.o.size(1), opt.cu_seqlens));
  Tolerance tol_o = tol, tol_s = tol;
  if (scale_floor) {
    const index_t K = q.size(3);
    const double scale = opt.scale ? static_cast<double>(*opt.scale) : 1.0 / std::sqrt(static_cast<double>(K));
    SumSq qq;  // over tokens and heads of ||q_t|| (as the reference reads q), scaled against overflow
    const index_t q_rows = q.numel() / std::max<index_t>(K, 1);
    for (index_t r = 0; r < q_rows; ++r) {
      SumSq row;
      for (index_t i = 0; i < K; ++i) row.add(q.data()[r * K + i]);
      const double nq = row.norm();  // ||q_t||; under use_qk_l2norm the reference reads q_t / sqrt(||q_t||^2 + 1e-6)
      qq.add(opt.use_qk_l2norm ? (nq > 0 ? 1.0 / std::sqrt(1.0 + 1e-6 / (nq * nq)) : 0.0) : nq);
    }
    const double q_rms = qq.rms(static_cast<double>(q_rows));
    // rms_t(rms(k_t) rms(v_t)), the size of one write, each factor scaled before squaring (SumSq: no overflow to
    // an infinite floor).
    const index_t V = v.size(3), rows = K > 0 && V > 0 ? q.numel() / K : 0;
    SumSq writes_sq;
    for (index_t r = 0; r < rows; ++r) {
      SumSq kr, vr;
      for (index_t i = 0; i < K; ++i) kr.add(k.data()[r * K + i]);
      for (index_t j = 0; j < V; ++j) vr.add(v.data()[r * V + j]);
      const double k_rms = opt.use_qk_l2norm ? std::sqrt(kr.ss / (kr.ss + 1e-6 / (kr.m * kr.m)) / static_cast<double>(K))
                                             : kr.rms(static_cast<double>(K));
      writes_sq.add(k_rms * vr.rms(static_cast<double>(V)));
    }
    const double writes = writes_sq.rms(static_cast<double>(rows));
    const double state = std::max(magnitude<double>({&want.final_state, &opt.initial_state}), writes);
    tol_o.atol_rms *= std::max(magnitude<double>({&want.o}), std::abs(scale) * q_rms * state);
    tol_s.atol_rms *= state;
  }
  std::vector<Comparison> out{compare("o", o, want.o, tol_o)};
  if (final_state.defined()) {
    out.push_back(compare("final_state", final_state, want.final_state, tol_s));
  } else {
    Comparison c;
    c.name = "final_state";
    c.compared = false;
    c.note = "the kernel did not give it; require_final_state = false";
    out.push_back(c);
  }
  return out;
}

/// A kernel's gradients against the reference backward's `want` (a float64 naive_recurrent_<op>_backward on the
/// same inputs and cotangents); q, k and opt are that call's (widened): q and k scale dg's floor, opt.cu_seqlens
/// gives the longest sequence (rtol_rms grows with it, Tolerance::for_length). Every gradient that `want` holds
/// is compared and must be in `got`, and `got` may hold no other; dh0 (the reference always gives it) may be
/// left out of `got` only with require_dh0 = false ("not compared"). The floor of `tol` is multiplied by the
/// case's magnitude (the largest RMS among the wanted gradients compared); for dg by at least the RMS of the
/// terms it is summed from, |q dq| + |k dk| (summed over K for a scalar gate [B, T, H]); for dh0, the state
/// gradient carried back through every token, which can shrink far below the values it is computed from, the
/// floor is rtol_rms times the magnitude (as test_chunk_backward.cpp bounds it).
template <class A>
std::vector<Comparison> compare_gradients(const RecurrentGrads<A>& got, const RecurrentGrads<double>& want,
                                          const Tensor<double>& q, const Tensor<double>& k,
                                          const RecurrentOptions<double>& opt,
                                          const Tolerance& tol = Tolerance::grads_of<A>(), bool require_dh0 = true) {
  struct Item {
    const char* name;
    const Tensor<A>* got;
    const Tensor<double>* want;
  };
  const std::vector<Item> items = {{"dq", &got.dq, &want.dq},       {"dk", &got.dk, &want.dk},
                                   {"dv", &got.dv, &want.dv},       {"dg", &got.dg, &want.dg},
                                   {"dbeta", &got.dbeta, &want.dbeta}, {"db", &got.db, &want.db},
                                   {"dw", &got.dw, &want.dw},       {"dh0", &got.dh0, &want.dh0}};
  if (!want.dq.defined() || want.dq.dim() != 4 || !want.dk.defined())
    throw Error("compare_gradients: argument 'want' expected the reference backward's gradients (dq [B, T, H, K], "
                "dk, ...) but got none");
  if (q.shape() != want.dq.shape())
    throw Error("compare_gradients: argument 'q' expected the reference's q of shape " + shape_str(want.dq.shape()) +
                " but got " + (q.defined() ? shape_str(q.shape()) : "an undefined tensor"));
  if (k.shape() != want.dk.shape())
    throw Error("compare_gradients: argument 'k' expected the reference's k of shape " + shape_str(want.dk.shape()) +
                " but got " + (k.defined() ? shape_str(k.shape()) : "an undefined tensor"));
  std::vector<const Tensor<double>*> compared;
  for (const Item& it : items) {
    const std::string name = it.name;
    if (!it.want->defined() && it.got->defined())
      throw Error("compare_gradients: argument 'got' has a gradient " + name +
                  " that the reference does not (another operator's gradients?)");
    if (!it.want->defined() || (name == "dh0" && !it.got->defined() && !require_dh0)) continue;
    if (!it.got->defined())
      throw Error("compare_gradients: argument 'got' expected a gradient " + name + " (the reference has one) but got none" +
                  (name == "dh0" ? " (pass require_dh0 = false for a kernel that gives no dh0)" : ""));
    compared.push_back(it.want);
  }
  const Tolerance grown = tol.for_length(longest_sequence(want.dq.size(1), opt.cu_seqlens));
  const double mag = magnitude<double>(compared);
  std::vector<Comparison> out;
  for (const Item& it : items) {
    if (!it.want->defined()) continue;
    const std::string name = it.name;
    if (!it.got->defined()) {  // dh0 with require_dh0 = false
      Comparison c;
      c.name = name;
      c.compared = false;
      c.note = "the kernel did not give it; require_dh0 = false";
      out.push_back(c);
      continue;
    }
    Tolerance t = grown;
    double scale = mag;
    if (name == "dg") {
      const bool scalar = it.want->dim() == 3;
      const index_t K = q.size(-1);
      Tensor<double> terms(it.want->shape());
      for (index_t i = 0; i < q.numel(); ++i) {
        const double term = std::abs(q.data()[i] * want.dq.data()[i]) + std::abs(k.data()[i] * want.dk.data()[i]);
        terms.data()[scalar ? i / K : i] += term;
      }
      scale = std::max(mag, magnitude<double>({&terms}));
    }
    t.atol_rms = (name == "dh0" ? (tol.floor_rtol >= 0 ? tol.floor_rtol : tol.rtol_rms) : grown.atol_rms) * scale;
    out.push_back(compare(name, *it.got, *it.want, t));
  }
  return out;
}

/// True when at least one comparison was made and every comparison passes: a list that compared nothing
/// (empty, or only "not compared" entries) is false, not a pass.
inline bool all_ok(const std::vector<Comparison>& cs) {
  const bool any = std::any_of(cs.begin(), cs.end(), [](const Comparison& c) { return c.compared; });
  return any && std::all_of(cs.begin(), cs.end(), [](const Comparison& c) { return c.ok(); });
}

/// @}

}  // namespace linattn::ref
