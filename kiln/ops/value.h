#pragma once
// Value: one argument of an op call (the boxed calling convention shared by
// dispatch, the IR, the printer and the serializer).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/core/pool.h"
#include "kiln/core/tensor.h"

namespace kiln {

/** Fixed-capacity vector kept inline (op outputs, small argument lists). */
template <typename T, size_t N>
class InlineVec {
 public:
  InlineVec() = default;
  InlineVec(std::initializer_list<T> v) {
    for (const T& x : v) push_back(x);
  }
  // Copies and moves touch the used slots only (most ops have one output of four).
  InlineVec(const InlineVec& o) : size_(o.size_) {
    for (size_t i = 0; i < size_; ++i) items_[i] = o.items_[i];
  }
  InlineVec(InlineVec&& o) noexcept : size_(o.size_) {
    for (size_t i = 0; i < size_; ++i) items_[i] = std::move(o.items_[i]);
  }
  InlineVec& operator=(const InlineVec& o) {
    if (this != &o) assign(o.items_, o.size_, [](const T& x) -> const T& { return x; });
    return *this;
  }
  InlineVec& operator=(InlineVec&& o) noexcept {
    if (this != &o) assign(o.items_, o.size_, [](T& x) -> T&& { return std::move(x); });
    return *this;
  }
  void push_back(T v) {
    KILN_ASSERT(size_ < N);
    items_[size_++] = std::move(v);
  }
  /** Appends the next slot as it is (default-constructed, released or moved from) for
   * the caller to assign every field: no temporary to move in. */
  T& append_slot() {
    KILN_ASSERT(size_ < N);
    return items_[size_++];
  }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T* begin() { return items_; }
  T* end() { return items_ + size_; }
  const T* begin() const { return items_; }
  const T* end() const { return items_ + size_; }
  operator std::span<T>() { return {items_, size_}; }              // NOLINT
  operator std::span<const T>() const { return {items_, size_}; }  // NOLINT

 private:
  template <typename U, typename F>
  void assign(U* from, size_t n, F&& take) {
    for (size_t i = 0; i < n; ++i) items_[i] = take(from[i]);
    for (size_t i = n; i < size_; ++i) items_[i] = T();  // release what the old slots held
    size_ = n;
  }

  T items_[N];  // default-constructed, not zeroed: TensorMeta is large
  size_t size_ = 0;
};

/** A list of ints (sizes, strides, dims): a std::vector whose buffer comes from the
 * pool, because boxed arguments and graph nodes copy their int lists on every traced op.
 * Made from a std::vector<int64_t> implicitly; `vec()` gives one back. */
class IntList : public std::vector<int64_t, PoolAllocator<int64_t>> {
  using Base = std::vector<int64_t, PoolAllocator<int64_t>>;

 public:
  using Base::Base;
  IntList() = default;
  IntList(std::initializer_list<int64_t> v) : Base(v) {}
  IntList(const std::vector<int64_t>& v) : Base(v.begin(), v.end()) {}  // NOLINT
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  friend bool operator==(const IntList& a, const IntList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
};

/** (Y1) A list of sizes some of which are expressions: what a size argument (view's,
 * expand's, a factory's) is while tracing with symbolic sizes. Lists of integers stay
 * IntList, so nothing else pays for it. */
class SymIntList {
 public:
  SymIntList() = default;
  explicit SymIntList(Dims sizes) : sizes_(std::make_shared<const Dims>(std::move(sizes))) {}
  const Dims& dims() const { return *sizes_; }
  friend bool operator==(const SymIntList& a, const SymIntList& b) { return a.dims() == b.dims(); }

 private:
  std::shared_ptr<const Dims> sizes_;
};

/** A string argument (gelu's approximate='tanh'). Interned: a pointer-sized value that
 * compares by identity, so Values stay small and cheap to copy. */
class Str {
 public:
  Str() : Str(std::string_view()) {}
  explicit Str(std::string_view s) : s_(&intern(s)) {}
  std::string_view view() const { return *s_; }
  bool operator==(const Str& o) const { return s_ == o.s_; }
  bool operator==(std::string_view s) const { return *s_ == s; }

