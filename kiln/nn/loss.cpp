#include "kiln/nn/loss.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "kiln/nn/activation.h"
#include "kiln/nn/functional.h"

namespace kiln::nn {

namespace {
Tensor reduce(const Tensor& losses, Reduction reduction, const char* op) {
  if (reduction == "mean") return mean(losses);
  if (reduction == "sum") return sum(losses);
  KILN_CHECK(reduction == "none", value, "[{}] reduction must be 'mean', 'sum' or 'none', got '{}'",
             op, reduction);
  return losses;
}
}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  KILN_CHECK(input.shape() == target.shape(), shape,
             "[mse_loss] input {} and target {} must have the same shape", input.meta_str(),
             target.meta_str());
  Tensor diff = input - target;
  return reduce(diff * diff, reduction, "mse_loss");
}

namespace {
// The checks of nll_loss and cross_entropy, naming the op the user called.
void check_class_targets(const Tensor& input, const Tensor& target, const char* op) {
  KILN_CHECK(is_floating(input.dtype()), dtype, "[{}] input must be floating, got {}", op,
             input.meta_str());
  KILN_CHECK(is_integral(target.dtype(), /*include_bool=*/false), dtype,
             "[{}] expects class indices of an integer dtype as target, got {}", op,
             target.meta_str());
  bool matches = input.dim() == 1
                     ? target.dim() == 0
                     : target.dim() == input.dim() - 1 && target.size(0) == input.size(0);
  for (int64_t d = 2; matches && d < input.dim(); ++d)
    matches = target.size(d - 1) == input.size(d);
  KILN_CHECK(matches, shape,
             "[{}] expects input [N, C, *] with target [N, *] (or [C] with []), got {} and {}", op,
             input.meta_str(), target.meta_str());
}

void check_class_weight(const Tensor& input, const Tensor& weight, const char* op) {
  int64_t classes = input.size(input.dim() == 1 ? 0 : 1);
  KILN_CHECK(!weight.defined() || (weight.dim() == 1 && weight.size(0) == classes), shape,
             "[{}] weight must be 1-D with one value per class ({}), got {}", op, classes,
             weight.meta_str());
}

// A per-class [C] tensor shaped to broadcast along input's class dim.
Tensor along_classes(const Tensor& w, const Tensor& input) {
  if (input.dim() == 1) return w;
  IntList shape(static_cast<size_t>(input.dim()), 1);
  shape[1] = w.size(0);
  return reshape(w, shape);
}
}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction,
                int64_t ignore_index, const Tensor& weight) {
  check_class_targets(input, target, "nll_loss");
  check_class_weight(input, weight, "nll_loss");
  // Rows [M, C] of log-probabilities (the class dim moved last) and their classes [M].
  int64_t c = input.size(input.dim() == 1 ? 0 : 1);
  Tensor logp = reshape(input.dim() > 2 ? movedim(input, 1, -1) : input, {-1, c});
  Tensor classes = reshape(target, {-1});
  Tensor ignored = classes == ignore_index;
  Tensor safe = masked_fill(classes, ignored, 0);  // ignored rows read class 0
  Tensor picked = reshape(gather(logp, 1, unsqueeze(safe, 1)), {-1});
  Tensor w = weight.defined() ? masked_fill(index_select(weight, 0, safe), ignored, 0)
                              : to(logical_not(ignored), picked.dtype());
  Tensor losses = masked_fill(neg(picked) * w, ignored, 0);
  if (reduction == "mean") return sum(losses) / sum(w);
  Tensor out = reduce(losses, reduction, "nll_loss");
  return reduction == "none" ? reshape(out, IntList(target.shape().begin(), target.shape().end()))
                             : out;
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction,
                     int64_t ignore_index, double label_smoothing, const Tensor& weight) {
  KILN_CHECK(is_floating(input.dtype()), dtype, "[cross_entropy] input must be floating, got {}",
             input.meta_str());
  KILN_CHECK(label_smoothing >= 0 && label_smoothing <= 1, value,
             "[cross_entropy] label_smoothing must be between 0.0 and 1.0, got {}",
             label_smoothing);
  check_class_weight(input, weight, "cross_entropy");
  int64_t class_dim = input.dim() == 1 ? 0 : 1;
  auto classes = static_cast<double>(input.size(class_dim));
  Tensor logp = log_softmax(input, class_dim);
  Tensor weighted = weight.defined() ? logp * along_classes(weight, input) : logp;
  if (is_floating(target.dtype())) {  // class probabilities
    KILN_CHECK(target.shape() == input.shape(), shape,
               "[cross_entropy] class-probability targets must be shaped like the input {}, got {}",
               input.meta_str(), target.meta_str());
    Tensor t =
        label_smoothing > 0 ? target * (1 - label_smoothing) + label_smoothing / classes : target;
    Tensor losses = neg(sum(weighted * t, {class_dim}));
    if (reduction == "mean") return sum(losses) / (static_cast<double>(input.numel()) / classes);
    return reduce(losses, reduction, "cross_entropy");
  }
  check_class_targets(input, target, "cross_entropy");
  Tensor nll = nll_loss(logp, target, reduction, ignore_index, weight);
  if (label_smoothing == 0) return nll;
  // The loss against every class, left out where the target is ignored.
  Tensor ignored = target == ignore_index;
  Tensor smooth = masked_fill(neg(sum(weighted, {class_dim})), ignored, 0);
  Tensor all_classes;
  if (reduction == "mean" && weight.defined())  // normalized by the weights taken, as nll_loss
    all_classes =
        sum(smooth) /
        sum(masked_fill(index_select(weight, 0, reshape(masked_fill(target, ignored, 0), {-1})),
                        reshape(ignored, {-1}), 0));
  else if (reduction == "mean")  // by the targets taken
    all_classes = sum(smooth) / sum(logical_not(ignored));
  else
    all_classes = reduce(smooth, reduction, "cross_entropy");
  return nll * (1 - label_smoothing) + all_classes * (label_smoothing / classes);
}

