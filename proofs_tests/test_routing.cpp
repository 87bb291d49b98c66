// proofs_tests/test_routing.cpp -- properties of cross-layer routing (reference/routing.hpp):
// the routable predecessor p(l) and the hybrid pattern, rho, the injections of Eqs.27-29, and the
// stack-level claims on the toy stack (zero initialisation is the baseline, CLER acts only above
// the first linear layer, v = r + v_bar in every linear layer, written error = beta r).
// Float64 identities hold to 1e-12 relative RMS (or exactly, where the maths adds an exact 0).
#include <rapidcheck/catch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <ostream>
#include <random>
#include <vector>

#include "generators.hpp"
#include "reference/routing.hpp"

using namespace linattn;
using namespace linattn::ref;
using Catch::Matchers::Contains;
using linattn::testing::compare;

namespace {

constexpr double kTol = 1e-12;  // float64 identities, relative RMS

Tensor<double> normal(std::mt19937_64& rng, std::vector<index_t> shape, double sd = 1.0) {
  return linattn::testing::detail::normal<double>(rng, std::move(shape), sd);
}

/// Same shape and bit-for-bit the same values.
bool identical(const Tensor<double>& a, const Tensor<double>& b) {
  if (a.shape() != b.shape()) return false;
  for (index_t i = 0; i < a.numel(); ++i)
    if (a.data()[i] != b.data()[i]) return false;
  return true;
}

/// The structure of one random toy-stack case.
struct StackCase {
  std::vector<LayerKind> kinds;
  index_t B = 1, T = 1, D = 1, H = 1, K = 1, V = 1;
  Host host = Host::gated_delta_rule;
  Rho rho = Rho::identity;
  RoutedError error = RoutedError::paper_error;
  std::uint64_t seed = 0;
};

std::ostream& operator<<(std::ostream& os, const StackCase& c) {
  os << "StackCase{kinds=";
  for (LayerKind k : c.kinds) os << (k == LayerKind::linear ? 'L' : 'S');
  return os << " B=" << c.B << " T=" << c.T << " d_model=" << c.D << " H=" << c.H << " K=" << c.K
            << " V=" << c.V << " host=" << (c.host == Host::delta_rule ? "DeltaNet" : "GDN")
            << " rho=" << to_string(c.rho) << " error=" << to_string(c.error) << " seed=" << c.seed
            << "}";
}

/// Hybrid, pure or arbitrary layer patterns; small dimensions (K != V often).
rc::Gen<StackCase> gen_stack_case(index_t max_L = 9) {
  return rc::gen::exec([max_L] {
    StackCase c;
    const index_t L = *rc::gen::inRange<index_t>(1, max_L + 1);
    switch (*rc::gen::inRange(0, 3)) {
      case 0: c.kinds = hybrid_layer_kinds(L); break;
      case 1: c.kinds = pure_layer_kinds(L); break;
      default:
        for (index_t l = 0; l < L; ++l)
          c.kinds.push_back(*rc::gen::arbitrary<bool>() ? LayerKind::linear : LayerKind::softmax);
    }
    c.B = *rc::gen::inRange<index_t>(1, 3);
    c.T = *rc::gen::inRange<index_t>(1, 13);
    c.D = *rc::gen::inRange<index_t>(1, 9);
    c.H = *rc::gen::inRange<index_t>(1, 3);
    c.K = *rc::gen::inRange<index_t>(1, 6);
    c.V = *rc::gen::inRange<index_t>(1, 6);
    c.host = *rc::gen::element(Host::gated_delta_rule, Host::delta_rule);
    c.rho = *rc::gen::element(Rho::identity, Rho::rms_norm);
    c.error = *rc::gen::element(RoutedError::paper_error, RoutedError::written_error);
    c.seed = *rc::gen::arbitrary<std::uint64_t>();
    return c;
  });
}

ToyStack<double> make_stack(const StackCase& c, Routing routing = Routing::none) {
  ToyStack<double> s = ToyStack<double>::random(c.kinds, c.D, c.H, c.K, c.V, c.seed, c.host);
  s.routing = routing;
  s.rho = c.rho;
  s.error = c.error;
  return s;
}

Tensor<double> make_h0(const StackCase& c) {
  std::mt19937_64 rng(c.seed ^ 0x9e3779b97f4a7c15ULL);
  return normal(rng, {c.B, c.T, c.D});
}

/// A Gamma away from 0: +-[0.25, 2].
double gen_nonzero_gamma() {
  const double mag = *rc::gen::inRange(25, 201) / 100.0;
  return *rc::gen::arbitrary<bool>() ? mag : -mag;
}

/// eps_i = sum_j P_ij s_j per token, written out with the head-major flattening (h, j) -> h*V + j.
Tensor<double> explicit_Ps(const Tensor<double>& P, const Tensor<double>& s) {
  const index_t B = s.size(0), T = s.size(1), H = s.size(2), V = s.size(3);
  Tensor<double> eps({B, T, P.size(0)});
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < T; ++t)
      for (index_t i = 0; i < P.size(0); ++i)
        for (index_t hh = 0; hh < H; ++hh)
          for (index_t j = 0; j < V; ++j) eps(b, t, i) += P(i, hh * V + j) * s(b, t, hh, j);
  return eps;
}

