// optimized/cuda/bench/capi.cu -- a C ABI over linattn::cuda::forward_device and backward_device,
// built as the shared library liblinattn_cuda_capi.so, so that the Python benchmark drivers
// (bench_forward.py, bench_backward.py) can call
// the kernels with ctypes on the very tensors it hands to flash-linear-attention and PyTorch; also the
// saved forward (linattn_cuda_forward_save, linattn_cuda_backward_saved, linattn_cuda_saved_free).
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "optimized/cuda/chunk_cuda.hpp"
#include "optimized/cuda/versions.cuh"  // detail::v10_last_segments, v10_last_cluster

extern "C" {

/// Mirrors linattn::cuda::DeviceArgs field by field (see bench_forward.py's ctypes Structure).
struct LinattnArgs {
  std::int64_t op, dtype, gate_dtype;  // ref::Op, DType, DType as integers
  std::int64_t B, T, H, K, V;
  const void *q, *k, *v, *g, *beta, *b, *w;
  void* o;
  double scale;
  const float* initial_state;
  float* final_state;
  const std::int64_t* cu_seqlens;  // host
  std::int64_t num_seqs;
  void* stream;
};

/// Returns 0 on success; otherwise 1 and the message in err.
int linattn_cuda_forward(const LinattnArgs* a, int version, char* err, int errlen) {
  try {
    linattn::cuda::DeviceArgs d;
    d.op = static_cast<linattn::ref::Op>(a->op);
    d.dtype = static_cast<linattn::cuda::DType>(a->dtype);
    d.gate_dtype = static_cast<linattn::cuda::DType>(a->gate_dtype);
    d.B = a->B, d.T = a->T, d.H = a->H, d.K = a->K, d.V = a->V;
    d.q = a->q, d.k = a->k, d.v = a->v, d.g = a->g, d.beta = a->beta, d.b = a->b, d.w = a->w;
    d.o = a->o;
    d.scale = static_cast<float>(a->scale);
    d.initial_state = a->initial_state;
    d.final_state = a->final_state;
    d.cu_seqlens = a->cu_seqlens;
    d.num_seqs = a->num_seqs;
    d.stream = a->stream;
    linattn::cuda::forward_device(d, static_cast<linattn::cuda::Version>(version));
    return 0;
  } catch (const std::exception& e) {
    if (err && errlen > 0) std::snprintf(err, std::size_t(errlen), "%s", e.what());
    return 1;
  }
}

/// Mirrors linattn::cuda::DeviceBwdArgs (see bench_backward.py's ctypes Structure).
struct LinattnBwdArgs {
  LinattnArgs fwd;
  const void* do_;
  const float* dht;
  void *dq, *dk, *dv, *dg, *dbeta, *db, *dw;
  float* dh0;
};

namespace {
linattn::cuda::DeviceArgs device_args(const LinattnArgs* a) {
  linattn::cuda::DeviceArgs d;
  d.op = static_cast<linattn::ref::Op>(a->op);
  d.dtype = static_cast<linattn::cuda::DType>(a->dtype);
  d.gate_dtype = static_cast<linattn::cuda::DType>(a->gate_dtype);
  d.B = a->B, d.T = a->T, d.H = a->H, d.K = a->K, d.V = a->V;
  d.q = a->q, d.k = a->k, d.v = a->v, d.g = a->g, d.beta = a->beta, d.b = a->b, d.w = a->w;
  d.o = a->o;
  d.scale = static_cast<float>(a->scale);
  d.initial_state = a->initial_state;
  d.final_state = a->final_state;
  d.cu_seqlens = a->cu_seqlens;
  d.num_seqs = a->num_seqs;
  d.stream = a->stream;
  return d;
}
}  // namespace

/// Returns 0 on success; otherwise 1 and the message in err.
int linattn_cuda_backward(const LinattnBwdArgs* a, int version, char* err, int errlen) {
  try {
    linattn::cuda::DeviceBwdArgs d;
    d.fwd = device_args(&a->fwd);
    d.do_ = a->do_, d.dht = a->dht;
    d.dq = a->dq, d.dk = a->dk, d.dv = a->dv;
    d.dg = a->dg, d.dbeta = a->dbeta, d.db = a->db, d.dw = a->dw;
    d.dh0 = a->dh0;
    linattn::cuda::backward_device(d, static_cast<linattn::cuda::BwdVersion>(version));
    return 0;
  } catch (const std::exception& e) {
    if (err && errlen > 0) std::snprintf(err, std::size_t(errlen), "%s", e.what());
    return 1;
  }
}

// Saved forward (issue 6; chunk_cuda.hpp, SavedForward): a training forward that keeps forward rung
// 4's intra outputs and A, and a backward that reads them instead of recomputing them. The handle is
// an opaque linattn::cuda::SavedForward* owned by the caller (linattn_cuda_saved_free, once). The
// forward and the backward may run on different streams: the handle's events order them
// (chunk_cuda.hpp, SavedForward).

/// forward_device(args, version, saved): *saved null makes a new SavedForward (stored in *saved);
/// otherwise the one there is refilled (its memory reused when large enough). Returns 0 on success;
/// otherwise 1 and the message in err (a new object is then freed and *saved left null).
static int forward_save(const char* fn, const LinattnArgs* a, int version, void** saved, bool states, char* err,
                        int errlen, bool states_bf16 = false) {
  linattn::cuda::SavedForward* fresh = nullptr;
  try {
    if (!saved)
      throw std::invalid_argument(std::string(fn) + ": argument 'saved' expected a pointer to a handle but got null");
    auto* s = static_cast<linattn::cuda::SavedForward*>(*saved);
    if (!s) s = fresh = new linattn::cuda::SavedForward;
    linattn::cuda::forward_device(device_args(a), static_cast<linattn::cuda::Version>(version), s, states, states_bf16);
    *saved = s;
    return 0;
  } catch (const std::exception& e) {
    delete fresh;
    if (err && errlen > 0) std::snprintf(err, std::size_t(errlen), "%s", e.what());
    return 1;
  }
}

int linattn_cuda_forward_save(const LinattnArgs* a, int version, void** saved, char* err, int errlen) {
  return forward_save("linattn_cuda_forward_save", a, version, saved, false, err, errlen);
}

/// The same with states (forward_device(args, version, saved, true); chunk_cuda.hpp, SavedForward,
/// "With states"): the saved backward then skips its states kernel and A's copy. Much more memory
/// (linattn_cuda_saved_bytes).
int linattn_cuda_forward_save_states(const LinattnArgs* a, int version, void** saved, char* err, int errlen) {
  return forward_save("linattn_cuda_forward_save_states", a, version, saved, true, err, errlen);
}

/// The same with the states kept as bf16 where backward rung 28 reads them (forward_device(args, version, saved, true,
/// true); chunk_cuda.hpp): only rung 28 (bwd_v28_sbf16) then reads the handle.
int linattn_cuda_forward_save_states_bf16(const LinattnArgs* a, int version, void** saved, char* err, int errlen) {
  return forward_save("linattn_cuda_forward_save_states_bf16", a, version, saved, true, err, errlen, true);
}

/// backward_device(args, version, saved) with the handle linattn_cuda_forward_save filled for this
/// call. Returns 0 on success; otherwise 1 and the message in err (a null handle: a linattn::Error
/// naming 'saved').
int linattn_cuda_backward_saved(const LinattnBwdArgs* a, int version, const void* saved, char* err, int errlen) {
  try {
    linattn::cuda::DeviceBwdArgs d;
    d.fwd = device_args(&a->fwd);
    d.do_ = a->do_, d.dht = a->dht;
    d.dq = a->dq, d.dk = a->dk, d.dv = a->dv;
    d.dg = a->dg, d.dbeta = a->dbeta, d.db = a->db, d.dw = a->dw;
    d.dh0 = a->dh0;
    if (!saved)
      linattn::fail("linattn_cuda_backward_saved", "saved", "a handle filled by linattn_cuda_forward_save", "a null handle");
    linattn::cuda::backward_device(d, static_cast<linattn::cuda::BwdVersion>(version),
                                   static_cast<const linattn::cuda::SavedForward*>(saved));
    return 0;
  } catch (const std::exception& e) {
    if (err && errlen > 0) std::snprintf(err, std::size_t(errlen), "%s", e.what());
    return 1;
  }
}

/// Device bytes a handle holds (0 for null).
std::int64_t linattn_cuda_saved_bytes(const void* saved) {
  return saved ? std::int64_t(static_cast<const linattn::cuda::SavedForward*>(saved)->bytes()) : 0;
}

/// Frees a handle of linattn_cuda_forward_save, its device memory and its events (null: nothing).
/// Free each handle once: it is invalid afterwards (a second free is undefined behaviour).
void linattn_cuda_saved_free(void* saved) { delete static_cast<linattn::cuda::SavedForward*>(saved); }

/// What the last forward call did in rung 10 (session 17): its segments (0: it did not pipeline), and the state
/// kernel's cluster size in `cluster` (1: no cluster; 0: not pipelined). Not thread-safe (a benchmark probe).
int linattn_cuda_v10_last(int* cluster) {
  if (cluster) *cluster = linattn::cuda::detail::v10_last_cluster();
  return linattn::cuda::detail::v10_last_segments();
}

const char* linattn_cuda_version_name(int version) {
  return linattn::cuda::version_name(static_cast<linattn::cuda::Version>(version));
}
}
