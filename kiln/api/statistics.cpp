// Statistics and sampling composites as PyTorch defines them: quantiles and NaN-aware
// medians (from one sort), mode, covariance and correlation, trapezoid integration,
// Vandermonde matrices, log-spaced ranges, and random sampling from kiln's generator
// (randint, randperm, bernoulli, multinomial, normal: PyTorch's distributions, not its
// random streams).
#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/api/functional.h"
#include "kiln/api/linalg.h"

namespace kiln {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

IntList shape_of(const Tensor& t) { return IntList(t.shape().begin(), t.shape().end()); }

// x with `dim` moved last (or flattened to 1-D when absent).
Tensor dim_last(const Tensor& x, std::optional<int64_t> dim, const char* op) {
  if (!dim) return reshape(x, {-1});
  int64_t d = wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), op);
  return x.dim() == 0 ? reshape(x, {1}) : movedim(x, d, -1);  // a 0-dim x is one row
}

// The reduced result [..., Q] back in x's layout: Q first (or dropped for a scalar q),
// the reduced dim kept as size 1 with keepdim.
Tensor place_reduced(const Tensor& r, const Tensor& x, std::optional<int64_t> dim, bool keepdim,
                     bool scalar_q) {
  Tensor out = r;  // [..., Q]
  if (keepdim) {
    if (!dim) {
      IntList shape(static_cast<size_t>(x.dim()), 1);
      shape.push_back(r.size(-1));
      out = reshape(out, shape);
    } else {
      out = unsqueeze(out, wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "quantile"));
      out = x.dim() == 0 ? squeeze(out, 0) : out;
    }
  }
  out = movedim(out, -1, 0);
  return scalar_q ? squeeze(out, 0) : out;
}

Tensor quantile_impl(const Tensor& x, const Tensor& q_in, std::optional<int64_t> dim, bool keepdim,
                     const std::string& interpolation, bool ignore_nan, const char* op) {
  KILN_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, dtype,
             "[{}] input tensor must be either float or double dtype, got {}", op, x.dtype());
  KILN_CHECK(x.numel() > 0, value, "[{}] input tensor must be non-empty", op);
  KILN_CHECK(q_in.dim() <= 1, shape, "[{}] q must be a scalar or 1-D tensor, got {}", op,
             q_in.meta_str());
  KILN_CHECK(q_in.dtype() == x.dtype(), dtype,
             "[{}] q tensor must be same dtype as the input tensor ({}), got {}", op, x.dtype(),
             q_in.dtype());
  KILN_CHECK(
      interpolation == "linear" || interpolation == "lower" || interpolation == "higher" ||
          interpolation == "midpoint" || interpolation == "nearest",
      value,
      "[{}] interpolation must be one of linear, lower, higher, midpoint or nearest, got '{}'", op,
      interpolation);
  if (!q_in.is_fake())  // PyTorch's range check, on the values: eager only
    KILN_CHECK(q_in.numel() == 0 || item<bool>(all(logical_and(q_in >= 0.0, q_in <= 1.0))), value,
               "[{}] q values must be in the range [0, 1]", op);
  Tensor rows = dim_last(x, dim, op);
  Tensor sorted = std::get<0>(sort(rows, -1));  // NaN last
  int64_t n = rows.size(-1);
  Tensor q = reshape(q_in, {-1});
  Tensor valid = sum(to(logical_not(isnan(rows)), x.dtype()), {-1}, true);  // [..., 1]
  Tensor count = ignore_nan ? valid : full_like(valid, static_cast<double>(n));
  Tensor rank = q * (count - 1.0);  // [..., Q]
  if (interpolation == "lower")
    rank = floor(rank);
  else if (interpolation == "higher")
    rank = ceil(rank);
  else if (interpolation == "nearest")
    rank = round(rank);  // half to even, as torch.round
  Tensor below_i = clamp(to(floor(rank), DType::i64), 0, n - 1),
         above_i = clamp(to(ceil(rank), DType::i64), 0, n - 1);
  Tensor below = gather(sorted, -1, below_i), above = gather(sorted, -1, above_i);
  Tensor weight = interpolation == "midpoint" ? full_like(rank, 0.5) : rank - floor(rank);
  Tensor r = lerp(below, above, weight);
  // quantile: a row with NaN gives NaN; nanquantile: a row of NaN only does.
  Tensor nan_row = ignore_nan ? valid == 0.0 : valid < static_cast<double>(n);
  r = where(nan_row, full_like(r, kNaN), r);
  return place_reduced(r, x, dim, keepdim, q_in.dim() == 0);
}

}  // namespace

Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  return quantile_impl(x, q, dim, keepdim, interpolation, false, "quantile");
}
Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  return quantile(x, scalar_tensor(q, {.dtype = x.dtype(), .device = x.device()}), dim, keepdim,
                  interpolation);
}
Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return quantile_impl(x, q, dim, keepdim, interpolation, true, "nanquantile");
}
Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return nanquantile(x, scalar_tensor(q, {.dtype = x.dtype(), .device = x.device()}), dim, keepdim,
                     interpolation);
}

