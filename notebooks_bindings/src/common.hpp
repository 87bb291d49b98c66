// notebooks_bindings/src/common.hpp -- NumPy <-> linattn::Tensor plumbing shared by the bindings.
//
// Policy (docs/python.md): inputs are BORROWED, never silently copied. An input array must be a
// numpy.ndarray, C-contiguous, aligned, of dtype float32 or float64 (native byte order), and all
// float inputs of one call must share one dtype; otherwise ValueError names the argument(s), what
// was expected and what came. With copy=True the caller allows a conversion instead: every input
// is passed through numpy.ascontiguousarray(x, dtype) with dtype = float32 if 'q' (the first
// array) is float32, else float64. Outputs are fresh C++ tensors handed to NumPy without a copy
// (a capsule owns the storage).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reference/check.hpp"
#include "reference/tensor.hpp"

namespace linattn::pyb {

namespace py = pybind11;

enum class DType { f32, f64 };

/// One named array argument of a call (None = not given).
struct Arg {
  std::string name;
  py::object obj;
};

inline std::string describe(const py::handle& o) {
  if (o.is_none()) return "None";
  if (py::isinstance<py::array>(o)) {
    auto a = py::reinterpret_borrow<py::array>(o);
    std::vector<index_t> s(a.shape(), a.shape() + a.ndim());
    return "an array of dtype " + py::str(a.dtype()).cast<std::string>() + " and shape " + shape_str(s);
  }
  return "an object of type " + py::str(py::type::of(o).attr("__name__")).cast<std::string>();
}

inline bool is_dtype(const py::array& a, const py::dtype& d) {
  // Same kind and size and native byte order ('=' or '|'), so the bytes can be read as T.
  const char bo = a.dtype().byteorder();
  return a.dtype().kind() == d.kind() && a.dtype().itemsize() == d.itemsize() && (bo == '=' || bo == '|');
}

/// The index [i, j, ...] of flat position `flat` in `shape` (for messages).
inline std::string index_of(const py::array& a, py::ssize_t flat) {
  std::vector<index_t> idx(a.ndim());
  for (py::ssize_t d = a.ndim() - 1; d >= 0; --d) idx[d] = flat % a.shape(d), flat /= a.shape(d);
  return shape_str(idx);
}

/// copy=True: convert every given argument to a C-contiguous array of one float dtype. A value
/// that the conversion would turn into +-inf (finite, but beyond float32's range) and a complex
/// array are refused, naming the argument; so is an argument numpy cannot convert.
inline void convert_all(const std::string& fn, std::vector<Arg>& args) {
  py::module_ np = py::module_::import("numpy");
  py::object target = np.attr("float64");
  for (const Arg& a : args)
    if (!a.obj.is_none()) {
      py::array x = np.attr("asarray")(a.obj);
      if (is_dtype(x, py::dtype::of<float>())) target = np.attr("float32");
      break;
    }
  const std::string tname = py::str(target.attr("__name__")).cast<std::string>();
  for (Arg& a : args) {
    if (a.obj.is_none()) continue;
    py::array src;
    try {
      src = np.attr("asarray")(a.obj);
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_ValueError) && !e.matches(PyExc_TypeError) && !e.matches(PyExc_OverflowError)) throw;
      fail(fn, a.name, "an array convertible to " + tname + " (copy=True)",
           describe(a.obj) + " (" + py::str(e.value()).cast<std::string>() + ")");
    }
    if (src.dtype().kind() == 'c')
      fail(fn, a.name, "real values (copy=True does not drop imaginary parts)", describe(src));
    py::dtype to = py::dtype::from_args(target);
    if (src.dtype().kind() == 'f' && src.dtype().itemsize() > to.itemsize()) {
      // A finite value beyond the target's range would become +-inf: refuse it, as given.
      py::array lost = np.attr("flatnonzero")(np.attr("logical_and")(
          np.attr("isfinite")(src), np.attr("greater")(np.attr("abs")(src), np.attr("finfo")(target).attr("max"))));
      if (lost.size() > 0) {
        const py::ssize_t i = lost.attr("item")(0).cast<py::ssize_t>();
        fail(fn, a.name, "values that fit " + tname + " (the dtype of the call, copy=True)",
             py::str(src.attr("ravel")().attr("__getitem__")(i)).cast<std::string>() + " at index " +
                 index_of(src, i));
      }
    }
    try {
      a.obj = np.attr("ascontiguousarray")(src, py::arg("dtype") = target);
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_ValueError) && !e.matches(PyExc_TypeError) && !e.matches(PyExc_OverflowError)) throw;
      fail(fn, a.name, "an array convertible to " + tname + " (copy=True)",
           describe(src) + " (" + py::str(e.value()).cast<std::string>() + ")");
    }
  }
}

// Scalar arguments. pybind11's own converters would coerce (True -> 1.0, 0.5 -> True) or print
// every argument on a mismatch, so the bindings take py::object and convert here: a wrong type is
// a TypeError, a value out of range a linattn::Error, each naming the function and the argument.

