// proofs_tests/cuda_test_common.hpp -- what every CUDA test executable (test_cuda_forward.cu,
// test_cuda_backward.cu, test_cuda_saved.cu) needs first: whether a CUDA device can be used, and
// SKIP_WITHOUT_GPU(), which ends a GPU test case with a WARN saying why when none can (so CPU-only
// CI builds and runs these executables and they skip cleanly); error_of, the message of the Error a
// call throws.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "optimized/cuda/chunk_cuda.hpp"

namespace linattn::testing {

/// True when a CUDA device can be used (asked once per process); otherwise `why` says what is missing.
inline bool gpu_ok(std::string& why) {
  static std::string reason;
  static const bool ok = linattn::cuda::device_available(&reason);
  why = reason;
  return ok;
}

/// The message of the linattn::Error that `call` throws ("no error" when it throws none): what the
/// bad-argument and overflow tests match their expectations against.
template <class F>
std::string error_of(F&& call) {
  try {
    call();
  } catch (const linattn::Error& e) {
    return e.what();
  }
  return "no error";
}

/// The current device's SM count (for tests whose cases are sized to it; call after SKIP_WITHOUT_GPU).
inline int device_sm_count() {
  int dev = 0, sms = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess);
  return sms;
}

}  // namespace linattn::testing

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    std::string why_;                                                       \
    if (!linattn::testing::gpu_ok(why_)) {                                \
      WARN("no CUDA device: " << why_ << " -- this CUDA test is skipped");  \
      return;                                                               \
    }                                                                       \
  } while (0)
