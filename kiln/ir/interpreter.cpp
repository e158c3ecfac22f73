#include "kiln/ir/interpreter.h"

#include <unordered_map>

#include "kiln/dispatch/dispatch.h"

namespace kiln::ir {

void bind_size_args(ops::OpKind op, std::vector<Value>& args, const SymbolValues& values) {
  const auto& specs = ops::op_info(op).schema.args;
  for (size_t a = 0; a < args.size(); ++a)
    if (const auto* s = std::get_if<SymIntList>(&args[a])) {
      Value& v = args[a];
      const Dims& d = s->dims();
      IntList ints(d.size());
      for (size_t i = 0; i < d.size(); ++i) {
        SymInt x = d.sym(i);
        ints[i] = x.is_symbolic() ? sym::eval(x.expr(), values) : x.hint();
      }
      if (a < specs.size() && specs[a].type != ops::ArgType::int_list)
        v = ints.at(0);
      else
        v = std::move(ints);
    }
}

TensorList interpret(const Graph& graph, const TensorList& inputs, const SymbolValues& values) {
  std::unordered_map<const Node*, Outputs> env;
  auto value_of = [&](const Ref& r) -> const Tensor& { return env.at(r.node)[r.output]; };
  std::vector<Node*> input_nodes = graph.inputs();
  KILN_CHECK(inputs.size() == input_nodes.size(), value,
             "[interpret] the graph takes {} inputs, got {}", input_nodes.size(), inputs.size());
  size_t next_input = 0;
  for (Node* n = graph.first(); n; n = n->next()) {
    switch (n->opcode()) {
      case Opcode::input: {
        const Tensor& t = inputs[next_input++];
        const ValueMeta& m = n->meta()[0];
        // (Y4) symbolic sizes are bound and checked by the program before it interprets
        bool shape_fits =
            t.defined() && (m.shape.is_symbolic() ? t.dim() == static_cast<int64_t>(m.shape.size())
                                                  : t.shape() == m.shape);
        KILN_CHECK(shape_fits && t.dtype() == m.dtype && t.device() == m.device, value,
                   "[interpret] input %{} expects {}, got {}", n->name(), m.str(),
                   t.defined() ? ValueMeta::of(t).str() : "an undefined tensor");
        env[n].push_back(t);
        break;
      }
      case Opcode::constant: env[n].push_back(n->value()); break;
      case Opcode::call: {
        std::vector<Value> args;
        args.reserve(n->args().size());
        call_args(*n, value_of, args);
        if (values) bind_size_args(n->op(), args, values);
        env[n] = dispatch(n->op(), args);
        break;
      }
      case Opcode::output: {
        TensorList out;
        for (const Ref& r : std::get<RefList>(n->args()[0])) out.push_back(value_of(r));
        return out;
      }
    }
  }
  fail(ErrorKind::invalid_graph, "[interpret] the graph has no output node");
}

}  // namespace kiln::ir