inline std::string type_name(const py::handle& o) {
  return py::str(py::type::of(o).attr("__name__")).cast<std::string>();
}

inline std::string repr_of(const py::handle& o) {
  std::string r = py::repr(o).cast<std::string>();
  return r.size() > 60 ? r.substr(0, 57) + "..." : r;
}

[[noreturn]] inline void type_fail(const std::string& fn, const std::string& arg, const std::string& expected,
                                   const py::handle& got) {
  throw py::type_error(fn + ": argument '" + arg + "' expected " + expected + " but got " + repr_of(got) + " (" +
                       type_name(got) + ")");
}

inline bool is_bool(const py::handle& o) {
  return PyBool_Check(o.ptr()) || py::isinstance(o, py::module_::import("numpy").attr("bool_"));
}

/// A flag: Python bool or numpy.bool_ only (0.5 or 1 are not flags).
inline bool flag(const std::string& fn, const std::string& arg, const py::handle& o) {
  if (!is_bool(o)) type_fail(fn, arg, "a bool", o);
  return PyObject_IsTrue(o.ptr()) == 1;
}

/// A real number (int, float or a NumPy real scalar; not a bool) as a double.
inline double real(const std::string& fn, const std::string& arg, const py::handle& o) {
  if (is_bool(o) || PyUnicode_Check(o.ptr()) || PyComplex_Check(o.ptr()) ||
      (py::isinstance<py::array>(o) && py::reinterpret_borrow<py::array>(o).ndim() != 0))
    type_fail(fn, arg, "a real number", o);
  const double x = PyFloat_AsDouble(o.ptr());
  if (x == -1.0 && PyErr_Occurred()) {
    const bool overflow = PyErr_ExceptionMatches(PyExc_OverflowError);
    PyErr_Clear();
    if (overflow) fail(fn, arg, "a value that fits float64", repr_of(o));
    type_fail(fn, arg, "a real number", o);
  }
  return x;
}

inline std::optional<double> opt_real(const std::string& fn, const std::string& arg, const py::handle& o) {
  if (o.is_none()) return std::nullopt;
  return real(fn, arg, o);
}

/// A real number narrowed to the compute type T: a finite value beyond T's range is refused as given
/// (float32 holds |x| <= 3.4e38). A non-zero one that rounds to 0 is refused only where 0 itself is
/// invalid (zero_ok = false: eps); elsewhere it is 0 in T, as for the arrays (a decay of exp(-200)
/// in float32 is a legitimate forget).
template <class T>
T narrow(const std::string& fn, const std::string& arg, double x, bool zero_ok = true) {
  const std::string fits = std::string("a value that fits ") + (sizeof(T) == 4 ? "float32" : "float64") +
                           " (the dtype of the arrays";
  const std::string given = py::repr(py::float_(x)).cast<std::string>();  // shortest form, as Python prints it
  if (std::isfinite(x) && std::abs(x) > static_cast<double>(std::numeric_limits<T>::max())) {
    std::ostringstream max;
    max << std::setprecision(std::numeric_limits<T>::max_digits10) << std::numeric_limits<T>::max();
    fail(fn, arg, fits + "; magnitude at most " + max.str() + ")", given);
  }
  const T y = static_cast<T>(x);
  if (!zero_ok && x != 0 && y == 0) fail(fn, arg, fits + "; it rounds to 0 there)", given);
  return y;
}

/// An integer (int or NumPy integer; not a bool, not a float) in [lo, hi].
inline long long integer(const std::string& fn, const std::string& arg, const py::handle& o, long long lo,
                         long long hi) {
  if (is_bool(o) || !PyIndex_Check(o.ptr())) type_fail(fn, arg, "an integer", o);
  py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(o.ptr()));
  if (!i) throw py::error_already_set();
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0 || x < lo || x > hi)
    fail(fn, arg, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
         py::str(i).cast<std::string>());
  return x;
}

/// A str argument (an operator, feature-map or rho name).
inline std::string text(const std::string& fn, const std::string& arg, const py::handle& o) {
  if (!PyUnicode_Check(o.ptr())) type_fail(fn, arg, "a str", o);
  return o.cast<std::string>();
}

/// The one float dtype of a call. Every given argument must be a float32/float64 ndarray and all
/// must agree; otherwise ValueError naming the arguments.
inline DType common_dtype(const std::string& fn, const std::vector<Arg>& args) {
  const Arg* first = nullptr;
  DType dt = DType::f64;
  for (const Arg& a : args) {
    if (a.obj.is_none()) continue;
    if (!py::isinstance<py::array>(a.obj))
      throw py::value_error(fn + ": argument '" + a.name +
                            "' expected a numpy.ndarray of dtype float32 or float64 but got " +
                            describe(a.obj) + " (pass copy=True to allow a conversion)");
    auto arr = py::reinterpret_borrow<py::array>(a.obj);
    DType d;
    if (is_dtype(arr, py::dtype::of<double>())) d = DType::f64;
    else if (is_dtype(arr, py::dtype::of<float>())) d = DType::f32;
    else
      throw py::value_error(fn + ": argument '" + a.name +
                            "' expected dtype float32 or float64 (native byte order) but got " +
                            describe(a.obj) + " (pass copy=True to allow a conversion)");
    if (!first) {
      first = &a;
      dt = d;
    } else if (d != dt) {
      auto f = py::reinterpret_borrow<py::array>(first->obj);
      throw py::value_error(fn + ": arguments '" + first->name + "' (" +
                            py::str(f.dtype()).cast<std::string>() + ") and '" + a.name + "' (" +
                            py::str(arr.dtype()).cast<std::string>() +
                            ") have different dtypes; expected one dtype, float32 or float64, for "
                            "all arrays (pass copy=True to convert to the dtype of '" +
                            first->name + "')");
    }
  }
  return dt;
}

