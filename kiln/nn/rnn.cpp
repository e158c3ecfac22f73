#include "kiln/nn/rnn.h"

#include <cmath>
#include <tuple>

#include "kiln/nn/functional.h"

namespace kiln::nn {
namespace {

using Mode = RNNBase::Mode;

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::rnn_tanh:
    case Mode::rnn_relu: return "RNN";
    case Mode::lstm: return "LSTM";
    case Mode::gru: return "GRU";
  }
  return "RNN";
}

int64_t gates(Mode m) { return m == Mode::lstm ? 4 : m == Mode::gru ? 3 : 1; }

Tensor uniform(const IntList& shape, double bound, Device d) {
  return sub(mul(rand(shape, {.device = d}), 2 * bound), bound);
}

// One step from the input's projection `gi` (x W_ih^T + b_ih) and the state. LSTM's
// state is (h, c); the others' c stays undefined.
std::pair<Tensor, Tensor> step(Mode mode, const Tensor& gi, const Tensor& h, const Tensor& c,
                               const Tensor& w_hh, const Tensor& b_hh) {
  Tensor gh = linear(h, w_hh, b_hh);
  switch (mode) {
    case Mode::rnn_tanh: return {tanh(gi + gh), Tensor()};
    case Mode::rnn_relu: return {relu(gi + gh), Tensor()};
    case Mode::lstm: {
      TensorList g = chunk(gi + gh, 4, -1);
      Tensor c1 = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
      return {sigmoid(g[3]) * tanh(c1), c1};
    }
    case Mode::gru: {
      TensorList a = chunk(gi, 3, -1), b = chunk(gh, 3, -1);
      Tensor r = sigmoid(a[0] + b[0]), z = sigmoid(a[1] + b[1]);
      Tensor n = tanh(a[2] + r * b[2]);
      return {n + z * (h - n), Tensor()};  // (1 - z) n + z h
    }
  }
  return {};
}

void check_cell(const char* op, const Tensor& x, const Tensor& h, const Tensor& w_ih,
                const Tensor& w_hh, int64_t gate_count) {
  KILN_CHECK(w_ih.dim() == 2 && w_hh.dim() == 2 && w_hh.size(0) == gate_count * w_hh.size(1) &&
                 w_ih.size(0) == w_hh.size(0),
             shape,
             "[{}] expects weights [{} * hidden, input] and [{} * hidden, hidden], got {} and {}",
             op, gate_count, gate_count, w_ih.meta_str(), w_hh.meta_str());
  KILN_CHECK(x.dim() >= 1 && x.size(-1) == w_ih.size(1), shape,
             "[{}] input {} does not match weight_ih {}", op, x.meta_str(), w_ih.meta_str());
  KILN_CHECK(
      h.dim() == x.dim() && h.size(-1) == w_hh.size(1) && (x.dim() == 1 || h.size(0) == x.size(0)),
      shape, "[{}] hidden state {} does not match input {} and weight_hh {}", op, h.meta_str(),
      x.meta_str(), w_hh.meta_str());
}

}  // namespace

Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih, const Tensor& b_hh) {
  check_cell("rnn_tanh_cell", x, h, w_ih, w_hh, 1);
  return step(Mode::rnn_tanh, linear(x, w_ih, b_ih), h, Tensor(), w_hh, b_hh).first;
}

Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih, const Tensor& b_hh) {
  check_cell("rnn_relu_cell", x, h, w_ih, w_hh, 1);
  return step(Mode::rnn_relu, linear(x, w_ih, b_ih), h, Tensor(), w_hh, b_hh).first;
}

std::pair<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                    const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                                    const Tensor& b_hh) {
  check_cell("lstm_cell", x, h, w_ih, w_hh, 4);
  KILN_CHECK(c.shape() == h.shape(), shape,
             "[lstm_cell] cell state {} must be shaped like the hidden state {}", c.meta_str(),
             h.meta_str());
  return step(Mode::lstm, linear(x, w_ih, b_ih), h, c, w_hh, b_hh);
}

Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih, const Tensor& b_hh) {
  check_cell("gru_cell", x, h, w_ih, w_hh, 3);
  return step(Mode::gru, linear(x, w_ih, b_ih), h, Tensor(), w_hh, b_hh).first;
}

// ---- sequence layers ------------------------------------------------------------------------

