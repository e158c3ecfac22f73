#include "kiln/passes/functionalize.h"

#include <optional>

#include "kiln/api/functional.h"
#include "kiln/autograd/autograd.h"
#include "kiln/device/registry.h"
#include "kiln/ops/extension.h"

namespace kiln::passes {

using ops::OpInfo;
using ops::OpKind;

// See Note [Functional storages].
struct FunctionalizeMode::FStorage {
  Tensor root;   // the first tensor written through: as_strided of it reads the storage
  Tensor flat;   // the contents as [numel] once written (and asked for)
  Tensor whole;  // or, after a write covering the storage, the written value itself:
                 // flattened only when something reads the storage another way
  SymInt numel;  // (Y2) symbolic for a storage a symbolic tensor covers
  uint64_t generation = 0;
  bool written_with_grad = false;  // some write ran with grad mode on (autograd saw it)
};

namespace {
// Stands for "older than any generation": the entry re-reads its value on first use.
constexpr uint64_t kStale = ~uint64_t{0};
}  // namespace

FunctionalizeMode::FunctionalizeMode() : guard_(*this) {}
FunctionalizeMode::~FunctionalizeMode() = default;

FunctionalizeMode::FTensor* FunctionalizeMode::find(const Tensor& t) {
  // Nothing tracked until a first write (a trace without mutation never hashes).
  if (!t.defined() || roots_.empty()) return nullptr;
  if (auto it = tensors_.find(t.impl()); it != tensors_.end() && refers_to(it->second.user, t))
    return &it->second;
  // Another handle on a tracked storage (a detached copy, say): tracked from here on,
  // its value read from the storage's contents.
  auto root = roots_.find(t.storage().get());
  if (root == roots_.end()) return nullptr;
  adopt(t, root->second, t);
  FTensor* f = &tensors_.find(t.impl())->second;
  f->generation = kStale;
  return f;
}

FunctionalizeMode::FTensor* FunctionalizeMode::track(const Tensor& t) {
  if (FTensor* f = find(t)) return f;
  adopt(t, storage_for(t), t);  // untracked so far: its own value, the storage's first
  return &tensors_.find(t.impl())->second;
}

Tensor FunctionalizeMode::adopt(Tensor user, std::shared_ptr<FStorage> st, const Tensor& value) {
  uint64_t gen = st->generation;
  tensors_[user.impl()] = FTensor{user.impl()->id.value(), std::move(st), value, gen};
  return user;
}

std::shared_ptr<FunctionalizeMode::FStorage> FunctionalizeMode::storage_for(const Tensor& root) {
  auto& slot = roots_[root.storage().get()];
  if (!slot) {
    slot = make_pooled<FStorage>();
    slot->root = root;
    auto elements = static_cast<int64_t>(root.storage()->nbytes / root.itemsize());
    SymInt numel = root.sym_numel();
    // A symbolic tensor over its whole storage gives it its symbolic size; a storage of
    // fixed size keeps its integer (fake storages hold the example values' bytes).
    bool whole = root.offset() == 0 && numel.hint() == elements && root.is_contiguous();
    slot->numel = numel.is_symbolic() && whole ? numel : SymInt(elements);
  }
  return slot;
}

const Tensor& FunctionalizeMode::flat_of(FStorage& st) {
  if (st.whole.defined())
    st.flat = reshape(std::exchange(st.whole, Tensor()), SymSizes{st.numel});
  else if (!st.flat.defined())
    st.flat = st.numel.is_symbolic() ? reshape(st.root, SymSizes{st.numel})  // it covers it
                                     : as_strided(st.root, {st.numel.hint()}, {1}, int64_t{0});
  return st.flat;
}

namespace {
// Whether `t` covers its storage of `numel` elements in order, from offset 0. Sizes are
// compared as expressions (Y2): a symbolic tensor covers the storage it was made with.
bool covers(const Tensor& t, const SymInt& numel) {
  return t.offset() == 0 && t.sym_numel().same_as(numel) && t.is_contiguous();
}
}  // namespace

Tensor FunctionalizeMode::value_of(const Tensor& t, FTensor& f) {
  if (f.generation != f.st->generation) {  // stale: re-read from the storage's contents
    FStorage& st = *f.st;
    if (st.whole.defined() && covers(t, st.numel) && t.shape() == st.whole.shape())
      f.value = st.whole;
    else
      f.value = as_strided(flat_of(st), IntList(t.shape().begin(), t.shape().end()),
                           IntList(t.strides().begin(), t.strides().end()), t.offset());
    f.generation = f.st->generation;
  }
  return f.value;
}

Tensor FunctionalizeMode::value_of(const Tensor& t) {
  BelowMode below(*this);  // a re-read is recorded below, like the ones handle() makes
  FTensor* f = find(t);
  return f ? value_of(t, *f) : t;
}

bool FunctionalizeMode::written_with_grad(const Tensor& t) {
  const FTensor* f = find(t);
  return f && f->st->written_with_grad;
}

uint64_t FunctionalizeMode::writes(const Tensor& t) {
  const FTensor* f = find(t);
  return f ? f->st->generation : 0;
}

std::span<const Value> FunctionalizeMode::values_of(std::span<const Value> args,
                                                    PoolVector<Value>& values) {
  // Built only once an argument is replaced, each argument copied once: the ones before
  // a replacement as they are, the replacement, then (below) the rest.
  bool any = false;
  auto replace = [&](size_t i, Value v) {
    if (!any) values.reserve(args.size());
    any = true;
    for (size_t k = values.size(); k < i; ++k) values.push_back(args[k]);
    values.push_back(std::move(v));
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto* t = std::get_if<Tensor>(&args[i])) {
      if (FTensor* f = find(*t)) replace(i, value_of(*t, *f));
    } else if (auto* list = std::get_if<TensorList>(&args[i])) {
      TensorList out;
      for (size_t j = 0; j < list->size(); ++j) {
        const Tensor& x = (*list)[j];
        FTensor* f = find(x);
        if (!f && out.empty()) continue;
        if (out.empty()) out.assign(list->begin(), list->end());
        if (f) out[j] = value_of(x, *f);
      }
      if (!out.empty()) replace(i, std::move(out));
    }
  }
  if (!any) return args;
  for (size_t k = values.size(); k < args.size(); ++k) values.push_back(args[k]);
  return values;
}

