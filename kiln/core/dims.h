#pragma once
// Dims: a small vector of sizes for shapes and strides, inline up to 6 entries.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/pool.h"
#include "kiln/core/symbolic.h"

namespace kiln {

/** Shape or strides. Inline storage for rank <= 6 keeps tiny ops allocation-free.
 *
 * An entry may be symbolic (Note [Symbolic sizes], kiln/core/symbolic.h): its slot then
 * holds the example value and an expression sits beside it. Symbolic Dims always live on
 * the heap, ints first and expressions after them, with the top bit of the capacity
 * saying so; integer-only Dims never look at any of it. Reading a symbolic entry as an
 * integer (operator[], data(), iteration) specializes it - the active ShapeEnv records
 * the guard - and writing through a mutable accessor first makes every entry an integer
 * that way; code written for symbols uses sym(), hint(), set() and the SymInt overloads. */
class Dims {
 public:
  static constexpr size_t kInline = 6;

  Dims() = default;
  explicit Dims(size_t n, int64_t value = 0) { resize(n, value); }
  Dims(std::initializer_list<int64_t> v) { assign(v.begin(), v.size()); }
  Dims(std::span<const int64_t> v) { assign(v.data(), v.size()); }     // NOLINT
  Dims(const std::vector<int64_t>& v) { assign(v.data(), v.size()); }  // NOLINT
  // Inline contents are copied as the whole fixed-size buffer: a constant-size copy the
  // compiler does in two vector moves, where a size-dependent one is a libc call (that
  // was the largest single cost of fake propagation).
  Dims(const Dims& o) {
    if (o.heap_)
      assign_from(o);
    else
      copy_inline(o);
  }
  Dims(Dims&& o) noexcept { steal(o); }
  Dims& operator=(const Dims& o) {
    if (this == &o) return *this;
    if (!o.heap_ && !heap_)
      copy_inline(o);
    else
      assign_from(o);
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
  /** Whether some entry may be an expression. */
  bool is_symbolic() const { return (cap_ & kSymbolic) != 0; }

  int64_t* data() {
    if (is_symbolic()) [[unlikely]]
      desymbolize();
    return ints();
  }
  const int64_t* data() const {
    if (is_symbolic()) [[unlikely]]
      specialize_all();
    return ints();
  }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const {
    if (is_symbolic()) [[unlikely]]
      return read(i);
    return ints()[i];
  }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + size_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t back() const { return (*this)[size_ - 1]; }
  operator std::span<const int64_t>() const { return {data(), size_}; }  // NOLINT
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  // ---- symbolic-aware access (no guard) ----
  /** Entry `i` as a size: its expression and hint, or its integer. */
  SymInt sym(size_t i) const {
    if (!is_symbolic()) [[likely]]
      return ints()[i];
    const sym::Expr* e = exprs()[i];
    return e ? SymInt(e, ints()[i]) : SymInt(ints()[i]);
  }
  /** The example value of entry `i` (its integer when not symbolic). */
  int64_t hint(size_t i) const { return ints()[i]; }
  /** Every entry's example value: for checks that hold at any binding when they hold
   * at the hints (a size is not negative), never for deciding shapes. */
  std::span<const int64_t> hints() const { return {ints(), size_}; }
  /** Sets entry `i` to a size. */
  void set(size_t i, const SymInt& v) {
    if (!v.is_symbolic() && !is_symbolic()) [[likely]] {
      ints()[i] = v.hint();
      return;
    }
    if (v.is_symbolic()) {
      make_symbolic();
      exprs()[i] = v.expr();
    } else if (is_symbolic()) {
      exprs()[i] = nullptr;
    }
    ints()[i] = v.hint();
  }
  void push_back(const SymInt& v) {
    if (!v.is_symbolic()) [[likely]]
      return push_back(v.hint());
    resize(size_ + 1);
    set(size_ - 1, v);
  }
  void insert(size_t pos, const SymInt& v) {
    insert(pos, int64_t{0});
    set(pos, v);
  }

  /** Empties it (symbolic entries are dropped, not read: no guard). */
  void clear() {
    size_ = 0;
    cap_ &= ~kSymbolic;
  }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) {
      ints()[i] = value;
      if (is_symbolic()) exprs()[i] = nullptr;
    }
    size_ = static_cast<uint32_t>(n);
  }
  void push_back(int64_t v) {
    reserve(size_ + 1);
    if (is_symbolic()) exprs()[size_] = nullptr;
    ints()[size_++] = v;
  }
  void insert(size_t pos, int64_t v) {
    reserve(size_ + 1);
    int64_t* d = ints();
    std::memmove(d + pos + 1, d + pos, (size_ - pos) * sizeof(int64_t));
    d[pos] = v;
    if (is_symbolic()) {
      const sym::Expr** e = exprs();
      std::memmove(e + pos + 1, e + pos, (size_ - pos) * sizeof(*e));
      e[pos] = nullptr;
    }
    ++size_;
  }
  void erase(size_t pos) {
    int64_t* d = ints();
    std::memmove(d + pos, d + pos + 1, (size_ - pos - 1) * sizeof(int64_t));
    if (is_symbolic()) {
      const sym::Expr** e = exprs();
      std::memmove(e + pos, e + pos + 1, (size_ - pos - 1) * sizeof(*e));
    }
    --size_;
  }

