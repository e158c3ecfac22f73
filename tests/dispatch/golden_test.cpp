// Compares kiln with results PyTorch produced (tests/golden/torch_ops.json, written by
// tools/golden/make_golden.py and committed, so no torch is needed at test time).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "golden_json.h"
#include "kiln/kiln.h"
#include "mock_cuda.h"
#include "test_util.h"

namespace kiln {
namespace {

using json = nlohmann::json;
using testing::from_json;
using testing::numbers;
using testing::scalar;

json load_golden() { return testing::load_golden("torch_ops.json"); }

// Points the module's parameters at the case's inputs from `first` on (so gradients
// reach them), checking PyTorch's names and order.
void bind_parameters(nn::Module& m, const std::vector<Tensor>& in, size_t first, const json& a) {
  auto names = a.at("names").get<std::vector<std::string>>();
  std::vector<nn::NamedTensor> slots = m.named_tensors();
  EXPECT_EQ(slots.size(), names.size());
  for (size_t i = 0; i < slots.size() && i < names.size() && first + i < in.size(); ++i) {
    EXPECT_EQ(slots[i].name, names[i]);
    *slots[i].tensor = in[first + i];
  }
  m.eval();
}

Tensor flat_cat(const TensorList& outs) {
  TensorList flat;
  for (const Tensor& t : outs)
    if (t.defined()) flat.push_back(reshape(t, {-1}));
  return cat(flat, 0);
}

// A recurrent layer or cell: the input, the states, then the parameters; its outputs
// flattened and concatenated, as the generator records them.
Tensor run_recurrent(const std::string& op, const std::vector<Tensor>& in, const json& a) {
  auto n_states = a.at("states").get<size_t>();
  int64_t input = a.at("input_size"), hidden = a.at("hidden_size");
  bool bias = a.value("bias", true);
  std::string nonlinearity = a.value("nonlinearity", std::string("tanh"));
  std::shared_ptr<nn::Module> m;
  if (op.ends_with("_cell")) {
    if (op == "rnn_cell")
      m = std::make_shared<nn::RNNCell>(input, hidden, bias, nonlinearity);
    else if (op == "lstm_cell")
      m = std::make_shared<nn::LSTMCell>(input, hidden, bias);
    else
      m = std::make_shared<nn::GRUCell>(input, hidden, bias);
  } else {
    nn::RNNOptions o{.input_size = input,
                     .hidden_size = hidden,
                     .num_layers = a.value("num_layers", int64_t{1}),
                     .nonlinearity = nonlinearity,
                     .bias = bias,
                     .batch_first = a.value("batch_first", false),
                     .bidirectional = a.value("bidirectional", false),
                     .proj_size = a.value("proj_size", int64_t{0})};
    if (op == "rnn")
      m = std::make_shared<nn::RNN>(o);
    else if (op == "lstm")
      m = std::make_shared<nn::LSTM>(o);
    else
      m = std::make_shared<nn::GRU>(o);
  }
  bind_parameters(*m, in, 1 + n_states, a);
  return flat_cat(
      (*m)(TensorList(in.begin(), in.begin() + 1 + static_cast<std::ptrdiff_t>(n_states))));
}

// Attention and transformer layers: the data (with masks at the indices the case names),
// then the parameters.
Tensor run_attention(const std::string& op, const std::vector<Tensor>& in, const json& a) {
  auto n_data = a.at("data").get<size_t>();
  nn::AttentionMasks masks;
  if (a.contains("attn_mask")) masks.attn_mask = in.at(a["attn_mask"].get<size_t>());
  if (a.contains("key_padding_mask"))
    masks.key_padding_mask = in.at(a["key_padding_mask"].get<size_t>());
  if (op == "mha") {
    nn::MultiheadAttention m({.embed_dim = a.at("embed_dim"),
                              .num_heads = a.at("num_heads"),
                              .bias = a.value("bias", true),
                              .kdim = a.value("kdim", int64_t{0}),
                              .vdim = a.value("vdim", int64_t{0}),
                              .batch_first = a.value("batch_first", false),
                              .add_bias_kv = a.value("add_bias_kv", false),
                              .add_zero_attn = a.value("add_zero_attn", false)});
    bind_parameters(m, in, n_data, a);
    auto [out, weights] = m.attend(in[0], in[1], in[2], masks, true, a.value("average", true));
    return flat_cat({out, weights});
  }
  nn::TransformerLayerOptions o{.d_model = a.at("d_model"),
                                .nhead = a.at("nhead"),
                                .dim_feedforward = a.at("dim_feedforward"),
                                .activation = a.value("activation", std::string("relu")),
                                .batch_first = a.value("batch_first", false),
                                .norm_first = a.value("norm_first", false)};
  if (op == "transformer_full") {  // masks: src's attn_mask, the tgt mask as "tgt_mask"
    nn::Transformer m(o, a.at("encoder_layers"), a.at("decoder_layers"));
    bind_parameters(m, in, n_data, a);
    nn::AttentionMasks tgt;
    if (a.contains("tgt_mask")) tgt.attn_mask = in.at(a["tgt_mask"].get<size_t>());
    return flat_cat({m.transform(in[0], in[1], masks, tgt)});
  }
  if (op == "transformer_encoder_layer") {
    nn::TransformerEncoderLayer m(o);
    bind_parameters(m, in, n_data, a);
    return flat_cat({m.encode(in[0], masks)});
  }
  nn::TransformerDecoderLayer m(o);
  bind_parameters(m, in, n_data, a);
  return flat_cat({m.decode(in[0], in[1], masks)});
}

// torch.masked: in[0] the input, in[1] the mask when given (logaddexp: two inputs, two masks).
Tensor run_masked(const std::string& op, const std::vector<Tensor>& in, const json& a) {
  std::string fn = op.substr(std::string("masked.").size());
  Tensor mask = in.size() > 1 ? in[1] : Tensor();
  IntList dims;
  if (a.contains("dim"))
    dims = a["dim"].is_array() ? a["dim"].get<IntList>() : IntList{a["dim"].get<int64_t>()};
  int64_t dim = dims.empty() ? -1 : dims[0];
  bool keepdim = a.value("keepdim", false);
  std::optional<DType> dtype;
  if (a.contains("dtype")) dtype = dtype_from_string(a["dtype"].get<std::string>());
  std::optional<int64_t> opt_dim = a.contains("dim") ? std::optional<int64_t>(dim) : std::nullopt;
  double ord = a.contains("ord") ? scalar(a["ord"]).to_double() : 2.0;
  if (fn == "sum") return masked::sum(in[0], dims, keepdim, dtype, mask);
  if (fn == "prod") return masked::prod(in[0], dims, keepdim, dtype, mask);
  if (fn == "amax") return masked::amax(in[0], dims, keepdim, dtype, mask);
  if (fn == "amin") return masked::amin(in[0], dims, keepdim, dtype, mask);
  if (fn == "argmax") return masked::argmax(in[0], opt_dim, keepdim, dtype, mask);
  if (fn == "argmin") return masked::argmin(in[0], opt_dim, keepdim, dtype, mask);
  if (fn == "mean") return masked::mean(in[0], dims, keepdim, dtype, mask);
  if (fn == "median") return masked::median(in[0], dim, keepdim, dtype, mask);
  if (fn == "logsumexp") return masked::logsumexp(in[0], dims, keepdim, dtype, mask);
  if (fn == "norm") return masked::norm(in[0], ord, dims, keepdim, dtype, mask);
  if (fn == "var" || fn == "std") {
    auto f = fn == "var" ? masked::var : masked::std;
    return f(in[0], dims, a.value("unbiased", false), keepdim, dtype, mask);
  }
  if (fn == "cumsum") return masked::cumsum(in[0], dim, dtype, mask);
  if (fn == "cumprod") return masked::cumprod(in[0], dim, dtype, mask);
  if (fn == "softmax") return masked::softmax(in[0], dim, dtype, mask);
  if (fn == "log_softmax") return masked::log_softmax(in[0], dim, dtype, mask);
  if (fn == "softmin") return masked::softmin(in[0], dim, dtype, mask);
  if (fn == "normalize")
    return masked::normalize(in[0], ord, dim, a.value("eps", 1e-12), dtype, mask);
  if (fn == "logaddexp") return masked::logaddexp(in[0], in[1], dtype, in[2], in[3]);
  ADD_FAILURE() << "no golden dispatch for " << op;
  return {};
}

// The indexing, stacking and statistics composites.
Tensor run_composite(const std::string& op, const std::vector<Tensor>& in, const json& a) {
  auto opt_int = [&](const char* key) {
    return a.contains(key) ? std::optional<int64_t>(a[key].get<int64_t>()) : std::nullopt;
  };
  auto joined = [](const TensorList& parts) {
    TensorList flat;
    for (const Tensor& t : parts) flat.push_back(reshape(t, {-1}));
    return cat(flat, 0);
  };
  if (op == "take") return take(in[0], in[1]);
  if (op == "take_along_dim") return take_along_dim(in[0], in[1], opt_int("dim"));
  if (op == "index" || op == "index_put") {
    std::string pattern =
        a.at("pattern");  // i: an index input, ':' a full slice, a: arange(rows)[:, None]
    std::vector<Tensor> idx;
    size_t k = 1;
    for (char c : pattern) {
      if (c == ':')
        idx.emplace_back();
      else if (c == 'a')
        idx.push_back(unsqueeze(arange(in[0].size(0)), 1));
      else
        idx.push_back(in[k++]);
    }
    if (op == "index") return index(in[0], idx);
    return index_put(in[0], idx, in[k], a.value("accumulate", false));
  }
  if (op == "masked_scatter") return masked_scatter(in[0], in[1], in[2]);
  if (op == "unfold") return unfold(in[0], a.at("dim"), a.at("size"), a.at("step"));
  if (op == "select_scatter") return select_scatter(in[0], in[1], a.at("dim"), a.at("index"));
  if (op == "slice_scatter")
    return slice_scatter(in[0], in[1], a.at("dim"), opt_int("start"), opt_int("end"),
                         a.value("step", int64_t{1}));
  if (op == "diagonal_scatter")
    return diagonal_scatter(in[0], in[1], a.value("offset", int64_t{0}),
                            a.value("dim1", int64_t{0}), a.value("dim2", int64_t{1}));
  if (op == "diag_embed")
    return diag_embed(in[0], a.value("offset", int64_t{0}), a.value("dim1", int64_t{-2}),
                      a.value("dim2", int64_t{-1}));
  if (op == "diagflat") return diagflat(in[0], a.value("offset", int64_t{0}));
  if (op == "scatter_reduce")
    return scatter_reduce(in[0], a.at("dim"), in[1], in[2], a.at("reduce"), a.at("include_self"));
  if (op == "index_reduce")
    return index_reduce(in[0], a.at("dim"), in[1], in[2], a.at("reduce"), a.at("include_self"));
  if (op == "put") return put(in[0], in[1], in[2], a.at("accumulate"));
  TensorList all(in.begin(), in.end());
  if (op == "hstack") return hstack(all);
  if (op == "vstack") return vstack(all);
  if (op == "row_stack") return row_stack(all);
  if (op == "dstack") return dstack(all);
  if (op == "column_stack") return column_stack(all);
  if (op == "atleast_1d") return atleast_1d(in[0]);
  if (op == "atleast_2d") return atleast_2d(in[0]);
  if (op == "atleast_3d") return atleast_3d(in[0]);
  if (op == "tensor_split") {
    int64_t dim = a.value("dim", int64_t{0});
    if (a.contains("indices")) return joined(tensor_split(in[0], a["indices"].get<IntList>(), dim));
    return joined(tensor_split(in[0], a.at("sections").get<int64_t>(), dim));
  }
  if (op == "hsplit") return joined(hsplit(in[0], a.at("sections").get<int64_t>()));
  if (op == "vsplit") return joined(vsplit(in[0], a.at("sections").get<int64_t>()));
  if (op == "unflatten") return unflatten(in[0], a.at("dim"), a.at("sizes").get<IntList>());
  if (op == "ldexp") return ldexp(in[0], in[1]);
  if (op == "sgn") return sgn(in[0]);
  if (op == "positive") return positive(in[0]);
  if (op == "quantile" || op == "nanquantile") {
    auto f = op == "quantile"
                 ? static_cast<Tensor (*)(const Tensor&, const Tensor&, std::optional<int64_t>,
                                          bool, const std::string&)>(quantile)
                 : static_cast<Tensor (*)(const Tensor&, const Tensor&, std::optional<int64_t>,
                                          bool, const std::string&)>(nanquantile);
    std::string how = a.value("interpolation", std::string("linear"));
    if (in.size() > 1) return f(in[0], in[1], opt_int("dim"), a.value("keepdim", false), how);
    double q = a.at("q");
    return op == "quantile" ? quantile(in[0], q, opt_int("dim"), a.value("keepdim", false), how)
                            : nanquantile(in[0], q, opt_int("dim"), a.value("keepdim", false), how);
  }
  if (op == "fft_fftshift") return fft::fftshift(in[0], a.value("dim", IntList{}));
  if (op == "fft_ifftshift") return fft::ifftshift(in[0], a.value("dim", IntList{}));
  if (op == "histogramdd" || op == "histogramdd_edges") {
    std::pair<Tensor, TensorList> h;
    if (a.value("edges", false)) {
      h = histogramdd(in[0], TensorList(in.begin() + 1, in.end()));
    } else {
      h = histogramdd(in[0], a.at("bins").get<IntList>(), a.value("range", std::vector<double>{}),
                      a.value("weight", false) ? in[1] : Tensor(), a.value("density", false));
    }
    return op == "histogramdd" ? h.first : cat(h.second, 0);
  }
  if (op.starts_with("svd_lowrank") || op.starts_with("pca_lowrank")) {
    auto [u, s, v] = op.starts_with("svd") ? svd_lowrank(in[0], a.at("q").get<int64_t>())
                                           : pca_lowrank(in[0], a.at("q").get<int64_t>());
    return op.ends_with("_S") ? s : matmul(matmul(u, diag(s)), transpose(v, 0, 1));
  }
  if (op == "nanmedian") return nanmedian(in[0]);
  if (op == "nanmedian_dim_values" || op == "nanmedian_dim_indices") {
    auto [v, i] = nanmedian(in[0], a.at("dim"));
    return op == "nanmedian_dim_values" ? v : i;
  }
  if (op == "mode_values" || op == "mode_indices") {
    auto [v, i] = mode(in[0], a.at("dim"), a.value("keepdim", false));
    return op == "mode_values" ? v : i;
  }
  if (op == "cov")
    return cov(in[0], a.value("correction", int64_t{1}), in.size() > 1 ? in[1] : Tensor(),
               in.size() > 2 ? in[2] : Tensor());
  if (op == "corrcoef") return corrcoef(in[0]);
  if (op == "trapezoid") {
    if (in.size() > 1) return trapezoid(in[0], in[1], a.value("dim", int64_t{-1}));
    return trapezoid(in[0], a.value("dx", 1.0), a.value("dim", int64_t{-1}));
  }
  if (op == "cumulative_trapezoid")
    return cumulative_trapezoid(in[0], a.value("dx", 1.0), a.value("dim", int64_t{-1}));
  if (op == "vander") return vander(in[0], opt_int("n"), a.value("increasing", false));
  if (op == "logspace") return logspace(a.at("start"), a.at("end"), a.at("steps"), a.at("base"));
  if (op == "embedding_fn") {
    std::optional<double> max_norm;
    if (a.contains("max_norm")) max_norm = a["max_norm"].get<double>();
    Tensor w = max_norm ? clone(in[1]) : in[1];  // max_norm rewrites the weight
    return nn::embedding(in[0], w, opt_int("padding_idx"), max_norm);
  }
  if (op == "embedding_bag")
    return nn::embedding_bag(in[0], in[1],
                             {.mode = a.at("mode"),
                              .offsets = in.size() > 2 ? in[2] : Tensor(),
                              .per_sample_weights = in.size() > 3 ? in[3] : Tensor(),
                              .padding_idx = opt_int("padding_idx"),
                              .include_last_offset = a.value("include_last_offset", false)});
  if (op == "instance_norm") {
    if (!a.value("use_input_stats", true))
      return nn::instance_norm(in[0], in[1], in[2], Tensor(), Tensor(), false);
    return nn::instance_norm(in[0], Tensor(), Tensor(), in.size() > 1 ? in[1] : Tensor(),
                             in.size() > 2 ? in[2] : Tensor());
  }
  if (op == "local_response_norm")
    return nn::local_response_norm(in[0], a.at("size"), a.value("alpha", 1e-4),
                                   a.value("beta", 0.75), a.value("k", 1.0));
  if (op == "unfold_im2col" || op == "fold") {
    auto ints = [&](const char* key, IntList fallback) {
      return a.contains(key) ? a[key].get<IntList>() : fallback;
    };
    IntList k = a.at("kernel_size"), d = ints("dilation", {1}), p = ints("padding", {0}),
            st = ints("stride", {1});
    if (op == "fold") return nn::fold(in[0], a.at("output_size").get<IntList>(), k, d, p, st);
    return nn::unfold(in[0], k, d, p, st);
  }
  if (op == "multi_margin_loss")
    return nn::multi_margin_loss(in[0], in[1], a.value("p", int64_t{1}), a.value("margin", 1.0),
                                 in.size() > 2 ? in[2] : Tensor(),
                                 a.value("reduction", std::string("mean")));
  if (op == "multilabel_margin_loss")
    return nn::multilabel_margin_loss(in[0], in[1], a.value("reduction", std::string("mean")));
  if (op == "affine_grid")
    return nn::affine_grid(in[0], a.at("size").get<IntList>(), a.at("align_corners"));
  if (op == "grid_sample")
    return nn::grid_sample(in[0], in[1], a.at("mode"), a.at("padding_mode"), a.at("align_corners"));
  if (op == "linalg_det") return linalg::det(in[0]);
  if (op == "linalg_slogdet_sign") return linalg::slogdet(in[0]).first;
  if (op == "linalg_slogdet_logabs") return linalg::slogdet(in[0]).second;
  if (op == "logdet") return logdet(in[0]);
  if (op == "linalg_inv") return linalg::inv(in[0]);
  if (op == "linalg_solve") return linalg::solve(in[0], in[1]);
  if (op == "linalg_lu_factor_lu") return linalg::lu_factor(in[0]).first;
  if (op == "linalg_lu_solve")
    return linalg::lu_solve(in[0], in[1], in[2], a.at("left"), a.at("adjoint"));
  if (op == "lu_solve") return lu_solve(in[0], in[1], in[2]);
  if (op == "lu_unpack_p") return std::get<0>(lu_unpack(in[0], in[1]));
  if (op == "lu_unpack_l") return std::get<1>(lu_unpack(in[0], in[1]));
  if (op == "lu_unpack_u") return std::get<2>(lu_unpack(in[0], in[1]));
  if (op == "linalg_lu_factor_ex_info") return std::get<2>(linalg::lu_factor_ex(in[0]));
  if (op == "linalg_cholesky_ex_info") return linalg::cholesky_ex(in[0]).second;
  if (op == "linalg_cholesky_ex_l") return linalg::cholesky_ex(in[0]).first;
  if (op == "linalg_inv_ex_info") return linalg::inv_ex(in[0]).second;
  if (op == "linalg_inv_ex") return linalg::inv_ex(in[0]).first;
  if (op == "linalg_solve_ex") return linalg::solve_ex(in[0], in[1]).first;
  if (op == "geqrf_a") return geqrf(in[0]).first;
  if (op == "geqrf_tau") return geqrf(in[0]).second;
  if (op == "linalg_householder_product") return linalg::householder_product(in[0], in[1]);
  if (op == "ormqr") return ormqr(in[0], in[1], in[2], a.at("left"), a.at("transpose"));
  if (op == "linalg_tensorinv") return linalg::tensorinv(in[0], a.at("ind"));
  if (op == "linalg_tensorsolve")
    return a.contains("dims") ? linalg::tensorsolve(in[0], in[1], a.at("dims").get<IntList>())
                              : linalg::tensorsolve(in[0], in[1]);
  if (op == "linalg_lu_factor_pivots") return linalg::lu_factor(in[0]).second;
  if (op == "linalg_lu_p") return std::get<0>(linalg::lu(in[0]));
  if (op == "linalg_lu_l") return std::get<1>(linalg::lu(in[0]));
  if (op == "linalg_lu_u") return std::get<2>(linalg::lu(in[0]));
  if (op == "linalg_solve_triangular")
    return linalg::solve_triangular(in[0], in[1], a.at("upper"), a.value("left", true),
                                    a.value("unitriangular", false));
  if (op == "linalg_cholesky") return linalg::cholesky(in[0], a.value("upper", false));
  if (op == "linalg_qr_q") return linalg::qr(in[0], a.at("mode")).first;
  if (op == "linalg_qr_r") return linalg::qr(in[0], a.at("mode")).second;
  if (op == "matrix_power") return matrix_power(in[0], a.at("n"));
  if (op == "linalg_matrix_norm") {
    std::string ord = a.at("ord");
    return linalg::matrix_norm(in[0], ord, a.value("keepdim", false));
  }
  if (op == "linalg_eigh_values") return linalg::eigh(in[0], a.at("uplo")).first;
  if (op == "linalg_eigh_vectors") return linalg::eigh(in[0], a.at("uplo")).second;
  if (op == "linalg_eigvalsh") return linalg::eigvalsh(in[0]);
  if (op == "linalg_svd_u") return std::get<0>(linalg::svd(in[0], a.at("full_matrices")));
  if (op == "linalg_svd_s") return std::get<1>(linalg::svd(in[0], a.at("full_matrices")));
  if (op == "linalg_svd_vh") return std::get<2>(linalg::svd(in[0], a.at("full_matrices")));
  if (op == "linalg_svdvals") return linalg::svdvals(in[0]);
  if (op == "svd_v") return std::get<2>(svd(in[0], a.at("some"), a.value("compute_uv", true)));
  auto opt = [&](const char* key) {
    return a.contains(key) ? std::optional<double>(a.at(key)) : std::nullopt;
  };
  if (op == "linalg_pinv")
    return linalg::pinv(in[0], opt("atol"), opt("rtol"), a.value("hermitian", false));
  if (op == "pinverse") return pinverse(in[0], a.at("rcond"));
  if (op == "linalg_matrix_rank")
    return linalg::matrix_rank(in[0], opt("atol"), opt("rtol"), a.value("hermitian", false));
  if (op.starts_with("linalg_lstsq_")) {
    linalg::Lstsq r = linalg::lstsq(in[0], in[1], opt("rcond"), a.at("driver"));
    if (op == "linalg_lstsq_solution") return r.solution;
    if (op == "linalg_lstsq_residuals") return r.residuals;
    if (op == "linalg_lstsq_rank") return r.rank;
    return r.singular_values;
  }
  if (op == "linalg_cond") return linalg::cond(in[0], a.at("p"));
  if (op == "linalg_multi_dot") return linalg::multi_dot(TensorList(in.begin(), in.end()));
  auto unary = [&](Tensor (*f)(const Tensor&)) { return f(in[0]); };
  auto binary = [&](Tensor (*f)(const Tensor&, const Tensor&)) { return f(in[0], in[1]); };
  if (op == "arccos") return unary(arccos);
  if (op == "arcsin") return unary(arcsin);
  if (op == "arctan") return unary(arctan);
  if (op == "arcsinh") return unary(arcsinh);
  if (op == "arctanh") return unary(arctanh);
  if (op == "arccosh") return unary(arccosh);
  if (op == "arctan2") return binary(arctan2);
  if (op == "greater") return binary(greater);
  if (op == "greater_equal") return binary(greater_equal);
  if (op == "less") return binary(less);
  if (op == "less_equal") return binary(less_equal);
  if (op == "not_equal") return binary(not_equal);
  if (op == "multiply") return binary(multiply);
  if (op == "divide")
    return a.contains("rounding_mode")
               ? divide(in[0], in[1], a.at("rounding_mode").get<std::string>())
               : divide(in[0], in[1]);
  if (op == "true_divide") return binary(true_divide);
  if (op == "subtract") return subtract(in[0], in[1]);
  if (op == "rsub") return rsub(in[0], in[1], a.value("alpha", 1.0));
  if (op == "fmax") return binary(fmax);
  if (op == "fmin") return binary(fmin);
  if (op == "concat") return concat(TensorList(in.begin(), in.end()));
  if (op == "msort") return unary(msort);
  if (op == "ravel") return unary(ravel);
  if (op == "inner") return binary(inner);
  if (op == "vdot") return binary(vdot);
  if (op == "broadcast_to") return broadcast_to(in[0], a.at("shape").get<IntList>());
  if (op == "isposinf") return unary(isposinf);
  if (op == "isneginf") return unary(isneginf);
  if (op == "isreal") return unary(isreal);
  if (op == "argwhere") return unary(argwhere);
  if (op == "gcd") return binary(gcd);
  if (op == "lcm") return binary(lcm);
  if (op == "i0") return unary(i0);
  if (op == "isin") return isin(in[0], in[1], false, a.value("invert", false));
  if (op == "combinations") return combinations(in[0], a.at("r"), a.at("with_replacement"));
  if (op == "addr")
    return addr(in[0], in[1], in[2], a.at("beta").get<double>(), a.at("alpha").get<double>());
  if (op == "addbmm")
    return addbmm(in[0], in[1], in[2], a.at("beta").get<double>(), a.at("alpha").get<double>());
  if (op == "renorm") return renorm(in[0], a.at("p"), a.at("dim"), a.at("maxnorm"));
  if (op == "dist") return distance(in[0], in[1], scalar(a.at("p")).to_double());
  if (op == "frobenius_norm") return frobenius_norm(in[0], a.at("dim").get<IntList>());
  if (op == "nuclear_norm") return nuclear_norm(in[0]);
  if (op.ends_with("_window")) {
    TensorOptions o{
        .dtype = a.contains("dtype") ? dtype_from_string(a.at("dtype").get<std::string>()) : f32};
    int64_t n = a.at("n");
    bool periodic = a.at("periodic");
    if (op == "hann_window") return hann_window(n, periodic, o);
    if (op == "blackman_window") return blackman_window(n, periodic, o);
    if (op == "bartlett_window") return bartlett_window(n, periodic, o);
    if (op == "kaiser_window") return kaiser_window(n, periodic, a.value("beta", 12.0), o);
    return hamming_window(n, periodic, a.value("alpha", 0.54), a.value("beta", 0.46), o);
  }
  if (op == "unique_consecutive_values") return std::get<0>(unique_consecutive(in[0]));
  if (op == "unique_consecutive_inverse") return std::get<1>(unique_consecutive(in[0], true));
  if (op == "unique_consecutive_counts") return std::get<2>(unique_consecutive(in[0], false, true));
  if (op == "repeat_interleave") return repeat_interleave(in[0], in[1], opt_int("dim"));
  if (op == "repeat_interleave_int")
    return repeat_interleave(in[0], a.at("repeats").get<int64_t>(), opt_int("dim"));
  if (op == "repeat_interleave_index") return repeat_interleave(in[0]);
  auto opt_dims = [&]() {
    return a.contains("dim") ? std::optional<IntList>(a.at("dim").get<IntList>()) : std::nullopt;
  };
  if (op == "linalg_norm")
    return linalg::norm(
        in[0],
        a.contains("ord") ? std::optional<double>(scalar(a.at("ord")).to_double()) : std::nullopt,
        opt_dims(), a.value("keepdim", false));
  if (op == "linalg_norm_str")
    return linalg::norm(in[0], a.at("ord").get<std::string>(), opt_dims(),
                        a.value("keepdim", false));
  if (op == "norm") return norm(in[0], scalar(a.at("p")).to_double(), a.value("dim", IntList{}));
  if (op == "norm_str") return norm(in[0], a.at("p").get<std::string>(), a.value("dim", IntList{}));
  if (op == "matrix_exp") return matrix_exp(in[0]);
  if (op == "cholesky_solve") return cholesky_solve(in[0], in[1], a.at("upper"));
  if (op == "cholesky_inverse") return cholesky_inverse(in[0], a.at("upper"));
  if (op == "triangular_solve")
    return triangular_solve(in[0], in[1], a.at("upper"), a.at("transpose")).first;
  if (op == "linalg_vecdot") return linalg::vecdot(in[0], in[1]);
  return Tensor();
}

// Runs one recorded case through kiln's functional API by name.
Tensor run(const std::string& op, const std::vector<Tensor>& in, const json& a) {
  if (op == "add") return add(in[0], in[1], a.contains("alpha") ? scalar(a["alpha"]) : Scalar(1));
  if (op == "add_scalar") return add(in[0], Scalar(a.at("other").get<double>()));
  if (op == "add_int_scalar") return add(in[0], Scalar(a.at("other").get<int64_t>()));
  if (op == "mul_scalar") return mul(in[0], scalar(a.at("other")));
  if (op == "div_scalar") return div(in[0], scalar(a.at("other")));
  if (op == "pow_scalar") return pow(in[0], scalar(a.at("exponent")));
  if (op == "sub") return sub(in[0], in[1]);
  if (op == "neg") return neg(in[0]);
  if (op == "abs") return abs(in[0]);
  if (op == "relu") return relu(in[0]);
  if (op == "sqrt") return sqrt(in[0]);
  if (op == "log") return log(in[0]);
  if (op == "erf") return erf(in[0]);
  if (op == "logical_not") return logical_not(in[0]);
  if (op == "log1p") return log1p(in[0]);
  if (op == "expm1") return expm1(in[0]);
  if (op == "log2") return log2(in[0]);
  if (op == "tan") return tan(in[0]);
  if (op == "atan") return atan(in[0]);
  if (op == "asin") return asin(in[0]);
  if (op == "acos") return acos(in[0]);
  if (op == "sinh") return sinh(in[0]);
  if (op == "cosh") return cosh(in[0]);
  if (op == "reciprocal") return reciprocal(in[0]);
  if (op == "floor") return floor(in[0]);
  if (op == "ceil") return ceil(in[0]);
  if (op == "round") return round(in[0]);
  if (op == "trunc") return trunc(in[0]);
  if (op == "sign") return sign(in[0]);
  if (op == "argmin") {
    std::optional<int64_t> dim;
    if (a.contains("dim")) dim = a["dim"].get<int64_t>();
    return argmin(in[0], dim, a.value("keepdim", false));
  }
  if (op == "std")
    return kiln::std(in[0], a.at("dim").get<IntList>(), a.value("correction", 1),
                     a.value("keepdim", false));
  if (op == "logsumexp")
    return logsumexp(in[0], a.at("dim").get<IntList>(), a.value("keepdim", false));
  if (op == "softplus")
    return nn::softplus(in[0], a.value("beta", 1.0), a.value("threshold", 20.0));
  if (op == "leaky_relu") return nn::leaky_relu(in[0], a.value("negative_slope", 0.01));
  if (op == "elu") return nn::elu(in[0], a.value("alpha", 1.0));
  if (op == "selu") return nn::selu(in[0]);
  if (op == "hardtanh")
    return nn::hardtanh(in[0], a.value("min_val", -1.0), a.value("max_val", 1.0));
  if (op == "relu6") return nn::relu6(in[0]);
  if (op == "hardsigmoid") return nn::hardsigmoid(in[0]);
  if (op == "hardswish") return nn::hardswish(in[0]);
  if (op == "mish") return nn::mish(in[0]);
  if (op == "logsigmoid") return nn::logsigmoid(in[0]);
  if (op == "l1_loss") return nn::l1_loss(in[0], in[1], a.at("reduction").get<std::string>());
  if (op == "smooth_l1_loss")
    return nn::smooth_l1_loss(in[0], in[1], a.at("reduction").get<std::string>(),
                              a.value("beta", 1.0));
  if (op == "huber_loss")
    return nn::huber_loss(in[0], in[1], a.at("reduction").get<std::string>(),
                          a.value("delta", 1.0));
  if (op == "binary_cross_entropy")
    return nn::binary_cross_entropy(in[0], in[1], a.value("weight", false) ? in[2] : Tensor(),
                                    a.at("reduction").get<std::string>());
  if (op == "bce_with_logits")
    return nn::binary_cross_entropy_with_logits(in[0], in[1], Tensor(),
                                                a.at("reduction").get<std::string>(),
                                                a.value("pos_weight", false) ? in[2] : Tensor());
  if (op == "kl_div")
    return nn::kl_div(in[0], in[1], a.at("reduction").get<std::string>(),
                      a.value("log_target", false));
  if (op == "nll_loss") return nn::nll_loss(in[0], in[1], a.at("reduction").get<std::string>());
  if (op == "logical_and") return logical_and(in[0], in[1]);
  if (op == "logical_or") return logical_or(in[0], in[1]);
  if (op == "logical_xor") return logical_xor(in[0], in[1]);
  if (op == "isnan") return isnan(in[0]);
  if (op == "isinf") return isinf(in[0]);
  if (op == "isfinite") return isfinite(in[0]);
  if (op == "nan_to_num") {
    auto opt = [&](const char* key) -> std::optional<double> {
      return a.contains(key) ? std::optional<double>(a[key].get<double>()) : std::nullopt;
    };
    return nan_to_num(in[0], a.value("nan", 0.0), opt("posinf"), opt("neginf"));
  }
  if (op == "tril") return tril(in[0], a.at("diagonal").get<int64_t>());
  if (op == "triu") return triu(in[0], a.at("diagonal").get<int64_t>());
  if (op == "flip") return flip(in[0], a.at("dims").get<IntList>());
  if (op == "repeat") return repeat(in[0], a.at("repeats").get<IntList>());
  if (op == "one_hot") return one_hot(in[0], a.at("num_classes").get<int64_t>());
  if (op == "outer") return outer(in[0], in[1]);
  if (op == "dot") return dot(in[0], in[1]);
  if (op == "addcmul") return addcmul(in[0], in[1], in[2], scalar(a.at("value")));
  if (op == "addcdiv") return addcdiv(in[0], in[1], in[2], scalar(a.at("value")));
  if (op == "lerp") return lerp(in[0], in[1], scalar(a.at("weight")));
  if (op == "lerp_tensor") return lerp(in[0], in[1], in[2]);
  if (op == "eye") {
    std::optional<int64_t> m;
    if (a.contains("m")) m = a["m"].get<int64_t>();
    TensorOptions o;
    if (a.contains("dtype")) o.dtype = dtype_from_string(a["dtype"].get<std::string>());
    return eye(a.at("n").get<int64_t>(), m, o);
  }
  if (op == "linspace") {
    TensorOptions o;
    if (a.contains("dtype")) o.dtype = dtype_from_string(a["dtype"].get<std::string>());
    return linspace(a.at("start").get<double>(), a.at("end").get<double>(),
                    a.at("steps").get<int64_t>(), o);
  }
  if (op == "diagonal")
    return diagonal(in[0], a.at("offset").get<int64_t>(), a.at("dim1").get<int64_t>(),
                    a.at("dim2").get<int64_t>());
  if (op == "diag") return diag(in[0], a.at("offset").get<int64_t>());
  if (op == "trace") return trace(in[0]);
  if (op == "unbind") return unbind(in[0], a.at("dim").get<int64_t>())[a.at("index").get<size_t>()];
  if (op == "movedim")
    return movedim(in[0], a.at("source").get<int64_t>(), a.at("destination").get<int64_t>());
  if (op == "vector_norm")
    return vector_norm(in[0], scalar(a.at("ord")).to_double(), a.at("dim").get<IntList>(),
                       a.value("keepdim", false));
  if (op == "normalize")
    return normalize(in[0], a.at("p").get<double>(), a.at("dim").get<int64_t>());
  if (op == "clamp") {
    auto bound = [&](const char* key) -> std::optional<Scalar> {
      return a.at(key).is_null() ? std::nullopt : std::optional<Scalar>(scalar(a[key]));
    };
    return clamp(in[0], bound("min"), bound("max"));
  }
  if (op == "minimum") return minimum(in[0], in[1]);
  if (op == "ne") return ne(in[0], in[1]);
  if (op == "le") return le(in[0], in[1]);
  if (op == "to") return to(in[0], dtype_from_string(a.at("dtype").get<std::string>()));
  if (op == "sum_all") return sum(in[0]);
  if (op == "mean_all") return mean(in[0]);
  if (op == "var_all") return var(in[0]);
  if (op == "amin") return amin(in[0], a.at("dim").get<IntList>(), a.value("keepdim", false));
  if (op == "amax_all") return amax(in[0]);
  if (op == "max_all") return max(in[0]);
  if (op == "argmax_all") return argmax(in[0]);
  if (op == "max_dim" || op == "min_dim") {
    int64_t dim = a.at("dim").get<int64_t>();
    bool keepdim = a.value("keepdim", false);
    auto [values, indices] = op == "max_dim" ? max(in[0], dim, keepdim) : min(in[0], dim, keepdim);
    return a.at("index").get<int>() == 0 ? values : indices;
  }
  if (op == "stack") return stack({in[0], in[1]}, a.at("dim").get<int64_t>());
  if (op == "scatter_add") return scatter_add(in[0], a.at("dim").get<int64_t>(), in[1], in[2]);
  if (op == "arange")
    return arange(scalar(a.at("start")), scalar(a.at("end")), scalar(a.at("step")));
  if (op == "full") {
    TensorOptions o;
    if (a.contains("dtype")) o.dtype = dtype_from_string(a["dtype"].get<std::string>());
    return full(a.at("size").get<IntList>(), scalar(a.at("value")), o);
  }
  if (op == "chunk_sizes") {
    std::vector<int64_t> sizes;
    for (const Tensor& c : chunk(in[0], a.at("chunks").get<int64_t>())) sizes.push_back(c.numel());
    return from_vector(sizes, {static_cast<int64_t>(sizes.size())});
  }
  if (op == "slice")
    return slice(in[0], a.at("dim").get<int64_t>(), a.at("start").get<int64_t>(),
                 a.at("end").get<int64_t>(), a.at("step").get<int64_t>());
  if (op == "squeeze_dim") return squeeze(in[0], a.at("dim").get<int64_t>());
  if (op == "flatten") return flatten(in[0]);
  if (op == "sum_dtype")
    return sum(in[0], {}, false, dtype_from_string(a.at("dtype").get<std::string>()));
  if (op == "min_all") return min(in[0]);
  if (op == "sub_alpha") return sub(in[0], in[1], scalar(a.at("alpha")));
  if (op == "sin") return sin(in[0]);
  if (op == "cos") return cos(in[0]);
  if (op == "gelu_backward") return gelu_backward(in[0], in[1], a.value("approximate", "none"));
  if (op == "threshold_backward")
    return threshold_backward(in[0], in[1], scalar(a.at("threshold")));
  if (op == "softmax_backward") return softmax_backward(in[0], in[1], a.at("dim").get<int64_t>());
  if (op == "log_softmax_backward")
    return log_softmax_backward(in[0], in[1], a.at("dim").get<int64_t>());
  if (op == "eq_scalar") return eq(in[0], scalar(a.at("other")));
  if (op == "gt_scalar") return gt(in[0], scalar(a.at("other")));
  if (op == "reshape") return reshape(in[0], a.at("shape").get<IntList>());
  if (op == "view") return view(in[0], a.at("shape").get<IntList>());
  if (op == "t_view") return view(t(in[0]), a.at("shape").get<IntList>());
  if (op == "t_reshape") return reshape(t(in[0]), a.at("shape").get<IntList>());
  if (op == "expand") return expand(in[0], a.at("shape").get<IntList>());
  if (op == "permute") return permute(in[0], a.at("dims").get<IntList>());
  if (op == "transpose") {
    IntList d = a.at("dims").get<IntList>();
    return transpose(in[0], d[0], d[1]);
  }
  if (op == "unsqueeze") return unsqueeze(in[0], a.at("dim").get<int64_t>());
  if (op == "squeeze_all") return squeeze(in[0]);
  if (op == "select")
    return select(in[0], a.at("dim").get<int64_t>(), a.at("index").get<int64_t>());
  if (op == "narrow")
    return narrow(in[0], a.at("dim").get<int64_t>(), a.at("start").get<int64_t>(),
                  a.at("length").get<int64_t>());
  if (op == "split_sizes" || op == "split_list") {
    TensorList parts = op == "split_sizes" ? split(in[0], a.at("size").get<int64_t>())
                                           : split(in[0], a.at("sizes").get<IntList>());
    std::vector<int64_t> sizes;
    for (const Tensor& p : parts) sizes.push_back(p.numel());
    return from_vector(sizes, {static_cast<int64_t>(sizes.size())});
  }
  if (op == "flatten_range")
    return flatten(in[0], a.at("start").get<int64_t>(), a.at("end").get<int64_t>());
  if (op == "as_strided")
    return as_strided(in[0], a.at("size").get<IntList>(), a.at("stride").get<IntList>(),
                      a.at("offset").get<int64_t>());
  if (op == "mm") return mm(in[0], in[1]);
  if (op == "bmm") return bmm(in[0], in[1]);
  if (op == "layer_norm_plain")
    return layer_norm(in[0], a.at("shape").get<IntList>(), Tensor(), Tensor(),
                      a.value("eps", 1e-5));
  if (op == "zeros") return zeros(a.at("size").get<IntList>());
  if (op == "ones") return ones(a.at("size").get<IntList>());
  if (op == "grad") {  // d(sum(fn(inputs) * g)) / d inputs[wrt]; g is the last input
    std::vector<Tensor> leaves(in.begin(), in.end() - 1);
    size_t wrt = a.at("wrt").get<size_t>();
    for (Tensor& t : leaves)
      if (is_floating(t.dtype())) t.set_requires_grad();
    Tensor out = run(a.at("fn").get<std::string>(), leaves, a);
    return autograd::grad({out}, {leaves[wrt]}, {in.back()})[0];
  }
  if (op.ends_with("_") || op == "add_view" ||
      op == "add_self_alias") {  // in place: the result is what
    Tensor x = clone(in[0]);     // self holds afterwards
    if (op == "add_")
      add_(x, in[1], a.contains("alpha") ? scalar(a["alpha"]) : Scalar(1));
    else if (op == "sub_")
      sub_(x, in[1]);
    else if (op == "mul_")
      mul_(x, in[1]);
    else if (op == "div_")
      div_(x, in[1]);
    else if (op == "copy_")
      copy_(x, in[1]);
    else if (op == "fill_")
      fill_(x, scalar(a.at("value")));
    else if (op == "masked_fill_")
      masked_fill_(x, in[1], scalar(a.at("value")));
    else if (op == "relu_")
      relu_(x);
    else if (op == "add_self_alias")
      add_(x, x);
    else if (op == "add_view") {
      Tensor column = select(x, 1, 1);
      add_(column, in[1]);
    } else
      ADD_FAILURE() << "unknown in-place op " << op;
    return x;
  }
  if (op == "mul_view" || op == "copy_view" || op == "add_slice_twice") {  // z = clone(x), written
    Tensor z = clone(in[0]);                                               // through views; z * z
    if (op == "mul_view") {
      Tensor column = select(z, 1, 1);
      mul_(column, in[1]);
    } else if (op == "copy_view") {
      Tensor row = select(z, 0, 1);
      copy_(row, in[1]);
    } else {
      Tensor a = slice(z, 0, 1, 3), b = slice(z, 0, 2, 4);
      add_(a, in[1]);
      mul_(b, in[1]);
    }
    return mul(z, z);
  }
  if (op == "cross_entropy")
    return nn::cross_entropy(in[0], in[1], a.at("reduction").get<std::string>(),
                             a.value("ignore_index", -100));
  if (op == "mse_loss") return nn::mse_loss(in[0], in[1], a.at("reduction").get<std::string>());
  if (op == "grad2") {  // the last two inputs are g1 and g2 (see make_golden.py's grad2_cases)
    std::vector<Tensor> leaves(in.begin(), in.end() - 2);
    size_t wrt = a.at("wrt").get<size_t>();
    for (Tensor& t : leaves)
      if (is_floating(t.dtype())) t.set_requires_grad();
    Tensor out = run(a.at("fn").get<std::string>(), leaves, a);
    Tensor first = autograd::grad({out}, {leaves[0]}, {in[in.size() - 2]}, false, false, true)[0];
    return autograd::grad({first}, {leaves[wrt]}, {in.back()})[0];
  }
  if (op == "addmm") return addmm(in[0], in[1], in[2], scalar(a.at("beta")), scalar(a.at("alpha")));
  if (op == "mul") return mul(in[0], in[1]);
  if (op == "mul_twice") return mul(mul(in[0], in[1]), in[0]);
  if (op == "div") return div(in[0], in[1]);
  if (op == "pow") return pow(in[0], in[1]);
  if (op == "remainder") return remainder(in[0], in[1]);
  if (op == "fmod") return fmod(in[0], in[1]);
  if (op == "floor_divide") return floor_divide(in[0], in[1]);
  if (op == "remainder_scalar") return remainder(in[0], scalar(a.at("other")));
  if (op == "fmod_scalar") return fmod(in[0], scalar(a.at("other")));
  if (op == "floor_divide_scalar") return floor_divide(in[0], scalar(a.at("other")));
  if (op == "remainder_rscalar") return remainder(scalar(a.at("self")), in[0]);
  if (op == "div_mode") return div(in[0], in[1], a.at("rounding_mode").get<std::string>());
  if (op == "div_mode_scalar")
    return div(in[0], scalar(a.at("other")), a.at("rounding_mode").get<std::string>());
  if (op == "atan2") return atan2(in[0], in[1]);
  if (op == "exp2") return exp2(in[0]);
  if (op == "log10") return log10(in[0]);
  if (op == "erfc") return erfc(in[0]);
  if (op == "erfinv") return erfinv(in[0]);
  if (op == "lgamma") return lgamma(in[0]);
  if (op == "digamma") return digamma(in[0]);
  if (op == "polygamma") return polygamma(a.at("n").get<int64_t>(), in[0]);
  if (op == "mvlgamma") return mvlgamma(in[0], a.at("p").get<int64_t>());
  if (op == "special_ndtr") return special_ndtr(in[0]);
  if (op == "special_ndtri") return special_ndtri(in[0]);
  if (op == "special_entr") return special_entr(in[0]);
  if (op == "special_xlog1py") return special_xlog1py(in[0], in[1]);
  if (op == "bitwise_left_shift_scalar") return bitwise_left_shift(in[0], scalar(a.at("other")));
  if (op == "bitwise_right_shift_scalar") return bitwise_right_shift(in[0], scalar(a.at("other")));
  if (op == "bitwise_left_shift") return bitwise_left_shift(in[0], in[1]);
  if (op == "bitwise_right_shift") return bitwise_right_shift(in[0], in[1]);
  if (op == "frexp_mantissa") return frexp(in[0]).first;
  if (op == "frexp_exponent") return frexp(in[0]).second;
  if (op == "nextafter") return nextafter(in[0], in[1]);
  if (op == "histogram_hist" || op == "histogram_edges") {
    std::optional<std::pair<double, double>> range;
    if (a.contains("range"))
      range = std::pair{a.at("range")[0].get<double>(), a.at("range")[1].get<double>()};
    auto h = histogram(in[0], a.at("bins"), range, Tensor(), a.value("density", false));
    return op == "histogram_hist" ? h.first : h.second;
  }
  if (op == "histogram_edges_hist") return histogram(in[0], in[1], in[2], a.at("density")).first;
  if (op == "gradient")
    return gradient(in[0], a.value("spacing", std::vector<double>{1.0}), a.value("dims", IntList{}),
                    a.value("edge_order", 1))[a.at("index").get<size_t>()];
  if (op == "gradient_coords")
    return gradient(in[0], TensorList{in[1]}, {a.at("dim").get<int64_t>()}, a.at("edge_order"))[0];
  if (op == "native_layer_norm") {
    auto r = native_layer_norm(in[0], a.at("shape").get<IntList>(), in[1], in[2], 1e-5);
    size_t k = a.at("index");
    return k == 0 ? std::get<0>(r) : k == 1 ? std::get<1>(r) : std::get<2>(r);
  }
  if (op == "native_batch_norm") {
    auto r = nn::native_batch_norm(in[0], in[1], in[2], in[3], in[4], a.at("training"), 0.1, 1e-5);
    size_t k = a.at("index");
    return k == 0 ? std::get<0>(r) : k == 1 ? std::get<1>(r) : std::get<2>(r);
  }
  if (op == "segment_reduce") {
    std::optional<double> initial;
    if (a.contains("initial")) initial = a.at("initial").get<double>();
    return segment_reduce(in[0], a.at("reduce"), in[1], Tensor(), 0, initial);
  }
  if (op == "segment_reduce_offsets") return segment_reduce(in[0], a.at("reduce"), Tensor(), in[1]);
  if (op == "upsample_nearest")
    return nn::upsample_nearest(in[0], {}, a.at("scale_factor").get<std::vector<double>>());
  if (op == "upsample_bilinear") return nn::upsample_bilinear(in[0], a.at("size").get<IntList>());
  if (op == "constant_pad_nd")
    return nn::constant_pad_nd(in[0], a.at("pad").get<IntList>(), a.at("value"));
  if (op == "fractional_max_pool2d" || op == "fractional_max_pool3d") {
    auto f = op == "fractional_max_pool2d" ? nn::fractional_max_pool2d : nn::fractional_max_pool3d;
    auto r = f(in[0], a.at("kernel_size").get<IntList>(), a.value("output_size", IntList{}),
               a.value("output_ratio", std::vector<double>{}),
               a.contains("samples")
                   ? to(from_vector(a.at("samples").get<std::vector<double>>(),
                                    a.at("samples_shape").get<IntList>(), {.dtype = in[0].dtype()}),
                        in[0].device())
                   : in[1]);
    return a.at("index").get<int>() == 0 ? r.first : r.second;
  }
  if (op == "ger") return ger(in[0], in[1]);
  if (op == "chain_matmul") return chain_matmul(TensorList(in.begin(), in.end()));
  if (op == "narrow_copy") return narrow_copy(in[0], a.at("dim"), a.at("start"), a.at("length"));
  if (op == "split_with_sizes")
    return split_with_sizes(in[0], a.at("sizes").get<IntList>())[a.at("index").get<size_t>()];
  if (op == "sum_to_size") return sum_to_size(in[0], a.at("size").get<IntList>());
  if (op == "mT") return mT(in[0]);
  if (op == "numpy_T") return numpy_T(in[0]);
  if (op == "special_multigammaln") return special_multigammaln(in[0], a.at("p"));
  if (op == "special_logsumexp") return special_logsumexp(in[0], a.at("dim").get<IntList>());
  if (op == "special_log_softmax") return special_log_softmax(in[0], a.at("dim"));
  static const std::map<std::string, Tensor (*)(const Tensor&)> special1 = {
      {"special_i0e", special_i0e},
      {"special_i1", special_i1},
      {"special_i1e", special_i1e},
      {"special_erfcx", special_erfcx},
      {"special_log_ndtr", special_log_ndtr},
      {"special_bessel_j0", special_bessel_j0},
      {"special_bessel_j1", special_bessel_j1},
      {"special_bessel_y0", special_bessel_y0},
      {"special_bessel_y1", special_bessel_y1},
      {"special_modified_bessel_i0", special_modified_bessel_i0},
      {"special_modified_bessel_i1", special_modified_bessel_i1},
      {"special_modified_bessel_k0", special_modified_bessel_k0},
      {"special_modified_bessel_k1", special_modified_bessel_k1},
      {"special_scaled_modified_bessel_k0", special_scaled_modified_bessel_k0},
      {"special_scaled_modified_bessel_k1", special_scaled_modified_bessel_k1},
      {"special_airy_ai", special_airy_ai},
      {"special_spherical_bessel_j0", special_spherical_bessel_j0},
      {"angle", angle},
      {"imag", imag},
      {"real", real},
      {"special_expit", special_expit},
      {"special_psi", special_psi},
      {"special_gammaln", special_gammaln},
      {"special_sinc", special_sinc},
  };
  static const std::map<std::string, Tensor (*)(const Tensor&, const Tensor&)> special2 = {
      {"special_zeta", special_zeta},
      {"special_gammainc", special_gammainc},
      {"special_gammaincc", special_gammaincc},
      {"special_chebyshev_polynomial_t", special_chebyshev_polynomial_t},
      {"special_chebyshev_polynomial_u", special_chebyshev_polynomial_u},
      {"special_chebyshev_polynomial_v", special_chebyshev_polynomial_v},
      {"special_chebyshev_polynomial_w", special_chebyshev_polynomial_w},
      {"special_shifted_chebyshev_polynomial_t", special_shifted_chebyshev_polynomial_t},
      {"special_shifted_chebyshev_polynomial_u", special_shifted_chebyshev_polynomial_u},
      {"special_shifted_chebyshev_polynomial_v", special_shifted_chebyshev_polynomial_v},
      {"special_shifted_chebyshev_polynomial_w", special_shifted_chebyshev_polynomial_w},
      {"special_hermite_polynomial_h", special_hermite_polynomial_h},
      {"special_hermite_polynomial_he", special_hermite_polynomial_he},
      {"special_laguerre_polynomial_l", special_laguerre_polynomial_l},
      {"special_legendre_polynomial_p", special_legendre_polynomial_p},
      {"igamma", igamma},
      {"special_xlogy", special_xlogy},
      {"igammac", igammac},
  };
  if (auto it = special1.find(op); it != special1.end()) return it->second(in[0]);
  if (auto it = special2.find(op); it != special2.end()) return it->second(in[0], in[1]);
  if (op == "asinh") return asinh(in[0]);
  if (op == "acosh") return acosh(in[0]);
  if (op == "atanh") return atanh(in[0]);
  if (op == "bitwise_not") return bitwise_not(in[0]);
  if (op == "bitwise_and") return bitwise_and(in[0], in[1]);
  if (op == "bitwise_or") return bitwise_or(in[0], in[1]);
  if (op == "bitwise_xor") return bitwise_xor(in[0], in[1]);
  if (op == "bitwise_and_scalar") return bitwise_and(in[0], scalar(a.at("other")));
  if (op == "bitwise_or_scalar") return bitwise_or(in[0], scalar(a.at("other")));
  if (op == "bitwise_xor_scalar") return bitwise_xor(in[0], scalar(a.at("other")));
  if (op == "sort_values" || op == "sort_indices") {
    auto [values, indices] =
        sort(in[0], a.at("dim").get<int64_t>(), a.at("descending").get<bool>(), true);
    return op == "sort_values" ? values : indices;
  }
  if (op == "argsort")
    return argsort(in[0], a.at("dim").get<int64_t>(), a.at("descending").get<bool>());
  if (op == "topk_values" || op == "topk_indices") {
    auto [values, indices] = topk(in[0], a.at("k").get<int64_t>(), a.at("dim").get<int64_t>(),
                                  a.at("largest").get<bool>());
    return op == "topk_values" ? values : indices;
  }
  if (op == "any") return any(in[0]);
  if (op == "all") return all(in[0]);
  if (op == "any_dim") return any(in[0], a.at("dim").get<int64_t>(), a.at("keepdim").get<bool>());
  if (op == "all_dim") return all(in[0], a.at("dim").get<int64_t>(), a.at("keepdim").get<bool>());
  if (op == "count_nonzero") return count_nonzero(in[0], a.at("dim").get<IntList>());
  if (op == "isclose")
    return isclose(in[0], in[1], a.at("rtol").get<double>(), a.at("atol").get<double>(),
                   a.at("equal_nan").get<bool>());
  if (op == "einsum")
    return einsum(a.at("equation").get<std::string>(), TensorList(in.begin(), in.end()));
  auto ints_or = [&](const char* key, IntList fallback) {
    return a.contains(key) ? a[key].get<IntList>() : fallback;
  };
  Tensor bias = in.size() > 2 ? in[2] : Tensor();
  if (op == "conv1d" || op == "conv2d" || op == "conv3d") {
    using Conv = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const IntList&,
                            const IntList&, const IntList&,
                            int64_t);  // the overload with padding amounts
    Conv conv = op == "conv1d"   ? Conv(nn::conv1d)
                : op == "conv2d" ? Conv(nn::conv2d)
                                 : Conv(nn::conv3d);
    return conv(in[0], in[1], bias, ints_or("stride", {1}), ints_or("padding", {0}),
                ints_or("dilation", {1}), a.value("groups", int64_t{1}));
  }
  if (op == "max_pool1d" || op == "max_pool2d" || op == "max_pool3d") {
    auto pool = op == "max_pool1d"   ? nn::max_pool1d
                : op == "max_pool2d" ? nn::max_pool2d
                                     : nn::max_pool3d;
    return pool(in[0], a.at("kernel_size").get<IntList>(), ints_or("stride", {}),
                ints_or("padding", {0}), ints_or("dilation", {1}), a.value("ceil_mode", false));
  }
  if (op.starts_with("max_pool") && op.ends_with("_indices")) {  // max_poolNd_indices
    auto pool = op[8] == '1'   ? nn::max_pool1d_with_indices
                : op[8] == '2' ? nn::max_pool2d_with_indices
                               : nn::max_pool3d_with_indices;
    return pool(in[0], a.at("kernel_size").get<IntList>(), ints_or("stride", {}),
                ints_or("padding", {0}), ints_or("dilation", {1}), a.value("ceil_mode", false))
        .second;
  }
  if (op.starts_with("max_unpool")) {
    auto unpool = op == "max_unpool1d"   ? nn::max_unpool1d
                  : op == "max_unpool2d" ? nn::max_unpool2d
                                         : nn::max_unpool3d;
    return unpool(in[0], in[1], a.at("kernel_size").get<IntList>(), ints_or("stride", {}),
                  ints_or("padding", {0}), ints_or("output_size", {}));
  }
  if (op == "lp_pool1d" || op == "lp_pool2d") {
    auto pool = op == "lp_pool1d" ? nn::lp_pool1d : nn::lp_pool2d;
    return pool(in[0], a.at("norm_type"), a.at("kernel_size").get<IntList>(), ints_or("stride", {}),
                a.value("ceil_mode", false));
  }
  if (op == "avg_pool1d")
    return nn::avg_pool1d(in[0], a.at("kernel_size").get<IntList>(), ints_or("stride", {}),
                          ints_or("padding", {0}), a.value("ceil_mode", false),
                          a.value("count_include_pad", true));
  if (op == "avg_pool2d" || op == "avg_pool3d") {
    auto pool = op == "avg_pool2d" ? nn::avg_pool2d : nn::avg_pool3d;
    return pool(in[0], a.at("kernel_size").get<IntList>(), ints_or("stride", {}),
                ints_or("padding", {0}), a.value("ceil_mode", false),
                a.value("count_include_pad", true),
                a.contains("divisor_override") ? std::optional<int64_t>(a.at("divisor_override"))
                                               : std::nullopt);
  }
  if (op == "adaptive_max_pool3d")
    return nn::adaptive_max_pool3d(in[0], a.at("output_size").get<IntList>());
  if (op == "dropout_eval") {
    std::string kind = a.at("kind");
    double p = a.at("p");
    bool train = a.at("training");
    if (kind == "dropout1d") return nn::dropout1d(in[0], p, train);
    if (kind == "dropout2d") return nn::dropout2d(in[0], p, train);
    if (kind == "dropout3d") return nn::dropout3d(in[0], p, train);
    if (kind == "alpha_dropout") return nn::alpha_dropout(in[0], p, train);
    return nn::feature_alpha_dropout(in[0], p, train);
  }
  if (op == "rrelu_eval") return nn::rrelu(in[0], a.at("lower"), a.at("upper"), false);
  if (op == "bilinear") return nn::bilinear(in[0], in[1], in[2], in.size() > 3 ? in[3] : Tensor());
  if (op == "channel_shuffle") return nn::channel_shuffle(in[0], a.at("groups"));
  if (op == "pdist") return nn::pdist(in[0], scalar(a.at("p")).to_double());
  if (op == "ctc_loss" || op == "ctc_loss_logits") {
    Tensor lp = op == "ctc_loss" ? in[0] : log_softmax(in[0], 2);
    return nn::ctc_loss(lp, in[1], a.at("input_lengths").get<IntList>(),
                        a.at("target_lengths").get<IntList>(), a.value("blank", int64_t{0}),
                        a.value("reduction", std::string("mean")), a.value("zero_infinity", false));
  }
  if (op == "triplet_margin_with_distance_loss") {
    std::function<Tensor(const Tensor&, const Tensor&)> distance;
    if (a.value("cosine", false))
      distance = [](const Tensor& x, const Tensor& y) { return 1.0 - nn::cosine_similarity(x, y); };
    return nn::triplet_margin_with_distance_loss(in[0], in[1], in[2], distance,
                                                 a.value("margin", 1.0), a.value("swap", false),
                                                 a.value("reduction", std::string("mean")));
  }
  if (op == "adaptive_avg_pool2d")
    return nn::adaptive_avg_pool2d(in[0], a.at("output_size").get<IntList>());
  if (op == "adaptive_avg_pool1d")
    return nn::adaptive_avg_pool1d(in[0], a.at("output_size").get<IntList>());
  if (op == "adaptive_avg_pool3d")
    return nn::adaptive_avg_pool3d(in[0], a.at("output_size").get<IntList>());
  if (op == "adaptive_max_pool1d")
    return nn::adaptive_max_pool1d(in[0], a.at("output_size").get<IntList>());
  if (op == "adaptive_max_pool2d")
    return nn::adaptive_max_pool2d(in[0], a.at("output_size").get<IntList>());
  if (op == "pad_mode")
    return nn::pad(in[0], a.at("pad").get<IntList>(), a.at("mode").get<std::string>());
  if (op.starts_with("conv_transpose")) {
    auto conv = op == "conv_transpose1d"   ? nn::conv_transpose1d
                : op == "conv_transpose2d" ? nn::conv_transpose2d
                                           : nn::conv_transpose3d;
    return conv(in[0], in[1], bias, ints_or("stride", {1}), ints_or("padding", {0}),
                ints_or("output_padding", {0}), a.value("groups", int64_t{1}),
                ints_or("dilation", {1}));
  }
  if (op == "interpolate") {
    nn::InterpolateOptions o{.size = ints_or("size", {}), .mode = a.at("mode").get<std::string>()};
    if (a.contains("scale_factor")) o.scale_factor = a["scale_factor"].get<std::vector<double>>();
    if (a.contains("align_corners")) o.align_corners = a["align_corners"].get<bool>();
    o.antialias = a.value("antialias", false);
    return nn::interpolate(in[0], o);
  }
  if (op == "rnn" || op == "lstm" || op == "gru" || op.ends_with("_cell"))
    return run_recurrent(op, in, a);
  if (op == "mha" || op.starts_with("transformer_")) return run_attention(op, in, a);
  if (op == "square_subsequent_mask") return nn::square_subsequent_mask(a.at("n").get<int64_t>());
  if (op == "pixel_shuffle") return nn::pixel_shuffle(in[0], a.at("factor").get<int64_t>());
  if (op.starts_with("masked.")) return run_masked(op, in, a);
  if (Tensor t = run_composite(op, in, a); t.defined()) return t;
  if (op == "pixel_unshuffle") return nn::pixel_unshuffle(in[0], a.at("factor").get<int64_t>());
  if (op == "pad") return nn::pad(in[0], a.at("pad").get<IntList>(), a.at("value").get<double>());
  if (op == "group_norm")
    return nn::group_norm(in[0], a.at("num_groups").get<int64_t>(),
                          in.size() > 1 ? in[1] : Tensor(), bias);
  if (op.starts_with("batch_norm")) {
    Tensor running_mean = clone(in[1].detach()),
           running_var = clone(in[2].detach());  // updated in place
    Tensor w = in.size() > 3 ? in[3] : Tensor(), b = in.size() > 4 ? in[4] : Tensor();
    Tensor y = nn::batch_norm(in[0], running_mean, running_var, w, b, op != "batch_norm_eval",
                              a.value("momentum", 0.1));
    return op == "batch_norm_running_mean"  ? running_mean
           : op == "batch_norm_running_var" ? running_var
                                            : y;
  }
  if (op == "sdpa")
    return nn::scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0.0,
                                            a.value("is_causal", false));
  if (op == "sdpa_mask") return nn::scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
  if (op == "roll") return roll(in[0], a.at("shifts").get<IntList>(), a.at("dims").get<IntList>());
  if (op == "scatter") return scatter(in[0], a.at("dim").get<int64_t>(), in[1], in[2]);
  if (op == "scatter_value")
    return scatter(in[0], a.at("dim").get<int64_t>(), in[1], scalar(a.at("value")));
  if (op == "index_add")
    return index_add(in[0], a.at("dim").get<int64_t>(), in[1], in[2], scalar(a.at("alpha")));
  if (op == "index_copy") return index_copy(in[0], a.at("dim").get<int64_t>(), in[1], in[2]);
  if (op == "index_fill")
    return index_fill(in[0], a.at("dim").get<int64_t>(), in[1], scalar(a.at("value")));
  if (op == "median_all") return median(in[0]);
  if (op == "median_values" || op == "median_indices") {
    auto [values, indices] = median(in[0], a.at("dim").get<int64_t>(), a.at("keepdim").get<bool>());
    return op == "median_values" ? values : indices;
  }
  if (op == "kthvalue_values" || op == "kthvalue_indices") {
    auto [values, indices] = kthvalue(in[0], a.at("k").get<int64_t>(), a.at("dim").get<int64_t>(),
                                      a.at("keepdim").get<bool>());
    return op == "kthvalue_values" ? values : indices;
  }
  if (op == "mv") return mv(in[0], in[1]);
  if (op == "addmv") return addmv(in[0], in[1], in[2], scalar(a.at("beta")), scalar(a.at("alpha")));
  if (op == "baddbmm")
    return baddbmm(in[0], in[1], in[2], scalar(a.at("beta")), scalar(a.at("alpha")));
  if (op == "kron") return kron(in[0], in[1]);
  if (op == "cross") return cross(in[0], in[1], a.at("dim").get<int64_t>());
  if (op == "cdist") return cdist(in[0], in[1], scalar(a.at("p")).to_double());
  if (op == "cosine_similarity")
    return nn::cosine_similarity(in[0], in[1], a.at("dim").get<int64_t>());
  if (op == "pairwise_distance")
    return nn::pairwise_distance(in[0], in[1], a.at("p").get<double>(), 1e-6,
                                 a.value("keepdim", false));
  if (op == "nonzero") return nonzero(in[0]);
  if (op == "where_cond") return where(in[0] != 0)[a.at("index").get<size_t>()];
  if (op == "masked_select") return masked_select(in[0], in[1]);
  if (op == "unique_values") return std::get<0>(unique(in[0]));
  if (op == "unique_inverse") return std::get<1>(unique(in[0], true));
  if (op == "unique_counts") return std::get<2>(unique(in[0], false, true));
  if (op == "bincount") return bincount(in[0], Tensor(), a.at("minlength").get<int64_t>());
  if (op == "bincount_weights") return bincount(in[0], in[1], a.at("minlength").get<int64_t>());
  if (op == "cross_entropy_opts")
    return nn::cross_entropy(in[0], in[1], a.at("reduction").get<std::string>(),
                             a.value("ignore_index", -100), a.value("label_smoothing", 0.0),
                             a.value("weight", false) ? in[2] : Tensor());
  if (op == "nll_loss_opts")
    return nn::nll_loss(in[0], in[1], a.at("reduction").get<std::string>(),
                        a.value("ignore_index", -100), a.value("weight", false) ? in[2] : Tensor());
  std::string red = a.value("reduction", std::string("mean"));
  if (op == "margin_ranking_loss")
    return nn::margin_ranking_loss(in[0], in[1], in[2], a.at("margin").get<double>(), red);
  if (op == "hinge_embedding_loss")
    return nn::hinge_embedding_loss(in[0], in[1], a.at("margin").get<double>(), red);
  if (op == "soft_margin_loss") return nn::soft_margin_loss(in[0], in[1], red);
  if (op == "cosine_embedding_loss")
    return nn::cosine_embedding_loss(in[0], in[1], in[2], a.at("margin").get<double>(), red);
  if (op == "triplet_margin_loss")
    return nn::triplet_margin_loss(in[0], in[1], in[2], a.at("margin").get<double>(), 2.0, 1e-6,
                                   a.at("swap").get<bool>(), red);
  if (op == "poisson_nll_loss")
    return nn::poisson_nll_loss(in[0], in[1], a.at("log_input").get<bool>(),
                                a.at("full").get<bool>(), 1e-8, red);
  if (op == "gaussian_nll_loss")
    return nn::gaussian_nll_loss(in[0], in[1], in[2], a.at("full").get<bool>(), 1e-6, red);
  if (op == "multilabel_soft_margin_loss")
    return nn::multilabel_soft_margin_loss(in[0], in[1], Tensor(), red);
  if (op == "celu") return nn::celu(in[0], a.at("alpha").get<double>());
  if (op == "softsign") return nn::softsign(in[0]);
  if (op == "tanhshrink") return nn::tanhshrink(in[0]);
  if (op == "softshrink") return nn::softshrink(in[0], a.at("lambd").get<double>());
  if (op == "hardshrink") return nn::hardshrink(in[0], a.at("lambd").get<double>());
  if (op == "threshold")
    return nn::threshold(in[0], a.at("threshold").get<double>(), a.at("value").get<double>());
  if (op == "prelu") return nn::prelu(in[0], in[1]);
  if (op == "glu") return nn::glu(in[0], a.at("dim").get<int64_t>());
  if (op == "softmin") return nn::softmin(in[0], a.at("dim").get<int64_t>());
  if (op == "logaddexp") return logaddexp(in[0], in[1]);
  if (op == "logaddexp2") return logaddexp2(in[0], in[1]);
  if (op == "hypot") return hypot(in[0], in[1]);
  if (op == "xlogy") return xlogy(in[0], in[1]);
  if (op == "sinc") return sinc(in[0]);
  if (op == "logit") return a.contains("eps") ? logit(in[0], a["eps"].get<double>()) : logit(in[0]);
  if (op == "deg2rad") return deg2rad(in[0]);
  if (op == "rad2deg") return rad2deg(in[0]);
  if (op == "frac") return frac(in[0]);
  if (op == "square") return square(in[0]);
  if (op == "copysign") return copysign(in[0], in[1]);
  if (op == "signbit") return signbit(in[0]);
  if (op == "heaviside") return heaviside(in[0], in[1]);
  if (op == "float_power") return float_power(in[0], in[1]);
  if (op == "nansum") return nansum(in[0], a.at("dim").get<IntList>());
  if (op == "nanmean") return nanmean(in[0], a.at("dim").get<IntList>());
  if (op == "var_mean" || op == "std_mean") {
    auto f = op == "var_mean" ? var_mean : std_mean;
    auto [spread, centre] = f(in[0], a.at("dim").get<IntList>(), 1, a.value("keepdim", false));
    return a.at("which").get<int>() == 0 ? spread : centre;
  }
  if (op == "aminmax") {
    auto [lo, hi] = a.contains("dim") ? aminmax(in[0], a["dim"].get<int64_t>()) : aminmax(in[0]);
    return a.at("which").get<int>() == 0 ? lo : hi;
  }
  if (op == "diff") return diff(in[0], a.at("n").get<int64_t>(), a.at("dim").get<int64_t>());
  if (op == "diff_prepend")
    return diff(in[0], a.at("n").get<int64_t>(), a.at("dim").get<int64_t>(), in[1]);
  if (op == "tensordot") return tensordot(in[0], in[1], a.at("dims").get<int64_t>());
  if (op == "tensordot_pairs")
    return tensordot(in[0], in[1], a.at("dims_a").get<IntList>(), a.at("dims_b").get<IntList>());
  if (op == "block_diag") return block_diag(TensorList(in.begin(), in.end()));
  if (op == "meshgrid")
    return meshgrid({in[0], in[1]},
                    a.at("indexing").get<std::string>())[a.at("which").get<size_t>()];
  if (op == "cartesian_prod") return cartesian_prod(TensorList(in.begin(), in.end()));
  if (op == "tile") return tile(in[0], a.at("reps").get<IntList>());
  if (op == "rot90") return rot90(in[0], a.at("k").get<int64_t>(), a.at("dims").get<IntList>());
  if (op == "fliplr") return fliplr(in[0]);
  if (op == "flipud") return flipud(in[0]);
  if (op == "tril_indices" || op == "triu_indices") {
    auto f = op == "tril_indices" ? tril_indices : triu_indices;
    return f(a.at("rows").get<int64_t>(), a.at("cols").get<int64_t>(),
             a.at("offset").get<int64_t>(), {.dtype = DType::i64});
  }
  if (op == "searchsorted") return searchsorted(in[0], in[1], a.at("right").get<bool>());
  if (op == "bucketize") return bucketize(in[0], in[1], a.at("right").get<bool>());
  if (op == "histc")
    return histc(in[0], a.at("bins").get<int64_t>(), a.at("min").get<double>(),
                 a.at("max").get<double>());
  if (op == "logcumsumexp") return logcumsumexp(in[0], a.at("dim").get<int64_t>());
  if (op.starts_with("cummax_") || op.starts_with("cummin_")) {
    auto [values, indices] = op.starts_with("cummax") ? cummax(in[0], a.at("dim").get<int64_t>())
                                                      : cummin(in[0], a.at("dim").get<int64_t>());
    return op.ends_with("values") ? values : indices;
  }
  if (op == "where_scalar_other") return where(in[0], in[1], scalar(a.at("other")));
  if (op == "where_scalar_self") return where(in[0], scalar(a.at("self")), in[1]);
  if (op == "masked_fill_tensor") return masked_fill(in[0], in[1], in[2]);
  if (op == "clamp_tensors") return clamp(in[0], in[1], in[2]);
  if (op == "clamp_min_tensor") return clamp(in[0], in[1], Tensor());
  if (op == "pow_scalar_base") return pow(scalar(a.at("base")), in[0]);
  std::optional<DType> dtype;
  if (a.contains("dtype")) dtype = dtype_from_string(a["dtype"].get<std::string>());
  if (op == "prod_all") return prod(in[0], dtype);
  if (op == "prod_dim")
    return prod(in[0], a.at("dim").get<int64_t>(), a.at("keepdim").get<bool>(), dtype);
  if (op == "cumsum") return cumsum(in[0], a.at("dim").get<int64_t>(), dtype);
  if (op == "cumprod") return cumprod(in[0], a.at("dim").get<int64_t>(), dtype);
  if (op == "maximum") return maximum(in[0], in[1]);
  if (op == "lt") return lt(in[0], in[1]);
  if (op == "eq") return eq(in[0], in[1]);
  if (op == "where") return where(in[0], in[1], in[2]);
  if (op == "exp") return exp(in[0]);
  if (op == "gelu") return gelu(in[0], a.value("approximate", "none"));
  if (op == "silu") return silu(in[0]);
  if (op == "sigmoid") return sigmoid(in[0]);
  if (op == "tanh") return tanh(in[0]);
  if (op == "rsqrt") return rsqrt(in[0]);
  if (op == "sum") return sum(in[0], a.at("dim").get<IntList>(), a.value("keepdim", false));
  if (op == "mean") return mean(in[0], a.at("dim").get<IntList>(), a.value("keepdim", false));
  if (op == "var") return var(in[0], a.at("dim").get<IntList>(), a.value("correction", 1));
  if (op == "amax") return amax(in[0], a.at("dim").get<IntList>(), a.value("keepdim", false));
  if (op == "argmax") return argmax(in[0], a.at("dim").get<int64_t>(), a.value("keepdim", false));
  if (op == "softmax") return softmax(in[0], a.at("dim").get<int64_t>());
  if (op == "log_softmax") return log_softmax(in[0], a.at("dim").get<int64_t>());
  if (op == "matmul") return matmul(in[0], in[1]);
  if (op == "linear") return linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor());
  if (op == "layer_norm") return layer_norm(in[0], a.at("shape").get<IntList>(), in[1], in[2]);
  if (op == "transpose_add") return add(transpose(in[0], 0, 1), in[1]);
  if (op == "cat") return cat({in[0], in[1]}, a.at("dim").get<int64_t>());
  if (op == "index_select") return index_select(in[0], a.at("dim").get<int64_t>(), in[1]);
  if (op == "gather") return gather(in[0], a.at("dim").get<int64_t>(), in[1]);
  if (op == "embedding") return embedding(in[0], in[1]);
  if (op == "masked_fill") return masked_fill(in[0], in[1], a.at("value").get<double>());
  if (op == "to_f16") return to(in[0], f16);
  ADD_FAILURE() << "golden file has an op this test does not know: " << op;
  return Tensor();
}

