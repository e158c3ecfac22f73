#include "kiln/distributed/dtensor.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <utility>

#include "kiln/autograd/autograd.h"
#include "kiln/core/overloaded.h"
#include "kiln/core/pool.h"
#include "kiln/core/small_vector.h"
#include "kiln/core/warning.h"
#include "kiln/dispatch/dispatch.h"
#include "kiln/distributed/sharding.h"
#include "kiln/nn/module.h"

namespace kiln::dist {

using ops::OpKind;

// ---- placements -------------------------------------------------------------------

std::string Placement::str() const {
  switch (kind) {
    case Kind::shard: return fmt::format("S({})", dim);
    case Kind::replicate: return "R";
    case Kind::partial: return fmt::format("P({})", to_string(op));
  }
  return "?";
}
std::string to_string(const Placements& p) {
  std::string s = "(";
  for (size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + p[i].str();
  return s + ")";
}

// A gradient through a conversion is laid out so too: a partial value's gradient is the
// same on every rank (PyTorch's backward redistribution).
Placements replicate_partials(Placements p) {
  for (Placement& x : p)
    if (x.is_partial()) x = Replicate();
  return p;
}

std::pair<int64_t, int64_t> chunk_of(int64_t size, int64_t n, int64_t index) {
  int64_t chunk = (size + n - 1) / n;  // torch.chunk: ceil, trailing chunks may be short or empty
  int64_t begin = std::min(size, chunk * index);
  return {begin, std::min(size, begin + chunk) - begin};
}

// ---- the mesh ---------------------------------------------------------------------

struct DeviceMesh::Impl {
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  std::vector<int64_t> coords;
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  Device device;
};

namespace {
void check_names(const std::vector<int64_t>& shape, const std::vector<std::string>& names) {
  KILN_CHECK(!shape.empty() && shape.size() == names.size(), value,
             "[DeviceMesh] needs one name per dimension: shape has {} dims, {} names given",
             shape.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    KILN_CHECK(shape[i] > 0, value, "[DeviceMesh] dimension '{}' has size {}", names[i], shape[i]);
    for (size_t j = 0; j < i; ++j)
      KILN_CHECK(names[i] != names[j], value, "[DeviceMesh] dimension name '{}' is used twice",
                 names[i]);
  }
}
std::vector<int64_t> coords_of(int64_t rank, const std::vector<int64_t>& shape) {
  std::vector<int64_t> c(shape.size());
  for (size_t i = shape.size(); i-- > 0;) c[i] = rank % shape[i], rank /= shape[i];
  return c;
}
}  // namespace

namespace {
// Each dimension's group of this rank, split off `world` (row-major layout). Every rank
// walks every group of every dimension in the same order (split's contract).
std::vector<std::shared_ptr<ProcessGroup>> split_dims(const std::shared_ptr<ProcessGroup>& world,
                                                      const std::vector<int64_t>& shape) {
  int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  KILN_CHECK(world && n == world->size(), value,
             "[DeviceMesh] a mesh of {} ranks over a group of {}", n, world ? world->size() : 0);
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::shared_ptr<ProcessGroup> mine;
    int64_t stride = 1;
    for (size_t k = d + 1; k < shape.size(); ++k) stride *= shape[k];
    for (int64_t base = 0; base < n; ++base) {
      if (coords_of(base, shape)[d] != 0)
        continue;  // one group per line along d, named by its first rank
      std::vector<int> ranks;
      for (int64_t i = 0; i < shape[d]; ++i) ranks.push_back(static_cast<int>(base + i * stride));
      if (auto g = world->split(ranks)) mine = g;
    }
    groups.push_back(mine);
  }
  return groups;
}
}  // namespace

DeviceMesh::DeviceMesh(const std::shared_ptr<ProcessGroup>& world, std::vector<int64_t> shape,
                       std::vector<std::string> names, Device device) {
  check_names(shape, names);
  auto impl = std::make_shared<Impl>();
  impl->groups = split_dims(world, shape);
  impl->coords = coords_of(world->rank(), shape);
  impl->device = resolve_device(device);
  impl->shape = std::move(shape);
  impl->names = std::move(names);
  impl_ = std::move(impl);
  bind();
}

DeviceMesh DeviceMesh::nccl(const std::shared_ptr<ProcessGroup>& bootstrap,
                            std::vector<int64_t> shape, std::vector<std::string> names,
                            Device device) {
  check_names(shape, names);
  auto impl = std::make_shared<Impl>();
  // Each dimension's NCCL communicator, bootstrapped over that dimension's group.
  for (const std::shared_ptr<ProcessGroup>& g : split_dims(bootstrap, shape))
    impl->groups.push_back(nccl_group(g, device));
  impl->coords = coords_of(bootstrap->rank(), shape);
  impl->device = resolve_device(device);
  impl->shape = std::move(shape);
  impl->names = std::move(names);
  DeviceMesh mesh(std::move(impl));
  mesh.bind();
  return mesh;
}

DeviceMesh DeviceMesh::fake(std::vector<int64_t> shape, std::vector<std::string> names,
                            int64_t rank, Device device) {
  check_names(shape, names);
  int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  KILN_CHECK(rank >= 0 && rank < n, index, "[DeviceMesh] rank {} of a mesh of {}", rank, n);
  auto impl = std::make_shared<Impl>();
  impl->coords = coords_of(rank, shape);
  impl->device = resolve_device(device);
  for (size_t d = 0; d < shape.size(); ++d)
    impl->groups.push_back(
        fake_group(static_cast<int>(impl->coords[d]), static_cast<int>(shape[d])));
  impl->shape = std::move(shape);
  impl->names = std::move(names);
  DeviceMesh mesh(std::move(impl));
  mesh.bind();
  return mesh;
}

int64_t DeviceMesh::ndim() const { return static_cast<int64_t>(impl_->shape.size()); }
int64_t DeviceMesh::size(int64_t dim) const { return impl_->shape[static_cast<size_t>(dim)]; }
int64_t DeviceMesh::size() const {
  return std::accumulate(impl_->shape.begin(), impl_->shape.end(), int64_t{1}, std::multiplies<>());
}
const std::vector<int64_t>& DeviceMesh::shape() const { return impl_->shape; }
const std::vector<std::string>& DeviceMesh::names() const { return impl_->names; }
int64_t DeviceMesh::coordinate(int64_t dim) const {
  return impl_->coords[static_cast<size_t>(dim)];
}
Device DeviceMesh::device() const { return impl_->device; }
const std::shared_ptr<ProcessGroup>& DeviceMesh::group(int64_t dim) const {
  return impl_->groups[static_cast<size_t>(dim)];
}
void DeviceMesh::bind() const {
  for (size_t d = 0; d < impl_->names.size(); ++d) bind_group(impl_->names[d], impl_->groups[d]);
}

int64_t DeviceMesh::dim_of(const std::string& name) const {
  for (size_t i = 0; i < impl_->names.size(); ++i)
    if (impl_->names[i] == name) return static_cast<int64_t>(i);
  fail(ErrorKind::value, "[DeviceMesh] has no dimension '{}'; its dimensions are {}", name, str());
}
DeviceMesh DeviceMesh::operator[](const std::string& name) const {
  int64_t d = dim_of(name);
  auto impl = std::make_shared<Impl>();
  impl->shape = {size(d)};
  impl->names = {name};
  impl->coords = {coordinate(d)};
  impl->groups = {group(d)};
  impl->device = impl_->device;
  return DeviceMesh(std::move(impl));
}
std::string DeviceMesh::str() const {
  std::string shape, names;
  for (size_t i = 0; i < impl_->shape.size(); ++i) {
    shape += (i ? ", " : "") + std::to_string(impl_->shape[i]);
    names += (i ? ", '" : "'") + impl_->names[i] + "'";
  }
  if (impl_->shape.size() == 1) shape += ",", names += ",";
  return fmt::format("DeviceMesh(({}), names=({}))", shape, names);
}

// ---- DTensors ---------------------------------------------------------------------

namespace {

Outputs handle(OpKind op, std::span<const Value> args);

// (S1) That `placements` can lay out an `ndim`-d tensor on `mesh`.
void check_layout(int64_t ndim, const DeviceMesh& mesh, const Placements& placements,
                  std::string_view op) {
  KILN_CHECK(static_cast<int64_t>(placements.size()) == mesh.ndim(), internal,
             "[{}] {} placements for a mesh of {} dimensions", op, placements.size(), mesh.ndim());
  for (size_t i = 0; i < placements.size(); ++i) {
    const Placement& p = placements[i];
    if (!p.is_shard()) continue;
    KILN_CHECK(p.dim >= 0 && p.dim < ndim, index, "[{}] placement {} of a {}-d tensor", op, p.str(),
               ndim);
  }
}

// Note [Nested shards]
// A tensor dim may be sharded by several mesh dimensions ([Shard(0), Shard(0)] on a 2-d
// mesh), as in PyTorch: mesh dimensions chunk it in order, each one the chunk the mesh
// dimensions before it left (torch.chunk at every level, so uneven sizes nest too). What
// mesh dimension i sees of the tensor is its level shape: the global shape chunked by the
// shards of the mesh dimensions before i. redistribute moves one mesh dimension at a time
// at its level shape: first it gathers, innermost mesh dimension first, every shard that
// changes and every shard whose tensor dim an earlier mesh dimension re-chunks; then it
// makes the new placements outermost first. Pointwise ops whose DTensor operands all have
// the output's shape and the same placements keep nested shards without communication;
// any other op first gathers the inner shards of a nested dim (its rule then sees at most
// one mesh dimension per tensor dim).
bool is_nested(const Placements& p) {
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (p[i].is_shard() && p[j].is_shard() && p[i].dim == p[j].dim) return true;
  return false;
}

Placements denested(Placements p) {
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (p[i].is_shard() && p[j].is_shard() && p[i].dim == p[j].dim) p[i] = Replicate();
  return p;
}

// The shape mesh dimension `upto` sees: `global` chunked by the shards of the mesh
// dimensions before it (all of them for upto = ndim: this rank's shard shape).
Dims level_shape(const Dims& global, const DeviceMesh& mesh, const Placements& placements,
                 int64_t upto) {
  Dims level = global;
  for (int64_t i = 0; i < upto; ++i) {
    const Placement& p = placements[static_cast<size_t>(i)];
    if (!p.is_shard()) continue;
    auto d = static_cast<size_t>(p.dim);
    // only sharded dims are read as integers: a symbolic batch elsewhere stays one
    int64_t size = std::as_const(level)[d];  // the const read: other entries stay symbols
    level.set(d, chunk_of(size, mesh.size(i), mesh.coordinate(i)).second);
  }
  return level;
}

// (S1) This rank's shard shape of a tensor of `global` shape.
Dims local_shape(const Dims& global, const DeviceMesh& mesh, const Placements& placements,
                 std::string_view op) {
  check_layout(static_cast<int64_t>(global.size()), mesh, placements, op);
  return level_shape(global, mesh, placements, mesh.ndim());
}

// The placements a user gave, checked against the mesh and the tensor's rank, with a
// negative shard dim counted from the end (Shard(-1) is the last dim), as PyTorch.
Placements checked_placements(const DeviceMesh& mesh, Placements placements, int64_t ndim,
                              std::string_view op) {
  KILN_CHECK(static_cast<int64_t>(placements.size()) == mesh.ndim(), value,
             "[{}] {} placements for a mesh of {} dimensions", op, placements.size(), mesh.ndim());
  for (Placement& p : placements) {
    if (p.is_shard() && p.dim < 0 && p.dim >= -ndim) p.dim += static_cast<int32_t>(ndim);
    KILN_CHECK(!p.is_shard() || (p.dim >= 0 && p.dim < ndim), index,
               "[{}] placement {} of a {}-d tensor", op, p.str(), ndim);
  }
  return placements;
}

// Attaches the DTensor state to `outer` (an impl with global metadata, no data).
void attach(const Tensor& outer, Tensor local, const DeviceMesh& mesh, Placements placements) {
  Dims want = local_shape(outer.shape(), mesh, placements, "dtensor");
  KILN_CHECK(local.shape() == want, internal,
             "DTensor of {} with placements {}: local shard {} should be {}", outer.shape().str(),
             to_string(placements), local.shape().str(), want.str());
  outer.impl()->dtensor = make_pooled<DTensorState>(std::move(local), mesh, std::move(placements));
}

Tensor rewrap(const Tensor& like, const Tensor& inner);
Tensor rewrap_gradient(const Tensor& like, const Tensor& inner);
Tensor distribute_like(const Tensor& like, const Tensor& whole);
Tensor inner_of(const Tensor& t) { return t.impl()->dtensor->local(*t.impl()); }
constexpr DTensorLayer kLayer{&handle, &inner_of, &rewrap, &rewrap_gradient, &distribute_like};

Tensor make_dtensor(const Tensor& local, const Dims& global, const DeviceMesh& mesh,
                    const Placements& placements) {
  static std::once_flag installed;
  std::call_once(installed, [] { set_dtensor_layer(&kLayer); });
  size_t bytes = check_sizes(global, local.dtype(), "dtensor");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = global;
  impl->strides = contiguous_strides(global);
  impl->dtype = local.dtype();
  impl->device = local.device();
  impl->storage = std::make_shared<StorageImpl>(nullptr, bytes, local.device(), nullptr, true);
  Tensor outer(std::move(impl));
  attach(outer, local, mesh, placements);
  return outer;
}

// (Note [Tensor subclasses under capture]) `like`'s spec around another shard.
Tensor rewrap(const Tensor& like, const Tensor& inner) {
  const DTensorState& s = *like.impl()->dtensor;
  return make_dtensor(inner, like.shape(), s.mesh, s.placements);
}
Tensor distribute_like(const Tensor& like, const Tensor& whole) {
  const DTensorState& s = *like.impl()->dtensor;
  return distribute_tensor(whole, s.mesh, replicate_partials(s.placements));
}
Tensor rewrap_gradient(const Tensor& like, const Tensor& inner) {
  const DTensorState& s = *like.impl()->dtensor;
  // a partial value's shard is the whole tensor, as R's
  return make_dtensor(inner, like.shape(), s.mesh, replicate_partials(s.placements));
}

}  // namespace

// Note [Derived shards]
// Under plain fake propagation (FakeMode below, nothing recording, every shard fake) an
// op's output shard is fully determined by the global output and the rule's placements
// (S1): a contiguous fake tensor of the local shape. handle_call then records only the
// placements; the shard is made the first time anything asks for it (redistribute,
// to_local, an op that runs on the shards), once, also when several threads read the
// DTensor. A chain of fake DTensor ops thus builds one tensor per op, as the local ops
// would, instead of two.
const Tensor& DTensorState::local(const TensorImpl& outer) const {
  if (derived_)
    std::call_once(made_, [&] {
      local_ = make_tensor(local_shape(outer.shape, mesh, placements, "to_local"), outer.dtype,
                           outer.device,
                           /*allocator=*/nullptr, "to_local");
    });
  return local_;
}

const DTensorState& dtensor_state(const Tensor& t, std::string_view op) {
  KILN_CHECK(t.defined() && t.is_dtensor(), value, "[{}] expected a DTensor, got {}", op,
             t.defined() ? t.meta_str() : "an undefined tensor");
  return *t.impl()->dtensor;
}

// Note [Autograd through the DTensor conversions]
// from_local, to_local and redistribute are not ops, so the recorder never sees them; each
// records itself (autograd::record_function) when grad mode is on and its input needs a
// gradient, as PyTorch's autograd.Functions of the same names do:
//  - to_local: the local gradient becomes a DTensor with the DTensor's placements (or the
//    grad_placements given), without communication;
//  - from_local: the DTensor gradient is redistributed to the placements given (partial
//    ones as Replicate) and its shard is the local gradient;
//  - redistribute: the gradient is redistributed back to the source's placements
//    (partial ones as Replicate).
// Inside the DTensor layer grad mode is off (it runs below autograd), so the layer's own
// conversions record nothing.
Tensor to_local(const Tensor& dtensor, std::optional<Placements> grad_placements) {
  const DTensorState& s = dtensor_state(dtensor, "to_local");
  Tensor local = s.local(*dtensor.impl());
  if (!autograd::grad_enabled() || !dtensor.requires_grad()) return local;
  Tensor out = local.detach_descriptor();  // a handle of its own to carry the history
  DeviceMesh mesh = s.mesh;
  Placements back = grad_placements
                        ? checked_placements(mesh, *grad_placements, dtensor.dim(), "to_local")
                        : s.placements;
  Dims global = dtensor.shape();
  autograd::record_function(
      out, dtensor, "ToTorchTensorBackward",
      [mesh, back, global](const Tensor& g) { return from_local(g, mesh, back, global); });
  return out;
}

Tensor from_local(const Tensor& local, const DeviceMesh& mesh, const Placements& given,
                  std::optional<Dims> global_shape, std::optional<Placements> grad_placements) {
  KILN_CHECK(!local.is_dtensor(), value, "[from_local] the local tensor is a DTensor already");
  Placements placements = checked_placements(mesh, given, local.dim(), "from_local");
  KILN_CHECK(local.device() == mesh.device(), device_mismatch,
             "[from_local] the local tensor is on {} but the mesh's device is {}", local.device(),
             mesh.device());
  Dims global = local.shape();
  if (global_shape) {
    global = *global_shape;
    Dims want = local_shape(global, mesh, placements, "from_local");
    KILN_CHECK(want == local.shape(), shape,
               "[from_local] a {} shard of a {} tensor with placements {} is {} on this rank",
               local.shape().str(), global.str(), to_string(placements), want.str());
  } else {
    for (int64_t i = 0; i < mesh.ndim(); ++i)
      if (placements[i].is_shard()) global[placements[i].dim] *= mesh.size(i);  // even shards
  }
  Tensor out = make_dtensor(local, global, mesh, placements);
  if (autograd::grad_enabled() && local.requires_grad()) {
    Placements back = replicate_partials(
        grad_placements ? checked_placements(mesh, *grad_placements, local.dim(), "from_local")
                        : placements);
    autograd::record_function(out, local, "FromTorchTensorBackward", [back](const Tensor& g) {
      return to_local(g.is_dtensor() ? redistribute(g, back) : g);
    });
  }
  return out;
}

Tensor distribute_tensor(const Tensor& full, const DeviceMesh& mesh, const Placements& given) {
  KILN_CHECK(!full.is_dtensor(), value, "[distribute_tensor] the tensor is a DTensor already");
  Placements placements = checked_placements(mesh, given, full.dim(), "distribute_tensor");
  Tensor local;
  {
    autograd::NoGradGuard no_grad;  // the DTensor is the leaf, not its shard
    local = full.device() == mesh.device() ? full : to(full, mesh.device());
    for (int64_t i = 0; i < mesh.ndim(); ++i) {
      const Placement& p = placements[static_cast<size_t>(i)];
      if (p.is_shard()) {  // nested shards chunk what the mesh dims before left
        auto [begin, len] = chunk_of(local.size(p.dim), mesh.size(i), mesh.coordinate(i));
        local = narrow(local, p.dim, begin, len);
      } else if (p.is_partial() && p.op == ReduceOp::sum && mesh.coordinate(i) != 0) {
        local = zeros_like(local);
      }
    }
    local = contiguous(local);
    if (local.is_alias_of(full)) local = clone(local);  // a DTensor's shard is its own
  }
  Tensor dt = make_dtensor(local, full.shape(), mesh, placements);
  if (full.requires_grad()) dt.set_requires_grad(true);
  return dt;
}

std::string describe(const Tensor& t) {
  const DTensorState& s = dtensor_state(t, "describe");
  return fmt::format("DTensor({}{}, mesh={}, placements={}, local={})", to_string(t.dtype()),
                     t.shape().str(), s.mesh.str(), to_string(s.placements),
                     s.local(*t.impl()).meta_str());
}

// ---- redistribution ---------------------------------------------------------------

namespace {

// One mesh dimension's transition of a local shard; `global` is the tensor's level shape
// at mesh dimension i (the sizes its chunks come from; Note [Nested shards]).
Tensor redistribute_dim(const Tensor& local, const Dims& global, const DeviceMesh& mesh, int64_t i,
                        const Placement& from, const Placement& to) {
  // a mesh dimension of one rank: every placement holds the whole value, nothing moves
  if (from == to || mesh.size(i) == 1) return local;
  const std::string& axis = mesh.names()[static_cast<size_t>(i)];
  int64_t n = mesh.size(i), me = mesh.coordinate(i);
  auto gather = [&](const Tensor& x, int64_t d) {  // S(d) -> R: all_gather, uneven chunks padded
    int64_t chunk = (global[d] + n - 1) / n;
    Tensor padded = x;
    if (x.size(d) < chunk) {
      Dims pad_shape = x.shape();
      pad_shape[d] = chunk - x.size(d);
      padded = cat({x, zeros(pad_shape.vec(), {.dtype = x.dtype(), .device = x.device()})}, d);
    }
    Tensor front = contiguous(transpose(padded, 0, d));
    Tensor all = transpose(all_gather_into_tensor(front, n, axis), 0, d);
    return contiguous(narrow(all, d, 0, global[d]));
  };
  auto my_chunk = [&](const Tensor& x, int64_t d) {  // R -> S(d): this coordinate's chunk, owned
    auto [begin, len] = chunk_of(global[d], n, me);
    Tensor c = contiguous(narrow(x, d, begin, len));
    return c.is_alias_of(x) ? clone(c) : c;
  };
  auto reduce = [&](const Tensor& x, ReduceOp op) { return all_reduce(x, to_string(op), axis); };
  if (from.is_shard() && to.is_replicate()) return gather(local, from.dim);
  if (from.is_replicate() && to.is_shard()) return my_chunk(local, to.dim);
  if (from.is_partial() && to.is_replicate()) return reduce(local, from.op);
  if (from.is_partial() && to.is_shard()) {
    int64_t d = to.dim;
    if (from.op == ReduceOp::sum) {
      // one reduce_scatter along dim d; uneven sizes are padded to n equal chunks (the
      // padding lands past the data and is cut off), as PyTorch's Partial -> Shard
      int64_t chunk = (global[d] + n - 1) / n;
      Tensor padded = local;
      if (chunk * n > global[d]) {
        Dims pad_shape = local.shape();
        pad_shape[d] = chunk * n - global[d];
        padded = cat(
            {local, zeros(pad_shape.vec(), {.dtype = local.dtype(), .device = local.device()})}, d);
      }
      Tensor front = contiguous(transpose(padded, 0, d));
      Tensor mine = transpose(reduce_scatter_tensor(front, "sum", n, axis), 0, d);
      // torch.chunk's chunks start at multiples of `chunk`: this rank's rows lead its piece
      int64_t len = chunk_of(global[d], n, me).second;
      return contiguous(len == chunk ? mine : narrow(mine, d, 0, len));
    }
    return my_chunk(reduce(local, from.op), d);
  }
  if (from.is_replicate() && to.is_partial()) {
    if (to.op != ReduceOp::sum || me == 0) return local;  // max/min of equal values is the value
    return zeros_like(local);
  }
  if (from.is_shard() && to.is_shard()) {
    int64_t d = from.dim, e = to.dim;
    if (global[d] % n == 0 && global[e] % n == 0 && local.size(e) == global[e]) {
      // all_to_all: my d-chunk, split along e into n pieces (piece r to rank r); I get
      // every rank's d-chunk of my e-chunk, which laid side by side along d is my shard.
      int64_t c = global[e] / n, k = local.dim();
      IntList split;  // dim e as [n, c]
      for (int64_t q = 0; q < k; ++q) {
        if (q == e) split.push_back(n);
        split.push_back(q == e ? c : local.size(q));
      }
      IntList front;  // the piece index first
      front.push_back(e);
      for (int64_t q = 0; q <= k; ++q)
        if (q != e) front.push_back(q);
      Tensor out = contiguous(permute(reshape(local, split), front));
      Tensor got = all_to_all_single(out, n, axis);  // [n, my e-chunk of rank r's d-chunk]
      IntList back;  // the rank index next to d, then merged into it
      for (int64_t q = 1; q <= k; ++q) {
        if (q == d + 1) back.push_back(0);
        back.push_back(q);
      }
      IntList merged = got.shape().vec();
      merged.erase(merged.begin());
      merged[static_cast<size_t>(d)] *= n;
      return reshape(permute(got, back), merged);
    }
    return my_chunk(gather(local, d), e);
  }
  fail(ErrorKind::internal, "[redistribute] no transition from {} to {}", from.str(), to.str());
}

}  // namespace

Tensor redistribute(const Tensor& dtensor, const Placements& given) {
  const DTensorState& s = dtensor_state(dtensor, "redistribute");
  Placements placements = checked_placements(s.mesh, given, dtensor.dim(), "redistribute");
  Tensor local = s.local(*dtensor.impl());
  Placements now = s.placements;
  const DeviceMesh& mesh = s.mesh;
  int64_t n = mesh.ndim();
  // As PyTorch's redistribute: a shard does not become a partial value, nor one partial
  // reduction another (neither has a meaning to move data for).
  for (int64_t i = 0; i < n; ++i) {
    const Placement &have = now[static_cast<size_t>(i)], &want = placements[static_cast<size_t>(i)];
    KILN_CHECK(!want.is_partial() || have.is_replicate() || have == want, unsupported,
               "[redistribute] from {} to {} along mesh dimension {} ('{}') is not supported (as "
               "in PyTorch); redistribute to Replicate first",
               have.str(), want.str(), i, mesh.names()[static_cast<size_t>(i)]);
  }
  // The first mesh dimension whose shard of tensor dim d changes: the chunks of d inside
  // it (mesh dimensions after it) must be gathered first.
  auto first_change = [&](int32_t d) {
    for (int64_t j = 0; j < n; ++j) {
      const Placement &have = now[static_cast<size_t>(j)],
                      &want = placements[static_cast<size_t>(j)];
      if (!(have == want) &&
          ((have.is_shard() && have.dim == d) || (want.is_shard() && want.dim == d)))
        return j;
    }
    return n;
  };
  // Gathers, innermost first (Note [Nested shards]) ...
  for (int64_t i = n - 1; i >= 0; --i) {
    const Placement& want = placements[static_cast<size_t>(i)];
    Placement& have = now[static_cast<size_t>(i)];
    if (!have.is_shard() || have == want) {
      if (!have.is_shard() || first_change(have.dim) >= i) continue;
    } else if (want.is_shard() && first_change(have.dim) >= i && first_change(want.dim) >= i) {
      continue;  // S(d) -> S(e) at one level: below, by all_to_all when even
    }
    local = redistribute_dim(local, level_shape(dtensor.shape(), mesh, now, i), mesh, i, have,
                             Replicate());
    have = Replicate();
  }
  // ... then every other change, outermost first (each level shape is final by then).
  for (int64_t i = 0; i < n; ++i) {
    const Placement& want = placements[static_cast<size_t>(i)];
    Placement& have = now[static_cast<size_t>(i)];
    if (have == want) continue;
    local =
        redistribute_dim(local, level_shape(dtensor.shape(), mesh, now, i), mesh, i, have, want);
    have = want;
  }
  Tensor out = make_dtensor(local, dtensor.shape(), s.mesh, placements);
  if (autograd::grad_enabled() && dtensor.requires_grad()) {
    Placements back = replicate_partials(s.placements);
    autograd::record_function(out, dtensor, "RedistributeBackward",
                              [back](const Tensor& g) { return redistribute(g, back); });
  }
  return out;
}

Tensor full_tensor(const Tensor& dtensor) {
  const DTensorState& s = dtensor_state(dtensor, "full_tensor");
  return to_local(
      redistribute(dtensor, Placements(static_cast<size_t>(s.mesh.ndim()), Replicate())));
}

// ---- running a call on the shards (the rules: sharding.cpp) --------------------------

namespace {

using detail::Decision;
using detail::Operands;
using detail::ShardingCall;
using detail::ShardingKind;

Operands operands_of(OpKind op, std::span<const Value> args, const DeviceMesh*& mesh) {
  Operands in;
  const auto& specs = ops::op_info(op).schema.args;
  auto take = [&](const Tensor& t, size_t i) {
    if (!t.defined()) return;
    if (!t.is_dtensor()) {
      KILN_CHECK(
          t.numel() == 1, value,
          "[{}] mixed Tensor and DTensor: argument '{}' is a plain tensor {}; only a 0-dim or "
          "one-element tensor joins a DTensor op (as a replicated scalar). Make it a DTensor first "
          "(distribute_tensor or from_local)",
          ops::op_name(op), i < specs.size() ? specs[i].name : "?", t.meta_str());
      if (t.dim() != 0)  // as PyTorch: a 0-dim tensor is a scalar, a one-element one is a guess
        warn_once(
            "DTensor implicit replication",
            fmt::format("[{}] argument '{}' is a plain one-element tensor {} with {} dim(s): it is "
                        "replicated over the mesh implicitly. Make it 0-dim, or a DTensor "
                        "(distribute_tensor)",
                        ops::op_name(op), i < specs.size() ? specs[i].name : "?", t.meta_str(),
                        t.dim()));
      return;
    }
    const DTensorState& s = *t.impl()->dtensor;
    if (!mesh) mesh = &s.mesh;
    KILN_CHECK(s.mesh == *mesh, value,
               "[{}] DTensor arguments on different meshes: {} and {} (argument '{}')",
               ops::op_name(op), mesh->str(), s.mesh.str(), i < specs.size() ? specs[i].name : "?");
    in.tensors.push_back(&t);
    in.arg.push_back(static_cast<int>(i));
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto* t = std::get_if<Tensor>(&args[i]))
      take(*t, i);
    else if (auto* l = std::get_if<TensorList>(&args[i]))
      for (const Tensor& t : *l) take(t, i);
  }
  return in;
}

// The local form of an argument that names global sizes (view, expand): the local shape.
Value local_arg(OpKind op, size_t i, const Value& v, const Tensor& global_out,
                const DeviceMesh& mesh, const Placements& out) {
  if ((op == OpKind::view || op == OpKind::expand) && i == 1)
    return local_shape(global_out.shape(), mesh, out, ops::op_name(op)).vec();
  return v;
}

thread_local bool t_implicit_replication = false;

// Under ImplicitReplication: plain tensors (other than scalars) as Replicate DTensors on
// the mesh of the call's DTensors.
PoolVector<Value> replicate_plain(std::span<const Value> args) {
  const DeviceMesh* mesh = nullptr;
  auto find = [&](const Tensor& t) {
    if (!mesh && t.defined() && t.is_dtensor()) mesh = &t.impl()->dtensor->mesh;
  };
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v))
      find(*t);
    else if (auto* l = std::get_if<TensorList>(&v))
      for (const Tensor& t : *l) find(t);
  }
  auto lift = [&](const Tensor& t) {
    if (!t.defined() || t.is_dtensor() || t.numel() == 1) return t;
    return from_local(t, *mesh, Placements(static_cast<size_t>(mesh->ndim()), Replicate()));
  };
  PoolVector<Value> out(args.begin(), args.end());
  for (Value& v : out) {
    if (auto* t = std::get_if<Tensor>(&v))
      v = lift(*t);
    else if (auto* l = std::get_if<TensorList>(&v)) {
      TensorList lifted;
      for (const Tensor& t : *l) lifted.push_back(lift(t));
      v = std::move(lifted);
    }
  }
  return out;
}

