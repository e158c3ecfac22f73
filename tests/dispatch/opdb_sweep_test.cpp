// Replays PyTorch's own OpInfo samples (tests/golden/opdb_sweep.json, written by
// tools/golden/make_opdb_sweep.py from torch.testing's op_db): every dtype each op
// supports, broadcasting, 0-dim and empty tensors, extremal values. Tolerances are
// PyTorch's defaults for the result's dtype (torch.testing.assert_close).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "golden_json.h"
#include "kiln/kiln.h"
#include "kiln/ops/meta.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::json;

/** One sample: tensors (input first), positional arguments (tensors by index into
 * `in`), keyword arguments. */
struct Sample {
  std::vector<Tensor> in;
  json args, kwargs;
  size_t listed = 0;  // how many leading tensors form the input list (cat, stack, ...)
  json value;         // an input that is a number or a shape (creation ops; add(2, t))
  Tensor wrapped;     // that number as a wrapped number, for the ops that take a tensor

  TensorList list() const {
    return TensorList(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(listed));
  }
  bool is_tensor(size_t i) const { return has(i) && args.at(i).is_object(); }
  bool is_null(size_t i) const { return has(i) && args.at(i).is_null(); }
  int64_t int_at(size_t i) const { return args.at(i).get<int64_t>(); }
  IntList ints_at(size_t i) const {
    return args.at(i).is_array() ? args.at(i).get<IntList>() : IntList{args.at(i).get<int64_t>()};
  }
  /** The tensor given as keyword `name`, or an undefined one. */
  Tensor kw_tensor(const char* name) const {
    return kwargs.contains(name) && kwargs.at(name).is_object()
               ? in.at(kwargs.at(name).at("tensor").get<size_t>())
               : Tensor();
  }

  const Tensor& x() const { return wrapped.defined() ? wrapped : in.at(0); }
  /** Positional argument i as a tensor (a number becomes a wrapped scalar, as in Python). */
  Tensor tensor(size_t i) const {
    const json& a = args.at(i);
    if (a.is_null()) return Tensor();
    return a.is_object() ? in.at(a.at("tensor").get<size_t>()) : wrapped_number(testing::scalar(a));
  }
  bool has(size_t i) const { return args.size() > i; }
  /** An integer given as positional argument i or as keyword `name`. */
  int64_t int_arg(size_t i, const char* name, int64_t fallback) const {
    return has(i) ? args.at(i).get<int64_t>() : kw<int64_t>(name, fallback);
  }
  /** The `dtype` keyword, when given. */
  std::optional<DType> dtype() const {
    if (!kwargs.contains("dtype") || kwargs.at("dtype").is_null()) return std::nullopt;
    return dtype_from_string(kwargs.at("dtype").at("dtype").get<std::string>());
  }
  double number(size_t i) const { return testing::scalar(args.at(i)).to_double(); }
  template <typename T>
  T kw(const char* name, T fallback) const {
    return kwargs.contains(name) && !kwargs.at(name).is_null() ? kwargs.at(name).get<T>()
                                                               : fallback;
  }
  /** An int-or-list keyword as a list (a number n as {n}); `fallback` when absent or null. */
  IntList kw_ints(const char* name, IntList fallback) const {
    if (!kwargs.contains(name) || kwargs.at(name).is_null()) return fallback;
    const json& v = kwargs.at(name);
    return v.is_array() ? v.get<IntList>() : IntList{v.get<int64_t>()};
  }
  /** Positional argument i as a list (a number n as {n}); `fallback` when absent or null. */
  IntList ints_or(size_t i, IntList fallback) const {
    return has(i) && !is_null(i) ? ints_at(i) : fallback;
  }
  /** A loss's reduction keyword. */
  std::string reduction() const { return kw<std::string>("reduction", "mean"); }
  /** A Scalar keyword (alpha, beta), 1 when absent. */
  Scalar kw_scalar(const char* name) const {
    return kwargs.contains(name) && !kwargs.at(name).is_null() ? testing::scalar(kwargs.at(name))
                                                               : Scalar(int64_t{1});
  }
  double kw_number(const char* name, double fallback) const {
    return kwargs.contains(name) && !kwargs.at(name).is_null()
               ? testing::scalar(kwargs.at(name)).to_double()
               : fallback;
  }
  /** The `dim` keyword as a list (absent or null: empty, meaning every dim). */
  IntList dims() const {
    if (!kwargs.contains("dim") || kwargs.at("dim").is_null()) return {};
    return kwargs.at("dim").is_array() ? kwargs.at("dim").get<IntList>()
                                       : IntList{kwargs.at("dim").get<int64_t>()};
  }
  std::optional<int64_t> dim() const {
    if (!kwargs.contains("dim") || kwargs.at("dim").is_null()) return std::nullopt;
    return kwargs.at("dim").get<int64_t>();
  }
};

using Fn = std::function<Tensor(const Sample&)>;

Fn unary(Tensor (*f)(const Tensor&)) {
  return [f](const Sample& s) { return f(s.x()); };
}
Fn binary(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](const Sample& s) { return f(s.x(), s.tensor(0)); };
}

// div with the sample's rounding_mode (op_db's reference samples may leave it out).
Tensor rounding_div(const Sample& s) {
  std::string mode = s.kw<std::string>("rounding_mode", "");
  return mode.empty() ? div(s.x(), s.tensor(0)) : div(s.x(), s.tensor(0), mode);
}

// quantile / nanquantile with q a tensor or a number.
Tensor quantile_like(const Sample& s, bool ignore_nan) {
  std::optional<int64_t> dim = s.dim();
  bool keepdim = s.kw("keepdim", false);
  std::string how = s.kw<std::string>("interpolation", "linear");
  if (s.is_tensor(0))
    return ignore_nan ? nanquantile(s.x(), s.tensor(0), dim, keepdim, how)
                      : quantile(s.x(), s.tensor(0), dim, keepdim, how);
  double q = s.number(0);
  return ignore_nan ? nanquantile(s.x(), q, dim, keepdim, how)
                    : quantile(s.x(), q, dim, keepdim, how);
}

// trapz / trapezoid / cumulative_trapezoid: over x (a tensor) or a spacing dx.
Tensor integrate(const Sample& s, std::string_view op) {
  int64_t dim = s.kw<int64_t>("dim", -1);
  if (s.is_tensor(0)) {
    if (op == "cumulative_trapezoid") return cumulative_trapezoid(s.x(), s.tensor(0), dim);
    return op == "trapz" ? trapz(s.x(), s.tensor(0), dim) : trapezoid(s.x(), s.tensor(0), dim);
  }
  double dx = s.kw_number("dx", 1.0);
  if (op == "cumulative_trapezoid") return cumulative_trapezoid(s.x(), dx, dim);
  return op == "trapz" ? trapz(s.x(), dx, dim) : trapezoid(s.x(), dx, dim);
}

// var_mean / std_mean: (spread, mean) with PyTorch's `unbiased` or `correction`.
std::pair<Tensor, Tensor> spread_mean(const Sample& s, bool take_sqrt) {
  int64_t correction = s.kw<int64_t>("correction", 1);
  if (s.has(0)) correction = s.args.at(0).get<bool>() ? 1 : 0;
  if (s.kwargs.contains("unbiased")) correction = s.kwargs.at("unbiased").get<bool>() ? 1 : 0;
  auto f = take_sqrt ? std_mean : var_mean;
  return f(s.x(), s.dims(), correction, s.kw("keepdim", false));
}

// conv1d / conv2d: (weight, bias) and stride / padding / dilation / groups keywords.
template <typename F>
Tensor convolution(const Sample& s, F f) {
  Tensor bias = s.has(1) ? s.tensor(1) : Tensor();
  if (s.kwargs.contains("padding") && s.kwargs.at("padding").is_string())  // "valid" / "same"
    return f(s.x(), s.tensor(0), bias, s.kw_ints("stride", {1}),
             s.kwargs.at("padding").get<std::string>() == "same" ? nn::ConvPadding::same
                                                                 : nn::ConvPadding::valid,
             s.kw_ints("dilation", {1}), s.kw<int64_t>("groups", 1));
  return f(s.x(), s.tensor(0), bias, s.kw_ints("stride", {1}), s.kw_ints("padding", {0}),
           s.kw_ints("dilation", {1}), s.kw<int64_t>("groups", 1));
}
template <typename F>
Tensor transposed_convolution(const Sample& s, F f) {
  return f(s.x(), s.tensor(0), s.has(1) ? s.tensor(1) : Tensor(), s.kw_ints("stride", {1}),
           s.kw_ints("padding", {0}), s.kw_ints("output_padding", {0}), s.kw<int64_t>("groups", 1),
           s.kw_ints("dilation", {1}));
}
template <typename F>
std::pair<Tensor, Tensor> max_pooled(const Sample& s, F f) {
  return f(s.x(), s.kw_ints("kernel_size", {}), s.kw_ints("stride", {}), s.kw_ints("padding", {0}),
           s.kw_ints("dilation", {1}), s.kw("ceil_mode", false));
}
// The scale_factor keyword as a list (one number for every dim).
std::vector<double> scale_factors(const Sample& s) {
  if (!s.kwargs.contains("scale_factor") || s.kwargs.at("scale_factor").is_null()) return {};
  const json& v = s.kwargs.at("scale_factor");
  if (v.is_array()) return v.get<std::vector<double>>();
  return {testing::scalar(v).to_double()};
}

// F.pad(x, pad, mode="constant", value=0).
Tensor padded(const Sample& s) {
  std::string mode = s.has(1) ? s.args.at(1).get<std::string>() : "constant";
  return nn::pad(s.x(), s.ints_at(0), mode, s.has(2) ? s.number(2) : 0.0);
}
// F.interpolate(x, size, scale_factor, mode, align_corners).
Tensor interpolated(const Sample& s) {
  nn::InterpolateOptions o{.size = s.ints_or(0, {}), .mode = s.args.at(2).get<std::string>()};
  if (s.has(1) && !s.is_null(1)) o.scale_factor = {s.number(1)};
  if (s.has(3) && !s.is_null(3)) o.align_corners = s.args.at(3).get<bool>();
  return nn::interpolate(s.x(), o);
}

// linalg.norm / linalg.matrix_norm with ord a number, a string ("fro", "nuc") or absent;
// "inf" / "-inf" stand for the numbers (JSON has no infinity).
Tensor norm_like(const Sample& s, std::optional<IntList> dim, bool keepdim) {
  const json* ord = s.has(0)                   ? &s.args.at(0)
                    : s.kwargs.contains("ord") ? &s.kwargs.at("ord")
                                               : nullptr;
  if (!ord || ord->is_null()) return linalg::norm(s.x(), std::nullopt, dim, keepdim);
  if (ord->is_string() && (*ord == "fro" || *ord == "nuc"))
    return linalg::norm(s.x(), ord->get<std::string>(), dim, keepdim);
  return linalg::norm(s.x(), testing::scalar(*ord).to_double(), dim, keepdim);
}

// var / std: PyTorch's `unbiased` (positional or keyword) or `correction`.
Fn spread(bool take_sqrt) {
  return [take_sqrt](const Sample& s) {
    int64_t correction = s.kw<int64_t>("correction", 1);
    if (s.has(0)) correction = s.args.at(0).get<bool>() ? 1 : 0;
    if (s.kwargs.contains("unbiased")) correction = s.kwargs.at("unbiased").get<bool>() ? 1 : 0;
    bool keepdim = s.kw("keepdim", false);
    return take_sqrt ? kiln::std(s.x(), s.dims(), correction, keepdim)
                     : var(s.x(), s.dims(), correction, keepdim);
  };
}

// scatter_reduce(dim, index, src, reduce, include_self=).
Tensor scatter_reduced(const Sample& s) {
  return scatter_reduce(s.x(), s.int_at(0), s.tensor(1), s.tensor(2),
                        s.args.at(3).get<std::string>(), s.kw("include_self", true));
}

// torch.norm(x, p="fro", dim=None, keepdim=False): p a number, "fro" or "nuc".
Tensor torch_norm(const Sample& s) {
  const json* p = s.has(0) ? &s.args.at(0) : s.kwargs.contains("p") ? &s.kwargs.at("p") : nullptr;
  IntList dims = s.has(1) ? s.ints_or(1, {}) : s.kw_ints("dim", {});
  bool keepdim = s.has(2) ? s.args.at(2).get<bool>() : s.kw("keepdim", false);
  if (!p || p->is_null()) return norm(s.x(), "fro", dims, keepdim);
  if (p->is_string() && (*p == "fro" || *p == "nuc"))
    return norm(s.x(), p->get<std::string>(), dims, keepdim);
  return norm(s.x(), testing::scalar(*p).to_double(), dims, keepdim);
}