Tensor<double> plus(const Tensor<double>& a, const Tensor<double>& b) {
  Tensor<double> y = a.clone();
  for (index_t i = 0; i < y.numel(); ++i) y.data()[i] += b.data()[i];
  return y;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Layer kinds and p(l).
// ---------------------------------------------------------------------------------------------

TEST_CASE(
    "The routable predecessor is the nearest lower linear layer and softmax layers do not reset it") {
  rc::prop("p(l) equals a brute-force search and only softmax layers lie between p(l) and l", [] {
    const auto linear = *rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 2));
    std::vector<LayerKind> kinds;
    for (int lin : linear) kinds.push_back(lin ? LayerKind::linear : LayerKind::softmax);
    const std::vector<index_t> p = routable_predecessor(kinds);
    RC_ASSERT(p.size() == kinds.size());
    for (index_t l = 0; l < index_t(kinds.size()); ++l) {
      index_t want = -1;  // brute force: scan every lower layer, keep the highest linear one
      for (index_t j = 0; j < l; ++j)
        if (kinds[j] == LayerKind::linear) want = j;
      RC_ASSERT(p[l] == want);
      if (p[l] >= 0) RC_ASSERT(kinds[p[l]] == LayerKind::linear);
      for (index_t j = p[l] + 1; j < l; ++j) RC_ASSERT(kinds[j] == LayerKind::softmax);
    }
  });
  // By hand: hybrid(7) = L L S L L S L; the layer after each softmax routes from below it.
  CHECK(routable_predecessor(hybrid_layer_kinds(7)) == std::vector<index_t>{-1, 0, 1, 1, 3, 4, 4});
  CHECK(routable_predecessor(dense_layer_kinds(3)) == std::vector<index_t>{-1, -1, -1});
}

TEST_CASE("Hybrid stacks are 2 linear layers then 1 softmax layer in every block of three") {
  rc::prop("erratum 4: the ratio is 2 linear to 1 softmax and pure and dense are uniform", [] {
    const index_t L = *rc::gen::inRange<index_t>(1, 61);
    const auto hyb = hybrid_layer_kinds(L), pure = pure_layer_kinds(L),
               dense = dense_layer_kinds(L);
    RC_ASSERT(index_t(hyb.size()) == L);
    RC_ASSERT(index_t(pure.size()) == L);
    RC_ASSERT(index_t(dense.size()) == L);
    index_t n_softmax = 0;
    for (index_t i = 0; i < L; ++i) {
      const bool third_of_block = i % 3 == 2;  // positions 0, 1 of each block linear, 2 softmax
      RC_ASSERT((hyb[i] == LayerKind::softmax) == third_of_block);
      n_softmax += hyb[i] == LayerKind::softmax;
      RC_ASSERT(pure[i] == LayerKind::linear);
      RC_ASSERT(dense[i] == LayerKind::softmax);
    }
    RC_ASSERT(n_softmax == L / 3);
    if (L % 3 == 0) RC_ASSERT(L - n_softmax == 2 * n_softmax);
  });
  // SPEC section 5: 20 layers are 6 softmax + 14 linear.
  const auto k20 = hybrid_layer_kinds(20);
  CHECK(std::count(k20.begin(), k20.end(), LayerKind::softmax) == 6);
  CHECK(std::count(k20.begin(), k20.end(), LayerKind::linear) == 14);
}

// ---------------------------------------------------------------------------------------------
// rho and the two injections.
// ---------------------------------------------------------------------------------------------