namespace {
void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  KILN_CHECK(input.shape() == target.shape(), shape,
             "[{}] input {} and target {} must have the same shape", op, input.meta_str(),
             target.meta_str());
}
}  // namespace

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_same_shape(input, target, "l1_loss");
  return reduce(abs(input - target), reduction, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  check_same_shape(input, target, "smooth_l1_loss");
  KILN_CHECK(beta >= 0, value, "[smooth_l1_loss] beta must be non-negative, got {}", beta);
  Tensor d = abs(input - target);
  if (beta == 0) return reduce(d, reduction, "smooth_l1_loss");
  return reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction, "smooth_l1_loss");
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  check_same_shape(input, target, "huber_loss");
  KILN_CHECK(delta > 0, value, "[huber_loss] delta must be positive, got {}", delta);
  Tensor d = abs(input - target);
  return reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction, "huber_loss");
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            Reduction reduction) {
  check_same_shape(input, target, "binary_cross_entropy");
  KILN_CHECK(is_floating(input.dtype()), dtype,
             "[binary_cross_entropy] input must be floating, got {}", input.meta_str());
  Tensor log_p = clamp_min(log(input), -100.0), log_q = clamp_min(log(1.0 - input), -100.0);
  Tensor losses = neg(target * log_p + (1.0 - target) * log_q);
  if (weight.defined()) losses = losses * weight;
  return reduce(losses, reduction, "binary_cross_entropy");
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight, Reduction reduction,
                                        const Tensor& pos_weight) {
  check_same_shape(input, target, "binary_cross_entropy_with_logits");
  if (wants_opmath({input, target, weight, pos_weight}))
    return in_opmath({input, target, weight, pos_weight}, [&](const TensorList& t) {
      return binary_cross_entropy_with_logits(t[0], t[1], t[2], reduction, t[3]);
    });
  // -log sigmoid(x) = log(1 + exp(-|x|)) + max(-x, 0), finite for every x.
  Tensor neg_log_sigmoid = log1p(exp(neg(abs(input)))) + clamp_min(neg(input), 0.0);
  Tensor losses = pos_weight.defined() ? (1.0 - target) * input +
                                             (1.0 + (pos_weight - 1.0) * target) * neg_log_sigmoid
                                       : (1.0 - target) * input + neg_log_sigmoid;
  if (weight.defined()) losses = losses * weight;
  return reduce(losses, reduction, "binary_cross_entropy_with_logits");
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  Tensor losses = log_target ? exp(target) * (target - input)
                             : masked_fill(target * log(target), target == 0.0, 0) - target * input;
  if (reduction == "batchmean") {
    KILN_CHECK(input.dim() > 0, shape, "[kl_div] batchmean needs a batch dim, got {}",
               input.meta_str());
    return sum(losses) / static_cast<double>(input.size(0));
  }
  return reduce(losses, reduction, "kl_div");
}

Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin,
                           Reduction reduction) {
  return reduce(clamp_min(neg(y) * (x1 - x2) + margin, 0.0), reduction, "margin_ranking_loss");
}