// One entry of x[...] as the generator wrote it (enc_index).
indexing::TensorIndex index_entry(const json& e, Device device) {
  if (e.is_number_integer()) return e.get<int64_t>();
  if (e.contains("slice")) {
    const json& v = e.at("slice");
    auto bound = [&](size_t i) {
      return v.at(i).is_null() ? std::nullopt : std::optional(v.at(i).get<int64_t>());
    };
    return indexing::Slice{bound(0), bound(1), v.at(2).is_null() ? 1 : v.at(2).get<int64_t>()};
  }
  if (e.contains("none")) return indexing::None;
  if (e.contains("ellipsis")) return indexing::Ellipsis;
  return testing::from_json(e.at("tensor_value"), device);
}

std::vector<indexing::TensorIndex> index_entries(const json& entries, Device device) {
  std::vector<indexing::TensorIndex> out;
  for (const json& e : entries) out.push_back(index_entry(e, device));
  return out;
}

Fn converted(DType d) {
  return [d](const Sample& s) { return to(s.x(), d); };
}

const std::map<std::string, Fn>& ops() {
  static const auto* table = new std::map<std::string, Fn>{
      // unary
      {"abs", unary(abs)}, {"acos", unary(acos)}, {"acosh", unary(acosh)}, {"asin", unary(asin)},
      {"asinh", unary(asinh)}, {"atan", unary(atan)}, {"atanh", unary(atanh)},
      {"bitwise_not", unary(bitwise_not)}, {"ceil", unary(ceil)}, {"positive", unary(positive)},
      {"cos", unary(cos)}, {"cosh", unary(cosh)}, {"deg2rad", unary(deg2rad)}, {"exp", unary(exp)},
      {"frac", unary(frac)}, {"floor", unary(floor)}, {"i0", unary(i0)}, {"log1p", unary(log1p)},
      {"log", unary(log)}, {"log10", unary(log10)}, {"log2", unary(log2)}, {"logical_not", unary(logical_not)},
      {"neg", unary(neg)}, {"rad2deg", unary(rad2deg)},
      {"round", [](const Sample& s) { return round(s.x()); }},
      {"round.decimals_0", [](const Sample& s) { return round(s.x(), s.kw<int64_t>("decimals", 0)); }},
      {"round.decimals_3", [](const Sample& s) { return round(s.x(), s.kw<int64_t>("decimals", 0)); }},
      {"round.decimals_neg_3", [](const Sample& s) { return round(s.x(), s.kw<int64_t>("decimals", 0)); }},
      {"sin", unary(sin)}, {"sinc", unary(sinc)}, {"sinh", unary(sinh)}, {"sign", unary(sign)},
      {"sgn", unary(sgn)}, {"signbit", unary(signbit)}, {"tan", unary(tan)}, {"tanh", unary(tanh)},
      {"trunc", unary(trunc)}, {"exp2", unary(exp2)}, {"expm1", unary(expm1)},
      {"nan_to_num",
       [](const Sample& s) {
         auto opt = [&](const char* k) {
           return s.kwargs.contains(k) && !s.kwargs.at(k).is_null() ? std::optional<double>(s.kw_number(k, 0))
                                                                 : std::nullopt;
         };
         return nan_to_num(s.x(), s.kw_number("nan", 0.0), opt("posinf"), opt("neginf"));
       }},
      {"reciprocal", unary(reciprocal)}, {"rsqrt", unary(rsqrt)}, {"sqrt", unary(sqrt)}, {"square", unary(square)},
      {"isfinite", unary(isfinite)}, {"isinf", unary(isinf)}, {"isposinf", unary(isposinf)},
      {"isneginf", unary(isneginf)}, {"isreal", unary(isreal)}, {"isnan", unary(isnan)},
      {"sigmoid", unary(sigmoid)}, {"digamma", unary(digamma)}, {"erf", unary(erf)}, {"erfc", unary(erfc)},
      {"erfinv", unary(erfinv)}, {"lgamma", unary(lgamma)},
      {"logit",
       [](const Sample& s) { return s.has(0) ? logit(s.x(), s.number(0)) : logit(s.x()); }},
      {"polygamma.polygamma_n_0", [](const Sample& s) { return polygamma(s.int_arg(0, "n", 0), s.x()); }},
      {"polygamma.polygamma_n_1", [](const Sample& s) { return polygamma(s.int_arg(0, "n", 1), s.x()); }},
      {"polygamma.polygamma_n_2", [](const Sample& s) { return polygamma(s.int_arg(0, "n", 2), s.x()); }},
      {"mvlgamma.mvlgamma_p_1", [](const Sample& s) { return mvlgamma(s.x(), s.int_arg(0, "p", 1)); }},
      {"mvlgamma.mvlgamma_p_3", [](const Sample& s) { return mvlgamma(s.x(), s.int_arg(0, "p", 3)); }},
      {"nn.functional.relu", unary(relu)},
      {"nn.functional.elu", [](const Sample& s) { return nn::elu(s.x(), s.kw_number("alpha", 1.0)); }},
      {"nn.functional.celu", [](const Sample& s) { return nn::celu(s.x(), s.kw_number("alpha", 1.0)); }},
      {"nn.functional.selu", [](const Sample& s) { return nn::selu(s.x()); }},
      {"nn.functional.silu", unary(silu)},
      {"nn.functional.hardsigmoid", [](const Sample& s) { return nn::hardsigmoid(s.x()); }},
      {"nn.functional.logsigmoid", [](const Sample& s) { return nn::logsigmoid(s.x()); }},
      {"nn.functional.mish", [](const Sample& s) { return nn::mish(s.x()); }},
      {"nn.functional.softsign", [](const Sample& s) { return nn::softsign(s.x()); }},
      {"nn.functional.tanhshrink", [](const Sample& s) { return nn::tanhshrink(s.x()); }},
      {"nn.functional.threshold",
       [](const Sample& s) {
         return s.has(1) ? nn::threshold(s.x(), s.number(0), s.number(1))
                         : nn::threshold(s.x(), s.kw_number("threshold", 0), s.kw_number("value", 0));
       }},
      {"nn.functional.softshrink", [](const Sample& s) { return nn::softshrink(s.x(), s.kw_number("lambd", 0.5)); }},
      {"nn.functional.hardshrink", [](const Sample& s) { return nn::hardshrink(s.x(), s.kw_number("lambd", 0.5)); }},
      {"nn.functional.hardtanh",
       [](const Sample& s) { return nn::hardtanh(s.x(), s.kw_number("min_val", -1), s.kw_number("max_val", 1)); }},
      {"nn.functional.relu6", [](const Sample& s) { return nn::relu6(s.x()); }},
      {"nn.functional.softplus",
       [](const Sample& s) { return nn::softplus(s.x(), s.kw_number("beta", 1), s.kw_number("threshold", 20)); }},
      {"special.i0e", unary(special_i0e)}, {"special.i1", unary(special_i1)}, {"special.i1e", unary(special_i1e)},
      {"special.ndtr", unary(special_ndtr)}, {"special.entr", unary(special_entr)},
      {"special.ndtri", unary(special_ndtri)}, {"special.log_ndtr", unary(special_log_ndtr)},
      {"special.erfcx", unary(special_erfcx)}, {"special.airy_ai", unary(special_airy_ai)},
      {"special.bessel_j0", unary(special_bessel_j0)}, {"special.bessel_j1", unary(special_bessel_j1)},
      {"special.bessel_y0", unary(special_bessel_y0)}, {"special.bessel_y1", unary(special_bessel_y1)},
      {"special.modified_bessel_i0", unary(special_modified_bessel_i0)},
      {"special.modified_bessel_i1", unary(special_modified_bessel_i1)},
      {"special.modified_bessel_k0", unary(special_modified_bessel_k0)},
      {"special.modified_bessel_k1", unary(special_modified_bessel_k1)},
      {"special.scaled_modified_bessel_k0", unary(special_scaled_modified_bessel_k0)},
      {"special.scaled_modified_bessel_k1", unary(special_scaled_modified_bessel_k1)},
      {"special.spherical_bessel_j0", unary(special_spherical_bessel_j0)},
      // binary (the second operand a tensor, or a number wrapped as PyTorch wraps it)
      {"add", [](const Sample& s) { return add(s.x(), s.tensor(0)); }},
      {"sub", [](const Sample& s) { return sub(s.x(), s.tensor(0)); }},
      {"mul", binary(mul)},
      {"clamp_max", [](const Sample& s) { return clamp(s.x(), Tensor(), s.tensor(0)); }},
      {"clamp_min", [](const Sample& s) { return clamp(s.x(), s.tensor(0), Tensor()); }},
      {"atan2", binary(atan2)}, {"bitwise_left_shift", binary(bitwise_left_shift)},
      {"bitwise_right_shift", binary(bitwise_right_shift)}, {"copysign", binary(copysign)},
      {"div.no_rounding_mode", binary(div)},
      {"div.trunc_rounding", rounding_div}, {"div.floor_rounding", rounding_div},
      {"true_divide", binary(true_divide)}, {"eq", binary(eq)}, {"ne", binary(ne)}, {"ge", binary(ge)},
      {"gt", binary(gt)}, {"le", binary(le)}, {"lt", binary(lt)}, {"fmax", binary(fmax)}, {"fmin", binary(fmin)},
      {"fmod", binary(fmod)}, {"remainder", binary(remainder)}, {"floor_divide", binary(floor_divide)},
      {"ldexp", binary(ldexp)}, {"max.binary", binary(maximum)}, {"maximum", binary(maximum)},
      {"min.binary", binary(minimum)}, {"minimum", binary(minimum)}, {"logical_and", binary(logical_and)},
      {"logical_or", binary(logical_or)}, {"logical_xor", binary(logical_xor)}, {"bitwise_and", binary(bitwise_and)},
      {"bitwise_or", binary(bitwise_or)}, {"bitwise_xor", binary(bitwise_xor)}, {"heaviside", binary(heaviside)},
      {"lcm", binary(lcm)}, {"gcd", binary(gcd)},
      {"isclose",
       [](const Sample& s) {
         return isclose(s.x(), s.tensor(0), s.kw_number("rtol", 1e-5), s.kw_number("atol", 1e-8), s.kw("equal_nan", false));
       }},
      {"nextafter", binary(nextafter)}, {"igamma", binary(igamma)}, {"igammac", binary(igammac)},
      {"pow", binary(pow)}, {"float_power", binary(float_power)},
      {"__radd__", [](const Sample& s) { return add(s.tensor(0), s.x()); }},
      {"__rmul__", [](const Sample& s) { return mul(s.tensor(0), s.x()); }},
      {"__rand__", [](const Sample& s) { return bitwise_and(s.tensor(0), s.x()); }},
      {"__ror__", [](const Sample& s) { return bitwise_or(s.tensor(0), s.x()); }},
      {"__rxor__", [](const Sample& s) { return bitwise_xor(s.tensor(0), s.x()); }},
      {"__rsub__", [](const Sample& s) { return sub(s.tensor(0), s.x()); }},
      {"rsub", [](const Sample& s) { return rsub(s.x(), s.tensor(0)); }},
      {"hypot", binary(hypot)}, {"xlogy", binary(xlogy)}, {"special.xlog1py", binary(special_xlog1py)},
      {"special.zeta", binary(special_zeta)},
      {"special.chebyshev_polynomial_t", binary(special_chebyshev_polynomial_t)},
      {"special.hermite_polynomial_h", binary(special_hermite_polynomial_h)},
      {"special.laguerre_polynomial_l", binary(special_laguerre_polynomial_l)},
      {"special.legendre_polynomial_p", binary(special_legendre_polynomial_p)},
      // reductions
      {"all", [](const Sample& s) { return s.dim() ? all(s.x(), *s.dim(), s.kw("keepdim", false)) : all(s.x()); }},
      {"any", [](const Sample& s) { return s.dim() ? any(s.x(), *s.dim(), s.kw("keepdim", false)) : any(s.x()); }},
      {"amax", [](const Sample& s) { return amax(s.x(), s.dims(), s.kw("keepdim", false)); }},
      {"amin", [](const Sample& s) { return amin(s.x(), s.dims(), s.kw("keepdim", false)); }},
      {"argmax", [](const Sample& s) { return argmax(s.x(), s.dim(), s.kw("keepdim", false)); }},
      {"argmin", [](const Sample& s) { return argmin(s.x(), s.dim(), s.kw("keepdim", false)); }},
      {"count_nonzero", [](const Sample& s) { return count_nonzero(s.x(), s.dims()); }},
      {"mean", [](const Sample& s) { return mean(s.x(), s.dims(), s.kw("keepdim", false), s.dtype()); }},
      {"nanmean", [](const Sample& s) { return nanmean(s.x(), s.dims(), s.kw("keepdim", false)); }},
      {"sum", [](const Sample& s) { return sum(s.x(), s.dims(), s.kw("keepdim", false), s.dtype()); }},
      {"nansum", [](const Sample& s) { return nansum(s.x(), s.dims(), s.kw("keepdim", false)); }},
      {"prod",
       [](const Sample& s) {
         return s.has(0) ? prod(s.x(), s.args.at(0).get<int64_t>(), s.kw("keepdim", false), s.dtype())
                         : prod(s.x(), s.dtype());
       }},
      {"std", spread(true)}, {"var", spread(false)},
      {"linalg.vector_norm",
       [](const Sample& s) {
         return vector_norm(s.x(), s.kw_number("ord", 2.0), s.dims(), s.kw("keepdim", false));
       }},
      // op_db's where is where(condition, self, other) with self first
      {"where", [](const Sample& s) { return where(s.tensor(0), s.x(), s.tensor(1)); }},
      {"clamp", [](const Sample& s) { return clamp(s.x(), s.tensor(0), s.has(1) ? s.tensor(1) : Tensor()); }},
      {"lerp",
       [](const Sample& s) {
         return s.is_tensor(1) ? lerp(s.x(), s.tensor(0), s.tensor(1))
                               : lerp(s.x(), s.tensor(0), testing::scalar(s.args.at(1)));
       }},
      {"addcmul",
       [](const Sample& s) {
         return addcmul(s.x(), s.tensor(0), s.tensor(1), s.kwargs.contains("value") ? testing::scalar(s.kwargs.at("value")) : 1);
       }},
      {"addcdiv",
       [](const Sample& s) {
         return addcdiv(s.x(), s.tensor(0), s.tensor(1), s.kwargs.contains("value") ? testing::scalar(s.kwargs.at("value")) : 1);
       }},
      {"logsumexp",
       [](const Sample& s) { return logsumexp(s.x(), s.ints_at(0), s.has(1) && s.args.at(1).get<bool>()); }},
      {"cumsum", [](const Sample& s) { return cumsum(s.x(), s.int_at(0), s.dtype()); }},
      {"cumprod", [](const Sample& s) { return cumprod(s.x(), s.int_at(0), s.dtype()); }},
      {"logcumsumexp", [](const Sample& s) { return logcumsumexp(s.x(), s.int_at(0)); }},
      {"argsort",
       [](const Sample& s) {
         return argsort(s.x(), s.has(0) ? s.int_at(0) : -1, s.has(1) && s.args.at(1).get<bool>());
       }},
      {"msort", [](const Sample& s) { return msort(s.x()); }},
      {"median", [](const Sample& s) { return median(s.x()); }},
      {"nanmedian", [](const Sample& s) { return nanmedian(s.x()); }},
      {"quantile", [](const Sample& s) { return quantile_like(s, false); }},
      {"nanquantile", [](const Sample& s) { return quantile_like(s, true); }},
      {"softmax", [](const Sample& s) { return softmax(s.x(), s.int_at(0)); }},
      {"log_softmax", [](const Sample& s) { return log_softmax(s.x(), s.int_at(0)); }},
      {"nn.functional.softmin", [](const Sample& s) { return nn::softmin(s.x(), s.int_at(0)); }},
      {"nn.functional.layer_norm",
       [](const Sample& s) {
         return layer_norm(s.x(), s.ints_at(0), s.has(1) ? s.tensor(1) : Tensor(), s.has(2) ? s.tensor(2) : Tensor(),
                           s.kw_number("eps", 1e-5));
       }},
      {"nn.functional.linear",
       [](const Sample& s) { return linear(s.x(), s.tensor(0), s.has(1) ? s.tensor(1) : Tensor()); }},
      {"nn.functional.gelu", [](const Sample& s) { return gelu(s.x(), s.kw<std::string>("approximate", "none")); }},
      {"nn.functional.leaky_relu", [](const Sample& s) { return nn::leaky_relu(s.x()); }},
      {"nn.functional.glu", [](const Sample& s) { return nn::glu(s.x(), s.has(0) ? s.int_at(0) : -1); }},
      {"nn.functional.normalize",
       [](const Sample& s) {
         return normalize(s.x(), s.kw_number("p", 2.0), s.kw<int64_t>("dim", 1), s.kw_number("eps", 1e-12));
       }},
      {"nn.functional.cosine_similarity",
       [](const Sample& s) {
         return nn::cosine_similarity(s.x(), s.tensor(0), s.kw<int64_t>("dim", 1), s.kw_number("eps", 1e-8));
       }},
      {"nn.functional.pairwise_distance",
       [](const Sample& s) {
         return nn::pairwise_distance(s.x(), s.tensor(0), s.kw_number("p", 2.0), s.kw_number("eps", 1e-6),
                                      s.kw("keepdim", false));
       }},
      {"gather", [](const Sample& s) { return gather(s.x(), s.int_at(0), s.tensor(1)); }},
      {"scatter",
       [](const Sample& s) {
         return s.is_tensor(2) ? scatter(s.x(), s.int_at(0), s.tensor(1), s.tensor(2))
                               : scatter(s.x(), s.int_at(0), s.tensor(1), testing::scalar(s.args.at(2)));
       }},
      {"scatter_add", [](const Sample& s) { return scatter_add(s.x(), s.int_at(0), s.tensor(1), s.tensor(2)); }},
      {"index_select", [](const Sample& s) { return index_select(s.x(), s.int_at(0), s.tensor(1)); }},
      {"take", [](const Sample& s) { return take(s.x(), s.tensor(0)); }},
      {"take_along_dim",
       [](const Sample& s) {
         return take_along_dim(s.x(), s.tensor(0), s.has(1) ? std::optional<int64_t>(s.int_at(1)) : std::nullopt);
       }},
      {"index_add",
       [](const Sample& s) {
         return index_add(s.x(), s.int_at(0), s.tensor(1), s.tensor(2),
                          s.kwargs.contains("alpha") ? testing::scalar(s.kwargs.at("alpha")) : 1);
       }},
      {"index_copy", [](const Sample& s) { return index_copy(s.x(), s.int_at(0), s.tensor(1), s.tensor(2)); }},
      {"index_fill",
       [](const Sample& s) { return index_fill(s.x(), s.int_at(0), s.tensor(1), testing::scalar(s.args.at(2))); }},
      {"masked_fill",
       [](const Sample& s) {
         return s.is_tensor(1) ? masked_fill(s.x(), s.tensor(0), s.tensor(1))
                               : masked_fill(s.x(), s.tensor(0), testing::scalar(s.args.at(1)));
       }},
      {"masked_select", [](const Sample& s) { return masked_select(s.x(), s.tensor(0)); }},
      {"masked_scatter", [](const Sample& s) { return masked_scatter(s.x(), s.tensor(0), s.tensor(1)); }},
      {"tril", [](const Sample& s) { return tril(s.x(), s.has(0) ? s.int_at(0) : 0); }},
      {"triu", [](const Sample& s) { return triu(s.x(), s.has(0) ? s.int_at(0) : 0); }},
      {"flip", [](const Sample& s) { return flip(s.x(), s.kwargs.at("dims").get<IntList>()); }},
      {"roll",
       [](const Sample& s) { return roll(s.x(), s.ints_at(0), s.has(1) ? s.ints_at(1) : IntList{}); }},
      {"rot90",
       [](const Sample& s) { return rot90(s.x(), s.int_arg(0, "k", 1), s.has(1) ? s.ints_at(1) : s.kw_ints("dims", {0, 1})); }},
      {"diag", [](const Sample& s) { return diag(s.x(), s.has(0) ? s.int_at(0) : 0); }},
      {"diagonal",
       [](const Sample& s) {
         return diagonal(s.x(), s.kw<int64_t>("offset", 0), s.kw<int64_t>("dim1", 0), s.kw<int64_t>("dim2", 1));
       }},
      {"diag_embed",
       [](const Sample& s) {
         return diag_embed(s.x(), s.kw<int64_t>("offset", 0), s.kw<int64_t>("dim1", -2), s.kw<int64_t>("dim2", -1));
       }},
      {"cat", [](const Sample& s) { return cat(s.list(), s.kw<int64_t>("dim", 0)); }},
      {"stack", [](const Sample& s) { return stack(s.list(), s.has(0) ? s.int_at(0) : 0); }},
      {"hstack", [](const Sample& s) { return hstack(s.list()); }},
      {"vstack", [](const Sample& s) { return vstack(s.list()); }},
      {"dstack", [](const Sample& s) { return dstack(s.list()); }},
      {"matmul", binary(matmul)}, {"mm", binary(mm)}, {"bmm", binary(bmm)}, {"mv", binary(mv)},
      {"dot", binary(dot)}, {"vdot", binary(vdot)}, {"inner", binary(inner)}, {"outer", binary(outer)},
      {"kron", binary(kron)}, {"logaddexp", binary(logaddexp)}, {"logaddexp2", binary(logaddexp2)},
      {"addmm", [](const Sample& s) { return addmm(s.x(), s.tensor(0), s.tensor(1), s.kw_scalar("beta"), s.kw_scalar("alpha")); }},
      {"addmv", [](const Sample& s) { return addmv(s.x(), s.tensor(0), s.tensor(1), s.kw_scalar("beta"), s.kw_scalar("alpha")); }},
      {"addbmm", [](const Sample& s) { return addbmm(s.x(), s.tensor(0), s.tensor(1), s.kw_scalar("beta"), s.kw_scalar("alpha")); }},
      {"baddbmm",
       [](const Sample& s) { return baddbmm(s.x(), s.tensor(0), s.tensor(1), s.kw_scalar("beta"), s.kw_scalar("alpha")); }},
      {"addr", [](const Sample& s) { return addr(s.x(), s.tensor(0), s.tensor(1), s.kw_scalar("beta"), s.kw_scalar("alpha")); }},
      {"tensordot",
       [](const Sample& s) {
         const json& d = s.kwargs.at("dims");
         if (d.is_array()) return tensordot(s.x(), s.tensor(0), d.at(0).get<IntList>(), d.at(1).get<IntList>());
         return tensordot(s.x(), s.tensor(0), d.get<int64_t>());
       }},
      {"einsum", [](const Sample& s) { return einsum(s.args.at(0).get<std::string>(), s.list()); }},
      {"cross", [](const Sample& s) { return cross(s.x(), s.tensor(0), s.kw<int64_t>("dim", -1)); }},
      {"linalg.cross", [](const Sample& s) { return linalg::cross(s.x(), s.tensor(0), s.kw<int64_t>("dim", -1)); }},
      {"dist", [](const Sample& s) { return distance(s.x(), s.tensor(0), s.has(1) ? s.number(1) : 2.0); }},
      {"cdist", [](const Sample& s) { return cdist(s.x(), s.tensor(0), s.has(1) ? s.number(1) : 2.0); }},
      {"renorm", [](const Sample& s) { return renorm(s.x(), s.number(0), s.int_at(1), s.number(2)); }},
      {"argwhere", [](const Sample& s) { return argwhere(s.x()); }},
      {"nonzero", [](const Sample& s) { return nonzero(s.x()); }},
      {"unique",
       [](const Sample& s) { return std::get<0>(unique(s.x(), false, false, s.dim())); }},
      {"unique_consecutive",
       [](const Sample& s) { return std::get<0>(unique_consecutive(s.x(), false, false, s.dim())); }},
      {"isin", [](const Sample& s) { return isin(s.x(), s.tensor(0)); }},
      {"bincount",
       [](const Sample& s) { return bincount(s.x(), s.kw_tensor("weights"), s.kw<int64_t>("minlength", 0)); }},
      {"bucketize",
       [](const Sample& s) { return bucketize(s.x(), s.tensor(0), s.kw("right", false), s.kw("out_int32", false)); }},
      {"searchsorted",
       [](const Sample& s) {
         return searchsorted(s.x(), s.tensor(0), s.kw("right", false), s.kw("out_int32", false));
       }},
      {"histc",
       [](const Sample& s) {
         return histc(s.x(), s.kw<int64_t>("bins", 100), s.kw_number("min", 0), s.kw_number("max", 0));
       }},
      {"diff",
       [](const Sample& s) {
         Tensor prepend = s.has(2) ? s.tensor(2) : Tensor(), append = s.has(3) ? s.tensor(3) : Tensor();
         return diff(s.x(), s.has(0) ? s.int_at(0) : 1, s.has(1) ? s.int_at(1) : -1, prepend, append);
       }},
      {"trapz", [](const Sample& s) { return integrate(s, "trapz"); }},
      {"trapezoid", [](const Sample& s) { return integrate(s, "trapezoid"); }},
      {"cumulative_trapezoid", [](const Sample& s) { return integrate(s, "cumulative_trapezoid"); }},
      {"cov",
       [](const Sample& s) {
         return cov(s.x(), s.kw<int64_t>("correction", 1), s.kw_tensor("fweights"), s.kw_tensor("aweights"));
       }},
      {"corrcoef", [](const Sample& s) { return corrcoef(s.x()); }},
      {"reshape", [](const Sample& s) { return reshape(s.x(), s.ints_at(0)); }},
      {"view", [](const Sample& s) { return view(s.x(), s.ints_at(0)); }},
      {"permute", [](const Sample& s) { return permute(s.x(), s.ints_at(0)); }},
      {"squeeze", [](const Sample& s) { return s.has(0) ? squeeze(s.x(), s.int_at(0)) : squeeze(s.x()); }},
      {"unsqueeze", [](const Sample& s) { return unsqueeze(s.x(), s.int_at(0)); }},
      {"expand", [](const Sample& s) { return expand(s.x(), s.ints_at(0)); }},
      {"repeat", [](const Sample& s) { return repeat(s.x(), s.ints_at(0)); }},
      {"tile", [](const Sample& s) { return tile(s.x(), s.ints_at(0)); }},
      {"narrow",
       [](const Sample& s) {
         int64_t start = s.is_tensor(1) ? item<int64_t>(s.tensor(1)) : s.int_at(1);
         return narrow(s.x(), s.int_at(0), start, s.int_at(2));
       }},
      {"select", [](const Sample& s) { return select(s.x(), s.int_at(0), s.int_at(1)); }},
      {"movedim",
       [](const Sample& s) {
         return s.args.at(0).is_array() ? movedim(s.x(), s.ints_at(0), s.ints_at(1)) : movedim(s.x(), s.int_at(0), s.int_at(1));
       }},
      {"t", [](const Sample& s) { return t(s.x()); }},
      {"transpose", [](const Sample& s) { return transpose(s.x(), s.int_at(0), s.int_at(1)); }},
      {"flatten",
       [](const Sample& s) {
         if (s.has(0)) return flatten(s.x(), s.int_at(0), s.int_at(1));
         return flatten(s.x(), s.kw<int64_t>("start_dim", 0), s.kw<int64_t>("end_dim", -1));
       }},
      {"unflatten", [](const Sample& s) { return unflatten(s.x(), s.int_at(0), s.ints_at(1)); }},
      {"ravel", [](const Sample& s) { return ravel(s.x()); }},
      {"broadcast_to", [](const Sample& s) { return broadcast_to(s.x(), s.ints_at(0)); }},
      {"atleast_1d", [](const Sample& s) { return atleast_1d(s.x()); }},
      {"column_stack", [](const Sample& s) { return column_stack(s.list()); }},
      {"fliplr", [](const Sample& s) { return fliplr(s.x()); }},
      {"flipud", [](const Sample& s) { return flipud(s.x()); }},
      {"block_diag",
       [](const Sample& s) { return block_diag(TensorList(s.in.begin(), s.in.end())); }},
      {"cartesian_prod",
       [](const Sample& s) { return cartesian_prod(TensorList(s.in.begin(), s.in.end())); }},
      {"logdet", [](const Sample& s) { return logdet(s.x()); }},
      {"trace", [](const Sample& s) { return trace(s.x()); }},
      {"diagflat", [](const Sample& s) { return diagflat(s.x(), s.kw<int64_t>("offset", 0)); }},
      // torch.nn.functional
      {"nn.functional.conv1d", [](const Sample& s) { return convolution(s, [](auto&&... a) { return nn::conv1d(a...); }); }},
      {"nn.functional.conv2d", [](const Sample& s) { return convolution(s, [](auto&&... a) { return nn::conv2d(a...); }); }},
      {"nn.functional.conv_transpose1d", [](const Sample& s) { return transposed_convolution(s, nn::conv_transpose1d); }},
      {"nn.functional.conv_transpose2d", [](const Sample& s) { return transposed_convolution(s, nn::conv_transpose2d); }},
      {"nn.functional.avg_pool1d",
       [](const Sample& s) {
         return nn::avg_pool1d(s.x(), s.has(0) ? s.ints_at(0) : s.kw_ints("kernel_size", {}), s.kw_ints("stride", {}),
                               s.kw_ints("padding", {0}), s.kw("ceil_mode", false), s.kw("count_include_pad", true));
       }},
      {"nn.functional.avg_pool2d",
       [](const Sample& s) {
         std::optional<int64_t> divisor;
         if (s.has(5) && !s.is_null(5)) divisor = s.int_at(5);
         if (!s.has(5) && s.kwargs.contains("divisor_override") && !s.kwargs.at("divisor_override").is_null())
           divisor = s.kwargs.at("divisor_override").get<int64_t>();
         return nn::avg_pool2d(s.x(), s.has(0) ? s.ints_at(0) : s.kw_ints("kernel_size", {}),
                               s.has(1) ? s.ints_or(1, {}) : s.kw_ints("stride", {}),
                               s.has(2) ? s.ints_or(2, {0}) : s.kw_ints("padding", {0}),
                               s.has(3) ? s.args.at(3).get<bool>() : s.kw("ceil_mode", false),
                               s.has(4) ? s.args.at(4).get<bool>() : s.kw("count_include_pad", true), divisor);
       }},
      {"nn.functional.adaptive_avg_pool1d", [](const Sample& s) { return nn::adaptive_avg_pool1d(s.x(), s.ints_at(0)); }},
      {"nn.functional.adaptive_avg_pool2d", [](const Sample& s) { return nn::adaptive_avg_pool2d(s.x(), s.ints_at(0)); }},
      {"nn.functional.adaptive_max_pool1d", [](const Sample& s) { return nn::adaptive_max_pool1d(s.x(), s.ints_at(0)); }},
      {"nn.functional.adaptive_max_pool2d", [](const Sample& s) { return nn::adaptive_max_pool2d(s.x(), s.ints_at(0)); }},
      {"nn.functional.mse_loss", [](const Sample& s) { return nn::mse_loss(s.x(), s.tensor(0), s.reduction()); }},
      {"nn.functional.l1_loss", [](const Sample& s) { return nn::l1_loss(s.x(), s.tensor(0), s.reduction()); }},
      {"nn.functional.smooth_l1_loss",
       [](const Sample& s) { return nn::smooth_l1_loss(s.x(), s.tensor(0), s.reduction(), s.kw_number("beta", 1.0)); }},
      {"nn.functional.huber_loss",
       [](const Sample& s) { return nn::huber_loss(s.x(), s.tensor(0), s.reduction(), s.kw_number("delta", 1.0)); }},
      {"nn.functional.nll_loss",
       [](const Sample& s) {
         return nn::nll_loss(s.x(), s.tensor(0), s.reduction(), s.kw<int64_t>("ignore_index", -100), s.kw_tensor("weight"));
       }},
      {"nn.functional.cross_entropy",
       [](const Sample& s) {
         return nn::cross_entropy(s.x(), s.tensor(0), s.reduction(), s.kw<int64_t>("ignore_index", -100),
                                  s.kw_number("label_smoothing", 0.0), s.kw_tensor("weight"));
       }},
      {"nn.functional.binary_cross_entropy",
       [](const Sample& s) { return nn::binary_cross_entropy(s.x(), s.tensor(0), s.kw_tensor("weight"), s.reduction()); }},
      {"nn.functional.binary_cross_entropy_with_logits",
       [](const Sample& s) {
         return nn::binary_cross_entropy_with_logits(s.x(), s.tensor(0), s.kw_tensor("weight"), s.reduction(),
                                                     s.kw_tensor("pos_weight"));
       }},
      {"nn.functional.kl_div",
       [](const Sample& s) { return nn::kl_div(s.x(), s.tensor(0), s.reduction(), s.kw("log_target", false)); }},
      {"nn.functional.soft_margin_loss",
       [](const Sample& s) { return nn::soft_margin_loss(s.x(), s.tensor(0), s.reduction()); }},
      {"nn.functional.hinge_embedding_loss",
       [](const Sample& s) {
         return nn::hinge_embedding_loss(s.x(), s.tensor(0), s.kw_number("margin", 1.0), s.reduction());
       }},
      {"nn.functional.margin_ranking_loss",
       [](const Sample& s) {
         return nn::margin_ranking_loss(s.x(), s.tensor(0), s.tensor(1), s.kw_number("margin", 0.0), s.reduction());
       }},
      {"nn.functional.poisson_nll_loss",
       [](const Sample& s) {
         return nn::poisson_nll_loss(s.x(), s.tensor(0), s.kw("log_input", true), s.kw("full", false),
                                     s.kw_number("eps", 1e-8), s.reduction());
       }},
      {"nn.functional.gaussian_nll_loss",
       [](const Sample& s) {
         return nn::gaussian_nll_loss(s.x(), s.tensor(0), s.tensor(1), s.kw("full", false), s.kw_number("eps", 1e-6),
                                      s.reduction());
       }},
      {"nn.functional.cosine_embedding_loss",
       [](const Sample& s) {
         return nn::cosine_embedding_loss(s.x(), s.tensor(0), s.tensor(1), s.kw_number("margin", 0.0), s.reduction());
       }},
      {"nn.functional.multilabel_soft_margin_loss",
       [](const Sample& s) {
         return nn::multilabel_soft_margin_loss(s.x(), s.tensor(0), s.kw_tensor("weight"), s.reduction());
       }},
      {"nn.functional.triplet_margin_loss",
       [](const Sample& s) {
         return nn::triplet_margin_loss(s.x(), s.tensor(0), s.tensor(1), s.kw_number("margin", 1.0), s.kw_number("p", 2.0),
                                        s.kw_number("eps", 1e-6), s.kw("swap", false), s.reduction());
       }},
      {"nn.functional.batch_norm",
       [](const Sample& s) {
         Tensor mean = s.has(0) ? s.tensor(0) : Tensor(), var = s.has(1) ? s.tensor(1) : Tensor();
         if (mean.defined()) mean = clone(mean);  // updated in place in training
         if (var.defined()) var = clone(var);
         return nn::batch_norm(s.x(), mean, var, s.has(2) ? s.tensor(2) : Tensor(), s.has(3) ? s.tensor(3) : Tensor(),
                               s.kw("training", false), s.kw_number("momentum", 0.1), s.kw_number("eps", 1e-5));
       }},
      {"nn.functional.group_norm",
       [](const Sample& s) {
         return nn::group_norm(s.x(), s.int_at(0), s.kw_tensor("weight"), s.kw_tensor("bias"), s.kw_number("eps", 1e-5));
       }},
      {"nn.functional.instance_norm",
       [](const Sample& s) {
         Tensor mean = s.kw_tensor("running_mean"), var = s.kw_tensor("running_var");
         if (mean.defined()) mean = clone(mean);
         if (var.defined()) var = clone(var);
         return nn::instance_norm(s.x(), mean, var, s.kw_tensor("weight"), s.kw_tensor("bias"),
                                  s.kw("use_input_stats", true), s.kw_number("momentum", 0.1), s.kw_number("eps", 1e-5));
       }},
      {"nn.functional.local_response_norm",
       [](const Sample& s) {
         return nn::local_response_norm(s.x(), s.int_at(0), s.kw_number("alpha", 1e-4), s.kw_number("beta", 0.75),
                                        s.kw_number("k", 1.0));
       }},
      // op_db passes (weight, indices): F.embedding(indices, weight)
      {"nn.functional.embedding",
       [](const Sample& s) {
         std::optional<int64_t> padding;
         if (s.kwargs.contains("padding_idx") && !s.kwargs.at("padding_idx").is_null())
           padding = s.kwargs.at("padding_idx").get<int64_t>();
         std::optional<double> max_norm;
         if (s.kwargs.contains("max_norm") && !s.kwargs.at("max_norm").is_null()) max_norm = s.kw_number("max_norm", 0);
         return nn::embedding(s.tensor(0), s.x(), padding, max_norm, s.kw_number("norm_type", 2.0),
                              s.kw("scale_grad_by_freq", false));
       }},
      {"nn.functional.embedding_bag",
       [](const Sample& s) {
         nn::EmbeddingBagOptions o{.mode = s.kw<std::string>("mode", "mean"), .offsets = s.kw_tensor("offsets"),
                                   .per_sample_weights = s.kw_tensor("per_sample_weights"),
                                   .include_last_offset = s.kw("include_last_offset", false),
                                   .norm_type = s.kw_number("norm_type", 2.0),
                                   .scale_grad_by_freq = s.kw("scale_grad_by_freq", false)};
         if (s.kwargs.contains("max_norm") && !s.kwargs.at("max_norm").is_null()) o.max_norm = s.kw_number("max_norm", 0);
         if (s.kwargs.contains("padding_idx") && !s.kwargs.at("padding_idx").is_null())
           o.padding_idx = s.kwargs.at("padding_idx").get<int64_t>();
         return nn::embedding_bag(s.tensor(0), s.x(), o);
       }},
      {"nn.functional.one_hot", [](const Sample& s) { return one_hot(s.x(), s.kw<int64_t>("num_classes", -1)); }},
      {"nn.functional.pad.constant", [](const Sample& s) { return padded(s); }},
      {"nn.functional.pad.reflect", [](const Sample& s) { return padded(s); }},
      {"nn.functional.pad.replicate", [](const Sample& s) { return padded(s); }},
      {"nn.functional.pad.circular", [](const Sample& s) { return padded(s); }},
      {"nn.functional.pixel_shuffle",
       [](const Sample& s) { return nn::pixel_shuffle(s.x(), s.kw<int64_t>("upscale_factor", 1)); }},
      {"nn.functional.pixel_unshuffle",
       [](const Sample& s) { return nn::pixel_unshuffle(s.x(), s.kw<int64_t>("downscale_factor", 1)); }},
      {"nn.functional.unfold",
       [](const Sample& s) {
         return nn::unfold(s.x(), s.ints_at(0), s.ints_or(1, {1}), s.ints_or(2, {0}), s.ints_or(3, {1}));
       }},
      {"nn.functional.interpolate.nearest", interpolated},
      {"nn.functional.interpolate.bilinear", interpolated},
      {"nn.functional.interpolate.linear", interpolated},
      {"nn.functional.interpolate.bicubic", interpolated},
      {"nn.functional.interpolate.area", interpolated},
      {"nn.functional.prelu",
       [](const Sample& s) { return nn::prelu(s.x(), s.has(0) ? s.tensor(0) : s.kw_tensor("weight")); }},
      {"nn.functional.bilinear",
       [](const Sample& s) { return nn::bilinear(s.x(), s.tensor(0), s.tensor(1), s.has(2) ? s.tensor(2) : Tensor()); }},
      {"nn.functional.pdist", [](const Sample& s) { return nn::pdist(s.x(), s.kw_number("p", 2.0)); }},
      {"nn.functional.multi_margin_loss",
       [](const Sample& s) {
         return nn::multi_margin_loss(s.x(), s.tensor(0), s.kw<int64_t>("p", 1), s.kw_number("margin", 1.0),
                                      s.kw_tensor("weight"), s.reduction());
       }},
      {"nn.functional.multilabel_margin_loss",
       [](const Sample& s) { return nn::multilabel_margin_loss(s.x(), s.tensor(0), s.reduction()); }},
      {"nn.functional.max_unpool1d",
       [](const Sample& s) {
         return nn::max_unpool1d(s.x(), s.tensor(0), s.kw_ints("kernel_size", {}), s.kw_ints("stride", {}),
                                 s.kw_ints("padding", {0}), s.kw_ints("output_size", {}));
       }},
      {"nn.functional.grid_sample",
       [](const Sample& s) {
         return nn::grid_sample(s.x(), s.tensor(0), s.kw<std::string>("mode", "bilinear"),
                                s.kw<std::string>("padding_mode", "zeros"), s.kw("align_corners", false));
       }},
      {"nn.functional.hardswish", [](const Sample& s) { return nn::hardswish(s.x()); }},
      // torch.masked (mask as a keyword tensor, or null)
      {"masked.sum", [](const Sample& s) { return masked::sum(s.x(), s.dims(), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.prod", [](const Sample& s) { return masked::prod(s.x(), s.dims(), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.amax", [](const Sample& s) { return masked::amax(s.x(), s.dims(), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.amin", [](const Sample& s) { return masked::amin(s.x(), s.dims(), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.argmax", [](const Sample& s) { return masked::argmax(s.x(), s.dim(), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.argmin", [](const Sample& s) { return masked::argmin(s.x(), s.dim(), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.mean", [](const Sample& s) { return masked::mean(s.x(), s.dims(), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.logsumexp",
       [](const Sample& s) { return masked::logsumexp(s.x(), s.dims(), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.median",
       [](const Sample& s) { return masked::median(s.x(), s.int_at(0), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.norm",
       [](const Sample& s) {
         return masked::norm(s.x(), s.number(0), s.dims(), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask"));
       }},
      {"masked.normalize",
       [](const Sample& s) {
         return masked::normalize(s.x(), s.number(0), s.int_at(1), s.kw_number("eps", 1e-12), s.dtype(), s.kw_tensor("mask"));
       }},
      {"masked.var",
       [](const Sample& s) {
         return masked::var(s.x(), s.dims(), s.kw("unbiased", false), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask"));
       }},
      {"masked.std",
       [](const Sample& s) {
         return masked::std(s.x(), s.dims(), s.kw("unbiased", false), s.kw("keepdim", false), s.dtype(), s.kw_tensor("mask"));
       }},
      {"masked.cumsum", [](const Sample& s) { return masked::cumsum(s.x(), s.int_at(0), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.cumprod", [](const Sample& s) { return masked::cumprod(s.x(), s.int_at(0), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.softmax", [](const Sample& s) { return masked::softmax(s.x(), s.int_at(0), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.log_softmax", [](const Sample& s) { return masked::log_softmax(s.x(), s.int_at(0), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.softmin", [](const Sample& s) { return masked::softmin(s.x(), s.int_at(0), s.dtype(), s.kw_tensor("mask")); }},
      {"masked.logaddexp",
       [](const Sample& s) {
         return masked::logaddexp(s.x(), s.tensor(0), s.dtype(), s.kw_tensor("input_mask"), s.kw_tensor("other_mask"));
       }},
      {"nn.functional.avg_pool3d",
       [](const Sample& s) {
         std::optional<int64_t> divisor;
         if (s.kwargs.contains("divisor_override") && !s.kwargs.at("divisor_override").is_null())
           divisor = s.kwargs.at("divisor_override").get<int64_t>();
         return nn::avg_pool3d(s.x(), s.has(0) ? s.ints_at(0) : s.kw_ints("kernel_size", {}), s.kw_ints("stride", {}), s.kw_ints("padding", {0}), s.kw("ceil_mode", false),
                               s.kw("count_include_pad", true), divisor);
       }},
      {"nn.functional.adaptive_avg_pool3d", [](const Sample& s) { return nn::adaptive_avg_pool3d(s.x(), s.ints_at(0)); }},
      {"nn.functional.conv_transpose3d", [](const Sample& s) { return transposed_convolution(s, nn::conv_transpose3d); }},
      {"nn.functional.upsample_nearest",
       [](const Sample& s) { return nn::upsample_nearest(s.x(), s.kw_ints("size", {}), scale_factors(s)); }},
      {"nn.functional.upsample_bilinear",
       [](const Sample& s) { return nn::upsample_bilinear(s.x(), s.kw_ints("size", {}), scale_factors(s)); }},
      {"nn.functional.max_unpool2d",
       [](const Sample& s) {
         return nn::max_unpool2d(s.x(), s.tensor(0), s.kw_ints("kernel_size", {}), s.kw_ints("stride", {}),
                                 s.kw_ints("padding", {0}), s.kw_ints("output_size", {}));
       }},
      // torch.linalg and the older linear algebra functions
      {"linalg.det", [](const Sample& s) { return linalg::det(s.x()); }},
      {"linalg.inv", [](const Sample& s) { return linalg::inv(s.x()); }},
      {"linalg.solve", [](const Sample& s) { return linalg::solve(s.x(), s.tensor(0)); }},
      {"linalg.cholesky", [](const Sample& s) { return linalg::cholesky(s.x(), s.kw("upper", false)); }},
      {"linalg.matrix_norm", [](const Sample& s) { return norm_like(s, s.ints_at(1), s.has(2) && s.args.at(2).get<bool>()); }},
      {"linalg.norm",
       [](const Sample& s) {
         std::optional<IntList> dim;
         if (s.kwargs.contains("dim") && !s.kwargs.at("dim").is_null()) dim = s.kw_ints("dim", {});
         return norm_like(s, dim, s.kw("keepdim", false));
       }},
      {"linalg.pinv",
       [](const Sample& s) {
         std::optional<double> rtol;
         if (s.kwargs.contains("rtol") && !s.kwargs.at("rtol").is_null()) rtol = s.kw_number("rtol", 0);
         return linalg::pinv(s.x(), std::nullopt, rtol, s.kw("hermitian", false));
       }},
      {"linalg.matrix_rank",
       [](const Sample& s) {
         Tensor atol = s.kw_tensor("atol"), rtol = s.kw_tensor("rtol");  // tolerances per matrix
         if (atol.defined() || rtol.defined()) return linalg::matrix_rank(s.x(), atol, rtol, s.kw("hermitian", false));
         std::optional<double> atol_n, rtol_n;
         if (s.kwargs.contains("atol") && !s.kwargs.at("atol").is_null()) atol_n = s.kw_number("atol", 0);
         if (s.kwargs.contains("rtol") && !s.kwargs.at("rtol").is_null()) rtol_n = s.kw_number("rtol", 0);
         return linalg::matrix_rank(s.x(), atol_n, rtol_n, s.kw("hermitian", false));
       }},
      {"linalg.eigvalsh", [](const Sample& s) { return linalg::eigvalsh(s.x(), s.kw<std::string>("UPLO", "L")); }},
      {"linalg.svdvals", [](const Sample& s) { return linalg::svdvals(s.x()); }},
      {"linalg.matrix_power", [](const Sample& s) { return linalg::matrix_power(s.x(), s.int_at(0)); }},
      {"linalg.multi_dot", [](const Sample& s) { return linalg::multi_dot(s.list()); }},
      {"linalg.vecdot", [](const Sample& s) { return linalg::vecdot(s.x(), s.tensor(0), s.kw<int64_t>("dim", -1)); }},
      {"linalg.solve_triangular",
       [](const Sample& s) {
         return linalg::solve_triangular(s.x(), s.tensor(0), s.kw("upper", false), s.kw("left", true),
                                         s.kw("unitriangular", false));
       }},
      {"linalg.tensorinv", [](const Sample& s) { return linalg::tensorinv(s.x(), s.kw<int64_t>("ind", 2)); }},
      {"linalg.tensorsolve",
       [](const Sample& s) {
         std::optional<IntList> dims;
         if (s.kwargs.contains("dims") && !s.kwargs.at("dims").is_null()) dims = s.kw_ints("dims", {});
         return linalg::tensorsolve(s.x(), s.tensor(0), dims);
       }},
      {"linalg.cond", [](const Sample& s) { return linalg::cond(s.x()); }},
      {"linalg.householder_product", [](const Sample& s) { return linalg::householder_product(s.x(), s.tensor(0)); }},
      {"linalg.lu_solve",
       [](const Sample& s) {
         return linalg::lu_solve(s.x(), s.tensor(0), s.tensor(1), s.kw("left", true), s.kw("adjoint", false));
       }},
      {"cholesky_solve", [](const Sample& s) { return cholesky_solve(s.x(), s.tensor(0), s.kw("upper", false)); }},
      {"cholesky_inverse", [](const Sample& s) { return cholesky_inverse(s.x(), s.kw("upper", false)); }},
      {"pinverse", [](const Sample& s) { return pinverse(s.x(), s.kw_number("rcond", 1e-15)); }},
      {"matrix_exp", [](const Sample& s) { return matrix_exp(s.x()); }},
      {"ormqr",
       [](const Sample& s) {
         return ormqr(s.x(), s.tensor(0), s.tensor(1), s.kw("left", true), s.kw("transpose", false));
       }},
      // creation ops: the sample's input is a number or a shape (value), on the test's device
      {"arange",
       [](const Sample& s) {
         TensorOptions o{.dtype = s.dtype()};
         Scalar first = testing::scalar(s.value);
         auto arg = [&](size_t i, const char* name) -> std::optional<Scalar> {
           if (s.has(i)) return testing::scalar(s.args.at(i));
           if (s.kwargs.contains(name) && !s.kwargs.at(name).is_null()) return testing::scalar(s.kwargs.at(name));
           return std::nullopt;
         };
         std::optional<Scalar> end = arg(0, "end"), step = arg(1, "step");
         if (!end) return arange(first, o);
         return arange(first, *end, step.value_or(Scalar(int64_t{1})), o);
       }},
      {"linspace",
       [](const Sample& s) {
         return linspace(testing::scalar(s.value).to_double(), s.number(0), s.int_at(1), {.dtype = s.dtype()});
       }},
      {"logspace",
       [](const Sample& s) {
         return logspace(testing::scalar(s.value).to_double(), s.number(0), s.int_at(1), s.has(2) ? s.number(2) : 10.0,
                         {.dtype = s.dtype()});
       }},
      {"eye",
       [](const Sample& s) {
         std::optional<int64_t> m;
         if (s.has(0)) m = s.int_at(0);
         return eye(s.value.get<int64_t>(), m, {.dtype = s.dtype()});
       }},
      {"zeros", [](const Sample& s) { return zeros(s.value.get<IntList>(), {.dtype = s.dtype()}); }},
      {"ones", [](const Sample& s) { return ones(s.value.get<IntList>(), {.dtype = s.dtype()}); }},
      {"triu_indices",
       [](const Sample& s) {
         return triu_indices(s.value.get<int64_t>(), s.int_at(0), s.has(1) ? s.int_at(1) : 0,
                             {.dtype = s.dtype().value_or(i64)});
       }},
      {"tril_indices",
       [](const Sample& s) {
         return tril_indices(s.value.get<int64_t>(), s.int_at(0), s.has(1) ? s.int_at(1) : 0,
                             {.dtype = s.dtype().value_or(i64)});
       }},
      // indexing: x[...] and index_put(indices, values, accumulate)
      {"__getitem__", [](const Sample& s) { return getitem(s.x(), index_entries(s.args.at(0), s.x().device())); }},
      {"index_put",
       [](const Sample& s) {
         std::vector<Tensor> indices;
         for (const json& e : s.args.at(0)) indices.push_back(testing::from_json(e.at("tensor_value"), s.x().device()));
         return index_put(s.x(), indices, s.tensor(1), s.kw("accumulate", false));
       }},
      // the twentieth pass
      {"allclose",
       [](const Sample& s) {
         return tensor(Scalar(allclose(s.x(), s.tensor(0), s.kw_number("rtol", 1e-5), s.kw_number("atol", 1e-8),
                                       s.kw("equal_nan", false))));
       }},
      {"equal", [](const Sample& s) { return tensor(Scalar(equal(s.x(), s.tensor(0)))); }},
      {"clone", unary(clone)}, {"contiguous", unary(contiguous)},
      {"expand_as", binary(expand_as)}, {"reshape_as", binary(reshape_as)}, {"view_as", binary(view_as)},
      {"atleast_2d", unary(atleast_2d)}, {"atleast_3d", unary(atleast_3d)},
      {"sum_to_size",
       [](const Sample& s) {
         if (s.args.at(0).is_array()) return sum_to_size(s.x(), s.ints_at(0));
         IntList size;  // variadic sizes
         for (const json& a : s.args) size.push_back(a.get<int64_t>());
         return sum_to_size(s.x(), size);
       }},
      {"narrow_copy", [](const Sample& s) { return narrow_copy(s.x(), s.int_at(0), s.int_at(1), s.int_at(2)); }},
      {"diagonal_scatter",
       [](const Sample& s) {
         return diagonal_scatter(s.x(), s.tensor(0), s.int_arg(1, "offset", 0), s.int_arg(2, "dim1", 0),
                                 s.int_arg(3, "dim2", 1));
       }},
      {"select_scatter", [](const Sample& s) { return select_scatter(s.x(), s.tensor(0), s.int_at(1), s.int_at(2)); }},
      {"slice_scatter",
       [](const Sample& s) {
         auto opt = [&](size_t i, const char* name) -> std::optional<int64_t> {
           if (s.has(i)) return s.is_null(i) ? std::nullopt : std::optional<int64_t>(s.int_at(i));
           return s.kwargs.contains(name) && !s.kwargs.at(name).is_null() ? std::optional(s.kwargs.at(name).get<int64_t>())
                                                                          : std::nullopt;
         };
         return slice_scatter(s.x(), s.tensor(0), s.int_arg(1, "dim", 0), opt(2, "start"), opt(3, "end"),
                              s.int_arg(4, "step", 1));
       }},
      {"constant_pad_nd",
       [](const Sample& s) { return nn::constant_pad_nd(s.x(), s.ints_at(0), s.has(1) ? s.number(1) : s.kw_number("value", 0)); }},
      {"max.reduction_no_dim", [](const Sample& s) { return max(s.x()); }},
      {"min.reduction_no_dim", [](const Sample& s) { return min(s.x()); }},
      // a dtype keyword converts the input first, as PyTorch
      {"softmax.with_dtype", [](const Sample& s) { return softmax(s.x(), s.int_at(0), *s.dtype()); }},
      {"log_softmax.dtype", [](const Sample& s) { return log_softmax(s.x(), s.int_at(0), *s.dtype()); }},
      {"nn.functional.softmin.with_dtype", [](const Sample& s) { return nn::softmin(s.x(), s.int_at(0), *s.dtype()); }},
      {"repeat_interleave",
       [](const Sample& s) {
         std::optional<int64_t> dim = s.dim();
         const json& r = s.kwargs.contains("repeats") ? s.kwargs.at("repeats") : s.args.at(0);
         if (r.is_object()) return repeat_interleave(s.x(), s.in.at(r.at("tensor").get<size_t>()), dim);
         return repeat_interleave(s.x(), r.get<int64_t>(), dim);
       }},
      {"scatter_reduce.sum", scatter_reduced}, {"scatter_reduce.prod", scatter_reduced},
      {"scatter_reduce.mean", scatter_reduced}, {"scatter_reduce.amin", scatter_reduced},
      {"scatter_reduce.amax", scatter_reduced},
      {"index_reduce",
       [](const Sample& s) {
         return index_reduce(s.x(), s.int_at(0), s.tensor(1), s.tensor(2), s.args.at(3).get<std::string>(),
                             s.kw("include_self", true));
       }},
      {"put",
       [](const Sample& s) {
         return put(s.x(), s.tensor(0), s.tensor(1), s.has(2) ? s.args.at(2).get<bool>() : s.kw("accumulate", false));
       }},
      {"polygamma.polygamma_n_3", [](const Sample& s) { return polygamma(s.int_arg(0, "n", 3), s.x()); }},
      {"polygamma.polygamma_n_4", [](const Sample& s) { return polygamma(s.int_arg(0, "n", 4), s.x()); }},
      {"mvlgamma.mvlgamma_p_5", [](const Sample& s) { return mvlgamma(s.x(), s.int_arg(0, "p", 5)); }},
      {"linalg.vander",
       [](const Sample& s) {
         std::optional<int64_t> n;
         if (s.kwargs.contains("N") && !s.kwargs.at("N").is_null()) n = s.kwargs.at("N").get<int64_t>();
         return linalg::vander(s.x(), n);
       }},
      {"combinations",
       [](const Sample& s) { return combinations(s.x(), s.kw<int64_t>("r", 2), s.kw("with_replacement", false)); }},
      {"unfold", [](const Sample& s) { return unfold(s.x(), s.int_at(0), s.int_at(1), s.int_at(2)); }},
      {"cholesky", [](const Sample& s) { return linalg::cholesky(s.x(), s.kw("upper", false)); }},
      {"lu_solve", [](const Sample& s) { return lu_solve(s.x(), s.tensor(0), s.tensor(1)); }},
      {"norm", torch_norm}, {"norm.fro", torch_norm}, {"norm.nuc", torch_norm}, {"norm.inf", torch_norm},
      {"nn.functional.max_unpool3d",
       [](const Sample& s) {
         return nn::max_unpool3d(s.x(), s.tensor(0), s.kw_ints("kernel_size", {}), s.kw_ints("stride", {}),
                                 s.kw_ints("padding", {0}), s.kw_ints("output_size", {}));
       }},
      {"nn.functional.adaptive_max_pool3d",
       [](const Sample& s) { return nn::adaptive_max_pool3d_with_indices(s.x(), s.ints_at(0)).first; }},
      {"special.chebyshev_polynomial_u", binary(special_chebyshev_polynomial_u)},
      {"special.chebyshev_polynomial_v", binary(special_chebyshev_polynomial_v)},
      {"special.chebyshev_polynomial_w", binary(special_chebyshev_polynomial_w)},
      {"special.hermite_polynomial_he", binary(special_hermite_polynomial_he)},
      {"special.shifted_chebyshev_polynomial_t", binary(special_shifted_chebyshev_polynomial_t)},
      {"special.shifted_chebyshev_polynomial_u", binary(special_shifted_chebyshev_polynomial_u)},
      {"special.shifted_chebyshev_polynomial_v", binary(special_shifted_chebyshev_polynomial_v)},
      {"special.shifted_chebyshev_polynomial_w", binary(special_shifted_chebyshev_polynomial_w)},
      {"__rdiv__", [](const Sample& s) { return div(s.tensor(0), s.x()); }},
      {"__rmod__", [](const Sample& s) { return remainder(s.tensor(0), s.x()); }},
      // Tensor.__rpow__ copies `other` into a new tensor of the result type (no gradient
      // reaches it), then takes other ** self
      {"__rpow__",
       [](const Sample& s) { return pow(to(s.tensor(0).detach(), ops::result_type(s.tensor(0), s.x())), s.x()); }},
      {"__rmatmul__", [](const Sample& s) { return matmul(s.tensor(0), s.x()); }},
      {"T", unary(numpy_T)}, {"H", unary(numpy_T)}, {"mT", unary(mT)}, {"mH", unary(mH)},  // real tensors
      {"double", converted(f64)}, {"float", converted(f32)}, {"half", converted(f16)}, {"bfloat16", converted(bf16)},
      {"bool", converted(b8)}, {"byte", converted(u8)}, {"char", converted(i8)}, {"int", converted(i32)},
      {"long", converted(i64)}, {"short", converted(i16)},
      {"zeros_like", [](const Sample& s) { return zeros_like(s.x(), {.dtype = s.dtype()}); }},
      {"ones_like", [](const Sample& s) { return ones_like(s.x(), {.dtype = s.dtype()}); }},
      {"full_like", [](const Sample& s) { return full_like(s.x(), testing::scalar(s.args.at(0)), {.dtype = s.dtype()}); }},
      {"new_zeros", [](const Sample& s) { return new_zeros(s.x(), s.ints_at(0), {.dtype = s.dtype()}); }},
      {"new_ones", [](const Sample& s) { return new_ones(s.x(), s.ints_at(0), {.dtype = s.dtype()}); }},
      {"new_full",
       [](const Sample& s) { return new_full(s.x(), s.ints_at(0), testing::scalar(s.args.at(1)), {.dtype = s.dtype()}); }},
  };
  return *table;
}

using ListFn = std::function<TensorList(const Sample&)>;

template <typename F>
ListFn pair_of(F f) {
  return [f](const Sample& s) {
    auto [a, b] = f(s);
    return TensorList{a, b};
  };
}

// unique / unique_consecutive: the outputs PyTorch returned (values, then inverse and
// counts as asked).
TensorList unique_outputs(const std::tuple<Tensor, Tensor, Tensor>& r, const Sample& s) {
  TensorList out{std::get<0>(r)};
  if (s.kw("return_inverse", false)) out.push_back(std::get<1>(r));
  if (s.kw("return_counts", false)) out.push_back(std::get<2>(r));
  return out;
}

// torch.gradient(x, spacing=, dim=, edge_order=): spacing a number, a list of numbers or
// of coordinate tensors.
TensorList torch_gradient(const Sample& s) {
  IntList dims = s.kw_ints("dim", {});
  int64_t edge_order = s.kw<int64_t>("edge_order", 1);
  if (!s.kwargs.contains("spacing") || s.kwargs.at("spacing").is_null())
    return gradient(s.x(), std::vector<double>{1.0}, dims, edge_order);
  const json& sp = s.kwargs.at("spacing");
  if (sp.is_array() && !sp.empty() && sp.at(0).is_object()) {
    TensorList coordinates;
    for (const json& t : sp) coordinates.push_back(s.in.at(t.at("tensor").get<size_t>()));
    return gradient(s.x(), coordinates, dims, edge_order);
  }
  std::vector<double> spacing;
  if (sp.is_array())
    for (const json& v : sp) spacing.push_back(testing::scalar(v).to_double());
  else
    spacing.push_back(testing::scalar(sp).to_double());
  return gradient(s.x(), spacing, dims, edge_order);
}

// The ops that return several tensors.
const std::map<std::string, ListFn>& list_ops() {
  static const auto* table = new std::map<std::string, ListFn>{
      {"cummax", pair_of([](const Sample& s) { return cummax(s.x(), s.int_at(0)); })},
      {"cummin", pair_of([](const Sample& s) { return cummin(s.x(), s.int_at(0)); })},
      {"sort", pair_of([](const Sample& s) {
         if (s.has(0)) return sort(s.x(), s.int_at(0), s.has(1) && s.args.at(1).get<bool>());
         return sort(s.x(), s.kw<int64_t>("dim", -1), s.kw("descending", false),
                     s.kw("stable", false));
       })},
      {"topk", pair_of([](const Sample& s) {
         return topk(s.x(), s.int_at(0), s.has(1) ? s.int_at(1) : -1,
                     !s.has(2) || s.args.at(2).get<bool>(), !s.has(3) || s.args.at(3).get<bool>());
       })},
      {"kthvalue", pair_of([](const Sample& s) {
         return kthvalue(s.x(), s.int_at(0), s.has(1) ? s.int_at(1) : -1,
                         s.has(2) && s.args.at(2).get<bool>());
       })},
      {"median", pair_of([](const Sample& s) {
         return median(s.x(), s.kw<int64_t>("dim", -1), s.kw("keepdim", false));
       })},
      {"nanmedian", pair_of([](const Sample& s) {
         return nanmedian(s.x(), s.kw<int64_t>("dim", -1), s.kw("keepdim", false));
       })},
      {"mode", pair_of([](const Sample& s) {
         return mode(s.x(), s.has(0) ? s.int_at(0) : -1, s.has(1) && s.args.at(1).get<bool>());
       })},
      {"var_mean", pair_of([](const Sample& s) { return spread_mean(s, false); })},
      {"std_mean", pair_of([](const Sample& s) { return spread_mean(s, true); })},
      {"aminmax",
       pair_of([](const Sample& s) { return aminmax(s.x(), s.dim(), s.kw("keepdim", false)); })},
      {"unique",
       [](const Sample& s) {
         return unique_outputs(
             unique(s.x(), s.kw("return_inverse", false), s.kw("return_counts", false), s.dim()),
             s);
       }},
      {"unique_consecutive",
       [](const Sample& s) {
         return unique_outputs(unique_consecutive(s.x(), s.kw("return_inverse", false),
                                                  s.kw("return_counts", false), s.dim()),
                               s);
       }},
      {"nonzero", [](const Sample& s) { return where(s.x()); }},  // as_tuple=True
      {"split",
       [](const Sample& s) { return split(s.x(), s.int_at(0), s.has(1) ? s.int_at(1) : 0); }},
      {"chunk",
       [](const Sample& s) { return chunk(s.x(), s.int_at(0), s.has(1) ? s.int_at(1) : 0); }},
      {"unbind", [](const Sample& s) { return unbind(s.x(), s.has(0) ? s.int_at(0) : 0); }},
      {"tensor_split",
       [](const Sample& s) {
         int64_t dim = s.has(1) ? s.int_at(1) : 0;
         if (s.is_tensor(0)) {  // a tensor of sections (0-dim) or of indices (1-D)
           Tensor t = s.tensor(0);
           if (t.dim() == 0) return tensor_split(s.x(), item<int64_t>(t), dim);
           return tensor_split(s.x(), to_vector<int64_t>(t), dim);
         }
         return s.args.at(0).is_array() ? tensor_split(s.x(), s.ints_at(0), dim)
                                        : tensor_split(s.x(), s.int_at(0), dim);
       }},
      {"hsplit",
       [](const Sample& s) {
         return s.args.at(0).is_array() ? hsplit(s.x(), s.ints_at(0)) : hsplit(s.x(), s.int_at(0));
       }},
      {"vsplit",
       [](const Sample& s) {
         return s.args.at(0).is_array() ? vsplit(s.x(), s.ints_at(0)) : vsplit(s.x(), s.int_at(0));
       }},
      {"nn.functional.max_pool1d",
       pair_of([](const Sample& s) { return max_pooled(s, nn::max_pool1d_with_indices); })},
      {"nn.functional.max_pool2d",
       pair_of([](const Sample& s) { return max_pooled(s, nn::max_pool2d_with_indices); })},
      {"nn.functional.adaptive_max_pool1d", pair_of([](const Sample& s) {
         return nn::adaptive_max_pool1d_with_indices(s.x(), s.ints_at(0));
       })},
      {"nn.functional.adaptive_max_pool2d", pair_of([](const Sample& s) {
         return nn::adaptive_max_pool2d_with_indices(s.x(), s.ints_at(0));
       })},
      {"linalg.inv_ex", pair_of([](const Sample& s) { return linalg::inv_ex(s.x()); })},
      {"linalg.solve_ex",
       pair_of([](const Sample& s) { return linalg::solve_ex(s.x(), s.tensor(0)); })},
      {"linalg.cholesky_ex",
       pair_of([](const Sample& s) { return linalg::cholesky_ex(s.x(), s.kw("upper", false)); })},
      {"linalg.slogdet", pair_of([](const Sample& s) { return linalg::slogdet(s.x()); })},
      {"linalg.lu_factor", pair_of([](const Sample& s) { return linalg::lu_factor(s.x()); })},
      {"linalg.qr", pair_of([](const Sample& s) {
         return linalg::qr(s.x(), s.kw<std::string>("mode", "reduced"));
       })},
      {"geqrf", pair_of([](const Sample& s) { return geqrf(s.x()); })},
      {"triangular_solve", pair_of([](const Sample& s) {
         return triangular_solve(s.x(), s.tensor(0), s.kw("upper", true), s.kw("transpose", false),
                                 s.kw("unitriangular", false));
       })},
      {"linalg.lu",
       [](const Sample& s) {
         auto [p, l, u] = linalg::lu(s.x());
         return TensorList{p, l, u};
       }},
      {"lu_unpack",
       [](const Sample& s) {
         auto [p, l, u] = lu_unpack(s.x(), s.tensor(0));
         return TensorList{p, l, u};
       }},
      {"linalg.lstsq",
       [](const Sample& s) {
         linalg::Lstsq r =
             linalg::lstsq(s.x(), s.tensor(0), std::nullopt, s.kw<std::string>("driver", "gelsy"));
         return TensorList{r.solution, r.residuals, r.rank, r.singular_values};
       }},
      {"nn.functional.max_pool3d",
       pair_of([](const Sample& s) { return max_pooled(s, nn::max_pool3d_with_indices); })},
      {"meshgrid.list_of_tensors",
       [](const Sample& s) { return meshgrid(s.list(), s.kw<std::string>("indexing", "ij")); }},
      // the twentieth pass
      {"split_with_sizes",
       [](const Sample& s) {
         return split_with_sizes(s.x(), s.ints_at(0), s.int_arg(1, "dim", 0));
       }},
      {"split.list_args",
       [](const Sample& s) {
         return split_with_sizes(s.x(), s.ints_at(0), s.int_arg(1, "dim", 0));
       }},
      {"dsplit",
       [](const Sample& s) {
         return s.args.at(0).is_array() ? dsplit(s.x(), s.ints_at(0)) : dsplit(s.x(), s.int_at(0));
       }},
      {"native_layer_norm",
       [](const Sample& s) {
         auto [y, m, r] =
             native_layer_norm(s.x(), s.ints_at(0), s.tensor(1), s.tensor(2), s.number(3));
         return TensorList{y, m, r};
       }},
      {"native_batch_norm",
       [](const Sample& s) {
         auto [y, m, r] =
             nn::native_batch_norm(s.x(), s.tensor(0), s.tensor(1), s.tensor(2), s.tensor(3),
                                   s.args.at(4).get<bool>(), s.number(5), s.number(6));
         return TensorList{y, m, r};
       }},
      {"max.reduction_with_dim", pair_of([](const Sample& s) {
         return max(s.x(), s.int_at(0),
                    s.has(1) ? s.args.at(1).get<bool>() : s.kw("keepdim", false));
       })},
      {"min.reduction_with_dim", pair_of([](const Sample& s) {
         return min(s.x(), s.int_at(0),
                    s.has(1) ? s.args.at(1).get<bool>() : s.kw("keepdim", false));
       })},
      {"frexp", pair_of([](const Sample& s) { return frexp(s.x()); })},
      {"gradient", torch_gradient},
      {"histogram", pair_of([](const Sample& s) {
         Tensor weight = s.kw_tensor("weight");
         bool density = s.kw("density", false);
         if (s.is_tensor(0)) return histogram(s.x(), s.tensor(0), weight, density);
         std::optional<std::pair<double, double>> range;
         if (s.kwargs.contains("range") && !s.kwargs.at("range").is_null())
           range = std::pair{testing::scalar(s.kwargs.at("range").at(0)).to_double(),
                             testing::scalar(s.kwargs.at("range").at(1)).to_double()};
         return histogram(s.x(), s.has(0) ? s.int_at(0) : s.kw<int64_t>("bins", 100), range, weight,
                          density);
       })},
      {"linalg.lu_factor_ex",
       [](const Sample& s) {
         auto [lu, pivots, info] = linalg::lu_factor_ex(s.x());
         return TensorList{lu, pivots, info};
       }},
      {"nn.functional.adaptive_max_pool3d", pair_of([](const Sample& s) {
         return nn::adaptive_max_pool3d_with_indices(s.x(), s.ints_at(0));
       })},
  };
  return *table;
}

/** PyTorch's default (rtol, atol) for a result dtype (torch.testing.assert_close). */
std::pair<double, double> tolerance(DType d) {
  switch (d) {
    case DType::f16: return {1e-3, 1e-5};
    case DType::bf16: return {1.6e-2, 1e-5};
    case DType::f32: return {1.3e-6, 1e-5};
    case DType::f64: return {1e-7, 1e-7};
    default: return {0, 0};
  }
}

/** Ops whose results are sums of products that BLAS / oneDNN add in an order of their
 * own, which differs between CPU kernels (AVX2, AVX-512, AMX): their rounding error
 * scales with the largest term, not with each (possibly cancelling) result element. */
bool sums_products(const std::string& op) {
  static const std::set<std::string> products{"matmul",
                                              "mm",
                                              "bmm",
                                              "addmm",
                                              "addmv",
                                              "addbmm",
                                              "baddbmm",
                                              "mv",
                                              "dot",
                                              "vdot",
                                              "inner",
                                              "tensordot",
                                              "einsum",
                                              "nn.functional.linear",
                                              "nn.functional.bilinear",
                                              "linalg.multi_dot",
                                              "cdist",
                                              "ormqr",
                                              "linalg.householder_product"};
  return products.contains(op) || op.find("conv") != std::string::npos;
}

/** Ops that run a LAPACK-style factorization (LU, QR, Cholesky, SVD, eigen) of their first
 * argument. Their rounding differs between BLAS kernel families (OpenBLAS's Prescott,
 * Haswell, Zen, SkylakeX blocks sum in different orders), and the difference is amplified
 * by the matrix's condition number: backward-stable algorithms promise a forward error of
 * about n * eps * cond(A), not the dtype's plain tolerance. */
bool factorizes(const std::string& op) {
  static const std::set<std::string> ops{"linalg.cond",
                                         "linalg.inv",
                                         "linalg.inv_ex",
                                         "linalg.solve",
                                         "linalg.solve_ex",
                                         "linalg.det",
                                         "logdet",
                                         "linalg.slogdet",
                                         "linalg.pinv",
                                         "pinverse",
                                         "linalg.matrix_rank",
                                         "linalg.eigvalsh",
                                         "linalg.svdvals",
                                         "linalg.matrix_norm",
                                         "linalg.norm",
                                         "linalg.matrix_power",
                                         "linalg.tensorinv",
                                         "linalg.tensorsolve",
                                         "linalg.cholesky",
                                         "linalg.cholesky_ex",
                                         "cholesky",
                                         "cholesky_solve",
                                         "cholesky_inverse",
                                         "linalg.lu",
                                         "linalg.lu_factor",
                                         "linalg.lu_factor_ex",
                                         "linalg.lu_solve",
                                         "lu_solve",
                                         "linalg.qr",
                                         "geqrf",
                                         "linalg.lstsq",
                                         "linalg.solve_triangular",
                                         "triangular_solve",
                                         "matrix_exp"};
  return ops.contains(op);
}

/** The relative error a backward-stable factorization of `a`'s matrices may make in
 * `dtype`: n * eps * cond_2(A), the largest over the batch, with the condition number
 * from a double-precision SVD (0 when `a` holds no matrices), at most 1e-2. */
double factorization_rtol(const Tensor& a, DType dtype) {
  if (!a.defined() || a.dim() < 2 || !is_floating(a.dtype()) || a.numel() == 0) return 0;
  Tensor s = linalg::svdvals(to(a.detach(), DType::f64));
  double cond = item<double>(amax(div(amax(s, {-1}), amin(s, {-1}))));
  double eps = dtype == DType::f32 ? 0x1p-23 : dtype == DType::f64 ? 0x1p-52 : 0;
  int64_t n = std::max(a.size(-1), a.size(-2));
  // Capped: a (nearly) singular sample's result is noise in any library, yet its magnitude
  // and the zeros PyTorch reports (compared absolutely) still hold.
  return std::isfinite(cond) ? std::min(static_cast<double>(n) * eps * cond, 1e-2) : 1e-2;
}

/** Whether `got` is `want` (dtype, shape, values within the dtype's tolerance; for an op
 * that sums products, the absolute part at least rtol times the largest |value|; for a
 * factorization, a relative tolerance of at least `conditioned_rtol`). */
bool matches(const Tensor& got, const json& want, bool summed = false,
             double conditioned_rtol = 0) {
  std::string dtype = want.at("dtype");
  EXPECT_EQ(to_string(got.dtype()), dtype);
  EXPECT_EQ(got.shape().vec(), want.at("shape").get<IntList>());
  if (to_string(got.dtype()) != dtype || got.shape().vec() != want.at("shape").get<IntList>())
    return false;
  auto [rtol, atol] = tolerance(dtype_from_string(dtype));
  // f16/bf16: one more unit in the last place, for results either side of a rounding boundary
  if (dtype == "f16") rtol += 1.0 / 1024;
  if (dtype == "bf16") rtol += 1.0 / 128;
  rtol = std::max(rtol, conditioned_rtol);
  if (summed)
    for (double v : testing::numbers(want.at("data")))
      if (std::isfinite(v)) atol = std::max(atol, rtol * std::abs(v));
  auto close = testing::all_close(got, testing::numbers(want.at("data")), rtol, atol);
  EXPECT_TRUE(close);
  return close;
}

// Whether `got` (kiln's gradients w.r.t. the inputs `wrt`, undefined where none reaches
// one) are PyTorch's `want` (null where its gradient is None; a gradient kiln's graph
// does not carry must be one PyTorch computes as zeros).
bool same_gradients(const TensorList& got, const json& want, const std::vector<size_t>& wrt) {
  auto all_zero = [&](size_t k) {  // within the comparison's tolerance (PyTorch leaves round-off)
    if (want.at(k).is_null()) return true;
    for (double v : testing::numbers(want.at(k).at("data")))
      if (!(std::abs(v) <= 1e-6)) return false;
    return true;
  };
  bool ok = true;
  for (size_t k = 0; k < wrt.size(); ++k) {
    if (want.at(k).is_null()) {
      bool none = !got[k].defined() || item<double>(sum(abs(got[k]))) == 0.0;
      EXPECT_TRUE(none) << "input " << wrt[k] << " gets a gradient PyTorch's does not";
      ok = ok && none;
      continue;
    }
    if (!got[k].defined()) {
      if (!all_zero(k))
        ADD_FAILURE() << "no gradient reaches input " << wrt[k] << ", PyTorch's is not zero";
      ok = ok && all_zero(k);
      continue;
    }
    SCOPED_TRACE("d/d input " + std::to_string(wrt[k]));
    auto close = testing::all_close(got[k], testing::numbers(want.at(k).at("data")), 1e-6, 1e-6);
    EXPECT_TRUE(close);
    ok = ok && close && got[k].shape().vec() == want.at(k).at("shape").get<IntList>();
  }
  return ok;
}

// At 0, PyTorch's elu/celu/selu double backward takes the positive side while their first
// derivative takes the negative one: no smooth formula matches both there.
bool second_order_convention(const std::string& op, const Sample& s) {
  if (op != "nn.functional.elu" && op != "nn.functional.celu" && op != "nn.functional.selu")
    return false;
  return item<bool>(any(s.x() == 0.0));
}

// The gradients of sum(out * cotangent) w.r.t. the sample's f64 tensors against PyTorch's
// autograd, and where the case has them the second-order ones (test_ops' gradgrad: the
// gradients of sum(grads_i * v_i), through kiln's create_graph).
bool gradients_match(const Tensor& out, const Sample& s, const json& g, Device device,
                     const std::string& op) {
  SCOPED_TRACE("gradient");
  std::vector<size_t> wrt = g.at("wrt").get<std::vector<size_t>>();
  TensorList inputs;
  for (size_t i : wrt) inputs.push_back(s.in[i]);
  if (!out.requires_grad()) return same_gradients(TensorList(wrt.size()), g.at("grads"), wrt);
  bool second = g.contains("gradgrad") && !second_order_convention(op, s);
  TensorList grads;
  try {
    grads = autograd::grad({out}, inputs, {testing::from_json(g.at("cotangent"), device)},
                           /*retain_graph=*/second,
                           /*allow_unused=*/true, /*create_graph=*/second);
  } catch (const Error& e) {
    ADD_FAILURE() << "kiln's backward refused: " << e.what();
    return false;
  }
  bool ok = same_gradients(grads, g.at("grads"), wrt);
  if (!ok || !second) return ok;
  SCOPED_TRACE("second order");
  const json& gg = g.at("gradgrad");
  Tensor total;
  for (size_t k = 0; k < grads.size(); ++k) {
    if (!grads[k].defined() || !grads[k].requires_grad()) continue;  // constant in the inputs
    Tensor term = sum(grads[k] * testing::from_json(gg.at("v").at(k), device));
    total = total.defined() ? total + term : term;
  }
  TensorList second_grads(wrt.size());
  if (total.defined()) {
    try {
      second_grads = autograd::grad({total}, inputs, {}, false, /*allow_unused=*/true);
    } catch (const Error& e) {
      ADD_FAILURE() << "kiln's double backward refused: " << e.what();
      return false;
    }
  }
  return same_gradients(second_grads, gg.at("grads"), wrt);
}

// Replays every sample with its tensors on `device`.
void expect_matches_pytorch(Device device) {
  // KILN_OPDB_SWEEP=file replays another sweep (one written with other sample limits)
  const char* other = std::getenv("KILN_OPDB_SWEEP");
  json golden = other ? json::parse(std::ifstream(other)) : testing::load_golden("opdb_sweep.json");
  ASSERT_GE(golden.at("cases").size(), 1000u);
  std::map<std::string, int> failures;
  for (const json& c : golden.at("cases")) {
    std::string op = c.at("op");
    // (values, indices) where PyTorch returned two tensors, else one
    bool pair = c.contains("outputs");
    std::function<TensorList(const Sample&)> call;
    if (c.contains("error") && !ops().contains(op))
      pair = true;  // an error case of an op with several outputs
    if (auto it = list_ops().find(op); pair && it != list_ops().end()) {
      call = it->second;
    } else if (auto it1 = ops().find(op); !pair && it1 != ops().end()) {
      call = [f = it1->second](const Sample& s) { return TensorList{f(s)}; };
    } else {
      ADD_FAILURE() << "the sweep has an op this test does not map: " << op
                    << (pair ? " (two outputs)" : "");
      continue;
    }
    Sample s{.args = c.at("args"),
             .kwargs = c.at("kwargs"),
             .listed = c.value("input_list", size_t{0}),
             .value = c.value("value", json())};
    for (const json& t : c.at("inputs")) s.in.push_back(testing::from_json(t, device));
    if (s.value.is_number() || s.value.is_boolean())
      s.wrapped = wrapped_number(testing::scalar(s.value));
    const json* gradient = c.contains("grad") ? &c.at("grad") : nullptr;
    if (gradient)
      for (size_t i : gradient->at("wrt").get<std::vector<size_t>>()) s.in[i].set_requires_grad();
    SCOPED_TRACE(op + " on " +
                 (!s.value.is_null() ? s.value.dump()
                  : s.in.empty()     ? std::string("no tensor")
                                     : s.x().meta_str()) +
                 " args " + s.args.dump() + " kwargs " + s.kwargs.dump());
    if (c.contains("error")) {
      EXPECT_THROW(call(s), Error) << "PyTorch raised: " << c["error"];
      continue;
    }
    TensorList got;
    try {
      got = call(s);
    } catch (const Error& e) {
      ADD_FAILURE() << "kiln refused a call PyTorch accepts: " << e.what();
      ++failures[op];
      continue;
    } catch (const std::exception& e) {  // a sample this test reads wrongly: the op's failure
      ADD_FAILURE() << "reading the sample failed: " << e.what();
      ++failures[op];
      continue;
    }
    json wants = pair ? c.at("outputs") : json::array({c.at("output")});
    bool ok = got.size() == wants.size();
    if (ok && (op == "topk" || op == "kthvalue")) {
      // Which of equal elements is reported is the implementation's choice (PyTorch's
      // partial sorts do not promise one): the values must match and the indices must
      // point at them.
      ok = matches(got[0], wants[0]);
      int64_t d = wrap_dim(s.has(1) ? s.int_at(1) : -1, std::max<int64_t>(s.x().dim(), 1), "sweep");
      bool kept = op == "topk" || (s.has(2) && s.args.at(2).get<bool>());
      Tensor idx = kept || s.x().dim() == 0 ? got[1] : unsqueeze(got[1], d);
      Tensor picked = s.x().dim() == 0 ? s.x() : gather(s.x(), d, idx);
      if (!kept && s.x().dim() > 0) picked = squeeze(picked, d);
      EXPECT_EQ(got[1].shape().vec(), wants[1].at("shape").get<IntList>());
      auto same = testing::all_close(picked, to_vector<double>(got[0]), 0, 0);
      EXPECT_TRUE(same) << "the indices do not point at the values";
      ok = ok && same;
    } else {
      double conditioned =
          0;  // over every matrix argument (the system of a solve may be the second)
      if (factorizes(op))
        for (const Tensor& t : s.in)
          conditioned = std::max(conditioned, factorization_rtol(t, got[0].dtype()));
      for (size_t i = 0; ok && i < got.size(); ++i)
        ok = matches(got[i], wants[i], sums_products(op), conditioned) && ok;
    }
    if (ok && gradient) ok = gradients_match(got[0], s, *gradient, device, op);
    if (!ok) ++failures[op];
  }
  for (const auto& [op, n] : failures)
    std::cerr << "opdb sweep: " << op << " failed " << n << " sample(s)\n";
}

TEST(OpDbSweep, MatchesPyTorchOnItsOwnSamples) { expect_matches_pytorch(Device("cpu:0")); }

// The CUDA kernels on the same samples (wrapped numbers stay on the CPU, as in PyTorch).
TEST(OpDbSweep, MatchesPyTorchOnItsOwnSamplesOnCuda) {
  KILN_REQUIRE_CUDA(1);
  expect_matches_pytorch(Device("cuda:0"));
}

}  // namespace
}  // namespace kiln
