// walkthroughs/table2_mixers.cpp -- the paper's Table 2 at small scale: five token mixers
// (softmax; DeltaNet, GDN, KDA, GDN2) x {AdamW, Muon} x {hybrid, pure} (softmax: dense), the same
// budget, data and seeds for all 18 configurations; relative throughput (GDN/AdamW/pure = 100%),
// saturation loss and final loss, printed beside the paper's values (shared/paper/tables.json).
// docs/walkthrough-table2.md explains the run and its results.
//
//   table2_mixers --quick                       CI: tiny model, 30 steps, 1 seed (seconds)
//   table2_mixers --jobs 8 --threads 2          full: walkthroughs/paper/scales.hpp's model, 2 seeds
//   table2_mixers --list                        the runs
// Output (--out, default walkthroughs/results/table2 or .../table2_quick): runs/<run>.csv (loss
// curves), logs/, timing.csv, runs.csv, table2.csv, table2.md.
#include <algorithm>
#include <iostream>

#include "walkthroughs/paper/scales.hpp"

using namespace linattn;
using namespace linattn::paper;

namespace {

const char* kIntro = R"(Table 2 at small scale: which token mixer, optimiser and stack?

The paper (Sec.6.1, Table 2; 350M parameters, 15B tokens, one seed each) trains softmax attention
and four linear mixers (DeltaNet, Gated DeltaNet, Kimi Delta Attention, Gated DeltaNet-2), each with
AdamW and with Muon, as hybrid stacks (every third layer softmax) and pure stacks, and reports:
Muon ends below AdamW for every mixer; hybrid ends below pure for every mixer and optimiser; KDA +
Muon + hybrid has the lowest final loss (2.273); GDN/AdamW/pure is the fastest (100%), KDA the
slowest (68.5-74.4%), then softmax/Muon (79.7%); softmax/AdamW (81.7%) is level with GDN2.

Here: the same 18 configurations as byte-level models on tiny Shakespeare, with the model and
schedule of walkthroughs/paper/scales.hpp, several seeds each (seed = initialisation and batch
order), losses in nats per character. Throughput is measured afterwards, one configuration at a
time (median seconds per training iteration), relative to GDN/AdamW/pure. At this scale the
losses measure how fast each configuration learns in a short budget; throughput measures this
project's CPU trainer, not the paper's GPU kernels.
)";

struct Config {
  std::string arch, optimizer, stack;
  std::string group() const { return arch + "-" + optimizer + "-" + stack; }
};

std::vector<Config> configs() {
  std::vector<Config> cs;
  for (const char* opt : {"adamw", "muon"}) cs.push_back({"softmax", opt, "dense"});
  for (const char* arch : {"deltanet", "gdn", "kda", "gdn2"})
    for (const char* opt : {"adamw", "muon"})
      for (const char* stack : {"hybrid", "pure"}) cs.push_back({arch, opt, stack});
  return cs;
}

