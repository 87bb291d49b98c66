// notebooks_bindings/src/module.cpp -- the extension module linattn._core: registers every part
// of the bindings and maps linattn::Error (bad input) to Python's ValueError, as linattn.Error.
#include "bindings.hpp"

PYBIND11_MODULE(_core, m) {
  namespace py = pybind11;
  m.doc() = "linattn._core: C++ reference of linear attention (use the package linattn)";
  // linattn.Error subclasses ValueError and carries the C++ message (function, argument,
  // expected, actual).
  py::register_exception<linattn::Error>(m, "Error", PyExc_ValueError);
  linattn::pyb::bind_reference(m);
  linattn::pyb::bind_steps(m);
  linattn::pyb::bind_backward(m);
  linattn::pyb::bind_routing(m);
  linattn::pyb::bind_chunk(m);
#ifdef LINATTN_PY_CUDA
  linattn::pyb::bind_cuda(m);  // linattn.cuda (python/linattn/cuda.py) calls these
#else
  m.attr("cuda_built") = false;
#endif
#ifdef NDEBUG
  m.attr("build_type") = "release";
#else
  m.attr("build_type") = "debug";
#endif
}
