// walkthroughs/table7_routing.cpp -- the paper's Table 7 at small scale: CLER-H (the write error
// r projected into the residual stream, epsilon_l = P_l r_l, Eq.29 with s = r) and CLVR (the
// write value, s = v) against the matched baseline, GDN and DeltaNet hosts, at two training
// budgets, several seeds; printed beside the paper's deltas.
// docs/walkthrough-table7.md explains the run and its results.
//
//   table7_routing --quick                    CI: tiny model, budgets 20 and 40 steps, 1 seed
//   table7_routing --jobs 8 --threads 2       full: budgets 150 and 450 steps, 3 seeds
// Matched: same host, optimiser (Muon, as the paper's 350M routing runs), schedule, seed; only
// --routing differs. P_l is zero-initialised, so every routed model equals its baseline at step 0.
// Output (--out, default walkthroughs/results/table7 or .../table7_quick): table7.md, table7.csv,
// runs.csv, runs/<run>.csv, logs/.
#include <iostream>
#include <sstream>

#include "walkthroughs/paper/scales.hpp"

using namespace linattn;
using namespace linattn::paper;

namespace {

const char* kIntro = R"(Table 7 at small scale: routing the error or the value into the residual stream

The paper (Sec.6.6, Table 7; one seed per row) adds P_l s_l to the residual stream after every
linear layer l, P_l zero-initialised: CLER-H routes the write error (s = r), CLVR the write
value (s = v); the two have the same parameters, so they compare content. Deltas against the
matched baseline (negative = better), CLER-H / CLVR:
  GDN 350M 1B tokens      -0.0073 / -0.0103     DeltaNet 350M 1B tokens   -0.0047 / -0.0119
  GDN 350M 15B tokens     -0.0042 / -0.0059     DeltaNet 350M 15B tokens  -0.0002 / -0.0016
  GDN 1.3B 40B tokens     -0.0010 / -0.0019
The claimed orderings: CLVR below CLER-H below baseline in every row; the gains shrink with a
longer budget.

Here: both hosts as hybrid stacks with Muon at the walkthroughs' small scale, a short and a
3x longer budget, several seeds, seed-paired deltas with their spread. The paper's effects are
0.001-0.01 nats; whether a few seeds of a tiny model resolve them is printed, not assumed.
)";

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_wait(argv);
  try {
    Cli c = parse_cli(argc, argv, "table7_routing", "table7",
                      {{"budgets", "", "the two step budgets, comma-separated [quick 20,40; full 150,450]"},
                       {"optimizer", "muon", "adamw | muon"},
                       {"lr", "3e-3", "peak lr (Muon: its matrices; the Adam group uses --adam-lr)"},
                       {"adam-lr", "3e-3", "Muon's Adam group lr"},
                       {"routed-error", "paper", "what CLER-H routes: paper (r = v - v_bar) | written (beta r)"},
                       {"core", "chunk", "recurrence core: chunk | recurrent (equal to rounding; the reduced run in results/table7_reduced_100_300steps used recurrent)"},
                       {"stack", "hybrid", "stack of the hosts: hybrid | pure"}});
    for (ExtraOption& e : c.extra)
      if (e.name == "budgets" && e.value.empty()) e.value = c.quick ? "20,40" : "150,450";
    const index_t seeds = c.seeds > 0 ? c.seeds : (c.quick ? 1 : 3);
    const std::vector<std::string> budgets = c.get_list("budgets");
    const std::vector<long long> budget_steps = cli::to_int_list("table7_routing", "--budgets", c.get("budgets"), 1);
    if (budgets.size() != 2) fail("table7_routing", "--budgets", "two step counts", c.get("budgets"));
    const std::vector<std::string> hosts{"gdn", "deltanet"}, variants{"none", "cler-h", "clvr"};
    auto group = [](const std::string& host, const std::string& steps, const std::string& routing) {
      return host + "-" + steps + "steps-" + routing;
    };
    std::vector<Run> runs;
    for (const std::string& host : hosts)
      for (size_t b = 0; b < budgets.size(); ++b)
        for (const std::string& routing : variants) {
          const std::string& steps = budgets[b];
          lm::TrainOptions o = base_options(c.quick, budget_steps[b]);
          set_options(o, {{"stack", c.get("stack")}, {"mixer", host}, {"optimizer", c.get("optimizer")},
                          {"core", c.get("core")}, {"routing", routing}, {"routed-error", c.get("routed-error")},
                          {"lr", c.get("lr")}, {"adam-lr", c.get("adam-lr")}});
          add_seeded(runs, group(host, steps, routing), {{"host", host}, {"steps", steps}, {"routing", routing}}, o, seeds);
        }
    if (c.only.empty() && !c.list) std::cout << kIntro << '\n';
    std::vector<Result> rs;
    const bool all_ok = drive(c, runs, rs);

    const Json paper = load_paper_tables().at("table7_hidden_routing");
    Checks ck;
    check_runs(ck, rs);
    MdTable t;
    t.header = {"host", "budget", "baseline (ours)", "CLER-H delta (ours)", "CLVR delta (ours)", "CLVR - CLER-H (ours)",
                "resolved (H / V / V-H)", "seed pairs (H / V)", "paper budget", "paper baseline", "paper CLER-H delta", "paper CLVR delta"};
    CsvFile f(c.out + "/table7.csv", {"host", "steps", "seeds", "baseline_mean", "baseline_sd", "cler_h_delta_mean",
                                      "cler_h_delta_sd", "clvr_delta_mean", "clvr_delta_sd", "clvr_minus_cler_h_mean",
                                      "clvr_minus_cler_h_sd", "paper_tokens", "paper_baseline", "paper_cler_h_delta",
                                      "paper_clvr_delta"});
    int clvr_below_h = 0, h_below_base = 0, rows = 0;
    for (const std::string& host : hosts)
      for (size_t bi = 0; bi < budgets.size(); ++bi) {
        const std::string& steps = budgets[bi];
        const std::string g0 = group(host, steps, "none"), gh = group(host, steps, "cler-h"), gv = group(host, steps, "clvr");
        const Stat base = group_stat(rs, g0, final_of);
        const Stat dh = paired_delta(rs, g0, gh, final_of), dv = paired_delta(rs, g0, gv, final_of);
        const Stat dvh = paired_delta(rs, gh, gv, final_of);
        const std::string ptok = bi == 0 ? "1B" : "15B";
        const Json* p = paper_row(paper, {host, "350M", ptok});
        const double pb = p ? (*p)[3].num : NAN, ph = p ? (*p)[4].num : NAN, pv = p ? (*p)[5].num : NAN;
        auto yn = [](const Stat& s) { return resolved(s) ? std::string("yes") : std::string("no"); };
        t.add({host, steps + " steps", mean_sd(base), mean_sd(dh, 4, true), mean_sd(dv, 4, true), mean_sd(dvh, 4, true),
               yn(dh) + " / " + yn(dv) + " / " + yn(dvh), std::to_string(dh.n) + " / " + std::to_string(dv.n), "350M, " + ptok, fixed(pb), signed_fixed(ph), signed_fixed(pv)});
        f.row({host, steps, std::to_string(dh.n), fixed(base.mean, 6), fixed(base.sd, 6), fixed(dh.mean, 6), fixed(dh.sd, 6),
               fixed(dv.mean, 6), fixed(dv.sd, 6), fixed(dvh.mean, 6), fixed(dvh.sd, 6), ptok, fixed(pb), fixed(ph), fixed(pv)});
        ck.expect(p != nullptr, host + " " + ptok + " has a row in the paper's Table 7");
        check_matched(ck, rs, g0, gh), check_matched(ck, rs, g0, gv);
        ck.finite(dh.mean, host + " " + steps + " CLER-H delta");
        ck.finite(dv.mean, host + " " + steps + " CLVR delta");
        if (std::isfinite(dh.mean) && std::isfinite(dvh.mean))  // rows with both deltas measured
          ++rows, clvr_below_h += dvh.mean < 0, h_below_base += dh.mean < 0;
      }
    std::ostringstream md;
    md << "## Table 7 at small scale (" << (c.quick ? "quick mode: a smoke test, not a result" : "full mode") << ")\n\n"
       << provenance(c) << seeds << " seed(s), " << c.get("stack") << " stacks, " << c.get("optimizer") << ", "
       << runs[0].opt.batch * runs[0].opt.seq_len << " tokens per step, routed error (CLER-H) " << c.get("routed-error")
       << "; final validation loss in nats/char; deltas seed-paired, mean ± sd (negative: routing better); resolved = "
       << "|mean| > 2 sd/sqrt(seeds)\n\n"
       << t.str() << "\nOur rows showing the paper's orderings: CLER-H below baseline in " << h_below_base << " of " << rows
       << " rows, CLVR below CLER-H in " << clvr_below_h << " of " << rows << " rows (means, over the rows with both deltas measured; see 'resolved').\n";
    emit(c, "table7.md", "\n" + md.str());
    write_runs_csv(c, rs);
    if (!all_ok) ck.expect(false, "every run finished");
    return ck.verdict();
  } catch (...) {
    return cli::report_error("table7_routing");
  }
}