Outputs FunctionalizeMode::mutate(const OpInfo& info, std::span<const Value> args) {
  const Tensor& self = std::get<Tensor>(args[info.schema.mutated_arg]);
  // The errors eager would raise (shape, cast, device): an op with a meta function of
  // its own runs it; the others are checked on their functional result below.
  if (info.meta)
    dispatch_meta(info.kind, args);
  else
    op_device(info.kind, args);
  FTensor* f = track(self);
  Tensor next;  // the new value of self
  switch (info.kind) {
    case OpKind::copy_: {
      next = value_of(std::get<Tensor>(args[1]));
      if (next.shape() != self.shape())
        next = expand(next, IntList(self.shape().begin(), self.shape().end()));
      if (next.dtype() != self.dtype() || next.device() != self.device())
        next = _to_copy(next, self.dtype(), self.device());
      break;
    }
    case OpKind::fill_:
      next = full(IntList(self.shape().begin(), self.shape().end()), std::get<Scalar>(args[1]),
                  {.dtype = self.dtype(), .device = self.device()});
      break;
    default: {
      // An in-place op with no functional form of its own is captured through its
      // auto-functionalized twin (Note [Auto-functionalized extension ops]).
      OpKind functional = info.functional;
      if (functional == info.kind) {
        const ops::ExtensionOp* e = ops::extension_op(info.kind);
        KILN_CHECK(e && e->auto_functional, unsupported, "[{}] has no functional form to capture",
                   info.name);
        functional = *e->auto_functional;
      }
      PoolVector<Value> values;
      next = std::move(dispatch(functional, values_of(args, values))[0]);
      check_inplace_result(info, self, next.shape(), next.dtype());
      if (next.dtype() != self.dtype()) next = _to_copy(next, self.dtype(), self.device());
    }
  }
  FStorage& st = *f->st;
  if (covers(self, st.numel)) {  // the new contents are `next`, laid out like self
    st.whole = next;
    st.flat = Tensor();
  } else {
    Value scatter[5] = {flat_of(st), next, IntList(self.shape().begin(), self.shape().end()),
                        IntList(self.strides().begin(), self.strides().end()), self.offset()};
    st.flat = std::move(dispatch(OpKind::as_strided_scatter, scatter)[0]);
  }
  ++st.generation;
  st.written_with_grad = st.written_with_grad || autograd::grad_enabled();
  f->value = std::move(next);
  f->generation = st.generation;
  Outputs out;
  out.push_back(self);
  return out;
}

