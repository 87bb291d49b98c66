// proofs_tests/test_lm_gradcheck.cpp -- end-to-end gradient checks of the whole language model
// (walkthroughs/lm/model.hpp) for every mixer, stack and routing option, and the low-rank routing
// projection P_l = U_l D_l of CLER-H and CLVR (Eq.29), in float64:
//  * every configuration -- dense softmax (with and without the output gate); DeltaNet, GDN, KDA,
//    GDN2 in pure and hybrid stacks, each with routing none, CLER (paper / written error x rho
//    identity / rms), CLER-H (full / low-rank P x paper / written error), CLVR (full / low rank),
//    the Sec.6.6 controls clvr-gate and clvr-concat (full / low rank); and hybrid GDN2 with CLVR
//    on the chunked CPU core --
//    has, for every named parameter, a directional derivative g . u equal to the central finite
//    difference along a random unit direction u of that parameter (fd_check.hpp);
//  * low-rank models match central differences in every coordinate;
//  * the low-rank model equals the full-P model with P = U D, and its gradients are the chain
//    rule of the full one (dU = dP D^T, dD = U^T dP);
//  * at initialisation a low-rank model is the baseline exactly (U = 0, D drawn from a generator
//    of its own so that every other parameter is the baseline's), dD = 0 and dU != 0 (learning
//    starts; with both factors zero it would not), and bad ranks are refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fd_check.hpp"
#include "walkthroughs/lm/model.hpp"

using namespace linattn;
using namespace linattn::lm;
using namespace linattn::lm::fd;

namespace {

/// The tiny configuration of every check: 3 layers (pure: lin lin lin; hybrid: lin lin softmax),
/// or 4 for hybrid so that CLER's p(3) = 1 skips the softmax layer 2.
ModelConfig tiny(const std::string& stack, MixerKind kind) {
  ModelConfig cfg;
  cfg.vocab = 7, cfg.d_model = 8, cfg.n_head = 2, cfg.n_kv_head = 1, cfg.mlp_hidden = 8;
  cfg.stack = stack, cfg.linear_mixer = kind;
  cfg.n_layer = stack == "hybrid" ? 4 : stack == "pure" ? 3 : 2;
  cfg.lin_heads = 1, cfg.lin_v_heads = 2, cfg.lin_dk = 3, cfg.lin_dv = 3;
  return cfg;
}

struct Routing {
  const char* routing;
  const char* error;
  const char* rho;
  index_t rank;
};

std::string describe(const ModelConfig& c) {
  std::string s = c.stack + " " + to_string(c.linear_mixer) + " core " + c.core + " routing " + c.routing;
  if (c.routing == "cler") s += " " + c.routed_error + " error rho " + c.rho;
  if (c.routing == "cler-h" || c.routing == "clvr-gate" || c.routing == "clvr-concat") s += " " + c.routed_error + " error";
  if (c.residual_routing()) s += c.route_rank > 0 ? " rank " + std::to_string(c.route_rank) : " full P";
  return s;
}

/// Every configuration of the model that the trainer accepts, up to sizes and the core.
std::vector<ModelConfig> every_configuration() {
  std::vector<ModelConfig> out;
  for (bool gate : {false, true}) {
    ModelConfig c = tiny("dense", MixerKind::gdn);
    c.attn_gate = gate;
    out.push_back(c);
  }
  const Routing routings[] = {{"none", "paper", "identity", 0},   {"cler", "paper", "identity", 0},
                              {"cler", "paper", "rms", 0},        {"cler", "written", "identity", 0},
                              {"cler", "written", "rms", 0},      {"cler-h", "paper", "identity", 0},
                              {"cler-h", "written", "identity", 0}, {"cler-h", "paper", "identity", 2},
                              {"cler-h", "written", "identity", 2}, {"clvr", "paper", "identity", 0},
                              {"clvr", "paper", "identity", 2},   {"clvr-gate", "paper", "identity", 0},
                              {"clvr-gate", "written", "identity", 2}, {"clvr-concat", "written", "identity", 0},
                              {"clvr-concat", "paper", "identity", 2}};
  for (const char* stack : {"pure", "hybrid"})
    for (MixerKind kind : {MixerKind::deltanet, MixerKind::gdn, MixerKind::kda, MixerKind::gdn2})
      for (const Routing& r : routings) {
        ModelConfig c = tiny(stack, kind);
        c.routing = r.routing, c.routed_error = r.error, c.rho = r.rho, c.route_rank = r.rank;
        out.push_back(c);
      }
  // the model's wiring of the chunked CPU kernels as the core (a few configurations: the chunked
  // core is slower than the per-token one at these tiny sizes under the sanitizers, and
  // test_lm_mixers proves chunked == per-token for every mixer and every trace-routed mode):
  // CLVR, and the trace-routed modes through cpu::chunk_backward's dwritten / dv_bar
  ModelConfig c = tiny("hybrid", MixerKind::gdn2);
  c.routing = "clvr", c.core = "chunk";
  out.push_back(c);
  const std::pair<MixerKind, Routing> traced[] = {
      {MixerKind::gdn, {"cler", "paper", "rms", 0}},
      {MixerKind::kda, {"cler-h", "written", "identity", 2}},
      {MixerKind::deltanet, {"clvr-gate", "written", "identity", 0}},
      {MixerKind::gdn2, {"clvr-concat", "paper", "identity", 0}}};
  for (const auto& [kind, r] : traced) {
    ModelConfig t = tiny("hybrid", kind);
    t.routing = r.routing, t.routed_error = r.error, t.rho = r.rho, t.route_rank = r.rank, t.core = "chunk";
    out.push_back(t);
  }
  return out;
}

}  // namespace