/// Borrow a checked ndarray as a Tensor<T> without copying (None -> undefined tensor). The array
/// is kept alive by the tensor; releasing it takes the GIL.
template <class T>
Tensor<T> borrow(const std::string& fn, const Arg& a) {
  if (a.obj.is_none()) return {};
  auto arr = py::reinterpret_borrow<py::array>(a.obj);
  if (!is_dtype(arr, py::dtype::of<T>()))  // common_dtype() has been called; this is a guard
    throw py::value_error(fn + ": argument '" + a.name + "' has the wrong dtype: " + describe(a.obj));
  const bool contiguous = (arr.flags() & py::array::c_style) != 0;
  const bool aligned = (arr.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0;
  if (!contiguous || !aligned) {
    std::vector<index_t> st(arr.strides(), arr.strides() + arr.ndim());
    throw py::value_error(fn + ": argument '" + a.name + "' expected a C-contiguous aligned array but got " +
                          describe(a.obj) + " with strides " + shape_str(st) + (aligned ? "" : " (unaligned)") +
                          " (linattn never copies silently: pass np.ascontiguousarray(" + a.name +
                          ") or copy=True)");
  }
  std::vector<index_t> shape(arr.shape(), arr.shape() + arr.ndim());
  auto* keep = new py::object(arr);
  std::shared_ptr<void> keep_alive(keep, [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  // The reference never writes its inputs, so read-only arrays are accepted.
  T* data = const_cast<T*>(static_cast<const T*>(arr.data()));
  return Tensor<T>::wrap(data, std::move(shape), std::move(keep_alive));
}

/// A 1-D argument as a std::vector<T> (the per-token steps take vectors; these are small copies).
template <class T>
std::vector<T> vec(const std::string& fn, const Arg& a) {
  Tensor<T> t = borrow<T>(fn, a);
  if (!t.defined()) fail(fn, a.name, "a 1-D array", "None");
  check_rank(fn, a.name, t, 1);
  return std::vector<T>(t.begin(), t.end());
}

/// Hand a tensor to NumPy without copying (undefined -> None).
template <class T>
py::object to_numpy(const Tensor<T>& t) {
  if (!t.defined()) return py::none();
  auto* holder = new Tensor<T>(t);
  py::capsule owner(holder, [](void* p) { delete static_cast<Tensor<T>*>(p); });
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  return py::array_t<T>(shape, t.data(), owner);
}

template <class T>
py::object to_numpy(const std::vector<T>& v) {
  return to_numpy(Tensor<T>::from({static_cast<index_t>(v.size())}, v));
}

/// fla's cu_seqlens: None, or a 1-D integer sequence of at least 2 offsets (a small copy).
inline std::vector<index_t> offsets(const std::string& fn, const py::object& cu) {
  if (cu.is_none()) return {};
  if (PyUnicode_Check(cu.ptr()) || PyBytes_Check(cu.ptr()))
    type_fail(fn, "cu_seqlens", "a 1-D sequence of integer offsets [0, ..., T]", cu);
  py::array a = py::module_::import("numpy").attr("asarray")(cu);
  if (a.size() == 0)  // [] comes as float64: say what is wrong with it
    fail(fn, "cu_seqlens", "a 1-D sequence of at least 2 offsets [0, ..., T]", "an empty sequence");
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    fail(fn, "cu_seqlens", "integer offsets (fla's cu_seqlens)", describe(a));
  if (a.ndim() != 1 || a.shape(0) < 2)
    fail(fn, "cu_seqlens", "a 1-D sequence of at least 2 offsets [0, ..., T]", describe(a));
  if (kind == 'u' && a.dtype().itemsize() >= 8) {  // uint64 beyond int64 would wrap: report it as given
    py::array_t<unsigned long long, py::array::c_style | py::array::forcecast> u(a);
    for (py::ssize_t i = 0; i < u.size(); ++i)
      if (u.data()[i] > static_cast<unsigned long long>(std::numeric_limits<long long>::max()))
        fail(fn, "cu_seqlens", "offsets that fit int64", std::to_string(u.data()[i]) + " at index " + std::to_string(i));
  }
  py::array_t<long long, py::array::c_style | py::array::forcecast> c(a);
  return std::vector<index_t>(c.data(), c.data() + c.size());
}

}  // namespace linattn::pyb