Outputs handle_call(OpKind op, std::span<const Value> args);

// Indices and masks are never partial sums.
void check_output_placements(const ops::OpInfo& info, const Tensor& out, const Placements& p) {
  if (is_floating(out.dtype())) return;
  for (const Placement& x : p)
    KILN_CHECK(!x.is_partial(), internal, "[{}] partial integer output", info.name);
}

// Whether running the op on the shards would only propagate metadata (FakeMode below,
// nothing recording, every shard already fake) for fresh outputs, which the rule then
// determines: no in-place or view op, whose outputs are the inputs' own shards.
bool derives_shards(const ops::OpInfo& info, std::span<const Value> args, const Operands& in) {
  if (info.is_inplace() || info.is_view() || !redispatch_is_meta(args)) return false;
  for (const Tensor* t : in.tensors)
    if (!t->impl()->dtensor->fake_local()) return false;
  return true;
}

Outputs handle(OpKind op, std::span<const Value> args) {
  // Below autograd: it recorded the op on the DTensors already; the conversions this
  // layer makes (from_local, redistribute, to_local of shards) must not record again.
  autograd::NoGradGuard below_autograd;
  if (t_implicit_replication) {
    PoolVector<Value> lifted = replicate_plain(args);
    return handle_call(op, lifted);
  }
  return handle_call(op, args);
}

