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

/// copy=True: convert every given argument to a C-contiguous array of one float dtype.
inline void convert_all(std::vector<Arg>& args) {
  py::module_ np = py::module_::import("numpy");
  py::object target = np.attr("float64");
  for (const Arg& a : args)
    if (!a.obj.is_none()) {
      py::array x = np.attr("asarray")(a.obj);
      if (is_dtype(x, py::dtype::of<float>())) target = np.attr("float32");
      break;
    }
  for (Arg& a : args)
    if (!a.obj.is_none()) a.obj = np.attr("ascontiguousarray")(a.obj, py::arg("dtype") = target);
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
  py::array a = py::module_::import("numpy").attr("asarray")(cu);
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    fail(fn, "cu_seqlens", "integer offsets (fla's cu_seqlens)", describe(a));
  if (a.ndim() != 1 || a.shape(0) < 2)
    fail(fn, "cu_seqlens", "a 1-D sequence of at least 2 offsets", describe(a));
  py::array_t<long long, py::array::c_style | py::array::forcecast> c(a);
  return std::vector<index_t>(c.data(), c.data() + c.size());
}

}  // namespace linattn::pyb