Outputs FunctionalizeMode::handle(OpKind op, std::span<const Value> args) {
  const OpInfo& info = ops::op_info(op);
  if (info.is_inplace()) return mutate(info, args);
  if (info.is_view()) {
    const Tensor& self = std::get<Tensor>(args[info.schema.view_of_arg]);
    FTensor* f = find(self);
    if (!f) return dispatch(op, args);  // an untracked storage: the view is its own value
    const Tensor& current = value_of(self, *f);
    if (op != OpKind::as_strided && current.offset() == self.offset() &&
        current.shape() == self.shape() && current.strides() == self.strides()) {
      // The value is laid out like the user's tensor (the common case): the view's
      // metadata is computed once, on the value, and the user's view shares it.
      PoolVector<Value> values;
      Tensor value = std::move(dispatch(op, values_of(args, values))[0]);
      Tensor user = make_view(self, value.shape(), value.strides(), value.offset(), info.name);
      mark_view(user, self);  // (G4) as any view
      Outputs out;
      out.push_back(adopt(std::move(user), f->st, value));
      return out;
    }
    // User-level metadata from the user's tensor; the value from the current value (or,
    // for as_strided, whose offsets are storage-relative, from the storage contents).
    Tensor user = std::move(dispatch_meta(op, args)[0]);
    Tensor value;
    if (op == OpKind::as_strided) {
      PoolVector<Value> a(args.begin(), args.end());
      a[0] = flat_of(*f->st);
      if (std::holds_alternative<std::monostate>(a[3])) a[3] = self.offset();
      value = std::move(dispatch(op, a)[0]);
    } else if (op == OpKind::view) {
      // A value may be laid out differently from its user tensor (a new value is dense),
      // so it is reshaped: a copy where a view is impossible changes nothing functionally.
      value = reshape(current, std::get<IntList>(args[1]));
    } else {
      PoolVector<Value> values;
      value = std::move(dispatch(op, values_of(args, values))[0]);
    }
    Outputs out;
    out.push_back(adopt(std::move(user), f->st, value));
    return out;
  }
  // Fresh outputs are their own values: tracked only once written.
  PoolVector<Value> values;
  return dispatch(op, values_of(args, values));
}

namespace {

bool share_storage(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage() && a.storage() == b.storage();
}

bool overlap(const Tensor& a, const Tensor& b) {
  if (!share_storage(a, b)) return false;
  auto [a0, a1] = element_span(a);
  auto [b0, b1] = element_span(b);
  return a0 <= a1 && b0 <= b1 && a0 <= b1 && b0 <= a1;
}

}  // namespace