Outputs handle_call(OpKind op, std::span<const Value> args) {
  const DeviceMesh* mesh = nullptr;
  Operands in = operands_of(op, args, mesh);
  const ops::OpInfo& info = ops::op_info(op);
  const detail::ShardingEntry& entry = detail::sharding_entry(op);
  if (entry.kind == ShardingKind::decomposed) {
    autograd::NoGradGuard no_grad;  // below autograd (see below)
    return entry.decompose(args);
  }
  if (op == OpKind::_to_copy)
    KILN_CHECK(
        std::get<Device>(args[2]) == mesh->device(), unsupported,
        "[_to_copy] moves a DTensor off its mesh's device {}; use to_local() or full_tensor()",
        mesh->device());
  // Global metadata from kiln's own meta function, on the global shapes (errors too).
  Outputs global = dispatch_meta(op, args);
  bool derive = derives_shards(info, args, in);
  ShardingCall call{op, args, in, global[0].shape(), *mesh, derive};
  bool nested = false;
  for (const Tensor* t : in.tensors) nested = nested || is_nested(t->impl()->dtensor->placements);
  if (nested && !detail::keeps_nested_shards(call)) {
    // Note [Nested shards]: the rules see one mesh dimension per tensor dim at most.
    KILN_CHECK(!info.is_inplace(), unsupported,
               "[{}] writes a DTensor whose tensor dim is sharded by several mesh dimensions "
               "({}) in place; redistribute it first",
               info.name, to_string(in.tensors[0]->impl()->dtensor->placements));
    PoolVector<Value> flat(args.begin(), args.end());
    auto flatten = [](const Tensor& t) {
      if (!t.defined() || !t.is_dtensor() || !is_nested(t.impl()->dtensor->placements)) return t;
      return redistribute(t, denested(t.impl()->dtensor->placements));
    };
    for (Value& v : flat) {
      if (auto* t = std::get_if<Tensor>(&v)) {
        v = flatten(*t);
      } else if (auto* l = std::get_if<TensorList>(&v)) {
        TensorList ls;
        for (const Tensor& t : *l) ls.push_back(flatten(t));
        v = std::move(ls);
      }
    }
    return handle_call(op, flat);
  }
  Decision d = detail::decide(call);
  if (derive) {
    // Under plain fake propagation a fresh output's shard follows from the rule (S1): a
    // contiguous tensor of the global output's dtype, shaped by its placements -- the
    // metadata the local op's meta function would give, without redistributing the
    // (fake) inputs and dispatching the op a second time. It is made when first asked
    // for (Note [Derived shards]); the placements are checked against the shape now.
    for (const Tensor& g : global) {
      check_output_placements(info, g, d.output);
      check_layout(g.dim(), *mesh, d.output, info.name);
      g.impl()->dtensor = make_pooled<DTensorState>(*mesh, d.output);
    }
    return global;
  }
  // Below autograd: what runs here on shards is never recorded (the DTensor op is); the
  // derived path above records nothing either way.
  autograd::NoGradGuard no_grad;
  // Redistribute and unwrap (each argument built once: no copies of the DTensors).
  PoolVector<Value> local(args.size());
  size_t k = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    auto unwrap = [&](const Tensor& t) -> Tensor {
      if (!t.defined() || !t.is_dtensor()) return t;
      const Placements& want = d.inputs[k++];
      if (t.impl()->dtensor->placements == want) return t.impl()->dtensor->local(*t.impl());
      KILN_CHECK(!(info.is_inplace() && static_cast<int>(i) == info.schema.mutated_arg), internal,
                 "[{}] the rule redistributes the tensor the op writes", info.name);
      return to_local(redistribute(t, want));
    };
    if (auto* t = std::get_if<Tensor>(&args[i])) {
      local[i] = unwrap(*t);
    } else if (auto* l = std::get_if<TensorList>(&args[i])) {
      TensorList ls;
      for (const Tensor& t : *l) ls.push_back(unwrap(t));
      local[i] = std::move(ls);
    } else {
      local[i] = local_arg(op, i, args[i], global[0], *mesh, d.output);
    }
  }
  Outputs shards = redispatch(op, local);
  if (info.is_inplace()) return global;  // self, whose shard was written in place
  for (size_t o = 0; o < global.size(); ++o) {
    check_output_placements(info, global[o], d.output);
    attach(global[o], shards[o], *mesh, d.output);
  }
  return global;
}

}  // namespace

