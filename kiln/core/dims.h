#pragma once
// Dims: a small vector of int64 for shapes and strides, inline up to 6 entries.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

namespace kiln {

/** Shape or strides. Inline storage for rank <= 6 keeps tiny ops allocation-free. */
class Dims {
 public:
  static constexpr size_t kInline = 6;

  Dims() = default;
  explicit Dims(size_t n, int64_t value = 0) { resize(n, value); }
  Dims(std::initializer_list<int64_t> v) { assign(v.begin(), v.size()); }
  Dims(std::span<const int64_t> v) { assign(v.data(), v.size()); }  // NOLINT
  Dims(const std::vector<int64_t>& v) { assign(v.data(), v.size()); }  // NOLINT
  // Inline contents are copied as the whole fixed-size buffer: a constant-size copy the
  // compiler does in two vector moves, where a size-dependent one is a libc call (that
  // was the largest single cost of fake propagation).
  Dims(const Dims& o) {
    if (o.heap_) assign(o.data(), o.size());
    else copy_inline(o);
  }
  Dims(Dims&& o) noexcept { steal(o); }
  Dims& operator=(const Dims& o) {
    if (this == &o) return *this;
    if (!o.heap_ && !heap_) copy_inline(o);
    else assign(o.data(), o.size());
    return *this;
  }
  Dims& operator=(Dims&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  ~Dims() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t back() const { return data()[size_ - 1]; }
  operator std::span<const int64_t>() const { return {data(), size_}; }  // NOLINT
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = value;
    size_ = static_cast<uint32_t>(n);
  }
  void push_back(int64_t v) {
    reserve(size_ + 1);
    data()[size_++] = v;
  }
  void insert(size_t pos, int64_t v) {
    reserve(size_ + 1);
    int64_t* d = data();
    std::memmove(d + pos + 1, d + pos, (size_ - pos) * sizeof(int64_t));
    d[pos] = v;
    ++size_;
  }
  void erase(size_t pos) {
    int64_t* d = data();
    std::memmove(d + pos, d + pos + 1, (size_ - pos - 1) * sizeof(int64_t));
    --size_;
  }

  bool operator==(const Dims& o) const {
    if (size_ != o.size_) return false;
    const int64_t* a = data();
    const int64_t* b = o.data();
    for (size_t i = 0; i < size_; ++i)  // a few dims: inline, where std::equal calls memcmp
      if (a[i] != b[i]) return false;
    return true;
  }
  /** "[2, 3]". */
  std::string str() const {
    std::string s = "[";
    for (size_t i = 0; i < size_; ++i) s += (i ? ", " : "") + std::to_string(data()[i]);
    return s + "]";
  }

 private:
  void reserve(size_t n) {
    if (n <= capacity()) return;
    auto* p = new int64_t[n];
    std::memcpy(p, data(), size_ * sizeof(int64_t));
    delete[] heap_;
    heap_ = p;
    cap_ = static_cast<uint32_t>(n);
  }
  size_t capacity() const { return heap_ ? cap_ : kInline; }
  void assign(const int64_t* p, size_t n) {
    size_ = 0;
    reserve(n);
    if (n) std::memcpy(data(), p, n * sizeof(int64_t));  // p may be null when n == 0
    size_ = static_cast<uint32_t>(n);
  }
  void release() {
    delete[] heap_;
    heap_ = nullptr;
  }
  void copy_inline(const Dims& o) {
    std::memcpy(inline_, o.inline_, sizeof(inline_));
    size_ = o.size_;
  }
  void steal(Dims& o) {
    size_ = o.size_;
    cap_ = o.cap_;
    heap_ = o.heap_;
    if (!heap_) std::memcpy(inline_, o.inline_, sizeof(inline_));
    o.heap_ = nullptr;
    o.size_ = 0;
  }

  int64_t* heap_ = nullptr;
  uint32_t size_ = 0;
  uint32_t cap_ = 0;
  int64_t inline_[kInline];
};

/** Prints "[2, 3]" (as Dims::str). */
std::ostream& operator<<(std::ostream& os, const Dims& dims);

/** Number of elements of a shape. Never overflows: a count past int64 saturates at
 * INT64_MAX, which every tensor constructor rejects (see check_sizes in tensor.h). */
inline int64_t numel_of(const Dims& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    if (__builtin_mul_overflow(n, s, &n)) return INT64_MAX;
  return n;
}

/** Row-major strides of a shape (saturating, like numel_of). */
inline void contiguous_strides_into(const Dims& shape, Dims& st) {
  st.resize(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    if (__builtin_mul_overflow(acc, std::max<int64_t>(shape[i], 1), &acc)) acc = INT64_MAX;
  }
}
inline Dims contiguous_strides(const Dims& shape) {
  Dims st;
  contiguous_strides_into(shape, st);
  return st;
}

}  // namespace kiln