Tensor hinge_embedding_loss(const Tensor& x, const Tensor& y, double margin, Reduction reduction) {
  if (wants_opmath({x, y}))
    return in_opmath({x, y}, [&](const TensorList& t) {
      return hinge_embedding_loss(t[0], t[1], margin, reduction);
    });
  // PyTorch's form: a label that is neither 1 nor -1 takes both terms.
  Tensor pushed = clamp_min(neg(x) + margin, 0.0);
  Tensor losses = where(y != 1, pushed, zeros_like(x)) + where(y != -1, x, zeros_like(x));
  return reduce(losses, reduction, "hinge_embedding_loss");
}

Tensor soft_margin_loss(const Tensor& x, const Tensor& y, Reduction reduction) {
  if (wants_opmath({x, y}))
    return in_opmath({x, y},
                     [&](const TensorList& t) { return soft_margin_loss(t[0], t[1], reduction); });
  return reduce(softplus(neg(y) * x), reduction, "soft_margin_loss");
}

Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin,
                             Reduction reduction) {
  if (wants_opmath({x1, x2}))
    return in_opmath({x1, x2, y}, [&](const TensorList& t) {
      return cosine_embedding_loss(t[0], t[1], t[2], margin, reduction);
    });
  // PyTorch's form: dot / sqrt((|x1|^2 + eps) (|x2|^2 + eps)), eps = 1e-12.
  int64_t d = x1.dim() - 1;
  Tensor cos = sum(x1 * x2, {d}) / sqrt((sum(x1 * x1, {d}) + 1e-12) * (sum(x2 * x2, {d}) + 1e-12));
  Tensor losses = where(y == 1, 1.0 - cos, zeros_like(cos)) +
                  where(y == -1, clamp_min(cos - margin, 0.0), zeros_like(cos));
  return reduce(losses, reduction, "cosine_embedding_loss");
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin, double p, double eps, bool swap, Reduction reduction) {
  Tensor d_pos = pairwise_distance(anchor, positive, p, eps);
  Tensor d_neg = pairwise_distance(anchor, negative, p, eps);
  if (swap) d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps));
  return reduce(clamp_min(d_pos - d_neg + margin, 0.0), reduction, "triplet_margin_loss");
}

Tensor triplet_margin_with_distance_loss(
    const Tensor& anchor, const Tensor& positive, const Tensor& negative,
    const std::function<Tensor(const Tensor&, const Tensor&)>& distance_function, double margin,
    bool swap, Reduction reduction) {
  KILN_CHECK(margin > 0, value,
             "[triplet_margin_with_distance_loss] margin must be greater than 0, got {}", margin);
  auto distance = [&](const Tensor& a, const Tensor& b) {
    return distance_function ? distance_function(a, b) : pairwise_distance(a, b);
  };
  Tensor d_pos = distance(anchor, positive), d_neg = distance(anchor, negative);
  if (swap) d_neg = minimum(d_neg, distance(positive, negative));
  return reduce(clamp_min(d_pos - d_neg + margin, 0.0), reduction,
                "triplet_margin_with_distance_loss");
}