ImplicitReplication::ImplicitReplication() : prev_(t_implicit_replication) {
  t_implicit_replication = true;
}
ImplicitReplication::~ImplicitReplication() { t_implicit_replication = prev_; }

namespace {
// Whether module path `path` matches `pattern` ('*' matches one component).
bool path_matches(std::string_view pattern, std::string_view path) {
  while (true) {
    size_t pd = pattern.find('.'), qd = path.find('.');
    std::string_view p = pattern.substr(0, pd), q = path.substr(0, qd);
    if (p != "*" && p != q) return false;
    if (pd == std::string_view::npos || qd == std::string_view::npos) return pd == qd;
    pattern.remove_prefix(pd + 1), path.remove_prefix(qd + 1);
  }
}
}  // namespace

namespace {

// Makes each tensor of `module` whose placement `placement_of(owner path, is a weight)`
// gives a DTensor on the 1-d `mesh`; parameters stay leaves that require grad.
void place_tensors(
    nn::Module& module, const DeviceMesh& mesh,
    const std::function<std::optional<Placement>(const std::string&, bool)>& placement_of) {
  KILN_CHECK(mesh.ndim() == 1, unsupported, "[parallelize_module] needs a 1-d mesh, got {}",
             mesh.str());
  for (const nn::NamedTensor& nt : module.named_tensors()) {
    size_t dot = nt.name.rfind('.');
    std::string owner = dot == std::string::npos ? "" : nt.name.substr(0, dot);
    bool weight = nt.name.substr(dot == std::string::npos ? 0 : dot + 1) == "weight";
    std::optional<Placement> p = placement_of(owner, weight);
    if (!p) continue;
    Tensor value = nt.tensor->is_dtensor() ? full_tensor(*nt.tensor) : *nt.tensor;
    Tensor d = distribute_tensor(value.detach_descriptor(), mesh, {*p});
    if (nt.kind == nn::SlotKind::parameter) d.set_requires_grad(true);
    *nt.tensor = d;
  }
}

}  // namespace

