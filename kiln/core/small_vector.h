#pragma once
// SmallVector: a vector of trivially copyable values, inline up to N entries (a heap
// vector beyond). For small per-op lists -- a DTensor's placements -- that would
// otherwise allocate on every op.

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <vector>

namespace kiln {

template <typename T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable values");

 public:
  using value_type = T;
  // User-provided, so that value-initialization (a vector of SmallVectors resized)
  // does not zero the inline buffer first: only the size is set.
  SmallVector() noexcept {}  // NOLINT(modernize-use-equals-default)
  explicit SmallVector(size_t n, const T& value = T()) { resize(n, value); }
  SmallVector(std::initializer_list<T> values) : SmallVector(values.begin(), values.end()) {}
  template <typename It>
  SmallVector(It first, It last) {
    for (; first != last; ++first) push_back(*first);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return size_ > N ? heap_.data() : inline_; }
  const T* data() const { return size_ > N ? heap_.data() : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  // GCC 12 inlines push_back into callers and then warns that back() may write into the
  // (empty) heap vector: it cannot see that size_ > N selects the heap only once heap_
  // holds size_ entries. A false positive, silenced here only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
  void push_back(const T& value) {
    T copy = value;  // `value` may live in this vector
    resize(size_ + 1);
    back() = copy;
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  void pop_back() { resize(size_ - 1); }
  void clear() { resize(0); }
  void assign(size_t n, const T& value) {
    clear();
    resize(n, value);
  }
  void resize(size_t n, const T& value = T()) {
    if (n > N) {
      if (size_ <= N) heap_.assign(inline_, inline_ + size_);
      heap_.resize(n, value);
    } else {
      if (size_ > N)
        std::copy(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(n), inline_);
      for (size_t i = size_; i < n; ++i) inline_[i] = value;
      heap_.clear();
    }
    size_ = n;
  }
  bool operator==(const SmallVector& o) const {
    return std::equal(begin(), end(), o.begin(), o.end());
  }

 private:
  T inline_[N];
  size_t size_ = 0;
  std::vector<T> heap_;  // the entries while size_ > N
};

}  // namespace kiln
