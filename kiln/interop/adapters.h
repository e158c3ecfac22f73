#pragma once
// Shared pieces of the ATen adapter table (kiln/interop/ops.cpp and ops_nn.cpp): how an
// adapter returns its results and reads the arguments many overloads share. Internal to
// the importer.

#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "kiln/interop/call.h"

namespace kiln::interop {

using AdapterEntry = std::pair<std::string_view, Adapter>;

inline Results one(Tensor t) { return {Slot(std::move(t))}; }
inline Results many(const TensorList& ts) {
  Results r;
  for (const Tensor& t : ts) r.emplace_back(t);
  return r;
}
template <typename... T>
Results tuple_of(const std::tuple<T...>& t) {
  return std::apply([](const auto&... x) { return Results{Slot(x)...}; }, t);
}
inline Results pair_of(const std::pair<Tensor, Tensor>& p) {
  return {Slot(p.first), Slot(p.second)};
}
inline Tensor self(const Call& c) { return c.tensor("self"); }

/** dtype and device arguments of a factory (or `like`'s where the call names none). */
TensorOptions options_of(const Call& c, const Tensor& like = Tensor());
/** A pooling op's stride, defaulting to its kernel (PyTorch's pooling defaults). */
IntList stride_or_kernel(const Call& c);

/** The entries of torch.nn.functional's ops: losses, pooling, normalization, sampling,
 * activations and recurrent cells (ops_nn.cpp). */
std::vector<AdapterEntry> nn_adapters();

}  // namespace kiln::interop