namespace {

// log(exp(a) + exp(b) + exp(c)) with -inf kept exact and no NaN in the gradient: where
// every term is -inf the result is -inf through a where, and the computed branch sees a
// finite shift and a positive sum.
Tensor log_add3(const Tensor& a, const Tensor& b, const Tensor& c) {
  Tensor m = maximum(a, maximum(b, c));
  Tensor dead = eq(m, -std::numeric_limits<double>::infinity());
  Tensor shift = where(dead, zeros_like(m), m).detach();
  Tensor total = exp(a - shift) + exp(b - shift) + exp(c - shift);
  Tensor value = shift + log(where(dead, ones_like(total), total));
  return where(dead, full_like(m, -std::numeric_limits<double>::infinity()), value);
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const IntList& input_lengths,
                const IntList& target_lengths, int64_t blank, Reduction reduction,
                bool zero_infinity) {
  const char* op = "ctc_loss";
  KILN_CHECK(log_probs.dim() == 3 || log_probs.dim() == 2, shape,
             "[{}] expects log_probs [T, N, C] or [T, C], got {}", op, log_probs.meta_str());
  KILN_CHECK(is_floating(log_probs.dtype()), dtype, "[{}] expects floating log_probs, got {}", op,
             log_probs.dtype());
  bool batched = log_probs.dim() == 3;
  Tensor lp = batched ? log_probs : unsqueeze(log_probs, 1);  // [T, N, C]
  int64_t steps = lp.size(0), n = lp.size(1), classes = lp.size(2);
  KILN_CHECK(static_cast<int64_t>(input_lengths.size()) == n &&
                 static_cast<int64_t>(target_lengths.size()) == n,
             shape,
             "[{}] expected input_lengths and target_lengths to have {} values, got {} and {}", op,
             n, input_lengths.size(), target_lengths.size());
  KILN_CHECK(blank >= 0 && blank < classes, value,
             "[{}] blank must be in label range, got {} for {} classes", op, blank, classes);
  int64_t longest = 0;
  for (int64_t i = 0; i < n; ++i) {
    KILN_CHECK(input_lengths[i] >= 0 && input_lengths[i] <= steps, value,
               "[{}] expected input_lengths to be in [0, {}], got {} for sample {}", op, steps,
               input_lengths[i], i);
    KILN_CHECK(target_lengths[i] >= 0, value, "[{}] target lengths must be non-negative, got {}",
               op, target_lengths[i]);
    longest = std::max(longest, target_lengths[i]);
  }
  TensorOptions io{.dtype = DType::i64, .device = lp.device()};
  // Targets as [N, longest]: padded rows as given, or cut from the concatenation.
  Tensor tgt;
  if (targets.dim() == 2 || !batched) {
    tgt = batched ? targets : reshape(targets, {1, -1});
    KILN_CHECK(tgt.size(0) == n && tgt.size(1) >= longest, shape,
               "[{}] targets {} are shorter than the target lengths", op, targets.meta_str());
    tgt = narrow(tgt, 1, 0, longest);
  } else {
    std::vector<int64_t> at(static_cast<size_t>(n * longest), 0);
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t s = 0; s < target_lengths[i]; ++s)
        at[static_cast<size_t>(i * longest + s)] = offset + s;
      offset += target_lengths[i];
    }
    KILN_CHECK(targets.numel() >= offset, shape,
               "[{}] targets {} hold fewer labels than the lengths sum to ({})", op,
               targets.meta_str(), offset);
    tgt = reshape(index_select(reshape(targets, {-1}), 0, to(from_vector(at), lp.device())),
                  {n, longest});
  }
  tgt = to(tgt, DType::i64);
  // The extended labels: blank, l1, blank, l2, ..., blank.
  int64_t len = 2 * longest + 1;
  Tensor pos = arange(0, len, 1, io);
  Tensor odd = remainder(pos, 2) == 1;
  Tensor label_at =
      longest
          ? gather(tgt, 1,
                   expand(unsqueeze(clamp(floor_divide(pos - 1, 2), 0, longest - 1), 0), {n, len}))
          : zeros({n, len}, io);
  Tensor ext = where(odd, label_at, full({n, len}, blank, io));
  Tensor skip = len > 2
                    ? cat({zeros({n, 2}, {.dtype = DType::b8, .device = lp.device()}),
                           logical_and(narrow(ext, 1, 2, len - 2) != blank,
                                       narrow(ext, 1, 2, len - 2) != narrow(ext, 1, 0, len - 2))},
                          1)
                    : zeros({n, len}, {.dtype = DType::b8, .device = lp.device()});
  Tensor emit = gather(lp, 2, expand(unsqueeze(ext, 0), {steps, n, len}));  // [T, N, L]
  double inf = std::numeric_limits<double>::infinity();
  Tensor none = full({n, len}, -inf, {.dtype = lp.dtype(), .device = lp.device()});
  Tensor first_two = pos < 2;
  std::vector<int64_t> in_len(input_lengths.begin(), input_lengths.end());
  Tensor lengths = unsqueeze(to(from_vector(in_len), lp.device()), 1);  // [N, 1]
  // t = 0: the first blank or the first label; an empty input leaves "nothing emitted".
  Tensor alpha = steps ? where(first_two, select(emit, 0, 0), none) : none;
  Tensor empty_input = where(pos == 0, zeros_like(none), none);
  alpha = where(lengths > 0, alpha, empty_input);
  auto shifted = [&](const Tensor& a, int64_t by) {
    return cat(
        {narrow(none, 1, 0, std::min(by, len)), narrow(a, 1, 0, std::max<int64_t>(len - by, 0))},
        1);
  };
  for (int64_t t = 1; t < steps; ++t) {
    Tensor next = log_add3(alpha, shifted(alpha, 1), where(skip, shifted(alpha, 2), none)) +
                  select(emit, 0, t);
    alpha = where(lengths > t, next, alpha);
  }
  // The end: the last label or the blank after it.
  std::vector<int64_t> last_at(static_cast<size_t>(n)), before_at(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    last_at[static_cast<size_t>(i)] = 2 * target_lengths[i];
    before_at[static_cast<size_t>(i)] = std::max<int64_t>(2 * target_lengths[i] - 1, 0);
  }
  Tensor last = squeeze(gather(alpha, 1, unsqueeze(to(from_vector(last_at), lp.device()), 1)), 1);
  Tensor before =
      squeeze(gather(alpha, 1, unsqueeze(to(from_vector(before_at), lp.device()), 1)), 1);
  std::vector<int64_t> tl(target_lengths.begin(), target_lengths.end());
  Tensor has_label = to(from_vector(tl), lp.device()) > 0;
  Tensor nll = neg(
      log_add3(last, where(has_label, before, full_like(before, -inf)), full_like(before, -inf)));
  // PyTorch's gradient adds exp(log_probs) over each sample's frames (a zero in value).
  Tensor frames =
      to(unsqueeze(arange(0, steps, 1, io), 1) < transpose(lengths, 0, 1), lp.dtype());  // [T, N]
  Tensor p = exp(lp);
  nll = nll + sum((p - p.detach()) * unsqueeze(frames, 2), {0, 2});
  if (zero_infinity) nll = where(isinf(nll), zeros_like(nll), nll);
  if (reduction == "mean") {
    Tensor divisor = clamp_min(to(from_vector(tl), lp.device()), 1);
    return mean(nll / to(divisor, nll.dtype()));
  }
  if (reduction == "sum") return sum(nll);
  KILN_CHECK(reduction == "none", value, "[{}] reduction must be 'none', 'mean' or 'sum', got '{}'",
             op, reduction);
  return batched ? nll : squeeze(nll, 0);
}

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, Reduction reduction,
                bool zero_infinity) {
  auto host = [](const Tensor& t) {
    std::vector<int64_t> v = to_vector<int64_t>(to(reshape(t, {-1}), DType::i64));
    return IntList(v.begin(), v.end());
  };
  return ctc_loss(log_probs, targets, host(input_lengths), host(target_lengths), blank, reduction,
                  zero_infinity);
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                        double eps, Reduction reduction) {
  Tensor losses = log_input ? exp(input) - target * input : input - target * log(input + eps);
  if (full) {  // Stirling's approximation of log(target!), where target > 1
    Tensor t = target;
    Tensor stirling = t * log(t) - t + 0.5 * log(t * (2 * std::numbers::pi));
    losses = losses + masked_fill(stirling, le(t, 1.0), 0.0);
  }
  return reduce(losses, reduction, "poisson_nll_loss");
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full,
                         double eps, Reduction reduction) {
  if (!var.is_fake())  // a data check, as PyTorch's (tracing with fake tensors skips it)
    KILN_CHECK(item<bool>(all(var >= 0.0)), value,
               "[gaussian_nll_loss] var has negative entry/entries");
  Tensor v = var;
  if (var.dim() == input.dim() - 1 && input.dim() > 0)
    v = unsqueeze(var, -1);                                        // one variance per sample
  Tensor clamped = clamp_min(v.detach(), eps) + (v - v.detach());  // clamped value, gradient of var
  Tensor diff = input - target;
  Tensor losses = 0.5 * (log(clamped) + diff * diff / clamped);
  if (full) losses = losses + 0.5 * std::log(2 * std::numbers::pi);
  return reduce(losses, reduction, "gaussian_nll_loss");
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   Reduction reduction) {
  Tensor terms = target * logsigmoid(input) + (1.0 - target) * logsigmoid(neg(input));
  if (weight.defined()) terms = terms * weight;
  Tensor losses = neg(mean(terms, {input.dim() - 1}));
  return reduce(losses, reduction, "multilabel_soft_margin_loss");
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p, double margin,
                         const Tensor& weight, Reduction reduction) {
  KILN_CHECK(p == 1 || p == 2, value,
             "[multi_margin_loss] only p == 1 and p == 2 supported, got {}", p);
  if (input.dim() == 0)  // one class: PyTorch reads a 0-dim input as [1]
    return reshape(multi_margin_loss(reshape(input, {1}), target, p, margin, weight, reduction),
                   {});
  KILN_CHECK((input.dim() == 2 && target.dim() == 1 && target.size(0) == input.size(0)) ||
                 (input.dim() == 1 && target.dim() <= 1 && target.numel() == 1),
             shape, "[multi_margin_loss] inconsistent input {} and target {}", input.meta_str(),
             target.meta_str());
  Tensor x = input.dim() == 1 ? unsqueeze(input, 0) : input, y = reshape(target, {-1, 1});
  int64_t c = x.size(1);
  Tensor at_target = gather(x, 1, y);  // [N, 1]
  Tensor hinge = clamp_min(x - at_target + margin, 0.0);
  if (p == 2) hinge = hinge * hinge;
  if (weight.defined())
    hinge = hinge * unsqueeze(index_select(weight, 0, reshape(target, {-1})), 1);
  Tensor classes = arange(0, c, 1, {.dtype = DType::i64, .device = x.device()});
  Tensor losses = sum(where(unsqueeze(classes, 0) == y, zeros_like(hinge), hinge), {1}) /
                  static_cast<double>(c);
  if (input.dim() == 1) losses = squeeze(losses, 0);
  return reduce(losses, reduction, "multi_margin_loss");
}

Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (input.dim() == 0 && target.dim() == 0)  // PyTorch reads 0-dim input and target as [1]
    return reshape(multilabel_margin_loss(reshape(input, {1}), reshape(target, {1}), reduction),
                   {});
  KILN_CHECK(input.shape() == target.shape() && input.dim() <= 2 && input.dim() >= 1, shape,
             "[multilabel_margin_loss] inconsistent input {} and target {}", input.meta_str(),
             target.meta_str());
  Tensor x = input.dim() == 1 ? unsqueeze(input, 0) : input,
         y = input.dim() == 1 ? unsqueeze(target, 0) : target;
  int64_t c = x.size(1);
  // The targets are y's entries before the first -1; is_target[n, i]: class i among them.
  Tensor valid = cumprod(to(y != -1, DType::i64), 1) > 0;  // [N, C]
  Tensor classes = arange(0, c, 1, {.dtype = DType::i64, .device = x.device()});
  Tensor is_target =
      any(logical_and(unsqueeze(valid, 2), unsqueeze(y, 2) == reshape(classes, {1, 1, c})), 1);
  // Pairs (target entry k, other class i): max(0, 1 - x[y[k]] + x[i]); a class listed
  // twice counts twice, as in PyTorch.
  Tensor at_targets = gather(x, 1, clamp(y, 0, c - 1));                             // [N, k]
  Tensor pairs = clamp_min(1.0 - unsqueeze(at_targets, 2) + unsqueeze(x, 1), 0.0);  // [N, k, i]
  Tensor chosen = logical_and(unsqueeze(valid, 2), unsqueeze(logical_not(is_target), 1));
  Tensor losses = sum(where(chosen, pairs, zeros_like(pairs)), {1, 2}) / static_cast<double>(c);
  if (input.dim() == 1) losses = squeeze(losses, 0);
  return reduce(losses, reduction, "multilabel_margin_loss");
}

}  // namespace kiln::nn