std::pair<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "nanmedian");
  Tensor rows = x.dim() == 0 ? reshape(x, {1}) : movedim(x, d, -1);
  KILN_CHECK(rows.size(-1) > 0, index, "[nanmedian] cannot reduce an empty dim {} of {}", d,
             x.meta_str());
  auto [sorted, order] = sort(rows, -1, false, /*stable=*/true);  // NaN last
  Tensor valid = sum(to(logical_not(isnan(rows)), DType::i64), {-1}, true);
  Tensor at =
      clamp(floor_divide(valid - 1, 2), 0, rows.size(-1) - 1);  // the lower median of the numbers
  Tensor values = gather(sorted, -1, at), indices = gather(order, -1, at);
  values = squeeze(values, -1), indices = squeeze(indices, -1);
  if (keepdim && x.dim() > 0) values = unsqueeze(values, d), indices = unsqueeze(indices, d);
  return {values, indices};
}

Tensor nanmedian(const Tensor& x) { return std::get<0>(nanmedian(reshape(x, {-1}), 0, false)); }

std::pair<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "mode");
  Tensor rows = x.dim() == 0 ? reshape(x, {1}) : movedim(x, d, -1);
  int64_t n = rows.size(-1);
  KILN_CHECK(n > 0, index, "[mode] cannot reduce an empty dim {} of {}", d, x.meta_str());
  // Each element's count of equal elements (NaN equals nothing), the largest count, then
  // the smallest value with it and that value's last position, as PyTorch's.
  Tensor counts = sum(to(unsqueeze(rows, -1) == unsqueeze(rows, -2), DType::i64), {-1});
  Tensor best = amax(counts, {-1}, true);
  Tensor candidate = logical_and(counts == best, logical_not(isnan(rows)));
  Tensor fill = is_floating(rows.dtype()) ? full_like(rows, std::numeric_limits<double>::infinity())
                                          : amax(rows, {-1}, true);  // above every candidate
  Tensor value = amin(where(candidate, rows, fill), {-1}, true);
  Tensor all_nan = logical_not(any(candidate, -1, true));  // a row of NaN only
  value = where(all_nan, amin(rows, {-1}, true), value);
  Tensor pos = arange(0, n, 1, {.dtype = DType::i64, .device = x.device()});
  Tensor hit = logical_or(rows == value, logical_and(all_nan, isnan(rows)));
  Tensor index = amax(where(hit, expand(pos, shape_of(rows)), full_like(pos, -1)), {-1}, true);
  value = squeeze(value, -1), index = squeeze(index, -1);
  if (keepdim && x.dim() > 0) value = unsqueeze(value, d), index = unsqueeze(index, d);
  return {value, index};
}