RNNBase::RNNBase(Mode mode, RNNOptions o) : mode_(mode), options_(std::move(o)) {
  const char* op = mode_name(mode);
  KILN_CHECK(options_.input_size > 0 && options_.hidden_size > 0 && options_.num_layers > 0, value,
             "[{}] input_size, hidden_size and num_layers must be positive, got {}, {}, {}", op,
             options_.input_size, options_.hidden_size, options_.num_layers);
  KILN_CHECK(options_.dropout >= 0 && options_.dropout <= 1, value,
             "[{}] dropout must be in [0, 1], got {}", op, options_.dropout);
  int64_t h = options_.hidden_size, g = gates(mode), dirs = options_.bidirectional ? 2 : 1;
  int64_t proj = options_.proj_size, out = proj ? proj : h;
  KILN_CHECK(proj >= 0 && (proj == 0 || mode == Mode::lstm), value,
             "[{}] proj_size argument is only supported for LSTM, not RNN or GRU", op);
  KILN_CHECK(proj < h, value, "[{}] proj_size ({}) has to be smaller than hidden_size ({})", op,
             proj, h);
  double bound = 1 / std::sqrt(static_cast<double>(h));
  for (int64_t layer = 0; layer < options_.num_layers; ++layer) {
    for (int64_t dir = 0; dir < dirs; ++dir) {
      std::string suffix = "_l" + std::to_string(layer) + (dir ? "_reverse" : "");
      int64_t in = layer == 0 ? options_.input_size : out * dirs;
      std::vector<Tensor*> p;
      p.push_back(
          &register_parameter("weight_ih" + suffix, uniform({g * h, in}, bound, options_.device)));
      p.push_back(
          &register_parameter("weight_hh" + suffix, uniform({g * h, out}, bound, options_.device)));
      if (options_.bias) {
        p.push_back(
            &register_parameter("bias_ih" + suffix, uniform({g * h}, bound, options_.device)));
        p.push_back(
            &register_parameter("bias_hh" + suffix, uniform({g * h}, bound, options_.device)));
      }
      if (proj)
        p.push_back(
            &register_parameter("weight_hr" + suffix, uniform({proj, h}, bound, options_.device)));
      params_.push_back(std::move(p));
    }
  }
}

std::vector<Tensor*> RNNBase::layer_parameters(int64_t layer, int64_t dir) const {
  return params_.at(static_cast<size_t>(layer * (options_.bidirectional ? 2 : 1) + dir));
}

RNN::RNN(RNNOptions o) : RNNBase(o.nonlinearity == "relu" ? Mode::rnn_relu : Mode::rnn_tanh, o) {
  KILN_CHECK(o.nonlinearity == "tanh" || o.nonlinearity == "relu", value,
             "[RNN] nonlinearity must be 'tanh' or 'relu', got '{}'", o.nonlinearity);
}

TensorList RNNBase::forward(const TensorList& in) {
  const char* op = mode_name(mode_);
  bool lstm = mode_ == Mode::lstm;
  KILN_CHECK(!in.empty() && in.size() <= (lstm ? 3u : 2u) && (!lstm || in.size() != 2), value,
             "[{}] expects (input{}), got {} tensors", op, lstm ? "[, h0, c0]" : "[, h0]",
             in.size());
  const RNNOptions& o = options_;
  int64_t dirs = o.bidirectional ? 2 : 1, layers = o.num_layers, h = o.hidden_size;
  Tensor x = in[0];
  KILN_CHECK(x.dim() == 2 || x.dim() == 3, shape,
             "[{}] expects a 2-D (unbatched) or 3-D input, got {}", op, x.meta_str());
  KILN_CHECK(x.size(-1) == o.input_size, shape,
             "[{}] input.size(-1) must be equal to input_size: expected {}, got {}", op,
             o.input_size, x.size(-1));
  bool unbatched = x.dim() == 2;
  if (unbatched)
    x = unsqueeze(x, 1);
  else if (o.batch_first)
    x = transpose(x, 0, 1);  // [L, N, I]
  int64_t steps = x.size(0), batch = x.size(1), hout = o.proj_size ? o.proj_size : h;
  auto initial = [&](size_t i) {
    int64_t features = i == 1 ? hout : h;  // h states are projected, c states not
    IntList state_shape{layers * dirs, batch, features};
    if (in.size() <= i) return zeros(state_shape, {.dtype = x.dtype(), .device = x.device()});
    Tensor s = unbatched ? unsqueeze(in[i], 1) : in[i];
    KILN_CHECK(s.shape() == Dims(state_shape), shape, "[{}] expected {} state {}, got {}", op,
               i == 1 ? "hidden" : "cell",
               Dims(unbatched ? IntList{layers * dirs, features} : state_shape).str(),
               in[i].meta_str());
    return s;
  };
  Tensor h0 = initial(1), c0 = lstm ? initial(2) : Tensor();
  TensorList h_n, c_n;
  Tensor layer_in = x;
  for (int64_t layer = 0; layer < layers; ++layer) {
    TensorList outs;
    for (int64_t dir = 0; dir < dirs; ++dir) {
      std::vector<Tensor*> p = layer_parameters(layer, dir);
      const Tensor &w_ih = *p[0], &w_hh = *p[1];
      Tensor b_ih = o.bias ? *p[2] : Tensor(), b_hh = o.bias ? *p[3] : Tensor();
      Tensor w_hr = o.proj_size ? *p.back() : Tensor();
      Tensor gi = linear(layer_in, w_ih, b_ih);  // every step's input projection at once
      Tensor hs = select(h0, 0, layer * dirs + dir),
             cs = lstm ? select(c0, 0, layer * dirs + dir) : Tensor();
      TensorList seq(static_cast<size_t>(steps));
      for (int64_t i = 0; i < steps; ++i) {
        int64_t t = dir ? steps - 1 - i : i;
        std::tie(hs, cs) = step(mode_, select(gi, 0, t), hs, cs, w_hh, b_hh);
        if (w_hr.defined()) hs = linear(hs, w_hr);
        seq[static_cast<size_t>(t)] = hs;
      }
      outs.push_back(stack(seq, 0));
      h_n.push_back(hs);
      if (lstm) c_n.push_back(cs);
    }
    layer_in = dirs == 1 ? outs[0] : cat(outs, -1);
    if (o.dropout > 0 && layer + 1 < layers) layer_in = dropout(layer_in, o.dropout, training());
  }
  Tensor out = layer_in, hn = stack(h_n, 0), cn = lstm ? stack(c_n, 0) : Tensor();
  if (unbatched) {
    out = squeeze(out, 1);
    hn = squeeze(hn, 1);
    if (lstm) cn = squeeze(cn, 1);
  } else if (o.batch_first) {
    out = transpose(out, 0, 1);
  }
  if (lstm) return {out, hn, cn};
  return {out, hn};
}

