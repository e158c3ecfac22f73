#include "kiln/fake/fake_mode.h"

#include "kiln/ops/op_table.h"

namespace kiln {

FakeMode::FakeMode(FakeModeOptions options)
    : options_(options), policy_(options.policy), guard_(*this) {
  tensors_.reserve(32);  // a model's parameters and inputs without a rehash
  storages_.reserve(32);
}

Tensor FakeMode::from_real(const Tensor& real) {
  if (!real.defined() || real.is_fake()) return real;
  auto [it, fresh] = tensors_.try_emplace(real.impl());  // one lookup, found or new
  if (!fresh && refers_to(it->second.real, real)) return it->second.fake;

  // One fake storage per real storage keeps aliasing (views of one base) intact.
  const Storage& rs = real.storage();
  auto [sit, new_storage] = storages_.try_emplace(rs.get());
  if (new_storage || sit->second.real.lock() != rs)
    sit->second = {rs, make_pooled<StorageImpl>(nullptr, rs->nbytes, rs->device, nullptr, true)};
  // The real descriptor's fields but its storage (not copied first: a refcount pair).
  const TensorImpl& r = *real.impl();
  auto impl = make_pooled<TensorImpl>();
  impl->shape = r.shape;
  impl->strides = r.strides;
  impl->offset = r.offset;
  impl->dtype = r.dtype;
  impl->device = r.device;
  impl->storage = sit->second.fake;
  impl->wrapped_number = r.wrapped_number;
  impl->view_made_at = r.view_made_at;
  impl->autograd = r.autograd;
  impl->dtensor = r.dtensor;
  Tensor fake(std::move(impl));
  it->second = {real.impl()->id.value(), fake};
  return fake;
}

Tensor FakeMode::lift(const Tensor& literal) { return from_real(lift_literal(literal)); }

Value FakeMode::convert(const Value& v, ops::OpKind op, std::string_view arg) {
  auto one = [&](const Tensor& t) -> Tensor {
    // A C++ number wrapped as a 0-dim CPU tensor is a constant, not an input.
    if (!t.defined() || t.is_fake() || t.is_wrapped_number()) return t;
    KILN_CHECK(options_.allow_non_fake_inputs, value,
               "[{}] argument '{}' is a real tensor {} inside FakeMode; convert it with "
               "FakeMode::from_real first, or set allow_non_fake_inputs",
               ops::op_name(op), arg, t.meta_str());
    return from_real(t);
  };
  if (auto* t = std::get_if<Tensor>(&v)) return one(*t);
  if (auto* list = std::get_if<TensorList>(&v)) {
    TensorList out;
    for (const Tensor& t : *list) out.push_back(one(t));
    return out;
  }
  return v;
}

namespace {
bool needs_conversion(const Tensor& t) {
  return t.defined() && !t.is_fake() && !t.is_wrapped_number();
}
bool any_real(std::span<const Value> args) {
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v); t && needs_conversion(*t)) return true;
    if (auto* l = std::get_if<TensorList>(&v))
      for (const Tensor& t : *l)
        if (needs_conversion(t)) return true;
  }
  return false;
}
}  // namespace

bool FakeMode::only_propagates(std::span<const Value> args) const { return !any_real(args); }

Outputs FakeMode::handle(ops::OpKind op, std::span<const Value> args) {
  if (!any_real(args)) return dispatch_meta(op, args);  // the common case: nothing to convert
  const auto& specs = ops::op_info(op).schema.args;
  // (F2) Every tensor argument becomes fake (or the call fails).
  PoolVector<Value> converted;
  converted.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    converted.push_back(convert(args[i], op, i < specs.size() ? specs[i].name : "?"));
  return dispatch_meta(op, converted);
}

}  // namespace kiln