TensorList traced_inputs(const TensorList& inputs, FakeMode* fake,
                         std::vector<InputAlias>& overlapping) {
  TensorList inner;
  for (const Tensor& t : inputs) inner.push_back(subclass_inner(t));
  size_t n = inner.size();
  // Groups of inputs joined by overlapping memory (union-find over the pairs); an input
  // that shares a storage with others but overlaps none is a group of its own.
  std::vector<size_t> group(n);
  for (size_t i = 0; i < n; ++i) group[i] = i;
  auto root = [&](size_t i) {
    while (group[i] != i) i = group[i] = group[group[i]];
    return i;
  };
  std::vector<bool> shares(n, false);
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 0; i < j; ++i) {
      if (!share_storage(inner[i], inner[j])) continue;
      shares[i] = shares[j] = true;
      if (overlap(inner[i], inner[j]))
        group[std::max(root(i), root(j))] = std::min(root(i), root(j));
    }
  TensorList traced(n);
  for (size_t i = 0; i < n; ++i)
    if (!shares[i]) traced[i] = fake ? fake->from_real(inner[i]) : inner[i];
  // Each group gets a storage of its own, each member a view into it at the offset it
  // has in the caller's storage (functionalization addresses a storage by absolute
  // offsets, as_strided's, so a run must place the group's inputs at the same offsets).
  for (size_t g = 0; g < n; ++g) {
    if (!shares[g] || root(g) != g) continue;
    int64_t hi = 0;
    for (size_t i = g; i < n; ++i)
      if (shares[i] && root(i) == g) hi = std::max(hi, element_span(inner[i]).second);
    const Tensor& t0 = inner[g];
    Allocator* alloc = fake ? nullptr : &device_allocator(t0.device());
    Tensor storage = make_tensor(Dims{hi + 1}, t0.dtype(), t0.device(), alloc);
    for (size_t i = g; i < n; ++i) {
      if (!shares[i] || root(i) != g) continue;
      const Tensor& t = inner[i];
      Tensor view = make_view(storage, t.shape(), t.strides(), t.offset());
      if (!fake) {
        autograd::NoGradGuard no_grad;
        copy_(view, t);
        view.set_requires_grad(t.requires_grad());
      }
      traced[i] = view;  // fake already when `fake` (no allocator)
      if (i != g)
        overlapping.push_back({static_cast<int>(g), static_cast<int>(i), t0.offset(), t.offset()});
    }
  }
  return traced;
}

void check_input_aliasing(const TensorList& given, const std::vector<InputAlias>& overlapping,
                          std::string_view runner) {
  TensorList inputs;
  for (const Tensor& t : given) inputs.push_back(subclass_inner(t));
  for (const InputAlias& a : overlapping) {
    const Tensor &x = inputs[static_cast<size_t>(a.first)],
                 &y = inputs[static_cast<size_t>(a.second)];
    KILN_CHECK(
        share_storage(x, y) && x.offset() == a.first_offset && y.offset() == a.second_offset, value,
        "[{}] inputs {} and {} were captured as overlapping views of one storage (at offsets {} "
        "and {}), "
        "but here {}: capture the function again with inputs aliased like these",
        runner, a.first, a.second, a.first_offset, a.second_offset,
        share_storage(x, y) ? fmt::format("they sit at offsets {} and {}", x.offset(), y.offset())
                            : std::string("they do not share memory"));
  }
  auto group_of = [&](size_t i) {  // the first input of i's group (i when it has none)
    for (const InputAlias& a : overlapping)
      if (static_cast<size_t>(a.second) == i) return static_cast<size_t>(a.first);
    return i;
  };
  for (size_t j = 0; j < inputs.size(); ++j)
    for (size_t i = 0; i < j; ++i) {
      if (!overlap(inputs[i], inputs[j])) continue;
      bool known = group_of(i) == group_of(j);
      KILN_CHECK(
          known, value,
          "[{}] inputs {} and {} overlap in memory here, but were captured apart (the program "
          "reads "
          "and writes them independently): pass separate tensors, or capture with them aliased",
          runner, i, j);
    }
}

InputGeometry::InputGeometry(const TensorList& inputs) {
  for (const Tensor& t : inputs) entries_.push_back({t.shape(), t.strides(), t.offset()});
}

std::vector<bool> InputGeometry::changed(const TensorList& inputs) const {
  std::vector<bool> out(inputs.size());
  for (size_t i = 0; i < inputs.size() && i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const Tensor& t = inputs[i];
    out[i] = !(t.shape() == e.shape && t.strides() == e.strides && t.offset() == e.offset);
  }
  return out;
}

void InputGeometry::check(const TensorList& inputs, const std::vector<std::string>& names) const {
  std::vector<bool> moved = changed(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!moved[i]) continue;
    const Tensor& t = inputs[i];
    fail(ErrorKind::unsupported,
         "[capture] input {} ({}) had its shape, strides or offset changed in place (now {} with "
         "strides {}, offset {}) by an in-place metadata op (t_, transpose_, unsqueeze_, "
         "squeeze_, as_strided_): an exported program cannot replay that on its inputs (as "
         "torch.export refuses it; capture_joint replays it); use the out-of-place view "
         "(y = t(x)) instead",
         i < names.size() ? names[i] : "#" + std::to_string(i), entries_[i].shape.str(),
         t.shape().str(), t.strides().str(), t.offset());
  }
}

