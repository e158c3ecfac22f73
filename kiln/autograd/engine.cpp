// The backward engine: dependency-counted execution of the recorded graph (G3, G5).
#include <iterator>
#include <queue>

#include "kiln/autograd/function.h"
#include "kiln/core/address_map.h"
#include "kiln/core/pool.h"
#include "kiln/device/registry.h"

namespace kiln::autograd {

namespace {

// Sums a leaf's gradients into its grad().
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {
    kind = Kind::accumulate_grad;
    inputs.push_back({leaf_.shape(), leaf_.dtype(), leaf_.device()});
    device = leaf_.device();
  }
  std::string name() const override { return "AccumulateGrad"; }
  GradList apply(GradList& grads) override {
    accumulate(leaf_.impl()->autograd->grad, subclass_like(leaf_, grads[0]));
    return {};
  }
  // A first gradient is kept as is when nothing else can see it; a later one is added
  // in place, so a grad() handle the user (or an optimizer) holds stays current. Under
  // create_graph (grad mode on in backward) gradients keep their history: out of place.
  static void accumulate(Tensor& into, const Tensor& g) {
    if (grad_enabled()) {
      into = into.defined() ? add(into, g) : g;
      return;
    }
    if (!into.defined()) {
      bool own = g.is_contiguous() && g.offset() == 0 && g.impl_ptr().use_count() <= 2 &&
                 g.storage().use_count() == 1 && !g.is_wrapped_number();
      into = own ? g : clone(g);
    } else {
      add_(into, g);
    }
  }

 private:
  Tensor leaf_;
};

// The start of a backward: hands the given output gradients to the outputs' nodes.
class GraphRoot final : public Node {
 public:
  GraphRoot(std::vector<Edge> roots, TensorList grads)
      : grads_(std::make_move_iterator(grads.begin()), std::make_move_iterator(grads.end())) {
    next.assign(roots.begin(), roots.end());
    sequence = UINT64_MAX;
  }
  std::string name() const override { return "GraphRoot"; }
  GradList apply(GradList&) override { return grads_; }