  /** Same entries: equal integers, or the same expressions. While a trace's ShapeEnv is
   * active, Dims whose entries differ in form but agree at the example values are equal
   * under the guards that say so (Y2); Dims that differ at the example values are not
   * equal, with no guard: callers use == for checks that fail and for fast paths whose
   * other branch also handles equal shapes, never to choose between results. */
  bool operator==(const Dims& o) const {
    if (size_ != o.size_) return false;
    if ((cap_ | o.cap_) & kSymbolic) [[unlikely]]
      return same_symbolic(o);
    const int64_t* a = ints();
    const int64_t* b = o.ints();
    for (size_t i = 0; i < size_; ++i)  // a few dims: inline, where std::equal calls memcmp
      if (a[i] != b[i]) return false;
    return true;
  }
  /** "[2, 3]", "[s0, 4]". */
  std::string str() const {
    std::string s = "[";
    for (size_t i = 0; i < size_; ++i) s += (i ? ", " : "") + sym(i).str();
    return s + "]";
  }

 private:
  static constexpr uint32_t kSymbolic = 1u << 31;
  // The heap block came from the thread pool (symbolic Dims of up to 32 entries: tracing
  // copies them on every op, and malloc was a third of that cost).
  static constexpr uint32_t kPooled = 1u << 30;
  static constexpr uint32_t kFlags = kSymbolic | kPooled;
  // A pool class is a whole number of granules (class c: c granules).
  static size_t pool_class(size_t cap) {
    return std::max<size_t>(
        1, (cap * 2 * sizeof(int64_t) + detail::kPoolGranule - 1) / detail::kPoolGranule);
  }

  int64_t* ints() { return heap_ ? heap_ : inline_; }
  const int64_t* ints() const { return heap_ ? heap_ : inline_; }
  // The expressions of a symbolic Dims: after its `capacity()` ints.
  const sym::Expr** exprs() const {
    return reinterpret_cast<const sym::Expr**>(heap_ + capacity());
  }
  size_t capacity() const { return heap_ ? (cap_ & ~kFlags) : kInline; }

  int64_t read(size_t i) const {
    if (const sym::Expr* e = exprs()[i]) detail::specialize(e, heap_[i]);
    return heap_[i];
  }
  void specialize_all() const {
    for (size_t i = 0; i < size_; ++i) read(i);
  }
  void desymbolize() {
    specialize_all();
    cap_ &= ~kSymbolic;
  }
  void make_symbolic() {
    if (is_symbolic()) return;
    grow(std::max<size_t>(capacity(), size_), true);
  }
  [[gnu::noinline, gnu::cold]] bool same_symbolic(const Dims& o) const {
    bool same = true;
    for (size_t i = 0; same && i < size_; ++i) same = sym(i).same_as(o.sym(i));
    if (same || !ShapeEnv::current()) return same;
    for (size_t i = 0; i < size_; ++i)
      if (hint(i) != o.hint(i)) return false;
    for (size_t i = 0; i < size_; ++i)
      if (sym(i) != o.sym(i)) return false;
    return true;
  }
  // A heap block for `n` entries (twice that when symbolic), keeping the contents.
  void grow(size_t n, bool symbolic) {
    bool pooled = symbolic && pool_class(n) < detail::kPoolClasses;
    auto* p =
        static_cast<int64_t*>(pooled ? detail::pool_get(pool_class(n))
                                     : ::operator new(n * sizeof(int64_t) * (symbolic ? 2 : 1)));
    std::memcpy(p, ints(), size_ * sizeof(int64_t));
    if (symbolic) {
      auto** e = reinterpret_cast<const sym::Expr**>(p + n);
      for (size_t i = 0; i < n; ++i) e[i] = is_symbolic() && i < size_ ? exprs()[i] : nullptr;
    }
    release();
    heap_ = p;
    cap_ = static_cast<uint32_t>(n) | (symbolic ? kSymbolic : 0) | (pooled ? kPooled : 0);
  }
  void reserve(size_t n) {
    if (n > capacity()) grow(n, is_symbolic());
  }
  void assign(const int64_t* p, size_t n) {
    size_ = 0;
    cap_ &= ~kSymbolic;  // overwritten, not read: no guard
    reserve(n);
    if (n) std::memcpy(ints(), p, n * sizeof(int64_t));  // p may be null when n == 0
    size_ = static_cast<uint32_t>(n);
  }
  void assign_from(const Dims& o) {
    if (!o.is_symbolic()) return assign(o.ints(), o.size_);
    size_ = 0;
    cap_ &= ~kSymbolic;
    if (capacity() < o.size_ || !heap_)
      grow(std::max<size_t>(o.size_, 1), true);
    else
      grow(capacity(), true);
    std::memcpy(ints(), o.ints(), o.size_ * sizeof(int64_t));
    std::memcpy(exprs(), o.exprs(), o.size_ * sizeof(const sym::Expr*));
    size_ = o.size_;
  }
  void release() {
    if (heap_) [[unlikely]]  // inline Dims (most) have nothing to give back
      release_heap();
  }
  [[gnu::noinline]] void release_heap() {
    if (cap_ & kPooled)
      detail::pool_put(heap_, pool_class(cap_ & ~kFlags));
    else
      ::operator delete(heap_);
    heap_ = nullptr;
    cap_ &= ~kFlags;
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
    o.cap_ = 0;
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

/** A shape from sizes (integers or expressions). */
inline Dims sym_dims(std::initializer_list<SymInt> sizes) {
  Dims d(sizes.size());
  size_t i = 0;
  for (const SymInt& s : sizes) d.set(i++, s);
  return d;
}

/** The element count as a size (an expression for a symbolic shape; no guard). */
SymInt sym_numel(const Dims& shape);
/** Row-major strides of a symbolic shape (dims of size 0 counted as 1, as below). */
void symbolic_strides_into(const Dims& shape, Dims& st);

/** Row-major strides of a shape (saturating, like numel_of). */
inline void contiguous_strides_into(const Dims& shape, Dims& st) {
  if (shape.is_symbolic()) [[unlikely]]
    return symbolic_strides_into(shape, st);
  st.clear();
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