Tensor cov(const Tensor& x, int64_t correction, const Tensor& fweights, const Tensor& aweights) {
  KILN_CHECK(x.dim() <= 2, shape, "[cov] expects a tensor of at most 2 dims, got {}", x.meta_str());
  Tensor obs = x.dim() < 2 ? reshape(x, {1, -1}) : x;  // [variables, observations]
  if (!is_floating(obs.dtype())) obs = to(obs, DType::f32);
  if (aweights.defined() &&
      is_floating(aweights.dtype()))  // f32 weights make a bf16 input's result f32
    obs = to(obs, promote_types(obs.dtype(), aweights.dtype()));
  int64_t n = obs.size(1);
  Tensor w;
  if (fweights.defined()) {
    KILN_CHECK(fweights.dim() <= 1 && fweights.numel() == n && !is_floating(fweights.dtype()),
               value, "[cov] fweights must be an integer tensor of {} weights, got {}", n,
               fweights.meta_str());
    if (!fweights.is_fake())
      KILN_CHECK(item<bool>(all(fweights >= 0)), value, "[cov] fweights cannot be negative");
    w = to(reshape(fweights, {-1}), obs.dtype());
  }
  if (aweights.defined()) {
    KILN_CHECK(aweights.dim() <= 1 && aweights.numel() == n && is_floating(aweights.dtype()), value,
               "[cov] aweights must be a floating tensor of {} weights, got {}", n,
               aweights.meta_str());
    Tensor a = to(reshape(aweights, {-1}), obs.dtype());
    if (!a.is_fake())  // a check on the values: eager only
      KILN_CHECK(item<bool>(all(a >= 0.0)), value, "[cov] aweights cannot be negative");
    w = w.defined() ? w * a : a;
  }
  Tensor avg, norm;
  if (w.defined()) {
    Tensor w_sum = sum(w);
    avg = sum(obs * w, {1}, true) / w_sum;
    norm = aweights.defined() ? w_sum - sum(w * to(reshape(aweights, {-1}), obs.dtype())) *
                                            static_cast<double>(correction) / w_sum
                              : w_sum - static_cast<double>(correction);
  } else {
    avg = mean(obs, {1}, true);
    norm = scalar_tensor(static_cast<double>(n - correction),
                         {.dtype = obs.dtype(), .device = obs.device()});
  }
  norm = clamp(norm, 0.0, std::nullopt);  // PyTorch warns and divides by 0
  Tensor centered = obs - avg;
  Tensor weighted = w.defined() ? centered * w : centered;
  Tensor c = matmul(weighted, transpose(centered, 0, 1)) / norm;
  return squeeze(c);  // one variable: 0-dim, as PyTorch
}

Tensor corrcoef(const Tensor& x) {
  Tensor c = cov(x);
  if (c.dim() == 0) return c / c;
  Tensor stddev = sqrt(diagonal(c));
  c = c / unsqueeze(stddev, 1) / unsqueeze(stddev, 0);
  return clamp(c, -1.0, 1.0);
}

namespace {
// The trapezoids' areas along dim d of y with sample points x (1-D along d, or shaped
// like y): (y[i] + y[i+1]) (x[i+1] - x[i]) / 2, n - 1 of them.
Tensor trapezoids(const Tensor& y, const Tensor& x, int64_t d, const char* op) {
  int64_t n = y.size(d);
  Tensor left = narrow(y, d, 0, n - 1), right = narrow(y, d, 1, n - 1);
  Tensor dx = diff(x, 1, x.dim() == 1 ? 0 : d - y.dim());
  if (x.dim() == 1) {  // spacing along dim d of y
    KILN_CHECK(x.size(0) == n, shape, "[{}] x {} must have y's length {} along dim {}", op,
               x.meta_str(), n, d);
    IntList shape(static_cast<size_t>(y.dim()), 1);
    shape[static_cast<size_t>(d)] = n - 1;
    dx = reshape(dx, shape);
  }
  return (left + right) * dx / 2.0;
}
}  // namespace

Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim) {
  int64_t d = wrap_dim(dim, y.dim(), "trapezoid");
  if (y.size(d) == 0) return sum(y, {d});
  return sum(trapezoids(y, x, d, "trapezoid"), {d});
}

