#!/usr/bin/env python3
"""Exports models of the public model libraries (torchvision, timm, transformers) with
torch.export -- both the training IR and, with --core, the core-ATen dialect -- and
checks that `kiln run` of each .pt2 gives PyTorch's eager outputs. Random weights; no
download. Needs the project's Python environment plus the libraries:

    py=$(scripts/python-venv.sh); $py -m pip install torchvision timm transformers
    $py tools/pt2/check_zoo.py [--core] [--dynamic] [--kiln build/tools/kiln/kiln] [--work /tmp/kiln-zoo] [NAME ...]

Prints one line per model: the largest absolute difference per output against the
output's scale, and kiln's run time. Exit status 1 if any model fails to import, run or
match (within 1e-4 of the output's scale; with --dtype bfloat16 or float16, the model and
its float inputs in that dtype, within 5e-2 or 1e-2). With --dynamic, each model is exported with a
dynamic batch (images) or batch and sequence (tokens) and run by kiln at a second shape
too: one imported program must give PyTorch's outputs at both; --dynamic-size makes the
spatial sizes of images and videos (and the length of audio) dynamic as well, and the
second run takes a larger image (a longer clip).
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
    # A wider sweep (2026-12-07): other layer kinds each library brings -- grouped and 3-d
    # convolutions, segmentation heads with interpolation, relative-position biases,
    # outlook/halo/split attention, ALiBi, soft-capping, sliding windows, MoE routing.
    for n in ["mobilenet_v2", "resnext50_32x4d", "efficientnet_v2_s", "maxvit_t", "swin_v2_t", "alexnet",
              "regnet_x_400mf", "mnasnet1_0"]:
        out["tv_" + n] = (lambda n=n: getattr(torchvision.models, n)(weights=None), image)
    out["tv_inception_v3"] = (lambda: torchvision.models.inception_v3(weights=None, init_weights=False,
                                                                      aux_logits=False), lambda b=1: image_of(b, 299))
    for n in ["deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large", "fcn_resnet50"]:
        out["tv_" + n] = (lambda n=n: getattr(torchvision.models.segmentation, n)(weights=None,
                                                                                weights_backbone=None), image)
    out["tv_r3d_18"] = (lambda: torchvision.models.video.r3d_18(weights=None),
                        lambda b=1: (torch.randn(b, 3, 8, 64, 64),))
    for n in ["beit_base_patch16_224", "swin_tiny_patch4_window7_224", "poolformer_s12", "resmlp_12_224",
              "cait_xxs24_224", "xcit_nano_12_p16_224", "ghostnet_100", "rexnet_100", "hrnet_w18_small", "dla34",
              "dm_nfnet_f0", "eva02_tiny_patch14_224", "fastvit_t8", "repvit_m1", "mobilenetv4_conv_small",
              "efficientformer_l1", "edgenext_xx_small", "tiny_vit_5m_224", "pit_ti_224", "volo_d1_224",
              "twins_pcpvt_small", "pvt_v2_b0", "resnest14d", "mixnet_s",
              "ecaresnet26t", "skresnet18", "cspdarknet53", "lcnet_050", "mobilevitv2_050", "efficientvit_m0",
              "davit_tiny", "focalnet_tiny_srf", "sequencer2d_s", "coat_lite_tiny", "gcvit_xxtiny", "nest_tiny", "convmixer_768_32", "inception_next_tiny"]:
        out["timm_" + n] = (lambda n=n: timm.create_model(n, pretrained=False), image)
    for n in ["halonet26t", "botnet26t_256"]:  # attention over fixed blocks: 256 x 256 images
        out["timm_" + n] = (lambda n=n: timm.create_model(n, pretrained=False), lambda b=1: image_of(b, 256))
    out["timm_vit_small_patch14_reg4_dinov2"] = (
        lambda: timm.create_model("vit_small_patch14_reg4_dinov2", pretrained=False, img_size=224), image)
    for name, cls, cfg, extra in [
            ("distilbert", "DistilBertModel", "DistilBertConfig", dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128)),
            ("albert", "AlbertModel", "AlbertConfig", dict(small, embedding_size=32)),
            ("electra", "ElectraModel", "ElectraConfig", dict(small, embedding_size=32)),
            ("deberta_v2", "DebertaV2Model", "DebertaV2Config", small),
            ("gpt_neo", "GPTNeoModel", "GPTNeoConfig",
             dict(hidden_size=64, num_layers=2, num_heads=4, vocab_size=100, attention_types=[[["global", "local"], 1]],
                  window_size=4, use_cache=False)),
            ("gptj", "GPTJModel", "GPTJConfig", dict(n_embd=64, n_layer=2, n_head=4, vocab_size=100, rotary_dim=8,
                                                     use_cache=False)),
            ("opt", "OPTModel", "OPTConfig", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                  ffn_dim=128, vocab_size=100, word_embed_proj_dim=64, use_cache=False)),
            ("bloom", "BloomModel", "BloomConfig", dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=100,
                                                        use_cache=False)),
            ("falcon", "FalconModel", "FalconConfig", dict(small, use_cache=False)),
            ("phi", "PhiModel", "PhiConfig", dict(small, use_cache=False)),
            ("phi3", "Phi3Model", "Phi3Config", dict(small, num_key_value_heads=2, use_cache=False, pad_token_id=0)),
            ("gemma", "GemmaModel", "GemmaConfig", dict(small, num_key_value_heads=2, head_dim=16, use_cache=False)),
            ("gemma2", "Gemma2Model", "Gemma2Config", dict(small, num_key_value_heads=2, head_dim=16, use_cache=False,
                                                           sliding_window=4)),
            ("qwen3", "Qwen3Model", "Qwen3Config", dict(small, num_key_value_heads=2, head_dim=16, use_cache=False)),
            ("mixtral", "MixtralModel", "MixtralConfig", dict(small, num_key_value_heads=2, num_local_experts=4,
                                                              num_experts_per_tok=2, use_cache=False)),
            ("stablelm", "StableLmModel", "StableLmConfig", dict(small, num_key_value_heads=2, use_cache=False)),
            ("gpt_bigcode", "GPTBigCodeModel", "GPTBigCodeConfig", dict(n_embd=64, n_layer=2, n_head=4,
                                                                         vocab_size=100, use_cache=False)),
            ("mobilebert", "MobileBertModel", "MobileBertConfig", dict(small, embedding_size=32, intra_bottleneck_size=32,
                                                                      true_hidden_size=32)),
            ("squeezebert", "SqueezeBertModel", "SqueezeBertConfig", dict(small, embedding_size=64)),
    ]:
        out["hf_" + name] = (lambda cls=cls, cfg=cfg, extra=extra: getattr(tf, cls)(getattr(tf, cfg)(**extra)), tokens)
    out["hf_vit"] = (lambda: tf.ViTModel(tf.ViTConfig(**small, image_size=64, patch_size=16)),
                     lambda b=1: image_of(b, 64))
    out["hf_dinov2"] = (lambda: tf.Dinov2Model(tf.Dinov2Config(**small, image_size=64, patch_size=16)),
                        lambda b=1: image_of(b, 80))
    out["hf_segformer"] = (lambda: tf.SegformerModel(tf.SegformerConfig(hidden_sizes=[16, 32, 48, 64],
                                                                        num_attention_heads=[1, 2, 2, 4],
                                                                        depths=[1, 1, 1, 1])),
                           lambda b=1: image_of(b, 64))
    out["hf_whisper_encoder"] = (lambda: tf.WhisperModel(tf.WhisperConfig(
        d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=32,
        vocab_size=100, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)).get_encoder(),
        lambda b=1: (torch.randn(b, 16, 64),))
    out["hf_wav2vec2"] = (lambda: tf.Wav2Vec2Model(tf.Wav2Vec2Config(**small, conv_dim=(16, 16), conv_kernel=(10, 3),
                                                                     conv_stride=(5, 2), num_conv_pos_embeddings=16,
                                                                     num_conv_pos_embedding_groups=4)),
                          lambda b=1, s=800: (torch.randn(b, s),))
    out["hf_bart"] = (lambda: tf.BartModel(tf.BartConfig(vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=2,
                                                         encoder_attention_heads=4, decoder_attention_heads=4,
                                                         encoder_ffn_dim=128, decoder_ffn_dim=128, use_cache=False)),
                      tokens)
    out["hf_clip_text"] = (lambda: tf.CLIPTextModel(tf.CLIPTextConfig(**small)), tokens)
    return out


def image_of(b, size):
    return (torch.randn(b, 3, size, size),)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(root, "build", "tools", "kiln", "kiln"))
    ap.add_argument("--work", default="/tmp/kiln-zoo")
    ap.add_argument("--core", action="store_true", help="the core-ATen dialect (run_decompositions)")
    ap.add_argument("--dynamic", action="store_true", help="dynamic batch (and sequence), run at a second shape")
    ap.add_argument("--dynamic-size", action="store_true",
                    help="with --dynamic: images, videos and audio get dynamic spatial sizes (lengths) too")
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                    help="the model's parameters and float inputs in this dtype")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failed = 0
    for name, (make, inputs) in models().items():
        if args.names and name not in args.names:
            continue
        torch.manual_seed(0)
        try:
            m = make().eval().to(getattr(torch, args.dtype))
        except Exception as e:  # a model this library version does not have: not kiln's failure
            print(f"{name}: skipped: the library cannot make it here ({type(e).__name__}: {str(e)[:200]})")
            continue
        dtype = getattr(torch, args.dtype)
        inputs = (lambda f: lambda *a: tuple(t.to(dtype) if t.is_floating_point() else t for t in f(*a)))(inputs)
        shapes, dims = [inputs()], None
        if args.dynamic:  # the example at batch 2, a second run at batch 3 (and another length)
            image_like = shapes[0][0].is_floating_point()  # images, videos, audio: batch only
            shapes = [inputs(2), inputs(3)] if image_like else [inputs(2, 8), inputs(3, 13)]
            batch = torch.export.Dim("batch", min=1, max=16)
            dims = ({0: batch},) if image_like else ({0: batch, 1: torch.export.Dim("seq", min=2, max=64)},)
            if image_like and args.dynamic_size:  # the spatial dims (audio: the length) too
                x = shapes[0][0]
                spatial = range(2, x.dim()) if x.dim() > 2 else range(1, 2)
                dims = ({0: batch, **{d: torch.export.Dim(f"size{d}", min=x.shape[d] // 2, max=x.shape[d] * 2)
                                      for d in spatial}},)
                grown = [x.shape[d] + (16 if d % 2 == 0 else 8) * (1 if x.dim() > 2 else 10) for d in spatial]
                second = list(shapes[1][0].shape)
                for d, n in zip(spatial, grown):
                    second[d] = n
                shapes[1] = (torch.randn(second, dtype=x.dtype),) + tuple(shapes[1][1:])
        try:
            ep = torch.export.export(m, shapes[0], dynamic_shapes=dims)
            if args.core:
                ep, name = ep.run_decompositions(), name + "_core"
        except Exception as e:  # PyTorch's own export fails: reported, not counted as kiln's
            first = (str(e).splitlines() or [""])[0][:200]
            print(f"{name}: skipped: torch.export fails ({type(e).__name__}: {first})")
            continue
        if args.dynamic:
            name += "_dynamic_size" if args.dynamic_size else "_dynamic"
        if args.dtype != "float32":
            name += "_" + args.dtype
        base = os.path.join(args.work, name)
        torch.export.save(ep, base + ".pt2")
        for k, x in enumerate(shapes):
            failed += check(args.kiln, m, x, base, f"{name} {tuple(x[0].shape)}" if args.dynamic else name, k,
                            TOLERANCE[args.dtype])
    return 1 if failed else 0


# Largest difference from PyTorch's output, relative to the output's largest magnitude. In
# half precision every op rounds to 8 (bf16) or 11 (f16) bits, and kiln and PyTorch may
# order a sum differently, so the errors of a deep network add up to a few ulps of the scale.
TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2, "float16": 1e-2}


def check(kiln, m, x, base, name, k, tolerance):
    """Runs `base`.pt2 on `x` with kiln and compares with m(*x); prints a line; 1 if it fails."""
    from safetensors.torch import load_file, save_file
    try:
        with torch.no_grad():
            want = [t for t in torch.utils._pytree.tree_leaves(m(*x)) if isinstance(t, torch.Tensor)]
    except RuntimeError as e:  # the model itself does not take this shape (a fixed resolution)
        print(f"{name}: skipped: PyTorch's own forward fails at this shape ({str(e).splitlines()[0][:160]})")
        return 0
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
        ok = ok and diff <= tolerance * max(scale, 1e-30) + 1e-30
        notes.append(f"max |diff| {diff:.1e} (scale {scale:.1e})")
    ms = p.stdout.split("median ")[1].split(" ms")[0]
    print(f"{name}: {'ok' if ok else 'MISMATCH'}: {'; '.join(notes)}; kiln {ms} ms", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