// Replays every case with its inputs on `device`: the same answers, and the same
// refusals, on every backend. Without `integer_products` (cuBLAS has none, and
// PyTorch's CUDA refuses them too: pytorch#44428) products of integers are refusals.
void expect_matches_pytorch(Device device, bool integer_products = true) {
  json golden = load_golden();
  ASSERT_GE(golden.at("cases").size(), 30u);
  for (const json& c : golden.at("cases")) {
    std::string op = c.at("op");
    SCOPED_TRACE(op + " " + c.value("note", ""));
    std::vector<Tensor> in;
    for (const json& t : c.at("inputs")) in.push_back(from_json(t, device));
    json args = c.value("args", json::object());
    if (c.value("error", false)) {  // PyTorch refuses the call: so must kiln, clearly
      // A GPU reports a bad index in device data at the next host wait (Note [Index
      // errors found by kernels]): reading the result is part of the call.
      EXPECT_THROW(
          {
            Tensor r = run(op, in, args);
            if (r.defined()) to_vector<double>(r);
          },
          Error);
      continue;
    }
    bool product = op == "matmul" || op == "linear" || op == "addmm";
    if (!integer_products && product && !is_floating(in[0].dtype())) {
      EXPECT_THROW(run(op, in, args), Error);
      continue;
    }
    Tensor got;
    try {
      got = run(op, in, args);
    } catch (const Error& e) {  // one case's failure, reported under its trace
      ADD_FAILURE() << "kiln refused a call PyTorch accepts: " << e.what();
      continue;
    }
    if (!got.defined()) continue;
    const json& want = c.at("output");
    EXPECT_EQ(to_string(got.dtype()), want.at("dtype").get<std::string>());
    EXPECT_EQ(got.shape().vec(), want.at("shape").get<IntList>());
    EXPECT_TRUE(testing::all_close(got, numbers(want.at("data")), c.value("rtol", 1e-5),
                                   c.value("atol", 1e-6)));
  }
}

