// proofs_tests/catch_main.cpp -- the one main() of every test executable.
//
// Seeds: RapidCheck reads RC_PARAMS. If it is unset we fix it (seed 20261129), so CI is
// reproducible. To rerun with another seed:      RC_PARAMS="seed=42" ctest --preset release
// with a random seed:                           RC_PARAMS="seed=$RANDOM" ctest --preset release
// with more cases:                              RC_PARAMS="seed=7 max_success=1000" ./build/release/proofs_tests/test_reductions
// A failing property prints the shrunk counterexample and the seed that reproduces it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

int main(int argc, char* argv[]) {
  if (std::getenv("RC_PARAMS") == nullptr) setenv("RC_PARAMS", "seed=20261129", 0);
  return Catch::Session().run(argc, argv);
}