TEST_CASE("LM model gradient of every mixer stack and routing option equals finite differences along a random direction of each parameter") {
  // Five-point differences with h = 5e-6 (fd_check.hpp). Bound: |g . u - FD| <= 1e-5 max(|FD|, 1e-3).
  // Measured: worst error 5.2e-7 over 138 configurations (the test prints it; now 127 are run). It is the finite
  // difference's own error: the worst case at h = 1e-5 (1.4e-6, CLER with rho = rms, whose RMS
  // normalisation of a small routed error is strongly curved) fell as h^4 from 1.2e-4 at h = 3e-5,
  // and rounding takes over below h = 5e-6; a wrong gradient term gives errors of order 1.
  double worst = 0;
  std::string worst_at;
  int n = 0;
  std::uint64_t seed = 100;
  for (const ModelConfig& cfg : every_configuration()) {
    FdProblem p(cfg, seed, 2, 4);
    for (const DirectionalError& e : model_directional_errors(p, seed + 7, 5e-6)) {
      INFO(describe(cfg) << ": parameter " << e.name << " analytic " << e.analytic << " numeric " << e.numeric);
      CHECK(e.err < 1e-5);
      if (e.err > worst) worst = e.err, worst_at = describe(cfg) + " " + e.name;
    }
    ++n, ++seed;
  }
  WARN("directional checks of " << n << " configurations: worst error " << worst << " at " << worst_at);
  CHECK(n == 127);
}

TEST_CASE("LM models with a low-rank routing projection have gradients equal to finite differences in every coordinate") {
  struct Case { const char* stack; MixerKind kind; const char* routing; const char* error; };
  // two of the 18 low-rank configurations (all of them are checked directionally above)
  for (const Case& c : {Case{"hybrid", MixerKind::gdn, "cler-h", "written"}, Case{"pure", MixerKind::kda, "clvr", "paper"}}) {
    ModelConfig cfg = tiny(c.stack, c.kind);
    cfg.routing = c.routing, cfg.routed_error = c.error, cfg.route_rank = 2;
    FdProblem p(cfg, 31, 2, 4);
    // h = 1e-6 as in test_lm_mixers (curvature of the L2 normalisation of small q, k)
    const double err = model_fd_error(p, 1e-6);
    INFO(describe(cfg) << ": relative error " << err);
    CHECK(err < 1e-6);
  }
}

