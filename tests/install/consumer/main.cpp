// A consumer of the installed package (static, shared and pkg-config builds): it uses the
// public API a user would -- tensors, errors, export and run, an extension op -- so a
// symbol the shared library fails to export is a link error here.
#include <kiln/kiln.h>

#include <cstdio>

int main() {
  kiln::Tensor x = kiln::tensor({1, 2, 3});
  std::printf("sum=%g\n", kiln::item<float>(kiln::sum(x)));
  std::printf("version=%s\n", kiln::version());
  try {
    kiln::Device bad("gpu:0");
  } catch (const kiln::Error& e) {  // the exception type crosses the library boundary
    std::printf("caught=%s\n", std::string(kiln::to_string(e.kind())).c_str());
  }
  kiln::nn::ReferenceModel ref =
      kiln::nn::make_reference_model("mlp", {{"batch", 2}, {"width", 8}, {"layers", 2}});
  kiln::ExportedProgram program =
      kiln::export_program(*ref.module, ref.example_inputs, {.device = kiln::Device("cuda:0")});
  kiln::move_to_device(program, kiln::Device("cpu:0"));  // traced for a GPU, run here
  kiln::Tensor y = program.run(ref.example_inputs)[0];
  kiln::Tensor eager = (*ref.module)(ref.example_inputs)[0];
  std::printf("program=%s\n",
              kiln::item<float>(kiln::max(kiln::abs(y - eager))) == 0 ? "ok" : "wrong");
  kiln::ops::OpKind twice =
      kiln::define_op({.schema = "consumer::twice(Tensor x) -> Tensor",
                       .meta =
                           [](const kiln::ops::OpCall& c, kiln::ops::MetaOut& out) {
                             out.fresh(c.args.tensor(0).shape(), kiln::DType::f32);
                           },
                       .cpu =
                           [](const kiln::ops::OpCall& c, std::span<kiln::Tensor> outs) {
                             for (int64_t i = 0; i < outs[0].numel(); ++i)
                               outs[0].data<float>()[i] = 2 * c.args.tensor(0).data<float>()[i];
                           },
                       .differentiable = false});
  std::printf("extension=%g\n", kiln::item<float>(kiln::sum(kiln::call_op(twice, {x})[0])));
  return 0;
}
