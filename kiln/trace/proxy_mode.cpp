#include "kiln/trace/proxy_mode.h"

#include <algorithm>
#include <optional>

#include "kiln/api/functional.h"

namespace kiln {

namespace {
thread_local bool t_no_clobber = false;
}  // namespace

NoClobberScope::NoClobberScope() : prev_(t_no_clobber) { t_no_clobber = true; }
NoClobberScope::~NoClobberScope() { t_no_clobber = prev_; }
bool NoClobberScope::active() { return t_no_clobber; }

ProxyMode::ProxyMode(ir::Graph& graph) : graph_(&graph), graphs_{&graph}, guard_(*this) {}

const ProxyMode::Entry* ProxyMode::find(const Tensor& t) const {
  const Entry* e = table_.find(t.impl());
  return e && refers_to(e->id, t) ? e : nullptr;
}

bool ProxyMode::tracked(const Tensor& t) const { return find(t) != nullptr; }

void ProxyMode::record_into(ir::Graph& graph, std::function<ir::Ref(const ir::Ref&)> import) {
  graph_ = &graph;
  auto it = std::find(graphs_.begin(), graphs_.end(), &graph);
  graph_index_ = static_cast<uint32_t>(it - graphs_.begin());
  if (it == graphs_.end()) graphs_.push_back(&graph);
  import_ = std::move(import);
}

void ProxyMode::bind(const Tensor& t, ir::Ref ref) {
  // An entry of a freed tensor stays (a few words, no memory of the tensor's held):
  // the table grows with the graph, not with the live tensors, at O(1) per op.
  table_.set(t.impl(), Entry{t.impl()->id.value(), ref.node, ref.output, graph_index_});
}

ir::Ref ProxyMode::add_input(const Tensor& t, std::string name) {
  ir::Ref ref{graph_->add_input(std::move(name), ir::ValueMeta::of(t)), 0};
  bind(t, ref);
  return ref;
}

ir::Ref ProxyMode::ref_of(const Tensor& t) {
  if (const Entry* e = find(t)) {
    if (e->graph == graph_index_) return e->ref();
    KILN_CHECK(import_, internal, "[trace] {} was recorded into another graph", t.meta_str());
    return import_(e->ref());  // not rebound: the tensor stays the other graph's value there
  }
  // (T2) Captured from outside the trace, or a literal made in it: a constant node that
  // holds the real value (a literal made fake below keeps its data in literals_).
  Tensor value = t;
  if (auto it = literals_.find(t.impl()); it != literals_.end()) {
    if (refers_to(it->second.id, t)) value = it->second.value;
    literals_.erase(it);
  }
  ir::Ref ref{graph_->add_constant(value), 0};
  bind(t, ref);
  return ref;
}

void ProxyMode::alias(const Tensor& alias, const Tensor& of) {
  if (const Entry* e = find(of)) {
    Entry same = *e;  // copied first: set() may grow the table
    same.id = alias.impl()->id.value();
    table_.set(alias.impl(), same);
  }
  Mode::alias(alias, of);
}

Tensor ProxyMode::lift(const Tensor& literal) {
  Tensor seen = lift_literal(literal);
  if (!seen.is_same(literal)) literals_[seen.impl()] = {seen.impl()->id.value(), literal};
  return seen;
}

Outputs ProxyMode::handle(ops::OpKind op, std::span<const Value> args) {
  const ops::OpInfo& info = ops::op_info(op);
  // (T4) Whether self had a node before this op, i.e. before any constant is made.
  bool self_tracked = info.is_inplace() && tracked(std::get<Tensor>(args[info.schema.mutated_arg]));
  ir::ArgList ir_args;
  ir_args.reserve(args.size());
  for (const Value& v : args) {
    if (auto* t = std::get_if<Tensor>(&v)) {
      if (t->defined() && t->is_wrapped_number() && !tracked(*t))  // a C++ number: a scalar
        ir_args.push_back(wrapped_value(*t));                      // argument, not a constant
      else
        ir_args.push_back(t->defined() ? ir::Arg(ref_of(*t)) : ir::Arg());
    } else if (auto* list = std::get_if<TensorList>(&v)) {
      ir::RefList refs;
      for (const Tensor& x : *list) refs.push_back(ref_of(x));
      ir_args.push_back(std::move(refs));
    } else {
      ir_args.push_back(std::visit(
          [](const auto& x) -> ir::Arg {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, Tensor> || std::is_same_v<T, TensorList>)
              return {};
            else
              return x;
          },
          v));
    }
  }
  const std::string& scope = current_scope();
  // Under FakeMode on fake tensors (make_fx's and joint capture's case), straight to the
  // meta function: the dispatch below would only get there through two more calls. (A
  // mode's arguments hold no DTensor: redispatch hands those to their layer first.)
  bool meta_below = !info.is_inplace() && redispatch_is_meta(args);
  Outputs outs = [&] {  // returned in place (no default-constructed Outputs to assign)
    try {
      return meta_below ? dispatch_meta(op, args) : dispatch(op, args);
    } catch (const Error& e) {
      if (scope.empty()) throw;
      throw Error(e.kind(), fmt::format("{} (while tracing {})", e.what(), scope));
    }
  }();
  ir::MetaList meta;
  meta.reserve(outs.size());
  for (const Tensor& t : outs) meta.push_back(ir::ValueMeta::of(t));
  ir::Node* node = graph_->add_call(op, std::move(ir_args), std::move(meta), scope);
  for (size_t i = 0; i < outs.size(); ++i) {
    bool is_self = info.is_inplace() && i == 0;
    if (is_self && NoClobberScope::active() && self_tracked) continue;  // (T4)
    bind(outs[i], {node, static_cast<int>(i)});  // (T3) in-place ops rebind self
    // The caller's handle to self too: under FakeMode, outs[0] is self's fake twin.
    if (is_self) bind(std::get<Tensor>(args[info.schema.mutated_arg]), {node, 0});
  }
  return outs;
}

ir::Graph make_fx(const std::function<TensorList(const TensorList&)>& fn, const TensorList& inputs,
                  const MakeFxOptions& options) {
  ir::Graph graph;
  std::optional<FakeMode> fake;
  TensorList traced;
  if (options.mode == MakeFxOptions::Mode::fake) {
    fake.emplace(options.fake);
    traced.reserve(inputs.size());  // the twins made in place: no copy of each input first
    for (const Tensor& t : inputs) traced.push_back(fake->from_real(t));
  } else {
    traced = inputs;
  }
  {
    ProxyMode proxy(graph);  // innermost: records, then forwards to FakeMode or eager
    for (size_t i = 0; i < traced.size(); ++i)
      proxy.add_input(traced[i], i < options.input_names.size() ? options.input_names[i]
                                                                : "arg" + std::to_string(i));
    TensorList results = fn(traced);
    ir::RefList refs;
    for (const Tensor& t : results) refs.push_back(proxy.ref_of(t));
    graph.set_output(std::move(refs));
  }
#ifndef NDEBUG
  graph.verify();
#endif
  return graph;
}

}  // namespace kiln