// ---- cells ------------------------------------------------------------------------------------

RNNCellBase::RNNCellBase(Mode mode, int64_t input_size, int64_t hidden_size, bool bias, Device d)
    : weight_ih(register_parameter("weight_ih",
                                   uniform({gates(mode) * hidden_size, input_size},
                                           1 / std::sqrt(static_cast<double>(hidden_size)), d))),
      weight_hh(register_parameter("weight_hh",
                                   uniform({gates(mode) * hidden_size, hidden_size},
                                           1 / std::sqrt(static_cast<double>(hidden_size)), d))),
      mode_(mode),
      hidden_(hidden_size) {
  if (bias) {
    double bound = 1 / std::sqrt(static_cast<double>(hidden_size));
    bias_ih = &register_parameter("bias_ih", uniform({gates(mode) * hidden_size}, bound, d));
    bias_hh = &register_parameter("bias_hh", uniform({gates(mode) * hidden_size}, bound, d));
  }
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, bool bias,
                 const std::string& nonlinearity, Device d)
    : RNNCellBase(nonlinearity == "relu" ? Mode::rnn_relu : Mode::rnn_tanh, input_size, hidden_size,
                  bias, d) {
  KILN_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", value,
             "[RNNCell] nonlinearity must be 'tanh' or 'relu', got '{}'", nonlinearity);
}

TensorList RNNCellBase::forward(const TensorList& in) {
  bool lstm = mode_ == Mode::lstm;
  const char* op = lstm ? "LSTMCell" : mode_ == Mode::gru ? "GRUCell" : "RNNCell";
  KILN_CHECK(!in.empty() && in.size() <= (lstm ? 3u : 2u) && (!lstm || in.size() != 2), value,
             "[{}] expects (input{}), got {} tensors", op, lstm ? "[, h, c]" : "[, h]", in.size());
  const Tensor& x = in[0];
  KILN_CHECK(x.dim() == 1 || x.dim() == 2, shape,
             "[{}] expects a 1-D (unbatched) or 2-D input, got {}", op, x.meta_str());
  IntList state = x.dim() == 1 ? IntList{hidden_} : IntList{x.size(0), hidden_};
  auto initial = [&](size_t i) {
    return in.size() > i ? in[i] : zeros(state, {.dtype = x.dtype(), .device = x.device()});
  };
  Tensor h = initial(1), b_ih = bias_ih ? *bias_ih : Tensor(), b_hh = bias_hh ? *bias_hh : Tensor();
  switch (mode_) {
    case Mode::rnn_tanh: return {rnn_tanh_cell(x, h, weight_ih, weight_hh, b_ih, b_hh)};
    case Mode::rnn_relu: return {rnn_relu_cell(x, h, weight_ih, weight_hh, b_ih, b_hh)};
    case Mode::gru: return {gru_cell(x, h, weight_ih, weight_hh, b_ih, b_hh)};
    case Mode::lstm: {
      auto [h1, c1] = lstm_cell(x, h, initial(2), weight_ih, weight_hh, b_ih, b_hh);
      return {h1, c1};
    }
  }
  return {};
}

}  // namespace kiln::nn
