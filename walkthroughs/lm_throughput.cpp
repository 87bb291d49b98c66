// walkthroughs/lm_throughput.cpp -- training throughput of the language model per token mixer:
// tokens per second of one training step (forward + backward + optimiser step, float32) for
// softmax (dense) and DeltaNet, GDN, KDA, GDN2 (pure and hybrid), with AdamW and with Muon, all
// in one run so that the ratios are measured side by side (SPEC section 5, "relative throughput":
// normalised to GDN / AdamW / pure = 100%, as the paper's Table 2).
//
//   lm_throughput                          the paper walkthroughs' model (walkthroughs/paper/scales.hpp,
//                                          full scale: d_model 96, 6 layers, 8 x 128 tokens per step)
//   lm_throughput --core recurrent         linear layers on lm/delta_core.hpp instead of the chunked kernels
//   lm_throughput --d-model 128 --layers 4 --batch 16   the sanity anchor's size
//   lm_throughput --routing cler-h         linear stacks with routing (dense rows stay unrouted)
//   lm_throughput --clock cpu              tokens per second of process CPU time (all threads):
//                                          the program's own cost, less sensitive to other jobs
//   lm_throughput --help
//
// Method: every configuration is built once; then `--rounds` rounds each time `--steps` steps of
// every configuration in turn (after one untimed warm-up step), so a change of machine load hits
// all configurations alike; the table gives the median over rounds of the tokens/s of a round.
// Tokens are random bytes (throughput does not depend on the data). The machine, the command and
// the load average before and after are printed with the table: on a shared machine the absolute
// numbers move with the load, the ratios much less.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#ifdef __linux__
#include <unistd.h>
#endif

#include "walkthroughs/lm/cli.hpp"
#include "walkthroughs/lm/model.hpp"
#include "walkthroughs/lm/optim.hpp"

using namespace linattn;
using namespace linattn::lm;

namespace {

struct Opts {
  index_t d_model = 96, layers = 6, heads = 4, kv_heads = 2, lin_heads = 2, lin_v_heads = 4, lin_dk = 32,
          lin_dv = 32, batch = 8, seq_len = 128, steps = 2, rounds = 3;
  int threads = 0;
  std::string core = "chunk";
  std::string routing = "none";
  bool cpu_clock = false;
};

std::string first_line_of(const char* path, const std::string& key) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);)
    if (line.rfind(key, 0) == 0) return line.substr(line.find(':') + 2);
  return "?";
}
std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

/// OpenMP's default spinning barriers are several times slower on a loaded machine (train_lm.cpp);
/// restart once with OMP_WAIT_POLICY=passive unless the user chose a policy.
void prefer_passive_openmp_wait(char** argv) {
#if defined(__linux__) && defined(_OPENMP)
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
  }
#else
  (void)argv;
#endif
}