TEST_CASE("RMS-normalising rho gives each token and head a mean square of ms over ms plus eps") {
  rc::prop(
      "rho rms_norm rescales each d_v row by a positive factor to unit RMS and identity copies",
      [] {
        const index_t B = *rc::gen::inRange<index_t>(1, 3), T = *rc::gen::inRange<index_t>(1, 6),
                      H = *rc::gen::inRange<index_t>(1, 3), V = *rc::gen::inRange<index_t>(1, 9);
        const double eps = *rc::gen::element(1e-6, 1e-2, 1.0);
        std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
        Tensor<double> x = normal(rng, {B, T, H, V}, *rc::gen::element(1e-4, 1.0, 100.0));
        const Tensor<double> y = rho(Rho::rms_norm, x, eps);
        RC_ASSERT(identical(rho(Rho::identity, x), x));
        for (index_t b = 0; b < B; ++b)
          for (index_t t = 0; t < T; ++t)
            for (index_t h = 0; h < H; ++h) {
              double msx = 0, msy = 0;
              for (index_t j = 0; j < V; ++j)
                msx += x(b, t, h, j) * x(b, t, h, j) / V, msy += y(b, t, h, j) * y(b, t, h, j) / V;
              const double want = msx / (msx + eps);
              RC_ASSERT(std::abs(msy - want) <= kTol * want);
              const double c = y(b, t, h, 0) / x(b, t, h, 0);  // y = c x with c > 0
              RC_ASSERT(c > 0);
              for (index_t j = 0; j < V; ++j)
                RC_ASSERT(std::abs(y(b, t, h, j) - c * x(b, t, h, j)) <= kTol * std::sqrt(msy * V));
            }
      });
}

TEST_CASE("residual_inject adds the matrix-vector product P s to every token") {
  rc::prop("Eq.29 equals an explicit sum over heads and value channels", [] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), T = *rc::gen::inRange<index_t>(1, 6),
                  H = *rc::gen::inRange<index_t>(1, 4), V = *rc::gen::inRange<index_t>(1, 6),
                  D = *rc::gen::inRange<index_t>(1, 8);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    const Tensor<double> h = normal(rng, {B, T, D}), s = normal(rng, {B, T, H, V}),
                         P = normal(rng, {D, H * V});
    const auto c = compare(residual_inject(h, s, P), plus(h, explicit_Ps(P, s)));
    RC_ASSERT(c.within(kTol));
  });
}

TEST_CASE("Low-rank residual_inject with P = U D equals the full P built from the product") {
  rc::prop("h + U (D s) equals h + (U D) s", [] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), T = *rc::gen::inRange<index_t>(1, 6),
                  H = *rc::gen::inRange<index_t>(1, 4), V = *rc::gen::inRange<index_t>(1, 6),
                  D = *rc::gen::inRange<index_t>(1, 8), r = *rc::gen::inRange<index_t>(1, 5);
    std::mt19937_64 rng(*rc::gen::arbitrary<std::uint64_t>());
    const Tensor<double> h = normal(rng, {B, T, D}), s = normal(rng, {B, T, H, V}),
                         U = normal(rng, {D, r}), Dn = normal(rng, {r, H * V});
    Tensor<double> P({D, H * V});  // P = U D by explicit loops
    for (index_t i = 0; i < D; ++i)
      for (index_t j = 0; j < H * V; ++j)
        for (index_t a = 0; a < r; ++a) P(i, j) += U(i, a) * Dn(a, j);
    const Tensor<double> low = residual_inject(h, s, U, Dn);
    RC_ASSERT(compare(low, residual_inject(h, s, P)).within(kTol));
    Projection<double> proj;
    proj.U = U, proj.D = Dn;
    RC_ASSERT(identical(residual_inject(h, s, proj), low));
  });
}