 private:
  static const std::string& intern(std::string_view s);  // ops/schema.cpp
  const std::string* s_;
};
using TensorList = std::vector<Tensor>;

/** None, a tensor, a tensor list, a Scalar, an int, a float, a bool, an int list, a
 * dtype, a device or a string. */
using Value = std::variant<std::monostate, Tensor, TensorList, Scalar, int64_t, double, bool,
                           IntList, DType, Device, Str, SymIntList>;

/** A size argument of the public API: integers (`{2, -1}`, an IntList) or sizes among
 * which some are symbolic (`{x.sym_size(0), -1}`, a shape). Boxed as an IntList unless
 * an entry is an expression. */
class SymSizes {
 public:
  SymSizes() = default;
  SymSizes(std::initializer_list<int64_t> v) : ints_(v) {}                // NOLINT
  SymSizes(std::initializer_list<SymInt> v) { set(v.begin(), v.end()); }  // NOLINT
  SymSizes(const IntList& v) : ints_(v) {}                                // NOLINT
  SymSizes(const std::vector<int64_t>& v) : ints_(v) {}                   // NOLINT
  SymSizes(const Dims& d) {                                               // NOLINT
    if (!d.is_symbolic())
      ints_ = IntList(d.hints().begin(), d.hints().end());
    else
      dims_ = d;
  }
  bool is_symbolic() const { return dims_.is_symbolic(); }
  /** The integers (when not symbolic). */
  const IntList& ints() const { return ints_; }
  /** The boxed argument. */
  Value value() const { return is_symbolic() ? Value(SymIntList(dims_)) : Value(ints_); }
  /** The sizes as a shape. */
  Dims dims() const {
    return is_symbolic() ? dims_ : Dims(std::vector<int64_t>(ints_.begin(), ints_.end()));
  }
  size_t size() const { return is_symbolic() ? dims_.size() : ints_.size(); }

 private:
  template <typename It>
  void set(It begin, It end) {
    if (std::none_of(begin, end, [](const SymInt& s) { return s.is_symbolic(); })) {
      ints_.reserve(static_cast<size_t>(end - begin));
      for (It it = begin; it != end; ++it) ints_.push_back(it->hint());
      return;
    }
    Dims d(static_cast<size_t>(end - begin));
    for (size_t i = 0; begin != end; ++begin, ++i) d.set(i, *begin);
    if (d.is_symbolic())
      dims_ = std::move(d);
    else
      ints_ = IntList(d.hints().begin(), d.hints().end());
  }
  IntList ints_;
  Dims dims_;
};

/** Up to four tensors an op returns. */
inline constexpr size_t kMaxOutputs = 4;
using Outputs = InlineVec<Tensor, kMaxOutputs>;

/** Typed read access to the arguments of one call, by position. */
class Args {
 public:
  Args(std::span<const Value> values) : v_(values) {}  // NOLINT
  size_t size() const { return v_.size(); }
  const Value& operator[](size_t i) const { return v_[i]; }
  bool is_none(size_t i) const { return std::holds_alternative<std::monostate>(v_[i]); }
  const Tensor& tensor(size_t i) const { return std::get<Tensor>(v_[i]); }
  /** An undefined Tensor for None. */
  Tensor opt_tensor(size_t i) const { return is_none(i) ? Tensor() : tensor(i); }
  /** An optional tensor without copying the handle (meta functions run per op). */
  const Tensor* opt_tensor_ptr(size_t i) const { return is_none(i) ? nullptr : &tensor(i); }
  const TensorList& tensors(size_t i) const { return std::get<TensorList>(v_[i]); }
  const Scalar& scalar(size_t i) const { return std::get<Scalar>(v_[i]); }
  int64_t i64(size_t i) const { return std::get<int64_t>(v_[i]); }
  double f64(size_t i) const { return std::get<double>(v_[i]); }
  bool flag(size_t i) const { return std::get<bool>(v_[i]); }
  const IntList& ints(size_t i) const { return std::get<IntList>(v_[i]); }
  /** (Y1) An int argument that may be a symbolic size (a one-entry SymIntList). */
  SymInt sym(size_t i) const {
    if (const auto* s = std::get_if<SymIntList>(&v_[i])) return s->dims().sym(0);
    return i64(i);
  }
  /** (Y1) A size argument as a shape: an IntList, or a SymIntList while tracing. */
  Dims sizes(size_t i) const {
    if (const auto* s = std::get_if<SymIntList>(&v_[i])) return s->dims();
    const IntList& l = ints(i);
    return Dims(std::span<const int64_t>(l.data(), l.size()));
  }
  DType dtype(size_t i) const { return std::get<DType>(v_[i]); }
  Device device(size_t i) const { return std::get<Device>(v_[i]); }
  std::string_view str(size_t i) const { return std::get<Str>(v_[i]).view(); }
  std::span<const Value> values() const { return v_; }

 private:
  std::span<const Value> v_;
};

}  // namespace kiln