 private:
  GradList grads_;
};

struct ByLatest {
  bool operator()(const Node* a, const Node* b) const { return a->sequence < b->sequence; }
};

// (G4, G5) Checked before anything runs, so a failing backward changes no grad().
void check_saved(const FormulaNode& node) {
  KILN_CHECK(!node.released, value,
             "[{}] backward through the graph a second time: the tensors this node saved were "
             "freed by the first backward. Pass retain_graph=true to the first backward (or "
             "grad) to run it again",
             node.name());
  for (const SavedTensor& s : node.saved) {
    uint32_t now = s.value.storage()->version;
    if (now == s.version) continue;
    // As PyTorch: the tensor is named by the node that produced it ("output 0 of
    // MulBackward0"); the op that saved it is this node, in brackets.
    std::string which =
        s.arg < 0 ? fmt::format(", which is output {} of {},", -1 - s.arg, node.name())
        : s.producer
            ? fmt::format(", which is output {} of {},", s.producer_output, s.producer->name())
            : std::string();
    std::string saved_as =
        s.arg >= 0 ? fmt::format("argument '{}'", ops::op_info(node.called).schema.args[s.arg].name)
                   : fmt::format("output {}", -1 - s.arg);
    fail(ErrorKind::value,
         "[{}] one of the tensors needed for gradient computation has been modified by an "
         "in-place operation: [{}]{} is at version {}; expected version {} instead ({} of {} saved "
         "it)",
         node.name(), s.value.meta_str(), which, now, s.version, saved_as,
         ops::op_name(node.called));
  }
}

// The gradient a node hands an edge, checked against what the edge expects: the same
// shape and device (a formula that breaks this is a bug, G3), converted to its dtype.
Tensor validated(const Node& from, const Edge& e, Tensor g) {
  const GradMeta& want = e.node->inputs[e.input_nr];
  KILN_CHECK(g.shape() == want.shape, internal,
             "[{}] produced a gradient of shape {} for an input of shape {}", from.name(),
             g.shape().str(), want.shape.str());
  KILN_CHECK(g.device() == want.device, device_mismatch,
             "[{}] produced a gradient on {} for an input on {}", from.name(), g.device(),
             want.device);
  if (g.dtype() != want.dtype) g = to(g, want.dtype);
  return g;
}

struct Run {
  bool keep_graph = false;
  const std::vector<Edge>* capture = nullptr;  // grad(): record these, accumulate nothing
  bool create_graph = false;                   // record the backward itself
};

TensorList execute(std::vector<Edge> roots, TensorList root_grads, const Run& run) {
  GradModeGuard mode(run.create_graph);  // backward records nothing, unless create_graph
  auto root = make_pooled<GraphRoot>(std::move(roots), std::move(root_grads));

  // What the run knows of each node reachable from the root, found by an explicit-stack
  // DFS that also gives a post-order: one entry per node, found by address in an
  // open-addressed table of indices (a multiply and usually one cache line per lookup,
  // no allocation per node: std::unordered_map's node chase showed in wall-clock
  // profiles of joint capture).
  struct Info {
    int deps = 0;            // edges into the node not yet run
    bool needed = false;     // grad(): on a path to a requested input
    bool target = false;     // grad(): a requested input's node
    int first_capture = -1;  // grad(): the requested inputs at this node (chained in capture_next)
    GradList buffer;         // gradients gathered for its inputs
  };
  std::vector<Info> infos(1);  // the root's first
  infos.reserve(64);
  AddressMap<uint32_t> index_of(64);
  index_of.set(root.get(), 0);
  auto info_of = [&](const Node* n) -> Info& { return infos[*index_of.find(n)]; };
  std::vector<Node*> post;
  post.reserve(64);
  {
    std::vector<std::pair<Node*, size_t>> stack;
    stack.reserve(64);
    stack.push_back({root.get(), 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->next.size()) {
        Node* child = n->next[i++].node.get();
        if (!child) continue;
        const uint32_t* at = index_of.find(child);
        bool fresh = !at;
        uint32_t k = fresh ? static_cast<uint32_t>(infos.size()) : *at;
        if (fresh) {
          index_of.set(child, k);
          infos.emplace_back();
        }
        ++infos[k].deps;
        if (fresh) {
          if (child->kind == Node::Kind::formula) check_saved(static_cast<FormulaNode&>(*child));
          stack.push_back({child, 0});
        }
      } else {
        post.push_back(n);
        stack.pop_back();
      }
    }
  }
  // grad(): only nodes on a path to a requested input run.
  std::vector<int> capture_next(run.capture ? run.capture->size() : 0, -1);
  if (run.capture) {
    for (size_t k = 0; k < run.capture->size(); ++k)
      if (const uint32_t* at = index_of.find((*run.capture)[k].node.get())) {
        Info& in = infos[*at];
        in.target = true;
        capture_next[k] = in.first_capture;
        in.first_capture = static_cast<int>(k);
      }
    for (Node* n : post) {  // children before parents
      Info& in = info_of(n);
      bool need = in.target;
      for (const Edge& e : n->next) need = need || (e.node && info_of(e.node.get()).needed);
      in.needed = need;
    }
  }

  TensorList captured(run.capture ? run.capture->size() : 0);
  std::vector<Node*> queue;
  queue.reserve(post.size());
  std::priority_queue<Node*, std::vector<Node*>, ByLatest> ready(ByLatest(), std::move(queue));
  ready.push(root.get());
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    Info& self = info_of(n);
    GradList grads = std::move(self.buffer);
    grads.resize(n->inputs.size());
    for (int k = self.first_capture; k >= 0; k = capture_next[static_cast<size_t>(k)])
      captured[static_cast<size_t>(k)] = grads[(*run.capture)[static_cast<size_t>(k)].input_nr];
    for (auto& [nr, weak] : n->retained)
      if (auto m = weak.lock(); m && grads[nr].defined())
        AccumulateGrad::accumulate(m->grad, grads[nr]);

    bool any = n == root.get();
    for (const Tensor& g : grads) any = any || g.defined();
    bool skip = !any || (run.capture && (!self.needed || n->kind == Node::Kind::accumulate_grad));
    GradList outs;
    if (!skip) {
      n->flowed = 0;
      for (size_t i = 0; i < grads.size() && i < 64; ++i)
        n->flowed |= uint64_t{grads[i].defined()} << i;
      for (size_t i = 0; i < grads.size(); ++i)  // a differentiable output nobody used
        if (!grads[i].defined() && is_floating(n->inputs[i].dtype))
          grads[i] = zeros(IntList(n->inputs[i].shape.begin(), n->inputs[i].shape.end()),
                           {.dtype = n->inputs[i].dtype, .device = n->inputs[i].device});
      OptionalDeviceGuard guard;  // (G3) the op's device is current while its formula runs
      if (n != root.get() && n->device.type != DeviceType::meta) guard.set_device(n->device);
      outs = n->apply(grads);
      if (!run.keep_graph) n->release();
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.valid()) continue;
      Info& next = info_of(e.node.get());
      if (i < outs.size() && outs[i].defined()) {
        Tensor g = validated(*n, e, std::move(outs[i]));
        GradList& buf = next.buffer;
        buf.resize(e.node->inputs.size());
        Tensor& slot = buf[e.input_nr];
        if (slot.defined()) {
          DeviceGuard guard(g.device());  // (G3) sums run where the gradients live
          // A sum nothing else holds is added to in place (no new buffer); one that
          // another node or a saved tensor may see is not.
          bool owned = slot.impl_ptr().use_count() == 1 && slot.storage().use_count() == 1 &&
                       !slot.is_wrapped_number() && !run.create_graph;
          if (owned)
            add_(slot, g);
          else
            slot = add(slot, g);
        } else {
          slot = std::move(g);
        }
      }
      if (--next.deps == 0) ready.push(e.node.get());
    }
  }
  return captured;
}

