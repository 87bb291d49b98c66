// optimized/cuda/v2_tensorcore.cu -- rung 2 (placeholder while it is written): supports nothing.
#include "optimized/cuda/versions.cuh"

namespace linattn::cuda::detail {
bool v2_supports(const Call&, std::string* why) {
  if (why) *why = "v2 is not written yet";
  return false;
}
std::size_t v2_workspace_bytes(const KParams&) { return 0; }
void v2_launch(Call) {}
}  // namespace linattn::cuda::detail
