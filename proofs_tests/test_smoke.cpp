#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>
#include "reference/recurrent.hpp"
#include "reference/softmax_attention.hpp"
#include "reference/linear_attention.hpp"
using namespace linattn;
TEST_CASE("DeltaNet worked example: prediction 2 target 5 beta 0.5 gives 3.5") {
  auto W = Tensor<double>::from({1, 1}, {2.0});
  ref::deltanet_step<double>(W, {1.0}, {5.0}, 0.5);
  REQUIRE(W(0, 0) == 3.5);
  rc::prop("x", [](int a) { RC_ASSERT(a == a); });
}
