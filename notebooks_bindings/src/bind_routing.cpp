// notebooks_bindings/src/bind_routing.cpp -- Python bindings of cross-layer routing
// (reference/routing.hpp, Sec.4): layer kinds and the routable predecessor p(l), rho and
// rms_normalize, CLER's value-target injection (Eq.27) and CLER-H/CLVR's residual injection
// (Eq.29, full or low-rank P). The routed error itself is the trace's 'r' (paper_error) or
// 'written' (written_error); linattn.routed_error picks it in Python.
#include "bindings.hpp"

#include "reference/routing.hpp"

namespace linattn::pyb {

namespace {

std::vector<std::string> kind_names(const std::vector<ref::LayerKind>& k) {
  std::vector<std::string> s;
  for (ref::LayerKind x : k) s.emplace_back(ref::to_string(x));
  return s;
}

std::vector<ref::LayerKind> parse_kinds(const std::string& fn, const py::object& names) {
  if (PyUnicode_Check(names.ptr()) || !PySequence_Check(names.ptr()))
    type_fail(fn, "kinds", "a sequence of 'softmax' / 'linear'", names);
  std::vector<ref::LayerKind> k;
  size_t l = 0;
  for (const py::handle x : names) {
    if (!PyUnicode_Check(x.ptr())) type_fail(fn, "kinds", "'softmax' or 'linear' at layer " + std::to_string(l), x);
    const std::string name = x.cast<std::string>();
    if (name == "softmax") k.push_back(ref::LayerKind::softmax);
    else if (name == "linear") k.push_back(ref::LayerKind::linear);
    else fail(fn, "kinds", "'softmax' or 'linear'", "'" + name + "' at layer " + std::to_string(l));
    ++l;
  }
  return k;
}

/// rho's kind, from the argument `arg` ('kind' of rho, 'rho' of cler_inject).
ref::Rho parse_rho(const std::string& fn, const std::string& arg, const py::object& o) {
  const std::string r = text(fn, arg, o);
  if (r == "identity") return ref::Rho::identity;
  if (r == "rms_norm") return ref::Rho::rms_norm;
  fail(fn, arg, "'identity' or 'rms_norm'", "'" + r + "'");
}

/// A layer count L: an integer, at most 2^20 layers (a list of that many names is already large).
index_t layers(const std::string& fn, const py::object& L) {
  return integer(fn, "L", L, std::numeric_limits<index_t>::min(), index_t(1) << 20);
}

/// rms_normalize's input (rank >= 1) and eps (finite, > 0) checked under the caller's names before the
/// reference sees them: rho and cler_inject call it, and a 0-D array is not "empty".
template <class T>
T rms_args(const std::string& fn, const std::string& xname, const Tensor<T>& x, double eps) {
  if (x.defined() && x.dim() == 0) fail(fn, xname, "an array of rank >= 1", "a 0-D array");
  if (!(std::isfinite(eps) && eps > 0)) fail(fn, "eps", "a finite value > 0", num_str(eps));
  return narrow<T>(fn, "eps", eps, false);
}

template <class Body>
py::object dispatch(const std::string& fn, std::vector<Arg> a, const py::object& copy, Body&& body) {
  if (flag(fn, "copy", copy)) convert_all(fn, a);
  if (common_dtype(fn, a) == DType::f64) return body(double{}, a);
  return body(float{}, a);
}

}  // namespace

void bind_routing(py::module_& m) {
  using namespace py::literals;

  m.def("hybrid_layer_kinds", [](const py::object& L) {
          return kind_names(ref::hybrid_layer_kinds(layers("hybrid_layer_kinds", L)));
        }, "L"_a,
        "Layer kinds of a hybrid stack (SPEC section 5): layer i is 'softmax' iff (i + 1) % 3 == 0\n"
        "(2 linear : 1 softmax; erratum 4).");
  m.def("pure_layer_kinds", [](const py::object& L) {
          return kind_names(ref::pure_layer_kinds(layers("pure_layer_kinds", L)));
        }, "L"_a,
        "Layer kinds of a pure stack: every layer 'linear'.");
  m.def("dense_layer_kinds", [](const py::object& L) {
          return kind_names(ref::dense_layer_kinds(layers("dense_layer_kinds", L)));
        }, "L"_a,
        "Layer kinds of a dense stack: every layer 'softmax'.");
  m.def(
      "routable_predecessor",
      [](const py::object& kinds) {
        return ref::routable_predecessor(parse_kinds("routable_predecessor", kinds));
      },
      "kinds"_a,
      "p(l) of Sec.4.2 for every layer: the nearest lower 'linear' layer, -1 if none. Softmax layers\n"
      "are skipped and do not reset the carried signal.");

  m.def(
      "rms_normalize",
      [](py::object x, const py::object& eps_, const py::object& copy) {
        const std::string fn = "rms_normalize";
        const double eps = real(fn, "eps", eps_);
        return dispatch(fn, {{"x", x}}, copy, [&]<class T>(T, std::vector<Arg>& a) -> py::object {
          const Tensor<T> tx = borrow<T>(fn, a[0]);
          return to_numpy(ref::rms_normalize(tx, rms_args<T>(fn, "x", tx, eps)));
        });
      },
      "x"_a, py::kw_only(), "eps"_a = 1e-6, "copy"_a = false,
      "x / sqrt(mean(x^2) + eps) over the last dimension (no learned weight).");

  m.def(
      "rho",
      [](py::object x, const py::object& kind_, const py::object& eps_, const py::object& copy) {
        const std::string fn = "rho";
        const ref::Rho kind = parse_rho(fn, "kind", kind_);
        const double eps = real(fn, "eps", eps_);
        return dispatch(fn, {{"x", x}}, copy, [&]<class T>(T, std::vector<Arg>& a) -> py::object {
          const Tensor<T> tx = borrow<T>(fn, a[0]);
          const T e = kind == ref::Rho::rms_norm ? rms_args<T>(fn, "x", tx, eps) : T(1e-6);  // eps unused by identity
          return to_numpy(ref::rho(kind, tx, e));
        });
      },
      "x"_a, "kind"_a = "identity", py::kw_only(), "eps"_a = 1e-6, "copy"_a = false,
      "rho of Eq.27: 'identity' (the paper's setting; a copy) or 'rms_norm' per token and head.");

  m.def(
      "cler_inject",
      [](py::object v, py::object r_prev, const py::object& Gamma_, const py::object& rho_, const py::object& eps_,
         const py::object& copy) {
        const std::string fn = "cler_inject";
        const double Gamma = real(fn, "Gamma", Gamma_);
        const ref::Rho rho = parse_rho(fn, "rho", rho_);
        const double eps = real(fn, "eps", eps_);
        return dispatch(fn, {{"v", v}, {"r_prev", r_prev}}, copy,
                        [&]<class T>(T, std::vector<Arg>& a) -> py::object {
                          const Tensor<T> tv = borrow<T>(fn, a[0]), tr = borrow<T>(fn, a[1]);
                          const T e = rho == ref::Rho::rms_norm ? rms_args<T>(fn, "r_prev", tr, eps) : T(1e-6);
                          return to_numpy(ref::cler_inject(tv, tr, narrow<T>(fn, "Gamma", Gamma), rho, e));
                        });
      },
      "v"_a, "r_prev"_a, "Gamma"_a, py::kw_only(), "rho"_a = "identity", "eps"_a = 1e-6, "copy"_a = false,
      "CLER, Eq.27: v~ = v + Gamma rho(r_prev) for every token and head; v, r_prev [B, T, H, V].\n"
      "The receiving layer then computes its own error r = v~ - v_bar (Eq.28) by running its\n"
      "recurrence on v~ (return_trace=True).");

  m.def(
      "residual_inject",
      [](py::object h, py::object s, py::object P, py::object U, py::object D, const py::object& copy) {
        const std::string fn = "residual_inject";
        const bool full = !P.is_none();
        if (full == (!U.is_none() || !D.is_none()))
          throw py::value_error(fn + ": expected either P (full) or U and D (low rank), not " +
                                std::string(full ? "both" : "neither"));
        return dispatch(fn, {{"h", h}, {"s", s}, {"P", P}, {"U", U}, {"D", D}}, copy,
                        [&]<class T>(T, std::vector<Arg>& a) -> py::object {
                          Tensor<T> th = borrow<T>(fn, a[0]), ts = borrow<T>(fn, a[1]);
                          if (full) return to_numpy(ref::residual_inject(th, ts, borrow<T>(fn, a[2])));
                          return to_numpy(ref::residual_inject(th, ts, borrow<T>(fn, a[3]), borrow<T>(fn, a[4])));
                        });
      },
      "h"_a, "s"_a, "P"_a = py::none(), py::kw_only(), "U"_a = py::none(), "D"_a = py::none(),
      "copy"_a = false,
      "CLER-H (s = r) and CLVR (s = v), Eq.29: h + P s for every token. h [B, T, d_model],\n"
      "s [B, T, H, V] flattened per token head-major (entry h*V + j), P [d_model, H*V]; or low rank\n"
      "P = U D with U [d_model, r], D [r, H*V] (P never formed).");
}

}  // namespace linattn::pyb
