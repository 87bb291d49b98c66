// walkthroughs/lm/data.hpp -- the byte-level data of the trainer: a small SHA-256 (FIPS 180-4) to
// check the corpus, the one configurable data path, the 90/10 split and deterministic batches.
//
// Data path (shared/data/README.md): option --data, else environment variable LINATTN_DATA, else
// $LINATTN_SHARED/data/tinyshakespeare.txt, else <project root>/../shared/data/tinyshakespeare.txt. The file is checked by size (1,115,394 bytes)
// and sha256 before use; a missing or different file is a linattn::Error saying what was expected.
//
// Tokens are bytes (vocabulary 256; the corpus is ASCII, so one token is one character and the
// loss in nats per token is nats per character). Split: the first 90% of the bytes train, the last
// 10% validate. Training batch of step s: B windows of T+1 bytes at offsets drawn from a
// SplitMix64 stream seeded by (seed, s) -- the same batch for the same (seed, s) on any machine,
// and no generator state to save in checkpoints. Validation: fixed windows evenly spaced over the
// validation split.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ios>
#include <sstream>
#include <string>
#include <vector>

#include "reference/check.hpp"

#ifndef LINATTN_PROJECT_ROOT
#define LINATTN_PROJECT_ROOT "."
#endif

namespace linattn::lm {

// ---------------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4), incremental.
// ---------------------------------------------------------------------------------------------

class Sha256 {
 public:
  Sha256() { reset(); }
  void reset() {
    h_ = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
          0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    len_ = 0;
    fill_ = 0;
  }
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    len_ += n;
    while (n > 0) {
      const size_t take = std::min(n, size_t(64) - fill_);
      std::copy(p, p + take, buf_.begin() + static_cast<std::ptrdiff_t>(fill_));
      fill_ += take, p += take, n -= take;
      if (fill_ == 64) block(buf_.data()), fill_ = 0;
    }
  }
  /// The digest as 64 lowercase hex characters. Resets the hasher.
  std::string hex() {
    const std::uint64_t bits = len_ * 8;
    const unsigned char one = 0x80, zero = 0;
    update(&one, 1);
    while (fill_ != 56) update(&zero, 1);
    unsigned char lenb[8];
    for (int i = 0; i < 8; ++i) lenb[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    update(lenb, 8);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (std::uint32_t w : h_)
      for (int i = 28; i >= 0; i -= 4) out += digits[(w >> i) & 0xf];
    reset();
    return out;
  }

 private:
  static std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void block(const unsigned char* b) {
    static const std::uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (std::uint32_t(b[4 * i]) << 24) | (std::uint32_t(b[4 * i + 1]) << 16) |
             (std::uint32_t(b[4 * i + 2]) << 8) | std::uint32_t(b[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = h_[0], bb = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      const std::uint32_t ch = (e & f) ^ (~e & g);
      const std::uint32_t t1 = h + S1 + ch + K[i] + w[i];
      const std::uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      const std::uint32_t mj = (a & bb) ^ (a & c) ^ (bb & c);
      const std::uint32_t t2 = S0 + mj;
      h = g, g = f, f = e, e = d + t1, d = c, c = bb, bb = a, a = t1 + t2;
    }
    h_[0] += a, h_[1] += bb, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
  }
  std::array<std::uint32_t, 8> h_{};
  std::array<unsigned char, 64> buf_{};
  std::uint64_t len_ = 0;
  size_t fill_ = 0;
};

inline std::string sha256_hex(const void* data, size_t n) {
  Sha256 s;
  s.update(data, n);
  return s.hex();
}

// ---------------------------------------------------------------------------------------------
// The corpus.
// ---------------------------------------------------------------------------------------------

inline constexpr std::uint64_t kShakespeareSize = 1115394;
inline constexpr const char* kShakespeareSha256 =
    "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed";

/// LINATTN_DATA if set, else $LINATTN_SHARED/data/tinyshakespeare.txt if LINATTN_SHARED is set, else
/// <project root>/../shared/data/tinyshakespeare.txt (also the paper-table programs' default: paper::corpus_path).
inline std::string default_data_path() {
  if (const char* e = std::getenv("LINATTN_DATA"); e && *e) return e;
  if (const char* e = std::getenv("LINATTN_SHARED"); e && *e) return std::string(e) + "/data/tinyshakespeare.txt";
  return std::string(LINATTN_PROJECT_ROOT) + "/../shared/data/tinyshakespeare.txt";
}

/// Error (fn, arg, expected) unless `path` is a file that can be opened for reading.
inline void check_readable(const std::string& fn, const std::string& arg, const std::string& expected,
                           const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(fn, arg, expected, "'" + path + "' (a directory)");
  if (!std::ifstream(path, std::ios::binary)) fail(fn, arg, expected, "'" + path + "' (cannot open)");
}

/// A whole file; Error (fn, arg, expected) if it is a directory or cannot be opened or read.
inline std::string read_file(const std::string& fn, const std::string& arg, const std::string& expected,
                             const std::string& path) {
  check_readable(fn, arg, expected, path);
  std::ifstream f(path, std::ios::binary);
  try {  // a read error (EIO, ...) is thrown by the stream buffer, whatever the stream's exception mask
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {
    fail(fn, arg, expected, "'" + path + "' (read error: " + e.what() + ")");
  }
}

/// Read a whole file as bytes; Error if it is a directory or cannot be opened or read.
inline std::vector<unsigned char> read_bytes(const std::string& path) {
  const std::string s =
      read_file("read_bytes", "path", "a readable file (set --data or LINATTN_DATA; see shared/data/README.md)", path);
  return std::vector<unsigned char>(s.begin(), s.end());
}

struct Dataset {
  std::vector<unsigned char> train, val;  ///< first 90% / last 10% of the bytes
  std::string path, sha256;
};

/// Split bytes 90/10 (the conventional split of this corpus).
inline Dataset split_dataset(const std::vector<unsigned char>& bytes) {
  Dataset d;
  const size_t n_train = bytes.size() * 9 / 10;
  d.train.assign(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n_train));
  d.val.assign(bytes.begin() + static_cast<std::ptrdiff_t>(n_train), bytes.end());
  return d;
}

/// Load tiny Shakespeare from `path`, check its size and sha256, split it.
inline Dataset load_tinyshakespeare(const std::string& path) {
  const std::string fn = "load_tinyshakespeare";
  const std::vector<unsigned char> bytes = read_bytes(path);
  if (bytes.size() != kShakespeareSize)
    fail(fn, "data file '" + path + "'", std::to_string(kShakespeareSize) + " bytes (shared/data/README.md)",
         std::to_string(bytes.size()) + " bytes");
  const std::string sha = sha256_hex(bytes.data(), bytes.size());
  if (sha != kShakespeareSha256)
    fail(fn, "data file '" + path + "'", std::string("sha256 ") + kShakespeareSha256, "sha256 " + sha);
  Dataset d = split_dataset(bytes);
  d.path = path;
  d.sha256 = sha;
  return d;
}

// ---------------------------------------------------------------------------------------------
// Batches.
// ---------------------------------------------------------------------------------------------

/// SplitMix64: a tiny, well-mixed, fully specified generator (same stream everywhere).
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Training batch of step `step`: x, y (B, T) with y the next byte of x. Offsets uniform over
/// [0, len - T - 1] from a SplitMix64 stream seeded by (seed, step).
inline void train_batch(const std::vector<unsigned char>& data, index_t B, index_t T,
                        std::uint64_t seed, index_t step, int* x, int* y) {
  const index_t len = static_cast<index_t>(data.size());
  if (len < T + 1)
    fail("train_batch", "data", "at least T + 1 = " + std::to_string(T + 1) + " bytes", std::to_string(len));
  std::uint64_t st = seed;
  std::uint64_t mix = splitmix64(st) ^ static_cast<std::uint64_t>(step);
  const std::uint64_t span = static_cast<std::uint64_t>(len - T);  // offsets 0 .. len-T-1
  for (index_t b = 0; b < B; ++b) {
    const index_t off = static_cast<index_t>(splitmix64(mix) % span);
    for (index_t t = 0; t < T; ++t) x[b * T + t] = data[off + t], y[b * T + t] = data[off + t + 1];
  }
}

/// Validation batch `k` of `nbatches`: window j of the B * nbatches fixed windows sits at
/// offset round(j (len - T - 1) / (nwin - 1)), evenly spread over the split.
inline void val_batch(const std::vector<unsigned char>& data, index_t B, index_t T, index_t k,
                      index_t nbatches, int* x, int* y) {
  const index_t len = static_cast<index_t>(data.size());
  if (len < T + 1)
    fail("val_batch", "data", "at least T + 1 = " + std::to_string(T + 1) + " bytes", std::to_string(len));
  const index_t nwin = B * nbatches, last = len - T - 1;
  for (index_t b = 0; b < B; ++b) {
    const index_t j = k * B + b;
    const index_t off = nwin > 1 ? (j * last + (nwin - 1) / 2) / (nwin - 1) : 0;
    for (index_t t = 0; t < T; ++t) x[b * T + t] = data[off + t], y[b * T + t] = data[off + t + 1];
  }
}

}  // namespace linattn::lm
