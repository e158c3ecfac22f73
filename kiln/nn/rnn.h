#pragma once
// Recurrent layers as torch.nn's: the cells (one time step) and RNN / LSTM / GRU over a
// sequence (layers, both directions, batch_first, dropout between layers), with
// PyTorch's gate order, parameter names and initialization, so a PyTorch state_dict
// loads as it is. Made of ordinary ops (one matmul for the whole sequence's input
// projection per layer and direction, then one per time step), so they differentiate
// (backpropagation through time), trace and export like any other module.

#include <string>
#include <utility>
#include <vector>

#include "kiln/nn/module.h"

namespace kiln::nn {

/** h' = tanh (or relu) (x W_ih^T + b_ih + h W_hh^T + b_hh); biases may be undefined. */
Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
/** Gates i, f, g, o (in that order along W's rows): c' = f c + i g, h' = o tanh(c').
 * Returns (h', c'). */
std::pair<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c,
                                    const Tensor& w_ih, const Tensor& w_hh,
                                    const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
/** Gates r, z, n: n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn)), h' = (1 - z) n + z h. */
Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

struct RNNOptions {
  int64_t input_size = 0, hidden_size = 0;
  int64_t num_layers = 1;
  /** RNN only: "tanh" or "relu". */
  std::string nonlinearity = "tanh";
  bool bias = true;
  /** Input and output [N, L, features] instead of [L, N, features]. */
  bool batch_first = false;
  /** Dropout on each layer's output but the last, in training. */
  double dropout = 0;
  bool bidirectional = false;
  /** LSTM only: h projected to proj_size (< hidden_size) by weight_hr_l{k}[_reverse]
   * [proj_size, hidden] each step; h states and outputs then have proj_size features. */
  int64_t proj_size = 0;
  Device device = Device("cpu:0");
};

/** The sequence layers. forward({input}) or with initial states ({input, h0} for RNN and
 * GRU, {input, h0, c0} for LSTM; zeros when absent): input [L, N, input_size] (or
 * batch_first, or unbatched [L, input_size]), states [layers * directions, N, hidden].
 * Returns {output [L, N, directions * hidden], h_n} (+ c_n for LSTM). Parameters
 * weight_ih_l{k}[_reverse] [gates * hidden, in], weight_hh_l{k}[_reverse], bias_ih_l{k}...,
 * bias_hh_l{k}..., uniform in +-1/sqrt(hidden), as PyTorch's. */
class RNNBase : public Module {
 public:
  enum class Mode : uint8_t { rnn_tanh, rnn_relu, lstm, gru };
  RNNBase(Mode mode, RNNOptions options);
  TensorList forward(const TensorList& in) override;
  const RNNOptions& options() const { return options_; }
  /** The parameters of layer `layer`, direction `dir`: w_ih, w_hh, then b_ih, b_hh if any,
   * then w_hr with proj_size. */
  std::vector<Tensor*> layer_parameters(int64_t layer, int64_t dir) const;

 private:
  Mode mode_;
  RNNOptions options_;
  std::vector<std::vector<Tensor*>> params_;  // [layer * directions + dir]
};

class RNN final : public RNNBase {
 public:
  explicit RNN(RNNOptions options);
};
class LSTM final : public RNNBase {
 public:
  explicit LSTM(RNNOptions options) : RNNBase(Mode::lstm, std::move(options)) {}
};
class GRU final : public RNNBase {
 public:
  explicit GRU(RNNOptions options) : RNNBase(Mode::gru, std::move(options)) {}
};

/** One time step as a module: forward({x}) or {x, h} ({x, h, c} for LSTMCell) with x
 * [N, input_size] or unbatched [input_size]; returns {h'} ({h', c'}). Parameters
 * weight_ih, weight_hh, bias_ih, bias_hh. */
class RNNCellBase : public Module {
 public:
  RNNCellBase(RNNBase::Mode mode, int64_t input_size, int64_t hidden_size, bool bias,
              Device device);
  TensorList forward(const TensorList& in) override;
  Tensor &weight_ih, &weight_hh;
  Tensor *bias_ih = nullptr, *bias_hh = nullptr;

 private:
  RNNBase::Mode mode_;
  int64_t hidden_;
};

class RNNCell final : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          const std::string& nonlinearity = "tanh", Device device = Device("cpu:0"));
};
class LSTMCell final : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true,
           Device device = Device("cpu:0"))
      : RNNCellBase(RNNBase::Mode::lstm, input_size, hidden_size, bias, device) {}
};
class GRUCell final : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          Device device = Device("cpu:0"))
      : RNNCellBase(RNNBase::Mode::gru, input_size, hidden_size, bias, device) {}
};

}  // namespace kiln::nn
