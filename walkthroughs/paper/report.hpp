// walkthroughs/paper/report.hpp -- what the paper walkthroughs print and write: mean and spread
// over seeds, Markdown tables, CSV files, and the checks of the --quick mode (every number
// finite, training lowered the loss) that decide the exit code.
#pragma once

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "reference/check.hpp"
#include "walkthroughs/lm/cli.hpp"

namespace linattn::paper {

/// Mean and sample standard deviation (n - 1; 0 for one value) of xs.
struct Stat {
  double mean = NAN, sd = NAN;
  size_t n = 0;
};
inline Stat stats_of(const std::vector<double>& xs) {
  Stat s;
  s.n = xs.size();
  if (xs.empty()) return s;
  double m = 0;
  for (double x : xs) m += x;
  m /= double(xs.size());
  double v = 0;
  for (double x : xs) v += (x - m) * (x - m);
  s.mean = m;
  s.sd = xs.size() > 1 ? std::sqrt(v / double(xs.size() - 1)) : 0.0;
  return s;
}

/// x with `digits` decimals ("nan" stays visible).
inline std::string fixed(double x, int digits = 4) {
  if (!std::isfinite(x)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, x);
  return buf;
}
/// x with an explicit sign, for deltas.
inline std::string signed_fixed(double x, int digits = 4) {
  if (!std::isfinite(x)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%+.*f", digits, x);
  return buf;
}
/// "mean ± sd" (just the mean for one seed).
inline std::string mean_sd(const Stat& s, int digits = 4, bool sign = false) {
  const std::string m = sign ? signed_fixed(s.mean, digits) : fixed(s.mean, digits);
  if (s.n <= 1) return m;
  return m + " ± " + fixed(s.sd, digits);
}

/// The standard error of a mean delta is sd / sqrt(n); the walkthroughs call an effect
/// "resolved" when |mean| > 2 sd / sqrt(n) (about a 95% interval excluding 0; with few seeds
/// this is optimistic, and it is stated as such where printed).
inline bool resolved(const Stat& d) { return d.n > 1 && std::abs(d.mean) > 2.0 * d.sd / std::sqrt(double(d.n)); }

/// A Markdown table built row by row.
struct MdTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  void add(std::vector<std::string> r) { rows.push_back(std::move(r)); }
  std::string str() const {
    std::ostringstream os;
    auto line = [&](const std::vector<std::string>& cells) {
      os << '|';
      for (const std::string& c : cells) os << ' ' << c << " |";
      os << '\n';
    };
    line(header);
    os << '|';
    for (size_t i = 0; i < header.size(); ++i) os << " --- |";
    os << '\n';
    for (const auto& r : rows) line(r);
    return os.str();
  }
};

/// A CSV file written row by row (values are not quoted: the walkthroughs never write commas).
struct CsvFile {
  std::ofstream f;
  CsvFile(const std::string& path, const std::vector<std::string>& header) : f(path, std::ios::trunc) {
    if (!f) fail("CsvFile", "path", "a writable file", cli::unwritable(path));
    row(header);
  }
  void row(const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) f << (i ? "," : "") << cells[i];
    f << '\n';
  }
};

/// The checks of a walkthrough: each failed one is printed; the program exits 1 if any failed.
struct Checks {
  int failed = 0, passed = 0;
  void expect(bool ok, const std::string& what) {
    if (ok) {
      ++passed;
      return;
    }
    ++failed;
    std::cout << "CHECK FAILED: " << what << '\n';
  }
  void finite(double x, const std::string& what) { expect(std::isfinite(x), what + " is finite (got " + fixed(x) + ")"); }
  /// Prints the verdict; returns the exit code.
  int verdict() const {
    std::cout << "\nchecks: " << passed << " passed, " << failed << " failed" << (failed ? "  -> exit 1" : "") << '\n';
    return failed ? 1 : 0;
  }
};

}  // namespace linattn::paper