TEST_CASE("A low-rank P with one zero factor can learn but with both factors zero it cannot") {
  rc::prop(
      "central differences of c . U D s: nonzero gradient for the zero factor unless both are zero",
      [] {
        const index_t H = *rc::gen::inRange<index_t>(1, 3), V = *rc::gen::inRange<index_t>(1, 5),
                      D = *rc::gen::inRange<index_t>(1, 6), r = *rc::gen::inRange<index_t>(1, 4);
        const ZeroFactor zero = *rc::gen::element(ZeroFactor::U, ZeroFactor::D);
        const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
        std::mt19937_64 rng(seed);
        const Tensor<double> s = normal(rng, {1, 1, H, V}), c = normal(rng, {1, 1, D});
        const Tensor<double> h0({1, 1, D});
        // L = c . eps with eps = U D s: linear in each factor, so central differences are exact.
        auto loss = [&](const Projection<double>& p) {
          const Tensor<double> eps = residual_inject(h0, s, p);
          double l = 0;
          for (index_t i = 0; i < D; ++i) l += c.data()[i] * eps.data()[i];
          return l;
        };
        // ||dL/dU||^2 (of_U) or ||dL/dD||^2 by central differences.
        auto grad_norm2 = [&](Projection<double> p, bool of_U) {
          Tensor<double> f = of_U ? p.U.clone() : p.D.clone();
          (of_U ? p.U : p.D) = f;
          double n2 = 0;
          for (double& x : f) {
            const double x0 = x, step = 1e-3;
            x = x0 + step;
            const double up = loss(p);
            x = x0 - step;
            const double down = loss(p);
            x = x0;
            n2 += std::pow((up - down) / (2 * step), 2);
          }
          return n2;
        };
        const Projection<double> one = low_rank_projection<double>(D, H * V, r, seed + 1, zero);
        const bool zero_is_U = zero == ZeroFactor::U;
        RC_ASSERT(loss(one) == 0.0);  // the product is zero at initialisation
        // The zero factor's gradient is c (D s)^T or U^T c s^T: nonzero for random c, s and other
        // factor.
        RC_ASSERT(grad_norm2(one, zero_is_U) > 1e-12);
        RC_ASSERT(grad_norm2(one, !zero_is_U) == 0.0);  // the random factor waits one step
        Projection<double> both = one;
        both.U = Tensor<double>({D, r}), both.D = Tensor<double>({r, H * V});
        RC_ASSERT(grad_norm2(both, true) == 0.0);
        RC_ASSERT(grad_norm2(both, false) == 0.0);
      });
}

// ---------------------------------------------------------------------------------------------
// The toy stack.
// ---------------------------------------------------------------------------------------------

TEST_CASE(
    "CLER writes v plus Gamma times rho of the predecessor error and the first linear layer receives nothing") {
  rc::prop(
      "Eq.27 in the stack: v_tilde = v + Gamma_l rho(e_p(l)) with e the chosen routed error", [] {
        const StackCase c = *gen_stack_case();
        ToyStack<double> s = make_stack(c, Routing::cler);
        for (auto& ly : s.layers) ly.Gamma = gen_nonzero_gamma();
        const ToyRun<double> run = s.forward(make_h0(c));
        const auto p = routable_predecessor(c.kinds);
        for (size_t l = 0; l < c.kinds.size(); ++l) {
          if (c.kinds[l] != LayerKind::linear) continue;
          const LayerRecord<double>& rec = run.layer[l];
          const Tensor<double> want_error =
              c.error == RoutedError::paper_error ? rec.mix.r : rec.mix.written;
          RC_ASSERT(identical(rec.error, want_error));
          if (p[l] < 0) {
            RC_ASSERT(identical(rec.v_tilde, rec.v));
            continue;
          }
          const Tensor<double>& e = run.layer[p[l]].error;
          Tensor<double> want = rec.v.clone();
          for (index_t b = 0; b < c.B; ++b)
            for (index_t t = 0; t < c.T; ++t)
              for (index_t h = 0; h < c.H; ++h) {
                double ms = 0;  // rho written out: identity, or x / sqrt(mean(x^2) + 1e-6) over d_v
                for (index_t j = 0; j < c.V; ++j) ms += e(b, t, h, j) * e(b, t, h, j) / c.V;
                const double scale = c.rho == Rho::identity ? 1.0 : 1.0 / std::sqrt(ms + 1e-6);
                for (index_t j = 0; j < c.V; ++j)
                  want(b, t, h, j) += s.layers[l].Gamma * scale * e(b, t, h, j);
              }
          RC_ASSERT(compare(rec.v_tilde, want).within(kTol));
        }
      });
}

TEST_CASE("CLER with Gamma = 0 equals the baseline stack exactly") {
  rc::prop(
      "every residual stream of the CLER stack at initialisation is bit-identical to the baseline",
      [] {
        const StackCase c = *gen_stack_case();
        const Tensor<double> h0 = make_h0(c);
        const ToyRun<double> base = make_stack(c).forward(h0),
                             cler = make_stack(c, Routing::cler).forward(h0);
        for (size_t l = 0; l < base.h.size(); ++l) RC_ASSERT(identical(cler.h[l], base.h[l]));
      });
}

