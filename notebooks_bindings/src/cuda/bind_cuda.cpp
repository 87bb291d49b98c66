// notebooks_bindings/src/cuda/bind_cuda.cpp -- Python bindings of the CUDA chunked kernels
// (optimized/cuda/chunk_cuda.hpp): the forward and the backward of DeltaNet, GDN, KDA and GDN2 on
// host NumPy arrays (copied to the GPU and back on every call; not a fast path). Compiled only in
// the opt-in build LINATTN_PY_CUDA=ON (see ../../CMakeLists.txt); the Python face is linattn.cuda
// (python/linattn/cuda.py), which checks that a device is there before calling these.
#include "bindings.hpp"

#include "optimized/cuda/chunk_cuda.hpp"

namespace linattn::pyb {

using ref::Op;

namespace {

Op parse_op(const std::string& fn, const std::string& name) {
  for (Op op : {Op::delta_rule, Op::gated_delta_rule, Op::kda, Op::gdn2})
    if (name == ref::op_name(op)) return op;
  fail(fn, "op", "one of 'delta_rule', 'gated_delta_rule', 'kda', 'gdn2'", "'" + name + "'");
}

cuda::DType parse_dtype(const std::string& fn, const char* arg, const std::string& name) {
  if (name == "float32") return cuda::DType::f32;
  if (name == "bfloat16") return cuda::DType::bf16;
  fail(fn, arg, "'float32' or 'bfloat16'", "'" + name + "'");
}

cuda::Version parse_version(const std::string& fn, const std::string& name) {
  for (cuda::Version v : {cuda::Version::best, cuda::Version::v1_simple,
                          cuda::Version::v2_tensorcore, cuda::Version::v3_async, cuda::Version::v4_levels,
                          cuda::Version::v5_split, cuda::Version::v6_lean, cuda::Version::v7_overlap,
                          cuda::Version::v8_wgmma, cuda::Version::v9_lean_overlap,
                          cuda::Version::v10_pipeline})
    if (name == cuda::version_name(v)) return v;
  fail(fn, "version",
       "one of 'best', 'v1_simple', 'v2_tensorcore', 'v3_async', 'v4_levels', 'v5_split', 'v6_lean', 'v7_overlap', "
       "'v8_wgmma', 'v9_lean_overlap', 'v10_pipeline'",
       "'" + name + "'");
}

cuda::BwdVersion parse_bwd_version(const std::string& fn, const std::string& name) {
  for (cuda::BwdVersion v : {cuda::BwdVersion::best, cuda::BwdVersion::v1_simple, cuda::BwdVersion::v2_tensorcore,
                             cuda::BwdVersion::v3_async, cuda::BwdVersion::v4_tc_tail,
                             cuda::BwdVersion::v5_levels_front, cuda::BwdVersion::v6_tc_b9,
                             cuda::BwdVersion::v7_rowbase, cuda::BwdVersion::v8_wide,
                             cuda::BwdVersion::v9_noextras, cuda::BwdVersion::v10_split,
                             cuda::BwdVersion::v11_wyfast,
                             cuda::BwdVersion::v12_g1slab, cuda::BwdVersion::v13_g1g2, cuda::BwdVersion::v14_pchan,
                             cuda::BwdVersion::v15_hionly, cuda::BwdVersion::v16_b9one,
                             cuda::BwdVersion::v17_hybrid, cuda::BwdVersion::v18_lean,
                             cuda::BwdVersion::v19_dsbf16, cuda::BwdVersion::v20_dvbf16,
                             cuda::BwdVersion::v21_duvsmem, cuda::BwdVersion::v22_kq8,
                             cuda::BwdVersion::v23_dsone, cuda::BwdVersion::v24_dswide,
                             cuda::BwdVersion::v25_g1async, cuda::BwdVersion::v26_wyasync,
                             cuda::BwdVersion::v27_dvplanes, cuda::BwdVersion::v28_sbf16,
                             cuda::BwdVersion::v29_b1hi, cuda::BwdVersion::v30_dsw2,
                             cuda::BwdVersion::v31_dkbf16, cuda::BwdVersion::v32_g1stage,
                             cuda::BwdVersion::v33_g2stage})
    if (name == cuda::bwd_version_name(v)) return v;
  fail(fn, "version",
       "one of 'best', 'bwd_v1_simple', 'bwd_v2_tensorcore', 'bwd_v3_async', 'bwd_v4_tc_tail', "
       "'bwd_v5_levels_front', 'bwd_v6_tc_b9', 'bwd_v7_rowbase', 'bwd_v8_wide', 'bwd_v9_noextras', "
       "'bwd_v10_split', 'bwd_v11_wyfast', 'bwd_v12_g1slab', 'bwd_v13_g1g2', 'bwd_v14_pchan', 'bwd_v15_hionly', "
       "'bwd_v16_b9one', 'bwd_v17_hybrid', 'bwd_v18_lean', 'bwd_v19_dsbf16', 'bwd_v20_dvbf16', 'bwd_v21_duvsmem', 'bwd_v22_kq8', 'bwd_v23_dsone', "
       "'bwd_v24_dswide', 'bwd_v25_g1async', 'bwd_v26_wyasync', 'bwd_v27_dvplanes', 'bwd_v28_sbf16', 'bwd_v29_b1hi', 'bwd_v30_dsw2', "
       "'bwd_v31_dkbf16', 'bwd_v32_g1stage', 'bwd_v33_g2stage'",
       "'" + name + "'");
}

/// The kernels take float32 host arrays: check that every given array is a float32 ndarray, or
/// with copy=True convert every one to a C-contiguous float32 array.
void require_float32(const std::string& fn, std::vector<Arg>& a, bool copy) {
  if (copy) {
    py::module_ np = py::module_::import("numpy");
    for (Arg& x : a)
      if (!x.obj.is_none())
        x.obj = np.attr("ascontiguousarray")(x.obj, py::arg("dtype") = np.attr("float32"));
  }
  if (common_dtype(fn, a) != DType::f32) {
    const Arg* first = nullptr;
    for (const Arg& x : a)
      if (!x.obj.is_none()) {
        first = &x;
        break;
      }
    fail(fn, first ? first->name : "q",
         "float32 arrays (the CUDA kernels read float32, or round it to bfloat16 with "
         "dtype='bfloat16'; pass copy=True to convert)",
         describe(first ? first->obj : py::none()));
  }
}

}  // namespace

void bind_cuda(py::module_& m) {
  using namespace py::literals;
  m.attr("cuda_built") = true;
  m.def(
      "_cuda_device_available",
      []() {
        std::string why;
        const bool ok = cuda::device_available(&why);
        return py::make_tuple(ok, why);
      },
      "(True, '') when a CUDA device the kernels were built for (sm_90a) can be used, else "
      "(False, why).");

  m.def(
      "_cuda_chunk_forward",
      [](const std::string& op_name, py::object q, py::object k, py::object v, py::object g,
         py::object beta, py::object b, py::object w, const py::object& scale,
         py::object initial_state, const py::object& output_final_state, py::object cu_seqlens,
         const py::object& l2, const py::object& copy, const std::string& dtype,
         const std::string& gate_dtype, const std::string& version) -> py::tuple {
        const std::string fn = "linattn.cuda.chunk_" + op_name;
        const Op op = parse_op(fn, op_name);
        // Scalars checked as the caller gave them (common.hpp), as the CPU functions do.
        RecurrentCall c = make_call(fn, op, q, k, v, g, beta, b, w, initial_state, scale, output_final_state,
                                    cu_seqlens, l2, py::bool_(false), copy);
        std::vector<Arg> a = call_args(c);
        require_float32(fn, a, c.copy);
        auto t = make_typed<float>(c, a, ref::RecurrentOptions<float>{});
        const cuda::DType dt = parse_dtype(fn, "dtype", dtype);
        const cuda::DType gdt = parse_dtype(fn, "gate_dtype", gate_dtype);
        const cuda::Version ver = parse_version(fn, version);
        ref::RecurrentOutput<float> out;
        {
          py::gil_scoped_release nogil;
          out = cuda::chunk_forward(op, t.q, t.k, t.v, t.gates, t.opt, dt, gdt, ver);
        }
        return py::make_tuple(to_numpy(out.o), to_numpy(out.final_state));
      },
      "op"_a, "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, "b"_a, "w"_a, "scale"_a, "initial_state"_a,
      "output_final_state"_a, "cu_seqlens"_a, "use_qk_l2norm_in_kernel"_a, "copy"_a, "dtype"_a,
      "gate_dtype"_a, "version"_a, "The CUDA chunked forward (use linattn.cuda.chunk_<op>).");

  m.def(
      "_cuda_chunk_backward",
      [](const std::string& op_name, py::object q, py::object k, py::object v, py::object g,
         py::object beta, py::object b, py::object w, py::object do_, py::object dht,
         const py::object& scale, py::object initial_state, py::object cu_seqlens, const py::object& l2,
         const py::object& copy, const std::string& dtype, const std::string& gate_dtype,
         const std::string& version) -> py::dict {
        const std::string fn = "linattn.cuda.chunk_backward";
        const Op op = parse_op(fn, op_name);
        RecurrentCall c = make_call(fn, op, q, k, v, g, beta, b, w, initial_state, scale, py::bool_(false),
                                    cu_seqlens, l2, py::bool_(false), copy);
        c.do_ = do_;
        c.dht = dht;
        std::vector<Arg> a = call_args(c);
        require_float32(fn, a, c.copy);
        auto t = make_typed<float>(c, a, ref::RecurrentOptions<float>{});
        if (!t.do_.defined()) fail(fn, "do", "an array of shape [B, T, H, V] (dL/do)", "None");
        const cuda::DType dt = parse_dtype(fn, "dtype", dtype);
        const cuda::DType gdt = parse_dtype(fn, "gate_dtype", gate_dtype);
        const cuda::BwdVersion ver = parse_bwd_version(fn, version);
        ref::RecurrentGrads<float> gr;
        {
          py::gil_scoped_release nogil;
          gr = cuda::chunk_backward(op, t.q, t.k, t.v, t.gates, t.do_, t.dht, t.opt, dt, gdt, ver);
        }
        return grads_dict(gr);
      },
      "op"_a, "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, "b"_a, "w"_a, "do"_a, "dht"_a, "scale"_a,
      "initial_state"_a, "cu_seqlens"_a, "use_qk_l2norm_in_kernel"_a, "copy"_a, "dtype"_a,
      "gate_dtype"_a, "version"_a, "The CUDA chunked backward (use linattn.cuda.chunk_backward).");
}

}  // namespace linattn::pyb