// The output gradients of backward()/grad(): given ones checked, missing ones 1 for
// one-element outputs (G5).
TensorList output_grads(const char* api, const TensorList& outputs, const TensorList& given) {
  KILN_CHECK(given.empty() || given.size() == outputs.size(), value,
             "[{}] got {} gradients for {} outputs", api, given.size(), outputs.size());
  TensorList grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    KILN_CHECK(out.defined() && out.requires_grad(), value,
               "[{}] element {} of tensors does not require grad and does not have a grad_fn{}",
               api, i, out.defined() ? fmt::format(" ({})", out.meta_str()) : "");
    if (i < given.size() && given[i].defined()) {
      KILN_CHECK(given[i].shape() == out.shape(), shape,
                 "[{}] gradient {} has shape {} but output {} has shape {}", api, i,
                 given[i].shape().str(), i, out.shape().str());
      grads.push_back(given[i].device() == out.device() ? given[i] : to(given[i], out.device()));
    } else {
      KILN_CHECK(out.numel() == 1, value,
                 "[{}] grad can be implicitly created only for scalar outputs: output {} is {}; "
                 "pass a gradient of its shape",
                 api, i, out.meta_str());
      DeviceGuard guard(out.device());  // (G3) the seed is made on its output's device
      grads.push_back(ones_like(out));
    }
  }
  return grads;
}

}  // namespace

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = t.defined() ? t.impl()->autograd.get() : nullptr;
  if (!m) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = make_pooled<AccumulateGrad>(t);
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

void backward(const TensorList& outputs, const TensorList& grad_outputs, bool retain_graph,
              bool create_graph) {
  TensorList grads = output_grads("backward", outputs, grad_outputs);
  std::vector<Edge> roots;
  for (const Tensor& out : outputs) roots.push_back(gradient_edge(out));
  execute(std::move(roots), std::move(grads),
          {.keep_graph = retain_graph || create_graph, .create_graph = create_graph});
}

namespace {
TensorList grad_of(const TensorList& outputs, const TensorList& inputs, std::vector<Edge> capture,
                   const TensorList& grad_outputs, bool retain_graph, bool allow_unused,
                   bool create_graph = false) {
  TensorList grads = output_grads("grad", outputs, grad_outputs);
  std::vector<Edge> roots;
  for (const Tensor& out : outputs) roots.push_back(gradient_edge(out));
  TensorList result = execute(std::move(roots), std::move(grads),
                              {.keep_graph = retain_graph || create_graph,
                               .capture = &capture,
                               .create_graph = create_graph});
  for (size_t i = 0; i < result.size(); ++i) {
    KILN_CHECK(result[i].defined() || allow_unused, value,
               "[grad] input {} ({}) was not used to compute the outputs; pass allow_unused=true "
               "to get an undefined gradient for it",
               i, inputs[i].meta_str());
    if (result[i].defined()) result[i] = subclass_like(inputs[i], result[i]);
  }
  return result;
}
}  // namespace

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                bool retain_graph, bool allow_unused, bool create_graph) {
  std::vector<Edge> capture;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined() && inputs[i].requires_grad(), value,
               "[grad] input {} ({}) does not require grad", i,
               inputs[i].defined() ? inputs[i].meta_str() : "undefined");
    capture.push_back(gradient_edge(inputs[i]));
  }
  return grad_of(outputs, inputs, std::move(capture), grad_outputs, retain_graph, allow_unused,
                 create_graph);
}

TensorList grad_at(const TensorList& outputs, const TensorList& inputs,
                   const std::vector<Edge>& edges, const TensorList& grad_outputs,
                   bool allow_unused) {
  KILN_CHECK(inputs.size() == edges.size(), internal, "[grad_at] {} inputs, {} edges",
             inputs.size(), edges.size());
  for (size_t i = 0; i < edges.size(); ++i)
    KILN_CHECK(edges[i].valid(), value, "[grad_at] input {} ({}) did not require grad", i,
               inputs[i].meta_str());
  return grad_of(outputs, inputs, edges, grad_outputs, false, allow_unused);
}

}  // namespace kiln::autograd
