// notebooks_bindings/src/bind_steps.cpp -- Python bindings of the per-token steps of
// reference/delta_rules.hpp (the paper's notation: W in R^{d_v x d_phi}, kappa, v_bar, r).
// Each step returns (W_new, trace) and leaves its input W untouched (W is copied: these are the
// small, teaching-sized calls). trace = {'v_bar', 'r', 'written'} as in StepTrace.
#include "bindings.hpp"

namespace linattn::pyb {

namespace {

template <class T>
py::dict trace_dict(const ref::StepTrace<T>& tr) {
  py::dict d;
  d["v_bar"] = to_numpy(tr.v_bar);
  d["r"] = to_numpy(tr.r);
  d["written"] = to_numpy(tr.written);
  return d;
}

/// Run `body<T>(fn, args)` in the dtype of the array arguments (copy=True converts them first).
template <class Body>
py::object dispatch(const std::string& fn, std::vector<Arg> a, const py::object& copy, Body&& body) {
  if (flag(fn, "copy", copy)) convert_all(fn, a);
  if (common_dtype(fn, a) == DType::f64) return body(double{}, a);
  return body(float{}, a);
}

/// A 2-D matrix argument, deep-copied so the caller's array is not modified.
template <class T>
Tensor<T> matrix_copy(const std::string& fn, const Arg& a) {
  Tensor<T> W = borrow<T>(fn, a);
  check_rank(fn, a.name, W, 2);
  return W.clone();
}

}  // namespace

void bind_steps(py::module_& m) {
  using namespace py::literals;

  m.def(
      "read",
      [](py::object W, py::object x, const py::object& copy) {
        return dispatch("read", {{"W", W}, {"x", x}}, copy, []<class T>(T, std::vector<Arg>& a) {
          Tensor<T> Wt = borrow<T>("read", a[0]);
          check_rank("read", "W", Wt, 2);
          return to_numpy(ref::read(Wt, vec<T>("read", a[1])));
        });
      },
      "W"_a, "x"_a, py::kw_only(), "copy"_a = false,
      "y = W x (Eq.8 with x = phi(q); Eq.9 with x = kappa). W [d_v, d_phi]. Note the order W phi(q):\n"
      "the PDF's Eq.3 prints phi(q)^T W, which does not type-check (SPEC erratum 1).");

  m.def(
      "linear_attention_step",
      [](py::object W, py::object kappa, py::object v, const py::object& copy) {
        const std::string fn = "linear_attention_step";
        return dispatch(fn, {{"W", W}, {"kappa", kappa}, {"v", v}}, copy,
                        [&]<class T>(T, std::vector<Arg>& a) -> py::object {
                          Tensor<T> Wn = matrix_copy<T>(fn, a[0]);
                          auto tr = ref::linear_attention_step(Wn, vec<T>(fn, a[1]), vec<T>(fn, a[2]));
                          return py::make_tuple(to_numpy(Wn), trace_dict(tr));
                        });
      },
      "W"_a, "kappa"_a, "v"_a, py::kw_only(), "copy"_a = false,
      "Linear attention (Eqs.4-5): W_i = W_{i-1} + v kappa^T. Returns (W_new, trace).");

  m.def(
      "deltanet_step",
      [](py::object W, py::object kappa, py::object v, const py::object& beta_, const py::object& copy) {
        const std::string fn = "deltanet_step";
        const double beta = real(fn, "beta", beta_);
        return dispatch(fn, {{"W", W}, {"kappa", kappa}, {"v", v}}, copy,
                        [&]<class T>(T, std::vector<Arg>& a) -> py::object {
                          Tensor<T> Wn = matrix_copy<T>(fn, a[0]);
                          auto tr = ref::deltanet_step(Wn, vec<T>(fn, a[1]), vec<T>(fn, a[2]),
                                                       narrow<T>(fn, "beta", beta));
                          return py::make_tuple(to_numpy(Wn), trace_dict(tr));
                        });
      },
      "W"_a, "kappa"_a, "v"_a, "beta"_a, py::kw_only(), "copy"_a = false,
      "DeltaNet (Eq.14): v_bar = W kappa, r = v - v_bar, W_new = W + beta r kappa^T.\n"
      "Returns (W_new, trace); W is not modified.");

  for (bool wrong : {false, true}) {
    const char* name = wrong ? "gdn_step_decay_after_error" : "gdn_step";
    m.def(
        name,
        [wrong, name](py::object W, py::object kappa, py::object v, const py::object& alpha_,
                      const py::object& beta_, const py::object& copy) {
          const std::string fn = name;
          const double alpha = real(fn, "alpha", alpha_), beta = real(fn, "beta", beta_);
          return dispatch(fn, {{"W", W}, {"kappa", kappa}, {"v", v}}, copy,
                          [&]<class T>(T, std::vector<Arg>& a) -> py::object {
                            Tensor<T> Wn = matrix_copy<T>(fn, a[0]);
                            auto kap = vec<T>(fn, a[1]), vv = vec<T>(fn, a[2]);
                            const T a_ = narrow<T>(fn, "alpha", alpha), b_ = narrow<T>(fn, "beta", beta);
                            auto tr = wrong ? ref::gdn_step_decay_after_error(Wn, kap, vv, a_, b_)
                                            : ref::gdn_step(Wn, kap, vv, a_, b_);
                            return py::make_tuple(to_numpy(Wn), trace_dict(tr));
                          });
        },
        "W"_a, "kappa"_a, "v"_a, "alpha"_a, "beta"_a, py::kw_only(), "copy"_a = false,
        wrong ? "A deliberately WRONG Gated DeltaNet (error from the undecayed state, decay after):\n"
                "kept to show that it differs from Eqs.15-17 whenever alpha != 1. Returns (W_new, trace)."
              : "Gated DeltaNet (Eqs.15-17): decay first, v_bar = alpha W kappa, r = v - v_bar,\n"
                "W_new = alpha W + beta r kappa^T. alpha in [0, 1] (not log space). Returns (W_new, trace).");
  }

  m.def(
      "kda_step",
      [](py::object W, py::object kappa, py::object v, py::object alpha_vec, const py::object& beta_,
         const py::object& copy) {
        const std::string fn = "kda_step";
        const double beta = real(fn, "beta", beta_);
        return dispatch(fn, {{"W", W}, {"kappa", kappa}, {"v", v}, {"alpha_vec", alpha_vec}}, copy,
                        [&]<class T>(T, std::vector<Arg>& a) -> py::object {
                          Tensor<T> Wn = matrix_copy<T>(fn, a[0]);
                          auto tr = ref::kda_step(Wn, vec<T>(fn, a[1]), vec<T>(fn, a[2]),
                                                  vec<T>(fn, a[3]), narrow<T>(fn, "beta", beta));
                          return py::make_tuple(to_numpy(Wn), trace_dict(tr));
                        });
      },
      "W"_a, "kappa"_a, "v"_a, "alpha_vec"_a, "beta"_a, py::kw_only(), "copy"_a = false,
      "Kimi Delta Attention (Eqs.18-20): D = Diag(alpha_vec) on the key side (right of W):\n"
      "v_bar = W D kappa, W_new = W D + beta (v - v_bar) kappa^T. Returns (W_new, trace).");

  m.def(
      "gdn2_step",
      [](py::object W, py::object kappa, py::object v, py::object alpha_vec, py::object b,
         py::object w, const py::object& copy) {
        const std::string fn = "gdn2_step";
        return dispatch(fn,
                        {{"W", W}, {"kappa", kappa}, {"v", v}, {"alpha_vec", alpha_vec}, {"b", b}, {"w", w}},
                        copy, [&]<class T>(T, std::vector<Arg>& a) -> py::object {
                          Tensor<T> Wn = matrix_copy<T>(fn, a[0]);
                          auto tr = ref::gdn2_step(Wn, vec<T>(fn, a[1]), vec<T>(fn, a[2]), vec<T>(fn, a[3]),
                                                   vec<T>(fn, a[4]), vec<T>(fn, a[5]));
                          return py::make_tuple(to_numpy(Wn), trace_dict(tr));
                        });
      },
      "W"_a, "kappa"_a, "v"_a, "alpha_vec"_a, "b"_a, "w"_a, py::kw_only(), "copy"_a = false,
      "Gated DeltaNet-2 (Eqs.21-24): W~ = W D, e = b * kappa, z = w * v, r = z - W~ e,\n"
      "W_new = W~ + r kappa^T (outer product with kappa, not e). Returns (W_new, trace).");

  m.def(
      "gdn2_step_S",
      [](py::object S, py::object k, py::object v, py::object alpha_vec, py::object b, py::object w,
         const py::object& copy) {
        const std::string fn = "gdn2_step_S";
        return dispatch(fn, {{"S", S}, {"k", k}, {"v", v}, {"alpha_vec", alpha_vec}, {"b", b}, {"w", w}},
                        copy, [&]<class T>(T, std::vector<Arg>& a) -> py::object {
                          Tensor<T> Sn = matrix_copy<T>(fn, a[0]);
                          ref::gdn2_step_S(Sn, vec<T>(fn, a[1]), vec<T>(fn, a[2]), vec<T>(fn, a[3]),
                                           vec<T>(fn, a[4]), vec<T>(fn, a[5]));
                          return to_numpy(Sn);
                        });
      },
      "S"_a, "k"_a, "v"_a, "alpha_vec"_a, "b"_a, "w"_a, py::kw_only(), "copy"_a = false,
      "GDN2 in the kernel layout S = W^T [K, V] (Eq.24 transposed):\n"
      "S_new = (I - k (b * k)^T) Diag(alpha) S + k (w * v)^T. Returns S_new.");

  for (bool to_S : {true, false}) {
    const char* name = to_S ? "W_to_S" : "S_to_W";
    m.def(
        name,
        [name](py::object M, const py::object& copy) {
          const std::string fn = name;
          return dispatch(fn, {{"M", M}}, copy, [&]<class T>(T, std::vector<Arg>& a) -> py::object {
            const Tensor<T> t = borrow<T>(fn, a[0]);
            check_rank(fn, "M", t, 2);  // here, or the reference names its helper 'transpose'
            return to_numpy(ref::transpose(t));
          });
        },
        "M"_a, py::kw_only(), "copy"_a = false,
        to_S ? "S = W^T: the paper's memory W [d_v, d_phi] to the kernels' state S [K, V] (exact)."
             : "W = S^T: the kernels' state S [K, V] to the paper's memory W [d_v, d_phi] (exact).");
  }
}

}  // namespace linattn::pyb