// Note [Parallel styles with layouts]: PyTorch's ColwiseParallel, RowwiseParallel,
// SequenceParallel and PrepareModuleInput as forward hooks. Before forward: a plain input
// becomes a DTensor (from_local with the style's input layout: this rank's part, no
// communication), then it is redistributed to what the module computes on (Replicate
// for colwise, Shard(-1) for rowwise, Shard(sequence) for sequence parallel) -- so a
// sequence-sharded activation meets a colwise linear as an all_gather. After forward:
// the output is redistributed to the output layout (a rowwise output is Partial: an
// all_reduce for Replicate, a reduce_scatter for Shard), then made plain if asked. All of
// it is DTensor ops, so autograd, tracing and export see the collectives.
namespace {

Placement normalized(Placement p, int64_t rank) {
  if (p.is_shard() && p.dim < 0) p.dim += static_cast<int32_t>(rank);
  return p;
}

Tensor lay_in(const Tensor& x, const DeviceMesh& mesh, Placement from, Placement to) {
  Tensor d = x.is_dtensor() ? x : from_local(x, mesh, {normalized(from, x.dim())});
  Placements want{normalized(to, d.dim())};
  return dtensor_state(d).placements == want ? d : redistribute(d, want);
}

Tensor lay_out(const Tensor& y, Placement to, bool local) {
  if (!y.is_dtensor()) return y;
  Placements want{normalized(to, y.dim())};
  Tensor d = dtensor_state(y).placements == want ? y : redistribute(y, want);
  return local ? to_local(d) : d;
}

// A style's hooks on its module's first input and output: taken as `in` (a plain
// tensor), computed on as `compute`, handed back as `out` (plain when `local`).
void lay_out_module(nn::Module& m, const DeviceMesh& mesh, Placement in, Placement compute,
                    Placement out, bool local) {
  m.register_forward_pre_hook([mesh, in, compute](nn::Module&, const TensorList& inputs) {
    TensorList laid = inputs;
    laid[0] = lay_in(inputs[0], mesh, in, compute);
    return laid;
  });
  m.register_forward_hook([out, local](nn::Module&, const TensorList&, const TensorList& outputs) {
    return TensorList{lay_out(outputs[0], out, local)};
  });
}

}  // namespace

void parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                        const std::vector<std::pair<std::string, ParallelStyle>>& plan) {
  place_tensors(module, mesh, [&](const std::string& owner, bool weight) {
    Placement p = Replicate();
    for (const auto& [pattern, style] : plan) {
      if (!path_matches(pattern, owner)) continue;
      if (style == ParallelStyle::colwise)
        p = Shard(0);
      else if (weight)
        p = Shard(1);
    }
    return std::optional<Placement>(p);
  });
  // A rowwise layer's output is a partial sum, which its bias leaves partial (P + R): as
  // RowwiseParallel's default output layout, it is made replicated after the layer.
  for (auto& [path, m] : module.named_modules())
    for (const auto& [pattern, style] : plan)
      if (style == ParallelStyle::rowwise && path_matches(pattern, path))
        m->register_forward_hook([](nn::Module&, const TensorList&, const TensorList& outputs) {
          return TensorList{lay_out(outputs[0], Replicate(), /*local=*/false)};
        });
}

void parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                        const std::vector<std::pair<std::string, TensorParallelStyle>>& plan) {
  // As PyTorch: only the matched modules' tensors become DTensors (colwise S(0); rowwise
  // weight S(1), bias R; sequence parallel R); the rest stay plain.
  place_tensors(module, mesh, [&](const std::string& owner, bool weight) {
    std::optional<Placement> p;
    for (const auto& [pattern, style] : plan) {
      if (!path_matches(pattern, owner)) continue;
      if (std::holds_alternative<ColwiseParallel>(style))
        p = Shard(0);
      else if (std::holds_alternative<RowwiseParallel>(style))
        p = weight ? Shard(1) : Replicate();
      else if (std::holds_alternative<SequenceParallel>(style))
        p = Replicate();
    }
    return p;
  });
  for (auto& named : module.named_modules())
    for (const auto& [pattern, style] : plan) {
      const std::string& path = named.first;  // not structured bindings: lambdas below take them
      nn::Module* m = named.second;
      if (!path_matches(pattern, path)) continue;
      std::visit(
          Overloaded{
              [&](const ColwiseParallel& s) {
                lay_out_module(*m, mesh, s.input_layout, Replicate(), s.output_layout,
                               s.use_local_output);
              },
              [&](const RowwiseParallel& s) {
                lay_out_module(*m, mesh, s.input_layout, Shard(-1), s.output_layout,
                               s.use_local_output);
              },
              [&](const SequenceParallel& s) {
                Placement seq = Shard(s.sequence_dim);
                lay_out_module(*m, mesh, seq, seq, seq, s.use_local_output);
              },
              [&](const PrepareModuleInput& s) {
                KILN_CHECK(s.input_layouts.size() == s.desired_input_layouts.size(), value,
                           "[parallelize_module] PrepareModuleInput for '{}': {} input layouts "
                           "but {} desired ones",
                           path, s.input_layouts.size(), s.desired_input_layouts.size());
                m->register_forward_pre_hook([mesh, s](nn::Module&, const TensorList& in) {
                  TensorList out = in;
                  for (size_t i = 0; i < s.input_layouts.size() && i < in.size(); ++i) {
                    out[i] = lay_in(in[i], mesh, s.input_layouts[i], s.desired_input_layouts[i]);
                    if (s.use_local_output) out[i] = to_local(out[i]);
                  }
                  return out;
                });
              }},
          style);
    }
}

}  // namespace kiln::dist