TEST_CASE(
    "Zero-initialised P leaves CLER-H and CLVR stacks equal to the baseline for full and low-rank P") {
  rc::prop(
      "P = 0 or P = U D with one zero factor: bit-identical streams and the other factor is not zero",
      [] {
        const StackCase c = *gen_stack_case();
        const Routing mode = *rc::gen::element(Routing::cler_h, Routing::clvr);
        const int form =
            *rc::gen::inRange(0, 3);  // 0 full zero, 1 low rank U = 0, 2 low rank D = 0
        const index_t rank = *rc::gen::inRange<index_t>(1, 4);
        ToyStack<double> s = make_stack(c, mode);
        for (size_t l = 0; l < s.layers.size(); ++l) {
          if (s.layers[l].kind != LayerKind::linear || form == 0) continue;
          const ZeroFactor z = form == 1 ? ZeroFactor::U : ZeroFactor::D;
          s.layers[l].P = low_rank_projection<double>(c.D, c.H * c.V, rank, c.seed + l, z);
          const Tensor<double>& other = z == ZeroFactor::U ? s.layers[l].P.D : s.layers[l].P.U;
          RC_ASSERT(std::any_of(other.begin(), other.end(), [](double x) { return x != 0; }));
        }
        const Tensor<double> h0 = make_h0(c);
        const ToyRun<double> base = make_stack(c).forward(h0), routed = s.forward(h0);
        for (size_t l = 0; l < base.h.size(); ++l) RC_ASSERT(identical(routed.h[l], base.h[l]));
      });
}

TEST_CASE(
    "CLER with nonzero Gamma leaves the stream unchanged up to the second linear layer and changes it there") {
  rc::prop("only layers above the first routable layer are affected", [] {
    const StackCase c = *gen_stack_case();
    ToyStack<double> s = make_stack(c, Routing::cler);
    for (auto& ly : s.layers) ly.Gamma = gen_nonzero_gamma();
    const Tensor<double> h0 = make_h0(c);
    const ToyRun<double> base = make_stack(c).forward(h0), cler = s.forward(h0);
    const auto p = routable_predecessor(c.kinds);
    size_t second = c.kinds.size();  // the first layer that receives a routed error
    for (size_t l = 0; l < c.kinds.size() && second == c.kinds.size(); ++l)
      if (c.kinds[l] == LayerKind::linear && p[l] >= 0) second = l;
    for (size_t l = 0; l < second; ++l) RC_ASSERT(identical(cler.h[l + 1], base.h[l + 1]));
    if (second < c.kinds.size()) {
      RC_ASSERT(!identical(cler.layer[second].v_tilde, cler.layer[second].v));
      RC_ASSERT(compare(cler.h[second + 1], base.h[second + 1]).rel_rms > 1e-12);
    }
  });
}

TEST_CASE(
    "One-layer CLER-H adds P times the routed error and CLVR adds P times the unscaled value") {
  rc::prop(
      "h1 of the routed stack = h1 of the baseline + P s with s = e for CLER-H and s = v for CLVR",
      [] {
        StackCase c = *gen_stack_case(1);
        c.kinds = {LayerKind::linear};
        std::mt19937_64 rng(c.seed + 7);
        const Tensor<double> P = normal(rng, {c.D, c.H * c.V}), h0 = make_h0(c);
        ToyStack<double> cler_h = make_stack(c, Routing::cler_h),
                         clvr = make_stack(c, Routing::clvr);
        cler_h.layers[0].P.P = P, clvr.layers[0].P.P = P;
        const ToyRun<double> base = make_stack(c).forward(h0), rh = cler_h.forward(h0),
                             rv = clvr.forward(h0);
        const LayerRecord<double>& rec = base.layer[0];
        const Tensor<double>& e = c.error == RoutedError::paper_error ? rec.mix.r : rec.mix.written;
        RC_ASSERT(compare(rh.out(), plus(base.out(), explicit_Ps(P, e))).within(kTol));
        RC_ASSERT(compare(rv.out(), plus(base.out(), explicit_Ps(P, rec.v))).within(kTol));
      });
}

