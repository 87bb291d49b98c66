// walkthroughs/fig6_iteration_time.cpp -- the paper's Fig.6 at small scale: seconds per training
// iteration (forward + backward + optimiser step) against the sequence length T at a constant
// number of tokens per step, for a dense softmax stack, a GDN hybrid and a GDN pure stack, and the
// increase from the shortest to the longest T. docs/walkthrough-fig6.md explains the run.
//
//   fig6_iteration_time --quick               CI: tiny model, T = 16, 32, 64
//   fig6_iteration_time --threads 2           full: T = 256 ... 2048 at 4096 tokens per step
// Timing is made one configuration at a time in this process (never with other runs going): the
// median of --timing-steps iterations after 2 untimed ones, with min and max beside it.
// Output (--out, default walkthroughs/results/fig6 or .../fig6_quick): fig6.csv, fig6.md.
#include <iostream>
#include <sstream>

#include "walkthroughs/paper/scales.hpp"

using namespace linattn;
using namespace linattn::paper;

namespace {

const char* kIntro = R"(Fig.6 at small scale: how the cost of an iteration grows with the context length

The paper (Sec.6.3, Fig.6; 350M models on GH200 nodes; SPEC: constant tokens per step) measures seconds
per iteration at 4k, 16k and 32k tokens of context: softmax attention grows by 192% from 4k to 32k
(3.37 s at 32k), the GDN hybrid (a third of the layers softmax) by 65% (1.56 s), GDN pure by 8%
(0.96 s). With the tokens per step fixed, softmax attention's cost per token grows linearly in T
(each token attends to up to T others) while a linear layer's cost per token is constant.

Here: the same three stacks at the walkthroughs' small width, T from the shortest to the longest
length below (8x, as 4k -> 32k), batch = tokens per step / T, timed one configuration at a time on
this CPU. The linear layers use the chunked CPU kernels (--core chunk) or the per-token
recurrence (--core recurrent). At small T the MLPs and projections dominate and all three cost
about the same; the question is the growth.
)";

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_wait(argv);
  try {
    Cli c = parse_cli(argc, argv, "fig6_iteration_time", "fig6",
                      {{"lengths", "", "sequence lengths, comma-separated [quick 16,32,64; full 256,512,1024,2048]"},
                       {"tokens", "", "tokens per step [quick 128; full 4096]"},
                       {"core", "chunk", "recurrence core of the GDN layers"}});
    for (ExtraOption& e : c.extra) {
      if (e.name == "lengths" && e.value.empty()) e.value = c.quick ? "16,32,64" : "256,512,1024,2048";
      if (e.name == "tokens" && e.value.empty()) e.value = c.quick ? "128" : "4096";
    }
    const index_t iters = c.timing_steps > 0 ? c.timing_steps : (c.quick ? 2 : 6);
    const std::vector<long long> ls = cli::to_int_list("fig6_iteration_time", "--lengths", c.get("lengths"), 1);
    const std::vector<index_t> lengths(ls.begin(), ls.end());
    const index_t tokens = c.get_int("tokens", 1, lm::kMaxTokens);
    for (index_t T : lengths)
      if (T <= 0 || tokens % T) fail("fig6_iteration_time", "--lengths", "divisors of --tokens = " + std::to_string(tokens), std::to_string(T));
    if (c.list || !c.only.empty()) {
      std::cout << "fig6_iteration_time has no training runs (timing only)\n";
      return 0;
    }
    std::cout << kIntro << '\n';
    const lm::Dataset data = lm::load_tinyshakespeare(corpus_path(c.data));
    struct Cfg { std::string name, stack; };
    const std::vector<Cfg> cfgs{{"softmax", "dense"}, {"gdn_hybrid", "hybrid"}, {"gdn_pure", "pure"}};
    std::filesystem::create_directories(c.out);
    CsvFile f(c.out + "/fig6.csv", {"config", "seq_len", "batch", "tokens_per_iter", "median_s", "min_s", "max_s", "iters", "threads", "clock"});
    std::map<std::string, std::vector<double>> med;
    std::cout << "timing " << iters << " iterations per point (after 2 untimed), one at a time\n";
    Checks ck;
    for (const Cfg& k : cfgs)
      for (index_t T : lengths) {
        lm::TrainOptions o = base_options(c.quick, 100);
        set_options(o, {{"stack", k.stack}, {"mixer", "gdn"}, {"core", c.get("core")}, {"optimizer", "adamw"}});
        o.seq_len = T, o.batch = tokens / T, o.seed = 1;
        const Timing t = time_iterations(o, data, 2, iters, c.run_threads(), c.clock == "cpu");
        med[k.name].push_back(t.median_s);
        f.row({k.name, std::to_string(T), std::to_string(o.batch), std::to_string(t.tokens), fixed(t.median_s, 5),
               fixed(t.min_s, 5), fixed(t.max_s, 5), std::to_string(iters), std::to_string(lm::num_threads()), c.clock});
        std::printf("  %-11s T %5lld batch %4lld  %8.4f s/iter (min %.4f, max %.4f)\n", k.name.c_str(),
                    static_cast<long long>(T), static_cast<long long>(o.batch), t.median_s, t.min_s, t.max_s);
        std::fflush(stdout);
        ck.finite(t.median_s, k.name + " T=" + std::to_string(T) + " seconds per iteration");
        ck.expect(t.median_s > 0, k.name + " T=" + std::to_string(T) + " took a positive time");
      }
    const Json paper = load_paper_tables().at("figure6_iteration_time_s");
    MdTable t;
    t.header = {"config"};
    for (index_t T : lengths) t.header.push_back("T=" + std::to_string(T) + " (s/iter)");
    t.header.insert(t.header.end(), {"increase " + std::to_string(lengths.front()) + " -> " + std::to_string(lengths.back()),
                                     "paper at 32k (s/iter)", "paper increase 4k -> 32k"});
    for (const Cfg& k : cfgs) {
      std::vector<std::string> row{k.name};
      for (double s : med[k.name]) row.push_back(fixed(s, 4));
      const double inc = 100.0 * (med[k.name].back() / med[k.name].front() - 1.0);
      row.push_back(signed_fixed(inc, 0) + "%");
      double p32 = NAN, pinc = NAN;
      for (const Json& r : paper.at("rows").arr)
        if (r.at("config").str == k.name) p32 = r.at("at_32k_s").num, pinc = r.at("increase_4k_to_32k_pct").num;
      row.push_back(fixed(p32, 2));
      row.push_back("+" + fixed(pinc, 0) + "%");
      t.add(row);
      ck.finite(inc, k.name + " increase");
    }
    const double r_soft = med["softmax"].back() / med["softmax"].front();
    const double r_pure = med["gdn_pure"].back() / med["gdn_pure"].front();
    const double r_hyb = med["gdn_hybrid"].back() / med["gdn_hybrid"].front();
    std::ostringstream md;
    md << "## Fig.6 at small scale (" << (c.quick ? "quick mode: a smoke test, not a result" : "full mode") << ")\n\n"
       << provenance(c) << tokens << " tokens per iteration, core " << c.get("core") << ", " << lm::num_threads()
       << " threads, " << c.clock << " clock; median of " << iters << " iterations\n\n"
       << t.str() << "\nOrdering of the growth (paper: softmax > GDN hybrid > GDN pure): "
       << (r_soft > r_hyb && r_hyb > r_pure ? "holds here" : "does not hold here") << " (x" << fixed(r_soft, 2) << ", x"
       << fixed(r_hyb, 2) << ", x" << fixed(r_pure, 2) << ")\n";
    emit(c, "fig6.md", "\n" + md.str());
    return ck.verdict();
  } catch (...) {
    return cli::report_error("fig6_iteration_time");
  }
}