TEST_CASE("LM low-rank routing projection U D gives the model of the full projection P equal to U D and the chain-rule gradients") {
  for (const char* routing : {"cler-h", "clvr"}) {
    ModelConfig lo = tiny("hybrid", MixerKind::gdn), full = lo;
    lo.routing = full.routing = routing, lo.route_rank = 2;
    FdProblem pl(lo, 8, 2, 5);
    Model<double> mf(full);
    // copy every shared parameter by name; P = U D for each routed layer
    for (const ParamSpec& s : mf.ps.specs) {
      if (s.name.find("route.P") != std::string::npos) continue;
      for (const ParamSpec& t : pl.m.ps.specs)
        if (t.name == s.name)
          std::copy_n(pl.m.ps.data.begin() + t.offset, s.numel(), mf.ps.data.begin() + s.offset);
    }
    const index_t r = 2;
    for (const auto& bl : pl.m.blocks) {
      if (bl.route_U < 0) continue;
      const auto& bf = mf.blocks[&bl - pl.m.blocks.data()];
      const ParamSpec& sp = mf.ps.spec(bf.route_P);
      const index_t C = sp.rows, HV = sp.cols;
      const double *U = pl.m.ps.p(bl.route_U), *D = pl.m.ps.p(bl.route_D);
      double* P = mf.ps.p(bf.route_P);
      for (index_t o = 0; o < C; ++o)
        for (index_t c = 0; c < HV; ++c) {
          double acc = 0;
          for (index_t j = 0; j < r; ++j) acc += U[o * r + j] * D[j * HV + c];
          P[o * HV + c] = acc;
        }
    }
    const Vd gl = pl.gradient();
    const double loss_lo = pl.loss();
    mf.ps.zero_grad();
    const double loss_full = mf.forward(pl.tok.data(), pl.tgt.data(), pl.B, pl.T);
    mf.backward();
    INFO(routing << ": loss low rank " << loss_lo << " full " << loss_full);
    CHECK(std::abs(loss_lo - loss_full) <= 1e-12 * std::abs(loss_full));
    int checked = 0;
    for (const auto& bl : pl.m.blocks) {
      if (bl.route_U < 0) continue;
      const auto& bf = mf.blocks[&bl - pl.m.blocks.data()];
      const index_t C = mf.ps.spec(bf.route_P).rows, HV = mf.ps.spec(bf.route_P).cols;
      const double *U = pl.m.ps.p(bl.route_U), *D = pl.m.ps.p(bl.route_D), *dP = mf.ps.g(bf.route_P);
      Vd dU(C * r, 0.0), dD(r * HV, 0.0), aU(C * r), aD(r * HV);
      for (index_t o = 0; o < C; ++o)
        for (index_t j = 0; j < r; ++j)
          for (index_t c = 0; c < HV; ++c) {
            dU[o * r + j] += dP[o * HV + c] * D[j * HV + c];  // dU = dP D^T
            dD[j * HV + c] += U[o * r + j] * dP[o * HV + c];  // dD = U^T dP
          }
      std::copy_n(gl.begin() + pl.m.ps.spec(bl.route_U).offset, C * r, aU.begin());
      std::copy_n(gl.begin() + pl.m.ps.spec(bl.route_D).offset, r * HV, aD.begin());
      CHECK(rel_err(aU, dU) < 1e-12);
      CHECK(rel_err(aD, dD) < 1e-12);
      ++checked;
    }
    CHECK(checked == 3);  // layers 0, 1, 3 are linear
  }
}

TEST_CASE("LM low-rank routing at initialisation is the baseline model exactly and only the zero factor U has a gradient") {
  const index_t B = 2, T = 6;
  std::vector<int> tok(B * T), tgt(B * T);
  for (index_t i = 0; i < B * T; ++i) tok[i] = int(i * 3 % 7), tgt[i] = int((i * 5 + 1) % 7);
  Model<double> base(tiny("hybrid", MixerKind::gdn));
  base.init(4);
  const double want = base.forward(tok.data(), tgt.data(), B, T);
  for (const char* routing : {"cler-h", "clvr"}) {
    ModelConfig cfg = tiny("hybrid", MixerKind::gdn);
    cfg.routing = routing, cfg.route_rank = 3;
    Model<double> m(cfg);
    m.init(4);
    INFO(routing);
    // every baseline parameter has the same value (the random D does not consume the shared generator)
    for (const ParamSpec& s : base.ps.specs)
      for (const ParamSpec& t : m.ps.specs)
        if (t.name == s.name)
          CHECK(std::equal(base.ps.data.begin() + s.offset, base.ps.data.begin() + s.offset + s.numel(),
                           m.ps.data.begin() + t.offset));
    m.ps.zero_grad();
    CHECK(m.forward(tok.data(), tgt.data(), B, T) == want);
    m.backward();
    for (const auto& bl : m.blocks) {
      if (bl.route_U < 0) continue;
      double nU = 0, nD = 0, nDval = 0;
      for (index_t i = 0; i < m.ps.spec(bl.route_U).numel(); ++i) nU += std::abs(m.ps.g(bl.route_U)[i]);
      for (index_t i = 0; i < m.ps.spec(bl.route_D).numel(); ++i)
        nD += std::abs(m.ps.g(bl.route_D)[i]), nDval += std::abs(m.ps.p(bl.route_D)[i]);
      CHECK(nU > 0);     // dU = dres^T (s D^T): not zero, so U moves at the first step
      CHECK(nD == 0.0);  // dD = U^T (...) with U = 0: exactly zero
      CHECK(nDval > 0);  // D is random
    }
  }
}

