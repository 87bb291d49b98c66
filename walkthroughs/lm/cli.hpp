// walkthroughs/lm/cli.hpp -- strict reading of command-line values, shared by train_lm,
// lm_throughput, the paper walkthroughs (walkthroughs/paper/experiment.hpp) and the CPU benchmarks
// (optimized/bench/bench_common.hpp).
//
// A value is read whole or refused: "66x", "", " 6", "1,,2", out-of-range or non-finite numbers are
// linattn::Errors naming the program, the flag, what was expected (with the limits) and what came.
#pragma once

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "reference/check.hpp"

namespace linattn::cli {

inline constexpr long long kNoMin = std::numeric_limits<long long>::min();
inline constexpr long long kNoMax = std::numeric_limits<long long>::max();
/// The most threads (--threads) or parallel runs (--jobs) a program accepts.
inline constexpr long long kMaxThreads = 1024;

/// The whole of `text` as a base-10 integer (false: empty, leading blank, trailing characters,
/// or outside long long).
inline bool read_int(const std::string& text, long long& v) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-' || text[0] == '+'))
    return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtoll(text.c_str(), &end, 10);
  return end == text.c_str() + text.size() && errno != ERANGE;
}

/// The whole of `text` as a finite number.
inline bool read_double(const std::string& text, double& v) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  v = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(v);
}

/// "an integer", "an integer >= 1", "an integer in [1, 64]" (`noun` replaces "an integer").
inline std::string int_range(long long lo, long long hi, const std::string& noun = "an integer") {
  if (lo == kNoMin && hi == kNoMax) return noun;
  if (hi == kNoMax) return noun + " >= " + std::to_string(lo);
  if (lo == kNoMin) return noun + " <= " + std::to_string(hi);
  return noun + " in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}
inline std::string double_range(double lo, double hi, const std::string& noun = "a finite number") {
  const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  if (!has_lo && !has_hi) return noun;
  if (!has_hi) return noun + " >= " + num_str(lo);
  if (!has_lo) return noun + " <= " + num_str(hi);
  return noun + " in [" + num_str(lo) + ", " + num_str(hi) + "]";
}

/// `text`, the value of `flag` of program `fn`, as an integer in [lo, hi].
inline long long to_int(const std::string& fn, const std::string& flag, const std::string& text,
                        long long lo = kNoMin, long long hi = kNoMax) {
  long long v = 0;
  if (!read_int(text, v) || v < lo || v > hi) fail(fn, flag, int_range(lo, hi), "'" + text + "'");
  return v;
}

/// `text` as a finite number in [lo, hi].
inline double to_double(const std::string& fn, const std::string& flag, const std::string& text,
                        double lo = -INFINITY, double hi = INFINITY) {
  double v = 0;
  if (!read_double(text, v) || v < lo || v > hi) fail(fn, flag, double_range(lo, hi), "'" + text + "'");
  return v;
}

/// The items of a comma-separated list; an empty list or an empty item is an Error.
inline std::vector<std::string> split(const std::string& fn, const std::string& flag, const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (items.back().empty())
      fail(fn, flag, "a comma-separated list without empty items",
           "'" + text + "' (item " + std::to_string(items.size()) + " is empty)");
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

/// A comma-separated list of integers, each in [lo, hi].
inline std::vector<long long> to_int_list(const std::string& fn, const std::string& flag, const std::string& text,
                                          long long lo = kNoMin, long long hi = kNoMax) {
  std::vector<long long> out;
  for (const std::string& item : split(fn, flag, text)) {
    long long v = 0;
    if (!read_int(item, v) || v < lo || v > hi)
      fail(fn, flag, "a comma-separated list of " + int_range(lo, hi, "integers"),
           "'" + item + "' (item " + std::to_string(out.size() + 1) + " of '" + text + "')");
    out.push_back(v);
  }
  return out;
}

/// A comma-separated list of finite numbers, each in [lo, hi].
inline std::vector<double> to_double_list(const std::string& fn, const std::string& flag, const std::string& text,
                                          double lo = -INFINITY, double hi = INFINITY) {
  std::vector<double> out;
  for (const std::string& item : split(fn, flag, text)) {
    double v = 0;
    if (!read_double(item, v) || v < lo || v > hi)
      fail(fn, flag, "a comma-separated list of " + double_range(lo, hi, "finite numbers"),
           "'" + item + "' (item " + std::to_string(out.size() + 1) + " of '" + text + "')");
    out.push_back(v);
  }
  return out;
}

/// `path` quoted, with why it cannot be a file written there, when that is visible without
/// trying: "'d/x' (directory 'd' does not exist)", "'d' (a directory)"; else just "'path'".
inline std::string unwritable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string q = "'" + path + "'";
  if (fs::is_directory(path, ec)) return q + " (a directory)";
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec)) return q + " (directory '" + dir.string() + "' does not exist)";
  return q;
}

/// For a main's `catch (...)`: prints the exception to stderr -- a linattn::Error as
/// "error: <message>", std::bad_alloc as out of memory with `hint` (which sizes to lower), any
/// other exception with its type's message -- and returns the exit status 2.
inline int report_error(const std::string& prog, const std::string& hint = "") {
  try {
    throw;
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << '\n';
  } catch (const std::bad_alloc&) {
    std::cerr << "error: " << prog << ": out of memory (std::bad_alloc): the sizes asked for need more memory than "
              << "this machine gives" << (hint.empty() ? "" : "; " + hint) << '\n';
  } catch (const std::exception& e) {
    std::cerr << "error: " << prog << ": " << e.what() << '\n';
  } catch (...) {
    std::cerr << "error: " << prog << ": an unknown exception\n";
  }
  return 2;
}

}  // namespace linattn::cli
