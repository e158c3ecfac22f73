#!/usr/bin/env python3
"""Exports models of the public model libraries (torchvision, timm, transformers) with
torch.export -- both the training IR and, with --core, the core-ATen dialect -- and
checks that `kiln run` of each .pt2 gives PyTorch's eager outputs. Random weights; no
download. Needs the project's Python environment plus the libraries:

    py=$(scripts/python-venv.sh); $py -m pip install torchvision timm transformers
    $py tools/pt2/check_zoo.py [--core] [--dynamic] [--kiln build/tools/kiln/kiln] [--work /tmp/kiln-zoo] [NAME ...]

Prints one line per model: the largest absolute difference per output against the
output's scale, and kiln's run time. Exit status 1 if any model fails to import, run or
match (within 1e-4 of the output's scale). With --dynamic, each model is exported with a
dynamic batch (images) or batch and sequence (tokens) and run by kiln at a second shape
too: one imported program must give PyTorch's outputs at both.
"""
import argparse
import os
import subprocess
import sys

import torch


def models():
    import timm
    import torchvision
    import transformers as tf
    from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    image = lambda b=1: (torch.randn(b, 3, 224, 224),)  # noqa: E731
    tokens = lambda b=1, s=8: (torch.randint(0, 100, (b, s)),)  # noqa: E731
    out = {}
    for n in ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit_b_16", "convnext_tiny", "swin_t",
              "regnet_y_400mf", "squeezenet1_0", "densenet121", "shufflenet_v2_x0_5", "mnasnet0_5", "googlenet"]:
        out["tv_" + n] = (lambda n=n: getattr(torchvision.models, n)(weights=None), image)
    for n in ["resnet18", "vit_tiny_patch16_224", "deit_tiny_patch16_224", "convnext_atto", "efficientnet_b0",
              "mobilevit_xxs", "levit_128s", "efficientvit_b0"]:
        out["timm_" + n] = (lambda n=n: timm.create_model(n, pretrained=False), image)
    out["hf_bert"] = (lambda: BertModel(BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                   intermediate_size=128, vocab_size=100)), tokens)
    out["hf_gpt2"] = (lambda: GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100,
                                                         use_cache=False)), tokens)
    out["hf_llama"] = (lambda: LlamaForCausalLM(LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                            num_key_value_heads=2, intermediate_size=128,
                                                            vocab_size=100, use_cache=False)), tokens)
    small = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    out["hf_roberta"] = (lambda: tf.RobertaModel(tf.RobertaConfig(**small)), tokens)
    out["hf_mistral"] = (lambda: tf.MistralModel(tf.MistralConfig(**small, num_key_value_heads=2, use_cache=False)),
                         tokens)
    out["hf_qwen2"] = (lambda: tf.Qwen2Model(tf.Qwen2Config(**small, num_key_value_heads=2, use_cache=False)), tokens)
    out["hf_t5_encoder"] = (lambda: tf.T5EncoderModel(tf.T5Config(vocab_size=100, d_model=64, d_kv=16, d_ff=128,
                                                                  num_layers=2, num_heads=4)), tokens)
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(root, "build", "tools", "kiln", "kiln"))
    ap.add_argument("--work", default="/tmp/kiln-zoo")
    ap.add_argument("--core", action="store_true", help="the core-ATen dialect (run_decompositions)")
    ap.add_argument("--dynamic", action="store_true", help="dynamic batch (and sequence), run at a second shape")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failed = 0
    for name, (make, inputs) in models().items():
        if args.names and name not in args.names:
            continue
        torch.manual_seed(0)
        m = make().eval()
        shapes, dims = [inputs()], None
        if args.dynamic:  # the example at batch 2, a second run at batch 3 (and another length)
            image_like = shapes[0][0].dim() == 4
            shapes = [inputs(2), inputs(3)] if image_like else [inputs(2, 8), inputs(3, 13)]
            batch = torch.export.Dim("batch", min=1, max=16)
            dims = ({0: batch},) if image_like else ({0: batch, 1: torch.export.Dim("seq", min=2, max=64)},)
        ep = torch.export.export(m, shapes[0], dynamic_shapes=dims)
        if args.core:
            ep, name = ep.run_decompositions(), name + "_core"
        if args.dynamic:
            name += "_dynamic"
        base = os.path.join(args.work, name)
        torch.export.save(ep, base + ".pt2")
        for k, x in enumerate(shapes):
            failed += check(args.kiln, m, x, base, f"{name} {tuple(x[0].shape)}" if args.dynamic else name, k)
    return 1 if failed else 0


def check(kiln, m, x, base, name, k):
    """Runs `base`.pt2 on `x` with kiln and compares with m(*x); prints a line; 1 if it fails."""
    from safetensors.torch import load_file, save_file
    with torch.no_grad():
        want = [t for t in torch.utils._pytree.tree_leaves(m(*x)) if isinstance(t, torch.Tensor)]
    save_file({f"input_{i}": t.contiguous() for i, t in enumerate(x)}, f"{base}.in{k}.safetensors")
    p = subprocess.run([kiln, "run", base + ".pt2", "--inputs", f"{base}.in{k}.safetensors", "--outputs",
                        f"{base}.out{k}.safetensors"], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{name}: FAILED: {p.stderr.strip()[-400:]}")
        return 1
    got = load_file(f"{base}.out{k}.safetensors")
    notes, ok = [], len(got) == len(want)
    for i, w in enumerate(want):
        g = got.get(f"output_{i}")
        if g is None or g.shape != w.shape:
            notes.append(f"output {i}: shape {None if g is None else tuple(g.shape)} vs {tuple(w.shape)}")
            ok = False
            continue
        diff = (g.double() - w.double()).abs().max().item()
        scale = w.double().abs().max().item()
        ok = ok and diff <= 1e-4 * max(scale, 1e-30) + 1e-30
        notes.append(f"max |diff| {diff:.1e} (scale {scale:.1e})")
    ms = p.stdout.split("median ")[1].split(" ms")[0]
    print(f"{name}: {'ok' if ok else 'MISMATCH'}: {'; '.join(notes)}; kiln {ms} ms", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