TEST_CASE("The written error is beta times the paper error in every linear layer of a CLER stack") {
  rc::prop("errata 3 and 6: written_error = beta (v_tilde - v_bar) with the decayed read", [] {
    const StackCase c = *gen_stack_case();
    ToyStack<double> s = make_stack(c, Routing::cler);
    for (auto& ly : s.layers) ly.Gamma = gen_nonzero_gamma();
    const ToyRun<double> run = s.forward(make_h0(c));
    for (size_t l = 0; l < c.kinds.size(); ++l) {
      if (c.kinds[l] != LayerKind::linear) continue;
      const LayerRecord<double>& rec = run.layer[l];
      const Tensor<double> paper = routed_error(rec.mix, RoutedError::paper_error);
      const Tensor<double> written = routed_error(rec.mix, RoutedError::written_error);
      Tensor<double> beta_paper = paper.clone();
      for (index_t b = 0; b < c.B; ++b)
        for (index_t t = 0; t < c.T; ++t)
          for (index_t h = 0; h < c.H; ++h)
            for (index_t j = 0; j < c.V; ++j) beta_paper(b, t, h, j) *= rec.beta(b, t, h);
      RC_ASSERT(compare(written, beta_paper).within(kTol));
    }
  });
}

TEST_CASE("Every linear layer of the toy stack writes v = r + v_bar") {
  rc::prop("the value written (v_tilde under CLER) is the error plus the decayed key read", [] {
    const StackCase c = *gen_stack_case();
    const Routing mode =
        *rc::gen::element(Routing::none, Routing::cler, Routing::cler_h, Routing::clvr);
    ToyStack<double> s = make_stack(c, mode);
    for (auto& ly : s.layers) ly.Gamma = gen_nonzero_gamma();  // used by CLER only
    std::mt19937_64 rng(c.seed + 3);
    for (auto& ly : s.layers)  // a nonzero P so CLER-H and CLVR change the stream
      if (ly.kind == LayerKind::linear) ly.P.P = normal(rng, {c.D, c.H * c.V});
    const ToyRun<double> run = s.forward(make_h0(c));
    for (size_t l = 0; l < c.kinds.size(); ++l) {
      if (c.kinds[l] != LayerKind::linear) continue;
      const LayerRecord<double>& rec = run.layer[l];
      RC_ASSERT(compare(rec.v_tilde, plus(rec.mix.r, rec.mix.v_bar)).within(kTol));
      if (mode != Routing::cler) RC_ASSERT(identical(rec.v_tilde, rec.v));
    }
  });
}

// The other toy-stack properties compare the stack with itself (routed against baseline, float32
// against float64), so a change to the layer's definition would reach both sides: this one writes the
// definition out (Sec.4's toy layer: pre-norm, GDN with L2-normalised q and k, gates from x).
TEST_CASE("One linear layer of the toy stack equals its definition written out") {
  rc::prop("h1 = h0 + Wo GDN(q, k, v, g = -softplus(Wa x), beta = sigmoid(Wbeta x)), x = h0 / rms(h0)", [] {
    const index_t B = *rc::gen::inRange<index_t>(1, 3), Tn = *rc::gen::inRange<index_t>(1, 8);
    const index_t D = *rc::gen::inRange<index_t>(2, 9), H = *rc::gen::inRange<index_t>(1, 3);
    const index_t K = *rc::gen::inRange<index_t>(1, 6), V = *rc::gen::inRange<index_t>(1, 6);
    const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
    const ToyStack<double> s = ToyStack<double>::random({LayerKind::linear}, D, H, K, V, seed);
    const ToyLayer<double>& ly = s.layers[0];
    std::mt19937_64 rng(seed + 1);
    const Tensor<double> h0 = normal(rng, {B, Tn, D}, 3.0);
    Tensor<double> q({B, Tn, H, K}), k({B, Tn, H, K}), v({B, Tn, H, V}), g({B, Tn, H}), beta({B, Tn, H});
    for (index_t b = 0; b < B; ++b)
      for (index_t t = 0; t < Tn; ++t) {
        double ms = 0;
        for (index_t d = 0; d < D; ++d) ms += h0(b, t, d) * h0(b, t, d) / D;
        std::vector<double> x(D);
        for (index_t d = 0; d < D; ++d) x[d] = h0(b, t, d) / std::sqrt(ms + 1e-6);
        auto row = [&](const Tensor<double>& M, index_t r) {
          double a = 0;
          for (index_t d = 0; d < D; ++d) a += M(r, d) * x[d];
          return a;
        };
        for (index_t h = 0; h < H; ++h) {
          for (index_t i = 0; i < K; ++i) q(b, t, h, i) = row(ly.Wq, h * K + i), k(b, t, h, i) = row(ly.Wk, h * K + i);
          for (index_t j = 0; j < V; ++j) v(b, t, h, j) = row(ly.Wv, h * V + j);
          beta(b, t, h) = 1.0 / (1.0 + std::exp(-row(ly.Wbeta, h)));
          g(b, t, h) = -std::log1p(std::exp(row(ly.Wa, h)));
        }
      }
    RecurrentOptions<double> opt;
    opt.use_qk_l2norm = true;
    const Tensor<double> o = naive_recurrent_gated_delta_rule(q, k, v, g, beta, opt).o;
    Tensor<double> want = h0.clone();
    for (index_t b = 0; b < B; ++b)
      for (index_t t = 0; t < Tn; ++t)
        for (index_t d = 0; d < D; ++d)
          for (index_t h = 0; h < H; ++h)
            for (index_t j = 0; j < V; ++j) want(b, t, d) += ly.Wo(d, h * V + j) * o(b, t, h, j);
    RC_ASSERT(compare(s.forward(h0).out(), want).within(1e-12));
  });
}

