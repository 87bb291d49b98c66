// walkthroughs/lr_sweep.cpp -- the paper's Figs.4-5 at small scale: final validation loss
// against the peak learning rate, per mixer (softmax; DeltaNet, GDN, KDA, GDN2 as hybrid stacks)
// and optimiser (AdamW, Muon). docs/walkthrough-lr-sweep.md explains the run and its results.
//
//   lr_sweep --quick                          CI: tiny model, lr 1e-3 and 1e-2, 1 seed
//   lr_sweep --jobs 8 --threads 2             full: lr 3e-4 ... 3e-2 (5 values), 1 seed
// In Muon mode --lr is the peak lr of the hidden matrices; the Adam group (embedding, head, norms,
// gates) keeps --adam-lr, so the sweep moves the Muon part alone (our choice: the paper does not
// say which parameter group its sweep moved).
// Output (--out, default walkthroughs/results/lr_sweep or .../lr_sweep_quick): lr_sweep.md,
// lr_sweep.csv, runs.csv, runs/<run>.csv, logs/.
#include <iostream>
#include <sstream>

#include "walkthroughs/paper/scales.hpp"

using namespace linattn;
using namespace linattn::paper;

namespace {

const char* kIntro = R"(Figs.4-5 at small scale: the learning rate that each mixer and optimiser wants

The paper (Sec.6.2, Figs.4-5; 350M hybrid models, 2,000 steps, about 1B tokens) sweeps the peak
learning rate for every mixer with AdamW and with Muon. It reports, in words: with Muon the best
learning rate is around 3e-4 for all mixers; with AdamW the linear mixers prefer about 1e-3 and
softmax about 3e-4; too small a rate under-trains, too large a rate makes the loss worse or
diverge. The ranking of the mixers can depend on the learning rate chosen.

Here: the same sweep at the walkthroughs' small scale (hybrid stacks; softmax dense), one seed
per point unless --seeds says otherwise. A small model wants a larger learning rate than a 350M
one, so the optimum moves; the question is the shape (a U in log lr) and whether the optimum
differs between mixers and optimisers.
)";

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_wait(argv);
  try {
    Cli c = parse_cli(argc, argv, "lr_sweep", "lr_sweep",
                      {{"steps", "", "optimiser steps per run [quick 24, full 300]"},
                       {"lrs", "", "peak learning rates, comma-separated [quick 1e-3,1e-2; full 3e-4,1e-3,3e-3,1e-2,3e-2]"},
                       {"adam-lr", "3e-3", "Muon mode: the Adam group's lr (fixed during the sweep)"},
                       {"mixers", "softmax,deltanet,gdn,kda,gdn2", "mixers to sweep"},
                       {"core", "chunk", "recurrence core of the linear layers"}});
    for (ExtraOption& e : c.extra) {
      if (e.name == "steps" && e.value.empty()) e.value = c.quick ? "24" : "300";
      if (e.name == "lrs" && e.value.empty()) e.value = c.quick ? "1e-3,1e-2" : "3e-4,1e-3,3e-3,1e-2,3e-2";
    }
    const index_t seeds = c.seeds > 0 ? c.seeds : 1;
    const std::vector<std::string> lrs = c.get_list("lrs"), mixers = c.get_list("mixers");
    for (double lr : cli::to_double_list("lr_sweep", "--lrs", c.get("lrs")))
      if (!(lr > 0)) fail("lr_sweep", "--lrs", "positive learning rates", num_str(lr));
    const index_t steps = c.get_int("steps", 1);
    std::vector<Run> runs;
    auto group = [](const std::string& m, const std::string& opt, const std::string& lr) { return m + "-" + opt + "-lr" + lr; };
    for (const std::string& m : mixers)
      for (const char* opt : {"adamw", "muon"})
        for (const std::string& lr : lrs) {
          lm::TrainOptions o = base_options(c.quick, steps);
          set_options(o, {{"stack", m == "softmax" ? "dense" : "hybrid"}, {"optimizer", opt}, {"core", c.get("core")},
                          {"lr", lr}, {"adam-lr", std::string(opt) == "muon" ? c.get("adam-lr") : lr}});
          if (m != "softmax") set_options(o, {{"mixer", m}});
          add_seeded(runs, group(m, opt, lr), {{"mixer", m}, {"optimizer", opt}, {"lr", lr}}, o, seeds);
        }
    if (c.only.empty() && !c.list) std::cout << kIntro << '\n';
    std::vector<Result> rs;
    const bool all_ok = drive(c, runs, rs);

    Checks ck;
    for (const Result& r : rs) {  // a too-large lr may diverge: that is a result, not a failure
      ck.expect(r.complete, r.run->name + " completed (a diverged run counts: it has a diverged row)");
    }
    // per mixer and optimiser, some learning rate of the sweep must lower the loss (checked below)
    MdTable t;
    t.header = {"mixer", "optimizer"};
    for (const std::string& lr : lrs) t.header.push_back("lr " + lr);
    t.header.push_back("best lr");
    CsvFile f(c.out + "/lr_sweep.csv", {"mixer", "optimizer", "lr", "seeds", "final_mean", "final_sd", "init_loss"});
    for (const std::string& m : mixers)
      for (const char* opt : {"adamw", "muon"}) {
        std::vector<std::string> row{m, opt};
        double best = INFINITY;
        std::string best_lr = "-";
        bool some_trained = false;
        for (const std::string& lr : lrs) {
          const Stat s = group_stat(rs, group(m, opt, lr), final_of);
          const Stat init = group_stat(rs, group(m, opt, lr), [](const Result& r) { return r.init_loss; });
          row.push_back(std::isfinite(s.mean) ? mean_sd(s) : "diverged");
          f.row({m, opt, lr, std::to_string(s.n), fixed(s.mean, 6), fixed(s.sd, 6), fixed(init.mean, 6)});
          if (std::isfinite(s.mean) && s.mean < best) best = s.mean, best_lr = lr;
          some_trained = some_trained || (std::isfinite(s.mean) && s.mean < init.mean);
        }
        row.push_back(best_lr);
        t.add(row);
        ck.expect(some_trained, m + "/" + opt + ": some learning rate lowered the loss");
      }
    std::ostringstream md;
    md << "## Learning-rate sweep at small scale (" << (c.quick ? "quick mode: a smoke test, not a result" : "full mode")
       << ")\n\n"
       << provenance(c) << seeds << " seed(s), " << c.get("steps") << " steps of " << runs[0].opt.batch * runs[0].opt.seq_len
       << " tokens; final validation loss (nats/char), mean ± sd over seeds; Muon's Adam group at lr "
       << c.get("adam-lr") << "\n\n"
       << t.str()
       << "\nPaper (words, Sec.6.2): Muon best near 3e-4 for every mixer; AdamW: linear mixers near 1e-3, softmax near "
          "3e-4 (350M models; a small model's optimum lies higher).\n";
    emit(c, "lr_sweep.md", "\n" + md.str());
    write_runs_csv(c, rs);
    if (!all_ok) std::cout << "note: some runs stopped early (a diverged run stops with a non-finite loss)\n";
    return ck.verdict();
  } catch (...) {
    return cli::report_error("lr_sweep");
  }
}
