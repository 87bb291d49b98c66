/// reference/tensor.hpp -- the one small tensor type shared by every layer of linattn.
///
/// A Tensor<T> is a shape plus contiguous row-major storage. Copies share storage (like NumPy
/// and PyTorch); clone() makes a deep copy. Storage is either owned (allocated here) or borrowed
/// (wrap(): a pointer into somebody else's buffer, e.g. a NumPy array, kept alive through an
/// optional keep-alive handle), so the Python bindings can hand arrays in without a copy.
///
/// Per-head views: the public layout of SPEC section 1 is [B, T, H, D] (token-major, heads
/// interleaved). One head of one sequence is therefore a strided T x D matrix with row stride
/// H*D; MatView describes exactly that, and head_view() builds it. States are [N, H, K, V]; one
/// head's state is a dense K x V matrix (state_view()).
/// @file
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace linattn {

/// @addtogroup tensor
/// @{

using index_t = std::int64_t;

/// Every bad-input error in linattn is a linattn::Error. Its message names the function, the
/// argument, what was expected and what came.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// "[2, 3, 4]"
inline std::string shape_str(const std::vector<index_t>& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

/// A strided matrix view: element (i, j) lives at p[i * ld + j]. No ownership.
template <class T>
struct MatView {
  T* p = nullptr;
  index_t rows = 0, cols = 0, ld = 0;
  T& operator()(index_t i, index_t j) const { return p[i * ld + j]; }
  T* row(index_t i) const { return p + i * ld; }
};

template <class T>
class Tensor {
 public:
  Tensor() = default;

  /// Owning tensor of the given shape, every element set to `fill`.
  explicit Tensor(std::vector<index_t> shape, T fill = T(0)) : shape_(std::move(shape)) {
    index_t n = count(shape_, "Tensor");
    owner_ = std::shared_ptr<T[]>(new T[static_cast<size_t>(n > 0 ? n : 1)]);
    data_ = owner_.get();
    for (index_t i = 0; i < n; ++i) data_[i] = fill;
  }
  Tensor(std::initializer_list<index_t> shape, T fill = T(0))
      : Tensor(std::vector<index_t>(shape), fill) {}

  /// Borrow `data` (contiguous, row-major, numel(shape) elements) without copying. `keep_alive`
  /// is held for as long as any copy of this Tensor lives (e.g. a reference to a NumPy array).
  static Tensor wrap(T* data, std::vector<index_t> shape, std::shared_ptr<void> keep_alive = {}) {
    Tensor t;
    t.shape_ = std::move(shape);
    if (count(t.shape_, "Tensor::wrap") > 0 && data == nullptr)
      throw Error("Tensor::wrap: argument 'data' expected a pointer to " + shape_str(t.shape_) +
                  " elements but got a null pointer");
    t.data_ = data;
    t.keep_alive_ = std::move(keep_alive);
    return t;
  }

  /// Build from values (tests, walkthroughs): Tensor<double>::from({2, 2}, {1, 2, 3, 4}).
  static Tensor from(std::vector<index_t> shape, const std::vector<T>& values) {
    Tensor t(std::move(shape));
    if (static_cast<index_t>(values.size()) != t.numel())
      throw Error("Tensor::from: argument 'values' expected " + std::to_string(t.numel()) +
                  " elements for shape " + shape_str(t.shape_) + " but got " +
                  std::to_string(values.size()));
    std::copy(values.begin(), values.end(), t.data_);
    return t;
  }

  /// False for a default-constructed Tensor (no shape, no storage): "argument not given".
  bool defined() const { return data_ != nullptr || !shape_.empty(); }
  const std::vector<index_t>& shape() const { return shape_; }
  index_t dim() const { return static_cast<index_t>(shape_.size()); }
  index_t size(index_t d) const { return shape_.at(static_cast<size_t>(d < 0 ? d + dim() : d)); }
  index_t numel() const {
    if (!defined()) return 0;
    index_t n = 1;
    for (index_t s : shape_)
      if (s == 0) return 0;  // before multiplying: [huge, huge, 0] is empty, and its product would overflow
    for (index_t s : shape_) n *= s;  // fits: count() checked it at construction
    return n;
  }
  T* data() const { return data_; }
  T* begin() const { return data_; }
  T* end() const { return data_ + numel(); }

  /// Row-major element access; indices are checked against the shape.
  template <class... I>
  T& operator()(I... idx) const {
    const index_t ix[] = {static_cast<index_t>(idx)...};
    if (sizeof...(I) != shape_.size())
      throw Error("Tensor::operator(): argument 'indices' expected " + std::to_string(shape_.size()) +
                  " indices but got " + std::to_string(sizeof...(I)));
    index_t off = 0;
    for (size_t d = 0; d < sizeof...(I); ++d) {
      if (ix[d] < 0 || ix[d] >= shape_[d])
        throw Error("Tensor::operator(): argument 'indices' expected an index in [0, " +
                    std::to_string(shape_[d]) + ") for dim " + std::to_string(d) + " of shape " +
                    shape_str(shape_) + " but got " + std::to_string(ix[d]));
      off = off * shape_[d] + ix[d];
    }
    return data_[off];
  }

  /// Deep copy into fresh owned storage.
  Tensor clone() const {
    Tensor t(shape_);
    if (numel()) std::memcpy(t.data_, data_, sizeof(T) * static_cast<size_t>(numel()));
    return t;
  }

  /// Same storage, new shape with the same number of elements.
  Tensor reshape(std::vector<index_t> shape) const {
    Tensor t = *this;
    t.shape_ = std::move(shape);
    count(t.shape_, "Tensor::reshape");
    if (t.numel() != numel())
      throw Error("Tensor::reshape: argument 'shape' expected " + std::to_string(numel()) +
                  " elements (the tensor's shape is " + shape_str(shape_) + ") but got " +
                  shape_str(t.shape_) + " with " + std::to_string(t.numel()) + " elements");
    return t;
  }

  void fill(T value) const {
    for (index_t i = 0; i < numel(); ++i) data_[i] = value;
  }

  /// The whole tensor as a rows x cols matrix over its last dimension (2-D tensors, mainly).
  MatView<T> mat() const {
    index_t cols = shape_.empty() ? 1 : shape_.back();
    index_t rows = cols ? numel() / cols : 0;
    return {data_, rows, cols, cols};
  }

 private:
  static index_t count(const std::vector<index_t>& shape, const char* who) {
    index_t n = 1;
    for (index_t s : shape)
      if (s < 0)
        throw Error(std::string(who) + ": argument 'shape' expected non-negative dimensions but got " +
                    shape_str(shape));
    // The product must fit in index_t and in memory's byte count (a shape read from a command line can be
    // anything): checked before multiplying, so the overflow itself never happens (signed overflow is UB).
    for (index_t s : shape)
      if (s == 0) return 0;
    const index_t limit = std::numeric_limits<index_t>::max() / static_cast<index_t>(sizeof(T));
    for (index_t s : shape) {
      if (s != 0 && n > limit / s)
        throw Error(std::string(who) + ": argument 'shape' expected at most " + std::to_string(limit) +
                    " elements in all but got " + shape_str(shape));
      n *= s;
    }
    return n;
  }

  std::vector<index_t> shape_;
  T* data_ = nullptr;
  std::shared_ptr<T[]> owner_;
  std::shared_ptr<void> keep_alive_;
};

/// One head of one sequence of a [B, T, H, D] tensor: a T x D matrix with row stride H*D.
/// With packed variable-length batches (B = 1), `t0` and `len` select one sequence.
template <class T>
MatView<T> head_view(const Tensor<T>& x, index_t b, index_t h, index_t t0 = 0, index_t len = -1) {
  const index_t Tn = x.size(1), H = x.size(2), D = x.size(3);
  if (len < 0) len = Tn - t0;
  return {x.data() + ((b * Tn + t0) * H + h) * D, len, D, H * D};
}

/// One head of one sequence of a [B, T, H] per-token scalar tensor (gates, beta): a T x 1 view.
template <class T>
MatView<T> scalar_head_view(const Tensor<T>& x, index_t b, index_t h, index_t t0 = 0,
                            index_t len = -1) {
  const index_t Tn = x.size(1), H = x.size(2);
  if (len < 0) len = Tn - t0;
  return {x.data() + (b * Tn + t0) * H + h, len, 1, H};
}

/// One head's state of an [N, H, K, V] state tensor: a dense K x V matrix.
template <class T>
MatView<T> state_view(const Tensor<T>& s, index_t n, index_t h) {
  const index_t H = s.size(1), K = s.size(2), V = s.size(3);
  return {s.data() + (n * H + h) * K * V, K, V, V};
}

/// @}

}  // namespace linattn