// Bound 2e-4: the worst of 40,000 cases (seeds 1-4, 10,000 each) was 4.0e-5. d_model >= 4 and
// K >= 2 because with d_model = 1 (pre-norm) or K = 1 (key L2 norm) the normalisation is nearly a
// sign function that amplifies float32 rounding of a near-zero input (worst seen there: 6e-4).
TEST_CASE("The float32 toy stack from the same seed matches float64 within relative RMS 2e-4") {
  rc::prop(
      "ToyStack<float>::random draws the float64 weights rounded and CLVR outputs agree to 2e-4",
      [] {
        StackCase c = *gen_stack_case();
        c.D = std::max<index_t>(c.D, 4);
        c.K = std::max<index_t>(c.K, 2);
        ToyStack<double> s = make_stack(c, Routing::clvr);
        ToyStack<float> f = ToyStack<float>::random(c.kinds, c.D, c.H, c.K, c.V, c.seed, c.host);
        f.routing = s.routing, f.error = s.error, f.rho = s.rho;
        std::mt19937_64 rng(c.seed + 5);
        using linattn::testing::cast;
        auto rounded = [](const Tensor<float>& x, const Tensor<double>& y) {
          const Tensor<float> want = cast<float>(y);
          return x.shape() == want.shape() && std::equal(x.begin(), x.end(), want.begin());
        };
        for (size_t l = 0; l < s.layers.size(); ++l) {
          const ToyLayer<float>& a = f.layers[l];
          const ToyLayer<double>& b = s.layers[l];
          RC_ASSERT(rounded(a.Wq, b.Wq) && rounded(a.Wk, b.Wk) && rounded(a.Wv, b.Wv) &&
                    rounded(a.Wo, b.Wo));
          RC_ASSERT(rounded(a.Wbeta, b.Wbeta) && rounded(a.Wa, b.Wa));
        }
        for (size_t l = 0; l < s.layers.size(); ++l)
          if (s.layers[l].kind == LayerKind::linear) {
            s.layers[l].P.P = normal(rng, {c.D, c.H * c.V}, 0.3);
            f.layers[l].P.P = cast<float>(s.layers[l].P.P);
          }
        const Tensor<double> h0 = make_h0(c);
        const auto cmp = compare(f.forward(cast<float>(h0)).out(), s.forward(h0).out());
        RC_LOG() << cmp.str();
        RC_ASSERT(cmp.within(2e-4));
      });
}

// ---------------------------------------------------------------------------------------------
// Bad input.
// ---------------------------------------------------------------------------------------------