Tensor cumulative_trapezoid(const Tensor& y, const Tensor& x, int64_t dim) {
  int64_t d = wrap_dim(dim, y.dim(), "cumulative_trapezoid");
  if (y.size(d) == 0) return narrow(y, d, 0, 0);
  return cumsum(trapezoids(y, x, d, "cumulative_trapezoid"), d);
}

Tensor trapezoid(const Tensor& y, double dx, int64_t dim) {
  int64_t d = wrap_dim(dim, y.dim(), "trapezoid");
  int64_t n = y.size(d);
  if (n == 0) return sum(y, {d});
  return (sum(y, {d}) - (select(y, d, 0) + select(y, d, n - 1)) / 2.0) * dx;
}

Tensor trapz(const Tensor& y, const Tensor& x, int64_t dim) { return trapezoid(y, x, dim); }
Tensor trapz(const Tensor& y, double dx, int64_t dim) { return trapezoid(y, dx, dim); }

Tensor cumulative_trapezoid(const Tensor& y, double dx, int64_t dim) {
  int64_t d = wrap_dim(dim, y.dim(), "cumulative_trapezoid");
  int64_t n = y.size(d);
  if (n == 0) return narrow(y, d, 0, 0);
  Tensor pieces = (narrow(y, d, 0, n - 1) + narrow(y, d, 1, n - 1)) * (dx / 2.0);
  return cumsum(pieces, d);
}

Tensor vander(const Tensor& x, std::optional<int64_t> n, bool increasing) {
  KILN_CHECK(x.dim() == 1, shape, "[vander] x must be a one-dimensional tensor, got {}",
             x.meta_str());
  int64_t cols = n.value_or(x.size(0));
  KILN_CHECK(cols >= 0, value, "[vander] N must be non-negative, got {}", cols);
  DType dtype = is_floating(x.dtype()) ? x.dtype() : DType::i64;  // integers (and bools) give i64
  Tensor powers = arange(0, cols, 1, {.dtype = DType::i64, .device = x.device()});
  Tensor v = pow(unsqueeze(to(x, dtype), 1), to(powers, dtype));
  return increasing ? v : flip(v, {1});
}

Tensor linalg::vander(const Tensor& x, std::optional<int64_t> n) {
  KILN_CHECK(x.dtype() != DType::b8, dtype,
             "[linalg.vander] supports floating point and integer tensors, got bool");
  Tensor v = x.dim() == 0 ? reshape(x, {1}) : x;
  int64_t cols = n.value_or(v.size(-1));
  KILN_CHECK(cols > 1, value, "[linalg.vander] N must be greater than 1, got {}", cols);
  v = unsqueeze(to(v, is_floating(x.dtype()) ? x.dtype() : DType::i64), -1);
  IntList shape = shape_of(v);
  shape.back() = cols - 1;
  return cat({ones_like(v), cumprod(expand(v, shape), -1)}, -1);
}

Tensor logspace(double start, double end, int64_t steps, double base, TensorOptions options) {
  DType dtype = options.dtype.value_or(DType::f32);
  if (is_integral(dtype, false)) {  // PyTorch converts the bounds to the dtype first
    start = std::trunc(start);
    end = std::trunc(end);
  }
  Tensor exponents = linspace(start, end, steps, {.dtype = DType::f64, .device = options.device});
  return to(
      pow(scalar_tensor(base, {.dtype = DType::f64, .device = exponents.device()}), exponents),
      dtype);
}

// ---- sampling -----------------------------------------------------------------------------

