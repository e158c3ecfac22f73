#include "kiln/backend/cuda/kernels.h"

namespace kiln::cuda {

using ops::OpKind;

namespace {

// The same coverage as the CPU table: every op with a kernel there has one here (the
// F6 consistency test checks both against the meta functions).
ops::KernelTable build() {
  ops::KernelTable t{};
  auto set = [&t](std::initializer_list<OpKind> ops, ops::Kernel k) {
    for (OpKind op : ops) t[static_cast<size_t>(op)] = k;
  };
  set({OpKind::empty}, k_empty);
  set({OpKind::full}, k_full);
  set({OpKind::arange}, k_arange);
  set({OpKind::rand}, k_rand);
  set({OpKind::randn}, k_randn);
  set({OpKind::neg, OpKind::abs, OpKind::relu, OpKind::exp, OpKind::log, OpKind::sqrt,
       OpKind::rsqrt, OpKind::sin, OpKind::cos, OpKind::tanh, OpKind::sigmoid, OpKind::silu,
       OpKind::gelu},
      k_unary);
  set({OpKind::logical_not}, k_logical_not);
  set({OpKind::add, OpKind::sub, OpKind::mul, OpKind::div, OpKind::pow, OpKind::maximum,
       OpKind::minimum},
      k_binary);
  set({OpKind::eq, OpKind::ne, OpKind::lt, OpKind::le, OpKind::gt, OpKind::ge}, k_compare);
  set({OpKind::where}, k_where);
  set({OpKind::masked_fill}, k_masked_fill);
  set({OpKind::copy_}, k_copy_);
  set({OpKind::fill_}, k_fill_);
  set({OpKind::sum, OpKind::mean}, k_sum_mean);
  set({OpKind::amax, OpKind::amin}, k_amax);
  set({OpKind::max, OpKind::min, OpKind::argmax}, k_max_dim);
  set({OpKind::var}, k_var);
  set({OpKind::softmax, OpKind::log_softmax}, k_softmax);
  set({OpKind::mm}, k_mm);
  set({OpKind::bmm}, k_bmm);
  set({OpKind::matmul}, k_matmul);
  set({OpKind::addmm}, k_addmm);
  set({OpKind::linear}, k_linear);
  set({OpKind::cat}, k_cat);
  set({OpKind::as_strided_scatter}, k_as_strided_scatter);
  set({OpKind::index_select}, k_index_select);
  set({OpKind::gather}, k_gather);
  set({OpKind::embedding}, k_embedding);
  set({OpKind::clone}, k_clone);
  set({OpKind::layer_norm, OpKind::rms_norm}, k_layer_norm);
  set({OpKind::_to_copy}, k_to_copy);
  return t;
}

}  // namespace

const ops::KernelTable& kernels() {
  static const ops::KernelTable table = build();
  return table;
}

}  // namespace kiln::cuda