TEST_CASE(
    "Routing functions reject bad input with messages naming the argument and the expected value") {
  const Tensor<double> v({1, 2, 2, 3}, 1.0), h({1, 2, 4}, 1.0), P({4, 6}, 0.0);
  // Layer kinds.
  CHECK_THROWS_AS(hybrid_layer_kinds(0), Error);
  CHECK_THROWS_WITH(hybrid_layer_kinds(-2),
                    Contains("hybrid_layer_kinds") && Contains("'L'") && Contains("-2"));
  CHECK_THROWS_WITH(routable_predecessor({LayerKind::linear, static_cast<LayerKind>(7)}),
                    Contains("'kinds'") && Contains("layer 1"));
  CHECK_THROWS_WITH(ToyStack<double>::random({}, 4, 1, 2, 3, 0),
                    Contains("'kinds'") && Contains("at least one layer"));
  CHECK_THROWS_WITH(ToyStack<double>::random({LayerKind::linear}, 4, 0, 2, 3, 0), Contains("'H'"));
  // rho and CLER.
  CHECK_THROWS_WITH(rms_normalize(v, 0.0), Contains("'eps'") && Contains("> 0"));
  CHECK_THROWS_WITH(rho(static_cast<Rho>(5), v), Contains("'kind'"));
  CHECK_THROWS_WITH(rho(Rho::rms_norm, v, 0.0), Contains("rho: argument 'eps'"));  // named as called
  CHECK_THROWS_WITH(rms_normalize(Tensor<double>(std::vector<index_t>{})),
                    Contains("'x'") && Contains("but got a 0-D tensor"));
  CHECK_THROWS_WITH(cler_inject(v, Tensor<double>({1, 2, 2, 4}), 0.5),
                    Contains("cler_inject") && Contains("'r_prev'") && Contains("[1, 2, 2, 3]") &&
                        Contains("[1, 2, 2, 4]"));
  CHECK_THROWS_WITH(cler_inject(v, v, std::nan("")), Contains("'Gamma'") && Contains("finite"));
  Tensor<double> bad = v.clone();
  bad(0, 1, 1, 2) = INFINITY;
  CHECK_THROWS_WITH(cler_inject(v, bad, 0.5), Contains("'r_prev'") && Contains("[0, 1, 1, 2]"));
  RecurrentOutput<double> no_trace;
  CHECK_THROWS_WITH(routed_error(no_trace, RoutedError::paper_error),
                    Contains("'trace'") && Contains("return_trace"));
  // Eq.29.
  CHECK_THROWS_WITH(
      residual_inject(h, v, Tensor<double>({4, 5})),
      Contains("residual_inject") && Contains("'P'") && Contains("[4, 6]") && Contains("[4, 5]"));
  CHECK_THROWS_WITH(residual_inject(Tensor<double>({1, 3, 4}), v, P),
                    Contains("'s'") && Contains("[1, 3, *, *]"));
  CHECK_THROWS_WITH(residual_inject(h, v, Tensor<double>({4, 2}), Tensor<double>({3, 6})),
                    Contains("'D'") && Contains("[2, 6]") && Contains("[3, 6]"));
  CHECK_THROWS_WITH(residual_inject(h, v, Tensor<double>({4, 0}), Tensor<double>({0, 6})),
                    Contains("'U.shape[1] (rank r)'"));
  CHECK_THROWS_WITH(low_rank_projection<double>(4, 6, 0, 1),
                    Contains("'rank'") && Contains("positive"));
  CHECK_THROWS_WITH(zero_projection<double>(0, 6), Contains("'d_model'"));
  // The toy stack.
  ToyStack<double> s = ToyStack<double>::random(hybrid_layer_kinds(4), 4, 2, 2, 3, 1);
  CHECK_THROWS_WITH(s.forward(Tensor<double>({1, 2, 5})),
                    Contains("ToyStack::forward") && Contains("'h0'") && Contains("[*, *, 4]"));
  s.routing = Routing::cler;
  s.layers[3].Gamma = INFINITY;
  CHECK_THROWS_WITH(s.forward(h), Contains("'layers[3].Gamma'") && Contains("finite"));
  s.routing = Routing::clvr;
  s.layers[1].P = zero_projection<double>(4, 5);
  CHECK_THROWS_WITH(s.forward(h),
                    Contains("'layers[1].P.P'") && Contains("[4, 6]") && Contains("[4, 5]"));
  s.layers[1].P = low_rank_projection<double>(4, 6, 2, 3);
  s.layers[1].P.P = Tensor<double>({4, 6});
  CHECK_THROWS_WITH(s.forward(h), Contains("'layers[1].P'") && Contains("both P and U"));
  s.layers[1].P.P = Tensor<double>();
  s.layers[0].Wq = Tensor<double>({4, 3});
  CHECK_THROWS_WITH(s.forward(h),
                    Contains("'layers[0].Wq'") && Contains("[*, 4]") && Contains("[4, 3]"));
}