Tensor randint(int64_t low, int64_t high, const IntList& size, TensorOptions options) {
  KILN_CHECK(low < high, value, "[randint] expects low < high, got from={} to={}", low, high);
  TensorOptions f{.dtype = DType::f64, .device = options.device};
  Tensor u = rand(size, f);  // [0, 1) in f64: exact below 2^53 values
  Tensor v =
      clamp(floor(u * static_cast<double>(high - low)), 0.0, static_cast<double>(high - low - 1)) +
      static_cast<double>(low);
  return to(v, options.dtype.value_or(DType::i64));
}

Tensor randperm(int64_t n, TensorOptions options) {
  KILN_CHECK(n >= 0, value, "[randperm] n must be non-negative, got {}", n);
  Tensor keys = rand({n}, {.dtype = DType::f64, .device = options.device});
  return to(argsort(keys), options.dtype.value_or(DType::i64));
}

Tensor bernoulli(const Tensor& p) {
  KILN_CHECK(is_floating(p.dtype()), dtype, "[bernoulli] expects floating probabilities, got {}",
             p.dtype());
  return to(rand_like(p) < p, p.dtype());
}

Tensor poisson(const Tensor& rates) {
  KILN_CHECK(is_floating(rates.dtype()), dtype, "[poisson] expects floating rates, got {}",
             rates.dtype());
  KILN_CHECK(!rates.is_fake(), data_dependent,
             "[poisson] samples by bisection over the data's range: eager only");
  Tensor lam = to(rates, DType::f64);
  if (lam.numel() == 0) return clone(rates);
  KILN_CHECK(item<bool>(all(lam >= 0.0)), value,
             "[poisson] invalid Poisson rate, expected rate to be non-negative");
  // P(X > rate + 40 sqrt(rate) + 40) is far below double's resolution of u.
  double top = item<double>(amax(lam));
  Tensor lo = full_like(lam, -1.0);                 // P(X <= lo) < u (P(X <= -1) = 0)
  Tensor hi = ceil(lam + sqrt(lam) * 40.0 + 40.0);  // P(X <= hi) >= u
  Tensor u = rand_like(lam);
  for (double width = top + std::sqrt(top) * 40.0 + 42.0; width > 1;
       width = std::ceil(width / 2)) {  // >= hi - lo
    Tensor mid = floor((lo + hi) / 2.0);
    Tensor enough = special_gammaincc(mid + 1.0, lam) >= u;  // P(X <= mid) = Q(mid + 1, rate)
    hi = where(enough, mid, hi);
    lo = where(enough, lo, mid);
  }
  return to(hi, rates.dtype());
}

Tensor bernoulli(const Tensor& x, double p) {
  KILN_CHECK(p >= 0 && p <= 1, value, "[bernoulli] p must be in [0, 1], got {}", p);
  return to(rand_like(x, {.dtype = is_floating(x.dtype()) ? x.dtype() : DType::f32}) < p,
            x.dtype());
}

namespace {

// u in [0, 1) in self's floating dtype (f32 for the others), self refilled from f(u).
template <typename F>
Tensor& refill(Tensor& self, const char* op, bool floating_only, F f) {
  KILN_CHECK(!floating_only || is_floating(self.dtype()), dtype,
             "[{}] expects a floating tensor, got {}", op, self.dtype());
  Tensor u = rand_like(self, {.dtype = is_floating(self.dtype()) ? self.dtype() : DType::f64});
  copy_(self, f(u));
  return self;
}

}  // namespace

Tensor& exponential_(Tensor& self, double lambd) {
  KILN_CHECK(lambd > 0, value, "[exponential_] expects lambd > 0.0, but found lambd={}", lambd);
  return refill(self, "exponential_", true,
                [&](const Tensor& u) { return neg(log1p(neg(u))) / lambd; });
}

Tensor& geometric_(Tensor& self, double p) {
  KILN_CHECK(p > 0 && p < 1, value, "[geometric_] expects p to be in (0, 1), got p={}", p);
  return refill(self, "geometric_", false, [&](const Tensor& u) {
    return clamp_min(ceil(log1p(neg(u)) / std::log1p(-p)), 1.0);
  });
}