TEST_CASE("LM routing rank must be non-negative and is refused without a routing projection") {
  ModelConfig cfg = tiny("hybrid", MixerKind::gdn);
  cfg.routing = "cler-h", cfg.route_rank = -1;
  REQUIRE_THROWS_AS(cfg.validate(), linattn::Error);
  REQUIRE_THROWS_WITH(cfg.validate(), Catch::Contains("route_rank") && Catch::Contains("-1"));
  for (const char* routing : {"none", "cler"}) {
    cfg.routing = routing, cfg.route_rank = 2;
    INFO(routing);
    REQUIRE_THROWS_WITH(cfg.validate(), Catch::Contains("route_rank") && Catch::Contains("cler-h or clvr"));
  }
  cfg.routing = "clvr";
  REQUIRE_NOTHROW(cfg.validate());
}

namespace {
/// The loss of a tiny hybrid GDN model with `routing` whose routing matrices P_l are set by
/// fill(l-th block's P, rows, cols), every other parameter from the same seed.
double loss_with_P(const std::string& routing, const std::function<void(double*, index_t, index_t)>& fill,
                   double gate_b = 0) {
  ModelConfig cfg = tiny("hybrid", MixerKind::gdn);
  cfg.routing = routing;
  Model<double> m(cfg);
  m.init(12);
  for (auto& bl : m.blocks) {
    if (bl.route_P < 0) continue;
    fill(m.ps.p(bl.route_P), m.ps.spec(bl.route_P).rows, m.ps.spec(bl.route_P).cols);
    if (bl.gate_a >= 0) m.ps.p(bl.gate_a)[0] = 0, m.ps.p(bl.gate_b)[0] = gate_b;
  }
  std::vector<int> tok(12), tgt(12);
  for (int i = 0; i < 12; ++i) tok[i] = i * 5 % 7, tgt[i] = (i * 3 + 2) % 7;
  return m.forward(tok.data(), tgt.data(), 2, 6);
}
/// P (rows x cols) entries from a fixed formula of (row, col), times `scale`, in columns [c0, c1).
void formula(double* P, index_t rows, index_t cols, index_t c0, index_t c1, index_t shift, double scale) {
  for (index_t i = 0; i < rows; ++i)
    for (index_t j = 0; j < cols; ++j)
      P[i * cols + j] = j >= c0 && j < c1 ? scale * std::sin(double(3 * i + 7 * (j - shift) + 1)) : 0.0;
}
}  // namespace

TEST_CASE("LM surprise-gated value routing with a equal to 0 and b equal to 0 is value routing with half the projection") {
  // gate = sigmoid(0 rho + 0) = 1/2 for every token and head, so P s = P (v / 2) = (P / 2) v
  const double gated = loss_with_P("clvr-gate", [](double* P, index_t r, index_t c) { formula(P, r, c, 0, c, 0, 1.0); });
  const double clvr = loss_with_P("clvr", [](double* P, index_t r, index_t c) { formula(P, r, c, 0, c, 0, 0.5); });
  const double base = loss_with_P("clvr", [](double* P, index_t r, index_t c) { formula(P, r, c, 0, 0, 0, 1.0); });
  INFO("gated " << gated << " clvr " << clvr << " unrouted " << base);
  CHECK(std::abs(gated - clvr) <= 1e-12 * std::abs(clvr));
  CHECK(std::abs(gated - base) > 1e-6);  // the routed path is not vacuous
}

TEST_CASE("LM concatenated error and value routing is CLER-H on its error half and CLVR on its value half") {
  // s = [r; v]: P = [P_r | 0] gives P_r r (CLER-H), P = [0 | P_v] gives P_v v (CLVR)
  const index_t HV = 2 * 3;  // tiny(): lin_v_heads 2 x lin_dv 3
  const double r_half = loss_with_P("clvr-concat", [&](double* P, index_t r, index_t c) { formula(P, r, c, 0, HV, 0, 1.0); });
  const double clerh = loss_with_P("cler-h", [&](double* P, index_t r, index_t c) { formula(P, r, c, 0, c, 0, 1.0); });
  const double v_half = loss_with_P("clvr-concat", [&](double* P, index_t r, index_t c) { formula(P, r, c, HV, 2 * HV, HV, 1.0); });
  const double clvr = loss_with_P("clvr", [&](double* P, index_t r, index_t c) { formula(P, r, c, 0, c, 0, 1.0); });
  INFO("r half " << r_half << " cler-h " << clerh << " v half " << v_half << " clvr " << clvr);
  CHECK(std::abs(r_half - clerh) <= 1e-12 * std::abs(clerh));
  CHECK(std::abs(v_half - clvr) <= 1e-12 * std::abs(clvr));
  CHECK(std::abs(clerh - clvr) > 1e-6);
}