struct Config {
  std::string name, stack, optimizer;
  MixerKind mixer = MixerKind::gdn;
  std::unique_ptr<Model<float>> model;
  std::unique_ptr<Optimizer<float>> opt;
  std::vector<double> tps;  ///< tokens/s of each round
};

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_wait(argv);
  Opts o;
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += std::string(i ? " " : "") + argv[i];  // (not "" + string: g++ 12 -Wrestrict)
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--help" || a == "-h") {
        std::cout << "lm_throughput [--d-model 96] [--layers 6] [--heads 4] [--kv-heads 2] [--lin-heads 2]\n"
                     "              [--lin-v-heads 4] [--lin-dk 32] [--lin-dv 32] [--batch 8] [--seq-len 128]\n"
                     "              [--steps 2] [--rounds 3] [--threads 0 (all)] [--core recurrent|chunk]\n"
                     "              [--routing none|cler|cler-h|clvr|clvr-gate|clvr-concat] [--clock wall|cpu]\n"
                     "tokens/s of forward + backward + optimiser step per mixer, stack and optimiser.\n";
        return 0;
      }
      static const char* const kOptions[] = {"--d-model", "--layers", "--heads",   "--kv-heads", "--lin-heads", "--lin-v-heads",
                                             "--lin-dk",  "--lin-dv", "--batch",   "--seq-len",  "--steps",     "--rounds",
                                             "--threads", "--core",   "--routing", "--clock"};
      if (std::find(std::begin(kOptions), std::end(kOptions), a) == std::end(kOptions))
        fail("lm_throughput", a, "a known option (see --help)", "an unknown option");
      if (i + 1 >= argc) fail("lm_throughput", a, "a value after it", "nothing");
      const std::string v = argv[++i];
      // Sizes are bounded as train_lm's (lm/config.hpp); the tokens of a step are checked below.
      auto as_int = [&](index_t hi = kMaxSize) -> index_t { return cli::to_int("lm_throughput", a, v, 1, hi); };
      if (a == "--d-model") o.d_model = as_int();
      else if (a == "--layers") o.layers = as_int();
      else if (a == "--heads") o.heads = as_int();
      else if (a == "--kv-heads") o.kv_heads = as_int();
      else if (a == "--lin-heads") o.lin_heads = as_int();
      else if (a == "--lin-v-heads") o.lin_v_heads = as_int();
      else if (a == "--lin-dk") o.lin_dk = as_int();
      else if (a == "--lin-dv") o.lin_dv = as_int();
      else if (a == "--batch") o.batch = as_int(kMaxTokens);
      else if (a == "--seq-len") o.seq_len = as_int(kMaxTokens);
      else if (a == "--steps") o.steps = as_int();
      else if (a == "--rounds") o.rounds = as_int(kMaxSize);
      else if (a == "--threads") o.threads = static_cast<int>(cli::to_int("lm_throughput", a, v, 0, cli::kMaxThreads));
      else if (a == "--core") {
        if (v != "recurrent" && v != "chunk") fail("lm_throughput", a, "recurrent or chunk", "'" + v + "'");
        o.core = v;
      } else if (a == "--routing") {
        o.routing = v;
      } else if (a == "--clock") {
        if (v != "wall" && v != "cpu") fail("lm_throughput", a, "wall or cpu", "'" + v + "'");
        o.cpu_clock = v == "cpu";
      }
    }
    if (o.batch * o.seq_len > kMaxTokens)
      fail("lm_throughput", "--batch x --seq-len", "at most " + std::to_string(kMaxTokens) + " tokens per step",
           std::to_string(o.batch) + " x " + std::to_string(o.seq_len));
    if (o.threads > 0) set_num_threads(o.threads);

    std::vector<Config> cfgs;
    auto add = [&](const std::string& stack, MixerKind mixer) {
      for (const char* opt : {"adamw", "muon"}) {
        Config c;
        c.stack = stack, c.mixer = mixer, c.optimizer = opt;
        c.name = std::string(stack == "dense" ? "softmax" : to_string(mixer)) + " " + stack;
        ModelConfig mc;
        mc.d_model = o.d_model, mc.n_layer = o.layers, mc.n_head = o.heads, mc.n_kv_head = o.kv_heads;
        mc.lin_heads = o.lin_heads, mc.lin_v_heads = o.lin_v_heads, mc.lin_dk = o.lin_dk, mc.lin_dv = o.lin_dv;
        mc.stack = stack, mc.linear_mixer = mixer, mc.core = o.core;
        if (stack != "dense") mc.routing = o.routing;
        OptimConfig oc;
        oc.name = opt;
        Schedule sc;
        sc.steps = 1000000, sc.warmup = 10;
        c.model = std::make_unique<Model<float>>(mc);
        c.model->init(1);
        c.opt = std::make_unique<Optimizer<float>>(oc, sc, c.model->ps);
        cfgs.push_back(std::move(c));
      }
    };
    add("dense", MixerKind::gdn);
    for (MixerKind m : {MixerKind::deltanet, MixerKind::gdn, MixerKind::kda, MixerKind::gdn2})
      for (const char* stack : {"pure", "hybrid"}) add(stack, m);

    const index_t B = o.batch, Tn = o.seq_len, tokens = B * Tn;
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int> u(0, 255);
    std::vector<int> x(tokens), y(tokens);
    for (index_t i = 0; i < tokens; ++i) x[i] = u(rng), y[i] = u(rng);
    auto step = [&](Config& c) {
      c.model->ps.zero_grad();
      c.model->forward(x.data(), y.data(), B, Tn);
      c.model->backward();
      c.opt->step(c.model->ps);
    };

    std::cout << "lm_throughput: training tokens/s (forward + backward + optimiser step, float32)\n"
              << "command: " << cmd << "\n"
              << "machine: " << first_line_of("/proc/cpuinfo", "model name") << ", "
              << std::thread::hardware_concurrency() << " hardware threads, " << num_threads()
              << " OpenMP threads; load average before: " << loadavg() << "\n"
              << "model: d_model " << o.d_model << ", " << o.layers << " layers, softmax " << o.heads << " heads / "
              << o.kv_heads << " kv heads, linear " << o.lin_heads << " q/k heads x " << o.lin_dk << ", "
              << o.lin_v_heads << " value heads x " << o.lin_dv << ", core " << o.core << ", routing " << o.routing << "; " << B << " x " << Tn
              << " tokens per step; " << o.rounds << " rounds of " << o.steps << " timed steps per configuration; "
              << (o.cpu_clock ? "process CPU time" : "wall time") << "\n"
              << std::flush;
    for (Config& c : cfgs) step(c);  // warm-up (allocations, first-touch)
    for (index_t r = 0; r < o.rounds; ++r) {
      for (Config& c : cfgs) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::clock_t c0 = std::clock();
        for (index_t s = 0; s < o.steps; ++s) step(c);
        const double dt = o.cpu_clock ? double(std::clock() - c0) / CLOCKS_PER_SEC
                                      : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        c.tps.push_back(double(o.steps * tokens) / dt);
      }
      std::cerr << "round " << r + 1 << "/" << o.rounds << " done\n";
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    };
    double ref = 0;
    for (const Config& c : cfgs)
      if (c.name == "gdn pure" && c.optimizer == "adamw") ref = median(c.tps);
    std::printf("\n| mixer | stack | parameters | AdamW tokens/s | Muon tokens/s | AdamW rel. | Muon rel. | spread (min-max over rounds, AdamW) |\n");
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (size_t i = 0; i + 1 < cfgs.size(); i += 2) {
      const Config &a = cfgs[i], &m = cfgs[i + 1];
      const double ta = median(a.tps), tm = median(m.tps);
      const auto [lo, hi] = std::minmax_element(a.tps.begin(), a.tps.end());
      std::printf("| %s | %s | %lld | %.0f | %.0f | %.1f%% | %.1f%% | %.0f-%.0f |\n",
                  a.stack == "dense" ? "softmax" : to_string(a.mixer), a.stack.c_str(),
                  static_cast<long long>(a.model->num_params()), ta, tm, 100 * ta / ref, 100 * tm / ref, *lo, *hi);
    }
    std::cout << "\nrelative = tokens/s / (GDN, AdamW, pure); load average after: " << loadavg() << "\n";
  } catch (...) {
    return cli::report_error("lm_throughput", "lower --d-model, --layers, --batch or --seq-len");
  }
  return 0;
}
