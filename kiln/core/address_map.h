#pragma once
// AddressMap: a map from object addresses to small trivially copyable values, for tables
// filled on every traced op (ProxyMode's node of each tensor). Open addressing over a
// power-of-two array with linear probing: a lookup is a multiply, a mask and usually one
// cache line, where std::unordered_map pays an integer division and a pointer chase per
// lookup (both showed in wall-clock profiles of make_fx; tsl::robin_map was measured too
// and was slower for these small, short-lived tables). Insert and find only: entries are
// never erased (callers check their own staleness, e.g. by TensorId).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

namespace kiln {

template <typename V>
class AddressMap {
  static_assert(std::is_trivially_copyable_v<V>, "AddressMap holds plain values");

 public:
  explicit AddressMap(size_t capacity = 64) { rehash(round_up(capacity)); }
  AddressMap(const AddressMap&) = delete;
  AddressMap& operator=(const AddressMap&) = delete;

  /** The value stored for `key`, or null. */
  const V* find(const void* key) const {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (!keys_[i]) return nullptr;
    }
  }
  /** Stores `value` for `key` (replacing what was there). */
  void set(const void* key, const V& value) {
    if (2 * (size_ + 1) > mask_ + 1) rehash(2 * (mask_ + 1));  // load factor <= 1/2
    size_t i = slot(key);
    while (keys_[i] && keys_[i] != key) i = (i + 1) & mask_;
    if (!keys_[i]) {
      keys_[i] = key;
      ++size_;
    }
    values_[i] = value;
  }
  size_t size() const { return size_; }

 private:
  static size_t round_up(size_t n) {
    size_t c = 16;
    while (c < 2 * n) c *= 2;
    return c;
  }
  size_t slot(const void* key) const {  // Fibonacci hashing: the high bits of a multiply
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(key) * 0x9e3779b97f4a7c15ull) >>
                               shift_);
  }
  void rehash(size_t capacity) {
    std::unique_ptr<const void*[]> old_keys = std::move(keys_);
    std::unique_ptr<V[]> old_values = std::move(values_);
    size_t old_capacity = keys_capacity_;
    keys_.reset(new const void*[capacity]());
    values_.reset(new V[capacity]);
    keys_capacity_ = capacity;
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c /= 2) --shift_;
    size_ = 0;
    for (size_t i = 0; i < old_capacity; ++i)
      if (old_keys[i]) set(old_keys[i], old_values[i]);
  }

  std::unique_ptr<const void*[]> keys_;
  std::unique_ptr<V[]> values_;
  size_t keys_capacity_ = 0;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace kiln