Tensor& log_normal_(Tensor& self, double mean, double std) {
  KILN_CHECK(std > 0, value, "[log_normal_] expects std > 0.0, but found std={}", std);
  KILN_CHECK(is_floating(self.dtype()), dtype, "[log_normal_] expects a floating tensor, got {}",
             self.dtype());
  copy_(self, exp(randn_like(self) * std + mean));
  return self;
}

Tensor& cauchy_(Tensor& self, double median, double sigma) {
  return refill(self, "cauchy_", true, [&](const Tensor& u) {
    return tan((u - 0.5) * std::numbers::pi) * sigma + median;
  });
}

Tensor& random_(Tensor& self, int64_t from, int64_t to) {
  KILN_CHECK(from < to, value,
             "[random_] expects 'from' to be less than 'to', but got from={} >= to={}", from, to);
  copy_(self, randint(from, to, IntList(self.shape().begin(), self.shape().end()),
                      {.dtype = DType::i64, .device = self.device()}));
  return self;
}

Tensor& random_(Tensor& self, int64_t to) { return random_(self, 0, to); }

Tensor chain_matmul(const TensorList& matrices) { return linalg::multi_dot(matrices); }
Tensor ger(const Tensor& a, const Tensor& b) { return outer(a, b); }

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  KILN_CHECK(probs.dim() == 1 || probs.dim() == 2, shape,
             "[multinomial] prob_dist must be 1 or 2 dim, got {}", probs.meta_str());
  KILN_CHECK(is_floating(probs.dtype()), dtype,
             "[multinomial] expects floating probabilities, got {}", probs.dtype());
  int64_t k = probs.size(-1);
  KILN_CHECK(num_samples > 0, value, "[multinomial] cannot sample n_sample <= 0 samples");
  KILN_CHECK(
      replacement || num_samples <= k, value,
      "[multinomial] cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  Tensor p = probs.dim() == 1 ? unsqueeze(probs, 0) : probs;
  if (!p.is_fake()) {  // PyTorch's checks on the values: eager only
    KILN_CHECK(item<bool>(all(logical_and(p >= 0.0, isfinite(p)))), value,
               "[multinomial] probability tensor contains either inf, nan or element < 0");
    KILN_CHECK(item<bool>(all(sum(p, {-1}) > 0.0)), value,
               "[multinomial] invalid multinomial distribution (sum of "
               "probabilities <= 0)");
  }
  Tensor out;
  if (replacement) {  // inverse CDF: the first category whose cumulative share exceeds u
    Tensor cdf = cumsum(to(p, DType::f64), -1);
    cdf = cdf / narrow(cdf, -1, k - 1, 1);
    Tensor u = rand({p.size(0), num_samples}, {.dtype = DType::f64, .device = p.device()});
    out = clamp(searchsorted(cdf, u, /*right=*/true), 0, k - 1);
  } else {  // Gumbel top-k: k distinct categories, each draw proportional to p
    Tensor u = rand(IntList{p.size(0), k}, {.dtype = DType::f64, .device = p.device()});
    Tensor keys = log(to(p, DType::f64)) - log(neg(log(u)));
    out = std::get<1>(topk(keys, num_samples, -1));
  }
  return probs.dim() == 1 ? squeeze(out, 0) : out;
}

Tensor normal(const Tensor& mean, const Tensor& std) {
  if (!std.is_fake())
    KILN_CHECK(item<bool>(all(std >= 0.0)), value, "[normal] expects all elements of std >= 0.0");
  Tensor m = is_floating(mean.dtype()) ? mean : to(mean, DType::f32);
  Tensor noise = randn_like(m + zeros_like(std, {.dtype = m.dtype()}));
  return m + noise * std;
}

Tensor normal(double mean, double std, const IntList& size, TensorOptions options) {
  KILN_CHECK(std >= 0, value, "[normal] expects std >= 0.0, got {}", std);
  return randn(size, options) * std + mean;
}

}  // namespace kiln
