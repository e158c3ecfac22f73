#include "kiln/core/tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <ostream>
#include <vector>

#include "kiln/core/pool.h"

namespace kiln {

namespace detail {
constinit thread_local IdBlock t_tensor_ids = {0, 0};

// Threads take ids in blocks from one counter: an atomic step per 65536 impls.
uint64_t refill_tensor_ids() {
  constexpr uint64_t kBlock = 1 << 16;
  static std::atomic<uint64_t> next_block{1};
  uint64_t base = next_block.fetch_add(kBlock, std::memory_order_relaxed);
  t_tensor_ids = {base + 1, base + kBlock};
  return base;
}
}  // namespace detail

std::string Scalar::str() const {
  if (kind_ == Kind::b) return i_ ? "True" : "False";
  if (kind_ == Kind::i) return std::to_string(i_);
  return fmt::format("{}", f_);
}

std::ostream& operator<<(std::ostream& os, const Dims& dims) { return os << dims.str(); }

int64_t wrap_dim(int64_t dim, int64_t rank, std::string_view op) {
  int64_t r = std::max<int64_t>(rank, 1);  // a 0-dim tensor accepts dim 0 and -1
  KILN_CHECK(dim >= -r && dim < r, index,
             "[{}] Dimension out of range (expected to be in range of [{}, {}], but got {})", op,
             -r, r - 1, dim);
  return dim < 0 ? dim + r : dim;
}

// Read through const: a mutable access would make a symbolic shape static in place.
int64_t Tensor::size(int64_t d) const {
  return shape()[static_cast<size_t>(wrap_dim(d, dim(), "size"))];
}
int64_t Tensor::stride(int64_t d) const {
  return strides()[static_cast<size_t>(wrap_dim(d, dim(), "stride"))];
}
SymInt Tensor::sym_size(int64_t d) const {
  return impl_->shape.sym(static_cast<size_t>(wrap_dim(d, dim(), "size")));
}

bool Tensor::symbolic_contiguous() const {
  Dims expected;
  symbolic_strides_into(impl_->shape, expected);
  for (size_t i = 0; i < impl_->shape.size(); ++i) {
    SymInt s = impl_->shape.sym(i);
    if (!s.is_symbolic() && s.hint() == 1) continue;
    if (!impl_->strides.sym(i).same_as(expected.sym(i))) return false;
  }
  return true;
}

void* Tensor::raw_data() const {
  const Storage& s = impl_->storage;
  KILN_CHECK(!impl_->dtensor, value,
             "[data] tensor {} is a DTensor: its data is in shards; read to_local() (this rank's) "
             "or full_tensor() (all of it)",
             meta_str());
  KILN_CHECK(!s->fake, data_dependent,
             "[data] tensor {} is fake: it has metadata but no data to read or write", meta_str());
  return static_cast<char*>(s->data) + impl_->offset * static_cast<int64_t>(itemsize());
}

void Tensor::wrong_element_type(DType requested) const {
  fail(ErrorKind::dtype, "[data] expected a tensor of dtype {} for this element type, but got {}",
       requested, meta_str());
}

std::string Tensor::meta_str() const {
  return fmt::format("{}{}@{}", impl_->dtype, impl_->shape.str(), impl_->device);
}

namespace {
// The element count of `shape` as one branch-free pass: a count in [1, INT64_MAX] with
// no negative size and no overflow (nothing else to check then, since the largest
// contiguous stride is at most the count); 0 for everything else, which the slow path
// below sorts out. This runs for every tensor and view kiln creates.
inline uint64_t fast_count(const Dims& shape) {
  uint64_t n = 1;
  bool bad = false;
  for (int64_t s : shape.hints()) {
    bad |= s < 0;
    bad |= __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n);
  }
  return bad || n > static_cast<uint64_t>(INT64_MAX) ? 0 : n;
}

// The slow path: a shape Error for a negative size, or a count (or, for shapes with a
// zero size, a contiguous stride: the product of max(size, 1)) past int64; else the count.
[[gnu::noinline, gnu::cold]] int64_t checked_count(const Dims& shape, std::string_view op) {
  int64_t n = 1, span = 1;
  bool overflow = false;
  for (int64_t s : shape.hints()) {
    KILN_CHECK(s >= 0, shape, "[{}] Trying to create tensor with negative dimension {}: {}", op, s,
               shape.str());
    overflow |= __builtin_mul_overflow(n, s, &n);
    overflow |= __builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span);
  }
  KILN_CHECK(!overflow, shape, "[{}] size {} has more elements than int64 can hold", op,
             shape.str());
  return n;
}

[[gnu::noinline, gnu::cold]] void too_many_bytes(const Dims& shape, DType dtype,
                                                 std::string_view op) {
  fail(ErrorKind::shape, "[{}] size {} of {} needs more bytes than the address space", op,
       shape.str(), to_string(dtype));
}
}  // namespace

size_t check_sizes(const Dims& shape, DType dtype, std::string_view op) {
  uint64_t n = fast_count(shape);
  if (n == 0) [[unlikely]]
    n = static_cast<uint64_t>(checked_count(shape, op));
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(n), static_cast<int64_t>(kiln::itemsize(dtype)),
                             &nbytes)) [[unlikely]]
    too_many_bytes(shape, dtype, op);
  return static_cast<size_t>(nbytes);
}

Tensor make_tensor(const Dims& shape, DType dtype, Device device, Allocator* allocator,
                   std::string_view op) {
  return make_tensor(shape, contiguous_strides(shape), dtype, device, allocator, op);
}

namespace {
thread_local bool t_inference_mode = false;
}  // namespace