CapturedProgram capture(const std::function<TensorList(const TensorList&)>& fn,
                        const TensorList& inputs, const CaptureOptions& options) {
  CapturedProgram program;
  program.inputs.resize(inputs.size());
  std::optional<FakeMode> fake;
  // Subclass inputs (DTensors) are traced on their inner tensors (Note [Tensor subclasses
  // under capture]).
  if (options.mode == MakeFxOptions::Mode::fake)
    fake.emplace(FakeModeOptions{.allow_non_fake_inputs = true});
  TensorList traced;
  traced.reserve(inputs.size());
  traced = traced_inputs(inputs, fake ? &*fake : nullptr,
                         program.overlapping_inputs);  // Note [Aliased inputs]
  {
    ProxyMode proxy(program.graph);
    for (size_t i = 0; i < traced.size(); ++i)
      proxy.add_input(traced[i], i < options.input_names.size() ? options.input_names[i]
                                                                : "arg" + std::to_string(i));
    TensorList new_values(inputs.size());
    TensorList results;
    std::vector<int> result_input(0);
    {
      FunctionalizeMode functionalize;  // the traced inputs are their own values
      TensorList fn_inputs;
      for (size_t i = 0; i < traced.size(); ++i)
        fn_inputs.push_back(subclass_rewrap(inputs[i], traced[i]));
      InputGeometry geometry(traced);
      TensorList user = fn(fn_inputs);
      geometry.check(traced, options.input_names);
      for (size_t i = 0; i < traced.size(); ++i)
        if (functionalize.mutated(traced[i])) new_values[i] = functionalize.value_of(traced[i]);
      for (const Tensor& r : user) {
        Tensor inner = subclass_inner(r);
        int input = -1;
        for (size_t i = 0; i < traced.size(); ++i)
          if (inner.is_same(traced[i])) input = static_cast<int>(i);
        result_input.push_back(input);
        results.push_back(functionalize.value_of(inner));
      }
    }
    // A new value that still is (a view of) a mutated input would be read after the
    // write-backs have started overwriting inputs (x.copy_(y); y.mul_(2) writes y, then
    // reads the old y into x): materialize such values first.
    auto aliases_mutated_input = [&](const Tensor& v) {
      for (size_t j = 0; j < traced.size(); ++j)
        if (new_values[j].defined() && v.is_alias_of(traced[j])) return true;
      return false;
    };
    std::vector<bool> must_clone;
    for (const Tensor& v : new_values)
      must_clone.push_back(v.defined() && aliases_mutated_input(v));
    for (size_t i = 0; i < new_values.size(); ++i)
      if (must_clone[i]) new_values[i] = clone(new_values[i]);
    ir::RefList refs;
    bool in_graph = options.write_back == WriteBack::in_graph;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!new_values[i].defined()) continue;
      InputMutation& m = program.inputs[i];
      m.data_mutated = true;
      if (in_graph) {
        m.where = InputMutation::Where::in_graph;
        NoClobberScope keep_inputs;  // (M4) the input node stays the input
        copy_(traced[i], new_values[i]);
      } else {
        m.where = InputMutation::Where::out_of_graph;
        refs.push_back(proxy.ref_of(new_values[i]));  // (M5) mutations first
        ++program.num_mutation_outputs;
      }
    }
    for (size_t k = 0; k < results.size(); ++k) {
      int i = result_input[k];
      bool returns_mutated_input = in_graph && i >= 0 && new_values[i].defined();
      refs.push_back(proxy.ref_of(returns_mutated_input ? traced[i] : results[k]));  // (M4)
    }
    program.graph.set_output(std::move(refs));
  }
  ir::eliminate_dead_code(program.graph);  // stale reads and unused values
#ifndef NDEBUG
  program.graph.verify();
#endif
  return program;
}

}  // namespace kiln::passes