TEST(Golden, MatchesPyTorch) { expect_matches_pytorch(Device("cpu:0")); }

// The CUDA kernels (and their autograd) against the same PyTorch answers.
TEST(Golden, MatchesPyTorchOnCuda) {
  KILN_REQUIRE_CUDA(1);
  expect_matches_pytorch(Device("cuda:0"), /*integer_products=*/false);
}

// The same replay on the stand-in CUDA backend (CPU kernels behind cuda:0): the device
// plumbing around every case (copies, 0-dim operands, autograd across backends).
TEST(Golden, MatchesPyTorchOnMockCuda) {
  testing::MockCuda mock;
  expect_matches_pytorch(Device("cuda:0"));
}

// add's result dtype for every pair of dtypes, the second operand a tensor, a 0-dim
// tensor or a number (T4's promotion lattice against PyTorch's).
TEST(Golden, PromotionTableMatchesPyTorch) {
  json golden = load_golden();
  const json& table = golden.at("promotion");
  ASSERT_GE(table.size(), 230u);
  for (const json& row : table) {
    std::string a = row[0], b = row[1], kind = row[2], want = row[3];
    SCOPED_TRACE(a + " + " + b + " (" + kind + ")");
    Tensor x = ones({2}, {.dtype = dtype_from_string(a)});
    Tensor got;
    if (kind == "number")
      got = b == "int"     ? add(x, Scalar(int64_t{2}))
            : b == "float" ? add(x, Scalar(2.5))
                           : add(x, Scalar(true));
    else
      got =
          add(x, ones(kind == "tensor" ? IntList{2} : IntList{}, {.dtype = dtype_from_string(b)}));
    EXPECT_EQ(to_string(got.dtype()), want);
  }
}

}  // namespace
}  // namespace kiln