lm::TrainOptions options_of(const Cli& c, const Config& k) {
  const index_t steps = c.get_int("steps", 1);
  lm::TrainOptions o = base_options(c.quick, steps);
  set_options(o, {{"stack", k.stack}, {"optimizer", k.optimizer}, {"core", c.get("core")}});
  if (k.arch != "softmax") set_options(o, {{"mixer", k.arch}});
  set_options(o, {{"lr", c.get(k.optimizer == "muon" ? "lr-muon" : "lr-adamw")}, {"adam-lr", c.get("lr-adamw")}});
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_wait(argv);
  try {
    Cli c = parse_cli(argc, argv, "table2_mixers", "table2", {{"steps", "", "optimiser steps per run [quick 30, full 400]"},
                                                         {"lr-adamw", "3e-3", "peak lr of AdamW (and Muon's Adam group)"},
                                                         {"lr-muon", "3e-3", "peak lr of Muon's matrices"},
                                                         {"core", "chunk", "recurrence core of the linear layers"}});
    for (ExtraOption& e : c.extra)
      if (e.name == "steps" && e.value.empty()) e.value = c.quick ? "30" : "400";
    const index_t seeds = c.seeds > 0 ? c.seeds : (c.quick ? 1 : 2);
    const index_t timing_steps = c.timing_steps >= 0 ? c.timing_steps : (c.quick ? 2 : 10);

    std::vector<Run> runs;
    for (const Config& k : configs())
      add_seeded(runs, k.group(), {{"arch", k.arch}, {"optimizer", k.optimizer}, {"stack", k.stack}}, options_of(c, k),
                 seeds);
    if (c.only.empty() && !c.list) std::cout << kIntro << '\n';
    std::vector<Result> rs;
    const bool all_ok = drive(c, runs, rs);

    // Throughput: one configuration at a time, in this process.
    std::map<std::string, double> tps;
    const std::string timing_csv = c.out + "/timing.csv";
    if (timing_steps > 0) {
      const lm::Dataset data = lm::load_tinyshakespeare(corpus_path(c.data));
      CsvFile f(timing_csv, {"config", "tokens_per_iter", "median_s", "min_s", "max_s", "iters", "threads", "tokens_per_s", "clock"});
      std::cout << "\ntiming " << timing_steps << " iterations per configuration (after 2 untimed), one at a time, "
                << (c.run_threads() ? c.run_threads() : lm::num_threads()) << " threads, " << c.clock << " clock\n";
      for (const Config& k : configs()) {
        lm::TrainOptions o = options_of(c, k);
        o.seed = 1;
        const Timing t = time_iterations(o, data, 2, timing_steps, c.run_threads(), c.clock == "cpu");
        tps[k.group()] = t.tokens_per_s();
        f.row({k.group(), std::to_string(t.tokens), fixed(t.median_s, 5), fixed(t.min_s, 5), fixed(t.max_s, 5),
               std::to_string(t.iters), std::to_string(lm::num_threads()), fixed(t.tokens_per_s(), 1), c.clock});
        std::printf("  %-22s %8.4f s/iter  %9.0f tokens/s\n", k.group().c_str(), t.median_s, t.tokens_per_s());
      }
    } else {  // reuse the committed timing
      std::ifstream f(timing_csv);
      std::string line;
      std::getline(f, line);
      while (std::getline(f, line)) {
        std::stringstream ss(line);
        std::vector<std::string> col;
        for (std::string x; std::getline(ss, x, ',');) col.push_back(x);
        if (col.size() < 8) continue;
        double v = NAN;  // fixed() writes "nan" for a non-finite rate
        if (col[7] != "nan" && !cli::read_double(col[7], v))
          fail("table2_mixers", "timing file '" + timing_csv + "'", "tokens/s in column 8 (--timing-steps 0 reuses it)",
               "'" + line + "'");
        tps[col[0]] = v;
      }
    }
    const double ref = tps.count("gdn-adamw-pure") ? tps["gdn-adamw-pure"] : NAN;

    const Json paper = load_paper_tables().at("table2_350M_15B");
    MdTable t;
    t.header = {"mixer", "optimizer", "stack", "rel. throughput", "paper", "saturation loss", "paper", "final loss",
                "paper"};
    CsvFile out(c.out + "/table2.csv", {"arch", "optimizer", "stack", "seeds", "rel_throughput_pct", "saturation_mean",
                                        "saturation_sd", "final_mean", "final_sd", "paper_rel_throughput_pct",
                                        "paper_saturation", "paper_final"});
    Checks ck;
    check_runs(ck, rs);
    for (const Config& k : configs()) {
      const Stat sat = group_stat(rs, k.group(), saturation_of), fin = group_stat(rs, k.group(), final_of);
      const double rel = 100.0 * tps[k.group()] / ref;
      const Json* p = paper_row(paper, {k.arch, k.optimizer, k.stack});
      const double p_rel = p ? (*p)[3].num : NAN, p_sat = p ? (*p)[4].num : NAN, p_fin = p ? (*p)[5].num : NAN;
      t.add({k.arch, k.optimizer, k.stack, fixed(rel, 1) + "%", fixed(p_rel, 1) + "%", mean_sd(sat), fixed(p_sat, 3),
             mean_sd(fin), fixed(p_fin, 3)});
      out.row({k.arch, k.optimizer, k.stack, std::to_string(fin.n), fixed(rel, 2), fixed(sat.mean, 6), fixed(sat.sd, 6),
               fixed(fin.mean, 6), fixed(fin.sd, 6), fixed(p_rel, 1), fixed(p_sat, 3), fixed(p_fin, 3)});
      ck.expect(p != nullptr, k.group() + " has a row in the paper's Table 2");
      ck.finite(rel, k.group() + " relative throughput");
      ck.finite(fin.mean, k.group() + " mean final loss");
    }

    // The paper's orderings, each with seed-paired deltas (mean ± sd over seeds).
    MdTable ord;
    ord.header = {"ordering (paper)", "pair", "paper delta", "ours: delta of final loss", "holds here", "resolved"};
    auto pair = [&](const Config& a, const Config& b, const std::string& claim) {
      const Stat d = paired_delta(rs, a.group(), b.group(), final_of);
      const Json *pa = paper_row(paper, {a.arch, a.optimizer, a.stack}), *pb = paper_row(paper, {b.arch, b.optimizer, b.stack});
      const double pd = pa && pb ? (*pb)[5].num - (*pa)[5].num : NAN;
      ord.add({claim, b.group() + " minus " + a.group(), signed_fixed(pd, 3), mean_sd(d, 4, true),
               d.mean < 0 ? "yes" : "no", resolved(d) ? "yes" : "no"});
    };
    for (const char* arch : {"softmax", "deltanet", "gdn", "kda", "gdn2"})
      for (const char* stack : {"dense", "hybrid", "pure"}) {
        if ((std::string(arch) == "softmax") != (std::string(stack) == "dense")) continue;
        pair({arch, "adamw", stack}, {arch, "muon", stack}, "Muon below AdamW");
      }
    for (const char* arch : {"deltanet", "gdn", "kda", "gdn2"})
      for (const char* opt : {"adamw", "muon"}) pair({arch, opt, "pure"}, {arch, opt, "hybrid"}, "hybrid below pure");

    // Throughput ranking, ours and the paper's.
    std::vector<std::pair<double, std::string>> ours, theirs;
    for (const Config& k : configs()) {
      ours.push_back({-tps[k.group()], k.group()});
      if (const Json* p = paper_row(paper, {k.arch, k.optimizer, k.stack})) theirs.push_back({-(*p)[3].num, k.group()});
    }
    std::sort(ours.begin(), ours.end()), std::sort(theirs.begin(), theirs.end());
    std::string rank = "\nThroughput ranking, fastest first:\n  ours:  ";
    for (auto& [v, g] : ours) rank += g + " ";
    rank += "\n  paper: ";
    for (auto& [v, g] : theirs) rank += g + " ";
    // Spearman rank correlation of the two rankings.
    std::map<std::string, double> ro, rt;
    for (size_t i = 0; i < ours.size(); ++i) ro[ours[i].second] = double(i);
    for (size_t i = 0; i < theirs.size(); ++i) rt[theirs[i].second] = double(i);
    double d2 = 0;
    for (auto& [g, r] : ro) d2 += (r - rt[g]) * (r - rt[g]);
    const double n = double(ro.size()), spearman = 1.0 - 6.0 * d2 / (n * (n * n - 1.0));
    rank += "\n  Spearman rank correlation with the paper: " + fixed(spearman, 2) + "\n";
    ck.finite(spearman, "throughput rank correlation");

    std::string md = "## Table 2 at small scale (" + std::string(c.quick ? "quick mode: a smoke test, not a result" : "full mode") +
                     ")\n\n" + provenance(c) + std::to_string(seeds) + " seed(s) per configuration, " + c.get("steps") +
                     " steps of " + std::to_string(runs[0].opt.batch * runs[0].opt.seq_len) +
                     " tokens; losses in nats/char as mean ± sd over seeds (paper: nats/token of a 350M model, 15B tokens)\n\n" +
                     t.str() +
                     "\nThe paper's orderings, as seed-paired deltas of the final loss (negative = the claim holds; "
                     "resolved = |mean| > 2 sd/sqrt(seeds), optimistic with few seeds):\n\n" +
                     ord.str() + rank;
    emit(c, "table2.md", "\n" + md);
    write_runs_csv(c, rs);
    std::cout << "\nfiles: " << c.out << "/{table2.md, table2.csv, timing.csv, runs.csv, runs/*.csv}\n";
    if (!all_ok) ck.expect(false, "every run finished");
    return ck.verdict();
  } catch (...) {
    return cli::report_error("table2_mixers");
  }
}