// ---- autograd's methods (Note [Autograd methods through a hook]) ----

namespace {
std::atomic<const detail::AutogradHooks*> g_autograd{nullptr};

// Whether autograd has anything to say about `t`: without gradient state or a stale
// view, a tensor does not require grad, is a leaf and has no history.
bool seen_by_autograd(const Tensor& t) { return t.impl()->autograd || detail::stale_view(t); }

const detail::AutogradHooks& autograd_hooks(const char* method) {
  const detail::AutogradHooks* hooks = g_autograd.load(std::memory_order_acquire);
  KILN_CHECK(hooks, unsupported,
             "[{}] needs kiln's autograd layer, which this program does not link: include "
             "kiln/autograd/autograd.h (or kiln/kiln.h) in one of its files",
             method);
  return *hooks;
}

const Tensor kUndefined;
const std::shared_ptr<autograd::Node> kNoNode;
}  // namespace

void detail::set_autograd_hooks(const AutogradHooks* hooks) {
  g_autograd.store(hooks, std::memory_order_release);
}

bool Tensor::requires_grad() const {
  return seen_by_autograd(*this) && autograd_hooks("requires_grad").requires_grad(*this);
}
Tensor& Tensor::set_requires_grad(bool on) {
  if (on || impl_->autograd) autograd_hooks("requires_grad").set_requires_grad(*this, on);
  return *this;
}
bool Tensor::is_leaf() const {
  return !impl_->autograd || autograd_hooks("is_leaf").is_leaf(*this);
}
const Tensor& Tensor::grad() const {
  return impl_->autograd ? autograd_hooks("grad").grad(*this) : kUndefined;
}
Tensor& Tensor::mutable_grad() const { return autograd_hooks("grad").mutable_grad(*this); }
void Tensor::retain_grad() const { autograd_hooks("retain_grad").retain_grad(*this); }
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  return seen_by_autograd(*this) ? autograd_hooks("grad_fn").grad_fn(*this) : kNoNode;
}
std::string Tensor::grad_fn_name() const {
  return seen_by_autograd(*this) ? autograd_hooks("grad_fn").grad_fn_name(*this) : std::string();
}
Tensor Tensor::detach() const { return autograd_hooks("detach").detach(*this); }
void Tensor::backward(const Tensor& grad, bool retain_graph, bool create_graph) const {
  autograd_hooks("backward").backward(*this, grad, retain_graph, create_graph);
}

Tensor Tensor::detach_descriptor() const {
  auto impl = make_pooled<TensorImpl>(*impl_);
  impl->autograd.reset();
  impl->view_made_at = 0;
  impl->view_base.reset();
  return Tensor(std::move(impl));
}

bool inference_mode() { return t_inference_mode; }
void set_inference_mode(bool on) { t_inference_mode = on; }

Tensor make_tensor(const Dims& shape, const Dims& strides, DType dtype, Device device,
                   Allocator* allocator, std::string_view op) {
  size_t nbytes = check_sizes(shape, dtype, op);
  auto impl = make_pooled<TensorImpl>();
  impl->strides = strides;
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = device;
  void* data = allocator ? allocator->allocate(nbytes) : nullptr;
  impl->storage = make_pooled<StorageImpl>(data, nbytes, device, allocator, !allocator);
  impl->storage->inference = t_inference_mode;
  return Tensor(std::move(impl));
}

std::pair<int64_t, int64_t> element_span(const Tensor& t) {
  if (t.numel() == 0) return {1, 0};
  int64_t last = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return {t.offset(), last};
}

namespace {
// The storage offsets of t's elements, ascending.
std::vector<int64_t> element_offsets(const Tensor& t) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(t.numel()));
  std::vector<int64_t> index(static_cast<size_t>(t.dim()), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t at = t.offset();
    for (int64_t d = 0; d < t.dim(); ++d) at += index[static_cast<size_t>(d)] * t.stride(d);
    out.push_back(at);
    for (int64_t d = t.dim() - 1; d >= 0 && ++index[static_cast<size_t>(d)] == t.size(d); --d)
      index[static_cast<size_t>(d)] = 0;
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

bool shares_elements(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || !a.storage() || a.storage() != b.storage()) return false;
  auto [a0, a1] = element_span(a);
  auto [b0, b1] = element_span(b);
  if (a0 > a1 || b0 > b1 || a1 < b0 || b1 < a0) return false;
  std::vector<int64_t> x = element_offsets(a), y = element_offsets(b);
  for (size_t i = 0, k = 0; i < x.size() && k < y.size();) {
    if (x[i] == y[k]) return true;
    x[i] < y[k] ? ++i : ++k;
  }
  return false;
}

Tensor make_view(const Tensor& base, Dims shape, Dims strides, int64_t offset,
                 std::string_view op) {
  int64_t any_negative = offset;
  for (int64_t st : strides.hints()) any_negative |= st;
  if (any_negative < 0) [[unlikely]] {
    KILN_CHECK(offset >= 0, shape, "[{}] invalid storage offset {}: offsets must be non-negative",
               op, offset);
    fail(ErrorKind::shape, "[{}] negative stride in {}: kiln views need non-negative strides", op,
         strides.str());
  }
  if (fast_count(shape) == 0) [[unlikely]]
    checked_count(shape, op);
  auto impl = make_pooled<TensorImpl>();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->device = base.device();
  impl->storage = base.storage();
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, Dims shape, Dims strides, const SymInt& offset,
                 std::string_view op) {
  Tensor v = make_view(base, std::move(shape), std::move(strides), offset.hint(), op);
  v.impl()->offset_expr = offset.expr();
  return v;
}

}  // namespace kiln
