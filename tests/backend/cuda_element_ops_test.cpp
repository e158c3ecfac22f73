// The CUDA kernels' per-element arithmetic and reduction combines
// (kiln/backend/cuda/element_ops.h) run on the host here and must match the CPU backend
// value for value, NaNs, ties and integer edge cases included.
#include <gtest/gtest.h>

#include <random>

#include "kiln/backend/cuda/element_ops.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::cuda {
namespace {

using ops::OpKind;

template <typename W>
Tensor one(W v) {
  if constexpr (std::is_same_v<W, bool>)
    return from_vector<bool>({v});
  else
    return from_vector<W>({v});
}
template <typename W>
W value_of(const Tensor& t) {
  if constexpr (std::is_same_v<W, bool>)
    return to_vector<bool>(t)[0];
  else
    return to_vector<W>(t)[0];
}
template <typename W>
bool same(W a, W b) {
  if constexpr (std::is_floating_point_v<W>)
    return (std::isnan(a) && std::isnan(b)) || a == b ||
           std::abs(a - b) <= 1e-6 * std::max<W>(1, std::abs(b));
  else
    return a == b;
}

template <typename W>
std::vector<W> samples() {
  if constexpr (std::is_same_v<W, bool>)
    return {false, true};
  else if constexpr (std::is_floating_point_v<W>)
    return {W(0),
            W(-0.0),
            W(1.5),
            W(-2.25),
            W(3),
            W(0.5),
            std::numeric_limits<W>::quiet_NaN(),
            std::numeric_limits<W>::infinity()};
  else if constexpr (std::is_unsigned_v<W>)
    return {0, 1, 2, 3, 7, 200};
  else
    return {0, 1, -1, 2, -3, 5, 7};
}

template <typename W>
void check_dtype() {
  SCOPED_TRACE(std::string(to_string(one(W{}).dtype())));
  for (OpKind op :
       {OpKind::add, OpKind::sub, OpKind::mul, OpKind::div, OpKind::pow, OpKind::maximum,
        OpKind::minimum, OpKind::remainder, OpKind::fmod, OpKind::floor_divide, OpKind::atan2}) {
    bool divides = backend::divides_integers(op);
    if ((op == OpKind::div || op == OpKind::atan2) && !std::is_floating_point_v<W>)
      continue;                                        // an f32 result
    if (std::is_same_v<W, bool> && divides) continue;  // refused, as PyTorch
    if (std::is_same_v<W, bool> && (op == OpKind::sub || op == OpKind::div)) continue;
    for (W x : samples<W>())
      for (W y : samples<W>()) {
        if constexpr (std::is_integral_v<W> && !std::is_same_v<W, bool>) {
          if (op == OpKind::pow && y > 5) continue;  // keep integer powers in range
          if (divides && y == 0) continue;           // an Error (on CUDA, reported by the kernel)
        }
        std::vector<Value> args = {one(x), one(y)};
        if (op == OpKind::add || op == OpKind::sub) args.push_back(Scalar(int64_t{2}));
        W want = value_of<W>(dispatch(op, args)[0]);
        W alpha = (op == OpKind::add || op == OpKind::sub) ? W(2) : W(1);
        if constexpr (std::is_same_v<W, bool>) alpha = true;
        W got = binary_w<W>(op, x, y, alpha);
        EXPECT_TRUE(same(got, want))
            << ops::op_name(op) << "(" << +x << ", " << +y << "): " << +got << " vs " << +want;
      }
  }
  for (OpKind op : {OpKind::eq, OpKind::ne, OpKind::lt, OpKind::le, OpKind::gt, OpKind::ge})
    for (W x : samples<W>())
      for (W y : samples<W>())
        EXPECT_EQ(compare_w<W>(op, x, y),
                  value_of<bool>(dispatch(op, std::vector<Value>{one(x), one(y)})[0]))
            << ops::op_name(op) << "(" << +x << ", " << +y << ")";
  std::vector<OpKind> unary = {OpKind::neg,   OpKind::abs,  OpKind::relu,  OpKind::sign,
                               OpKind::floor, OpKind::ceil, OpKind::round, OpKind::trunc};
  if constexpr (std::is_floating_point_v<W>)
    unary.insert(
        unary.end(),
        {OpKind::exp,   OpKind::log,    OpKind::sqrt,    OpKind::rsqrt,   OpKind::sin,
         OpKind::cos,   OpKind::tanh,   OpKind::sigmoid, OpKind::silu,    OpKind::gelu,
         OpKind::log1p, OpKind::expm1,  OpKind::log2,    OpKind::tan,     OpKind::atan,
         OpKind::asin,  OpKind::acos,   OpKind::sinh,    OpKind::cosh,    OpKind::reciprocal,
         OpKind::exp2,  OpKind::log10,  OpKind::erfc,    OpKind::asinh,   OpKind::acosh,
         OpKind::atanh, OpKind::erfinv, OpKind::lgamma,  OpKind::digamma, OpKind::polygamma});
  for (OpKind op : unary) {
    bool rounding =
        op == OpKind::floor || op == OpKind::ceil || op == OpKind::round || op == OpKind::trunc;
    if (std::is_same_v<W, bool> && (op == OpKind::neg || op == OpKind::relu || rounding))
      continue;                          // refused, as PyTorch
    for (int64_t attr : {0, 1, 2, 3}) {  // gelu: the tanh form; polygamma: n
      if (attr > 0 && op != OpKind::gelu && op != OpKind::polygamma) continue;
      if (attr > 1 && op == OpKind::gelu) continue;
      for (W x : samples<W>()) {
        std::vector<Value> args = {one(x)};
        if (op == OpKind::gelu) args.push_back(Str(attr ? "tanh" : "none"));
        if (op == OpKind::polygamma) args.push_back(attr);
        W want = value_of<W>(dispatch(op, args)[0]);
        EXPECT_TRUE(same(unary_w<W>(op, x, attr), want)) << ops::op_name(op) << "(" << +x << ")";
      }
    }
  }
  // clamp with one bound, both, and crossed bounds.
  std::vector<W> values = samples<W>();
  for (W lo : values)
    for (W hi : values)
      for (int which : {1, 2, 3}) {
        bool has_lo = which & 1, has_hi = which & 2;
        auto bound = [](W v) {
          return std::is_floating_point_v<W> ? Value(Scalar(static_cast<double>(v)))
                 : std::is_same_v<W, bool>   ? Value(Scalar(static_cast<bool>(v)))
                                             : Value(Scalar(static_cast<int64_t>(v)));
        };
        for (W x : values) {
          Outputs want =
              dispatch(OpKind::clamp, std::vector<Value>{one(x), has_lo ? bound(lo) : Value(),
                                                         has_hi ? bound(hi) : Value()});
          if (want[0].dtype() != one(x).dtype()) continue;  // promoted (bool with int bounds)
          EXPECT_TRUE(
              same(backend::clamp_value<W>(x, has_lo, lo, has_hi, hi), value_of<W>(want[0])))
              << "clamp(" << +x << ", " << +lo << ", " << +hi << ") bounds " << which;
        }
      }
}

TEST(CudaElementOps, MatchTheCpuBackend) {
  check_dtype<float>();
  check_dtype<double>();
  check_dtype<int64_t>();
  check_dtype<int32_t>();
  check_dtype<int8_t>();
  check_dtype<uint8_t>();
  check_dtype<bool>();
}

// The reduction order of a CUDA row kernel: 256 threads fold a strided slice each, the
// lanes of each warp combine in butterfly order, then the 8 warps' results in turn
// (block_reduce in reduce.cu).
template <typename A, typename F>
A block_order(const std::vector<A>& items, A identity, F combine) {
  constexpr int kBlock = 256;
  std::vector<A> part(kBlock, identity);
  for (size_t j = 0; j < items.size(); ++j) part[j % kBlock] = combine(part[j % kBlock], items[j]);
  for (int m = 16; m > 0; m >>= 1) {
    std::vector<A> next = part;
    for (int t = 0; t < kBlock; ++t) next[t] = combine(part[t], part[t ^ m]);
    part = next;
  }
  A r = part[0];
  for (int w = 1; w < kBlock / 32; ++w) r = combine(r, part[w * 32]);
  return r;
}

TEST(CudaElementOps, RowCombinesMatchCpuReductions) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + static_cast<int>(rng() % 700);
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(rng() % 9) - 4.0f;  // many ties
    if (trial % 3 == 0) v[rng() % n] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 5 == 0) v[rng() % n] = std::numeric_limits<float>::quiet_NaN();
    Tensor t = from_vector<float>(v);
    for (bool is_max : {true, false}) {
      std::vector<Arg<float>> items;
      for (int j = 0; j < n; ++j) items.push_back({v[j], j});
      Arg<float> got = block_order<Arg<float>>(
          items, {0.f, kNoIndex},
          [&](Arg<float> a, Arg<float> b) { return pick_arg(a, b, is_max); });
      Outputs want =
          dispatch(is_max ? OpKind::max : OpKind::min, std::vector<Value>{t, int64_t{0}, false});
      EXPECT_EQ(got.i, to_vector<int64_t>(want[1])[0]) << "trial " << trial;
      float e = block_order<float>(v, extreme_identity<float>(is_max),
                                   [&](float a, float b) { return pick_extreme(a, b, is_max); });
      float want_e = to_vector<float>(is_max ? amax(t, {}) : amin(t, {}))[0];
      EXPECT_TRUE(same(e, want_e)) << e << " vs " << want_e;
    }
  }
}

}  // namespace
}  // namespace kiln::cuda
