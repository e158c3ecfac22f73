#!/usr/bin/env python3
"""Makes tests/pt2/: small torch.export programs (.pt2) with PyTorch's inputs and outputs.

Run with current PyTorch from PyPI, in the project's Python environment:

    $(scripts/python-venv.sh) tools/pt2/make_corpus.py

Every model is tiny, with random weights from a fixed seed. For each NAME it writes
NAME.pt2 and NAME.safetensors holding input_0.., output_0.. (PyTorch's results) and,
where the program writes buffers, state.<buffer> (their values after the call). kiln's
tests (tests/interop/pt2_test.cpp) need no Python: the files are committed.
"""
import json
import pathlib
import shutil
import sys
import tempfile
import zipfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "pt2"


# ---- models -------------------------------------------------------------------------

class MlpBn(nn.Module):
    """Linear, BatchNorm1d (training mode: running statistics written), a non-persistent
    buffer and a tensor constant."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)
        self.bn = nn.BatchNorm1d(5)
        self.register_buffer("offset", torch.linspace(-1, 1, 5), persistent=False)
        self.scale = torch.tensor([0.5, 2.0, 1.0, -1.0, 3.0])  # a tensor constant

    def forward(self, x):
        return torch.relu(self.bn(self.fc(x))) * self.scale + self.offset


class SqueezeExcite(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.reduce = nn.Conv2d(c, c // 2, 1)
        self.expand = nn.Conv2d(c // 2, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.expand(F.relu(self.reduce(s))))


class Cnn(nn.Module):
    """A small MobileNet-like network: conv, batch norm, hardswish, depthwise conv,
    squeeze-excitation, max and adaptive pooling, a classifier."""

    def __init__(self, width=8, classes=4):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(width)
        self.dw = nn.Conv2d(width, width, 3, padding=1, groups=width)
        self.se = SqueezeExcite(width)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = F.hardswish(self.bn(self.stem(x)))
        x = self.pool(self.se(F.relu6(self.dw(x))))
        x = torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)
        return self.head(x)


class EncoderLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, 2 * d)
        self.ff2 = nn.Linear(2 * d, d)

    def forward(self, x, keep):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        mask = keep[:, None, None, :]  # padding mask, broadcast over heads and queries
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))


class Encoder(nn.Module):
    """A BERT-like encoder: token and position embeddings, two pre-norm layers with a
    padding mask, mean pooling over kept tokens."""

    def __init__(self, vocab=50, d=16, heads=4, layers=2, max_len=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.layers = nn.ModuleList(EncoderLayer(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, ids, keep):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        for layer in self.layers:
            x = layer(x, keep)
        x = self.ln(x)
        w = keep.to(x.dtype).unsqueeze(-1)
        return (x * w).sum(1) / w.sum(1)


class RmsNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x, cos, sin):
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-b, a), dim=-1) * sin


class DecoderLayer(nn.Module):
    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.norm1 = RmsNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.kv = nn.Linear(d, 2 * kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.norm2 = RmsNorm(d)
        self.gate = nn.Linear(d, 2 * d, bias=False)
        self.up = nn.Linear(d, 2 * d, bias=False)
        self.down = nn.Linear(2 * d, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.hd).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        # grouped-query heads: each key/value head serves heads // kv_heads query heads
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    """A Llama-like decoder: RMS norm written in ops, rotary embeddings from non-persistent
    buffers, grouped-query attention with a causal mask built from arange / full / triu /
    comparisons, tied embedding and LM-head weights, and the next token's log-probability
    picked with gather."""

    def __init__(self, vocab=64, d=32, heads=4, kv_heads=2, layers=2, max_len=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(DecoderLayer(d, heads, kv_heads) for _ in range(layers))
        self.norm = RmsNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.embed.weight  # tied
        hd = d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        angles = torch.outer(torch.arange(max_len).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        pos = torch.arange(t, device=ids.device)
        causal = pos[None, :] <= pos[:, None]
        bias = torch.full((t, t), float("-inf"), device=ids.device).triu(1)
        mask = torch.where(causal, bias, torch.full_like(bias, float("-inf")))
        x = self.embed(ids)
        cos, sin = self.cos[:t], self.sin[:t]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        logp = F.log_softmax(self.lm_head(self.norm(x)), dim=-1)
        nxt = torch.roll(ids, -1, dims=1)
        picked = logp.gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
        return logp, picked.cumsum(1)


class Recurrent(nn.Module):
    """An LSTM (two layers) and a GRU over its output, then a linear head."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 8, num_layers=2, batch_first=True)
        self.gru = nn.GRU(8, 6, batch_first=True)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        z, hg = self.gru(y)
        return self.head(z), h, c, hg


@torch.library.custom_op("kilntest::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x + alpha * y


@scaled_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


class CustomOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.ops.kilntest.scaled_add(self.fc(x), x, 0.25).tanh()


@torch.library.custom_op("kilntest::step2", mutates_args=("x", "y"))
def step2(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    x.add_(z)
    y.mul_(z)
    return x + y


@step2.register_fake
def _(x, y, z):
    return torch.empty_like(z)


class MutatingCustomOp(nn.Module):
    """A custom op that writes two buffers: the training IR calls it in place, the
    core-ATen dialect through higher_order.auto_functionalized_v2."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))
        self.register_buffer("scale", torch.ones(4))

    def forward(self, z):
        return torch.ops.kilntest.step2(self.total, self.scale, z.tanh()) * 2


class MutatingViews(nn.Module):
    """The same op writing views of buffers: two slices of one buffer, and two strided
    columns of another (auto_functionalized_v2's slice and as_strided view forms)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("flat", torch.zeros(8))
        self.register_buffer("grid", torch.ones(4, 3))

    def forward(self, z):
        a = torch.ops.kilntest.step2(self.flat[:4], self.flat[4:], z)
        b = torch.ops.kilntest.step2(self.grid[:, 0], self.grid[:, 2], z.sigmoid())
        return a + b


def mutating_custom_op():
    g = torch.Generator().manual_seed(3)
    z = torch.randn(4, generator=g)
    write("custom_op_mutating", MutatingCustomOp(), (z,), train=True)
    write("custom_op_mutating_core", MutatingCustomOp(), (z,), train=True, core=True)
    write("custom_op_views", MutatingViews(), (z,), train=True)
    write("custom_op_views_core", MutatingViews(), (z,), train=True, core=True)


class BiRecurrent(nn.Module):
    """A two-layer bidirectional LSTM and a bidirectional GRU (sequence first)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, num_layers=2, bidirectional=True)
        self.gru = nn.GRU(10, 3, bidirectional=True)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        z, hg = self.gru(y)
        return z, h, c, hg


class Assorted(nn.Module):
    """Ops public models emit that the families above do not: bilinear upsampling, diff,
    `&` of masks, reshape_as, in-place dropout (eval), a slice written in place, and a
    view of a convolution's output (kiln lays it out otherwise than PyTorch)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.drop = nn.Dropout(0.5, inplace=True)

    def forward(self, x):
        y = F.interpolate(self.conv(x), scale_factor=2, mode="bilinear", align_corners=False)
        z = y.clone()
        z[:, :, 0] = 1.0
        z[:, 1:, :, 1:3] = z[:, 1:, :, 1:3] * 2
        mask = (z > 0) & (z < 1.5)
        d = torch.diff(z, dim=-1)
        flat = self.conv(x).view(x.shape[0], -1)
        return self.drop(torch.where(mask[..., 1:], d, -d)), flat.reshape_as(flat), flat.sum(1)


class Layers(nn.Module):
    """The wider sweep of public models' ops (2026-12-07): 3-d pooling, im2col/col2im
    (timm's VOLO), F.normalize (Swin v2, XCiT), addcmul (ResMLP), swapaxes (MaxViT), weight
    norm (wav2vec2), Tensor.T (Falcon), grid sampling, group and instance norm, the losses,
    reductions and index ops ATen keeps whole, projected LSTMs, tanh RNNs and cells,
    max_unpool (SegNet-style decoders), an embedding with max_norm (it writes its weight)."""

    def __init__(self):
        super().__init__()
        self.prelu = nn.PReLU(4)
        self.gn = nn.GroupNorm(2, 4)
        self.deconv = nn.ConvTranspose1d(4, 2, 3, stride=2)
        self.lstm = nn.LSTM(4, 6, proj_size=3, batch_first=True)
        self.rnn = nn.RNN(4, 3, batch_first=True)
        self.cell = nn.GRUCell(4, 3)
        self.bag = nn.EmbeddingBag(10, 3, mode="mean")
        self.capped = nn.Embedding(10, 3, max_norm=1.0)  # embedding_renorm_: a parameter written
        self.wn = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3, padding=1))
        self.bilinear = nn.Bilinear(4, 4, 2)  # _trilinear in the core dialect

    def forward(self, img, vol, seq, x, idx):
        a = F.normalize(x, dim=-1) + torch.addcmul(x, x, x, value=0.5) + torch.addcdiv(x, x, x.abs() + 1)
        b = x.swapaxes(0, 1).movedim(0, 1) * x.T.T + torch.linalg.vector_norm(x, float("inf"), dim=1, keepdim=True)
        pools = [F.adaptive_avg_pool3d(vol, (2, 3, 3)), F.max_pool3d(vol, 2), F.avg_pool3d(vol, 2, 1, 1),
                 F.adaptive_max_pool1d(seq, 3), F.max_unpool2d(*F.max_pool2d(img, 2, return_indices=True), 2),
                 F.max_unpool3d(*F.max_pool3d(vol, 2, return_indices=True), 2, output_size=vol.shape[2:])]
        folded = F.fold(F.unfold(img, 3, padding=1, stride=2), (8, 8), 3, padding=1, stride=2)
        grid = F.affine_grid(torch.cat([x, x.flip(0)]).reshape(-1)[:12].reshape(2, 2, 3) * 0.5, (2, 4, 5, 5), align_corners=False)
        sampled = F.grid_sample(img, grid, align_corners=False) + F.grid_sample(img, grid, mode="nearest",
                                                                             padding_mode="border")
        shuffled = F.channel_shuffle(F.pixel_unshuffle(img, 2), 4)
        acts = (self.prelu(img) + F.hardshrink(img, 0.3) + F.softshrink(img, 0.3) + F.celu(img, 0.7)
                + F.threshold(img, 0.1, -2.0) + F.logsigmoid(img) + F.tanhshrink(img) + F.softsign(img))
        norms = self.gn(img) + F.instance_norm(img)
        t = idx[:3] % 4
        losses = torch.stack([F.cross_entropy(x, t, label_smoothing=0.1), F.mse_loss(x, x.flip(0)),
                              F.binary_cross_entropy_with_logits(x, torch.sigmoid(x.flip(1))),
                              F.smooth_l1_loss(x, x.flip(0), beta=0.5), F.huber_loss(x, x * 2),
                              F.kl_div(F.log_softmax(x, 1), F.softmax(x.flip(1), 1), reduction="batchmean"),
                              F.cosine_similarity(x, x.flip(0)).sum(), F.pairwise_distance(x, x.flip(0)).sum()])
        v, m = torch.var_mean(x, 1)
        s, _ = torch.std_mean(x, 0, correction=0)
        stats = [v + m, s, torch.nansum(x, 1), torch.median(x, 1).values, torch.kthvalue(x, 2, 1).values,
                 torch.cummax(x, 1).values, torch.logcumsumexp(x, 1), x.argsort(1, descending=True),
                 torch.bucketize(x, torch.tensor([-1.0, 0.0, 1.0])), torch.histc(x, 5, -2.0, 2.0),
                 torch.aminmax(x, dim=0).max]
        ones = torch.ones(2, 4)
        index = [x.index_add(0, idx[:2], ones), x.index_copy(0, idx[:2], ones), x.index_fill(1, idx[:2], -1.0),
                 x.scatter_reduce(0, idx.reshape(2, 2).repeat(1, 2) % 3, ones, "amax"),
                 x.masked_scatter(x > 0, torch.arange(12.0).reshape(3, 4)), torch.take_along_dim(x, x.argsort(1), 1)]
        shapes = [torch.diag_embed(x[0]), x.diagonal() * 2 + torch.trace(x[:, :3]),
                  x[torch.tril_indices(3, 3).unbind(0)], torch.rot90(x, 1, (0, 1)),
                  torch.cat(torch.tensor_split(x, 3, 1)[::-1], 1)]
        math = (torch.hypot(x, x.flip(0)) + torch.logaddexp(x, x.flip(0)) + torch.xlogy(x.abs(), x.abs() + 1)
                + torch.lgamma(x.abs() + 1) + torch.sinc(x) + torch.fmax(x, x.flip(0)) + torch.copysign(x, x.flip(1))
                + torch.heaviside(x, torch.tensor([0.5])) + torch.deg2rad(x) + torch.special.logit(torch.sigmoid(x)))
        products = [torch.addbmm(torch.zeros(3, 3), x.reshape(1, 3, 4), x.reshape(1, 3, 4).transpose(1, 2)),
                    torch.addmv(torch.ones(3), x, x[0]), torch.dot(x[0], x[1]), torch.outer(x[0], x[1]),
                    torch.linalg.cross(x[:, :3], x.flip(0)[:, :3]), torch.cdist(x, x.flip(0))]
        recurrent = [self.deconv(seq), self.lstm(seq.transpose(1, 2))[0], self.rnn(seq.transpose(1, 2))[1],
                     self.cell(x), self.bag(idx.reshape(2, 2) + 3), self.wn(seq), self.capped(idx % 10)]
        y = x.flip(0)
        more = [torch.round(x, decimals=2) + torch.linspace(0, 1, 4) + torch.logspace(0, 1, 4), x.tile(2, 1),
                torch.block_diag(x[:2, :2], x[:1]), torch.kron(x[:2, :2], x[:2, :3]),
                torch.tensordot(x, x.T, dims=([1], [0])), torch.trapezoid(x, dim=1), torch.renorm(x, 2, 0, 1.0),
                torch.special.erfcx(x) + torch.special.ndtr(x) + torch.special.log_ndtr(x)
                + torch.special.entr(x.abs()) + torch.special.xlog1py(x.abs(), x.abs()),
                torch.float_power(x.abs(), 2).float() + torch.clip(x, -0.5, 0.5) + torch.fix(x) + torch.asinh(x)
                + torch.atanh(x.tanh() * 0.9) + torch.acosh(x.abs() + 1),
                torch.stack([F.margin_ranking_loss(x[0], x[1], torch.sign(x[2])), F.soft_margin_loss(x, torch.sign(y)),
                             F.hinge_embedding_loss(x, torch.sign(y)), F.triplet_margin_loss(x, y, x * 2),
                             F.multi_margin_loss(x, t)]),
                F.pdist(x), F.dropout2d(img, 0.3, training=False) + F.selu(img) + F.elu(img, 0.5),
                F.max_pool1d(seq, 2, return_indices=True)[1], self.bilinear(x, y), x.scatter(0, idx.reshape(2, 2).repeat(1, 2) % 3, ones,
                                                                         reduce="add")]
        return (a, b, *pools, folded, sampled, shuffled, acts, norms, losses, *stats, *index, *shapes, math,
                *products, *recurrent, *more)


class Linalg(nn.Module):
    """torch.linalg in both dialects: the core one decomposes to _linalg_svd, _linalg_eigh,
    the *_ex forms, and runs the error checks of inv, solve and cholesky through
    higher_order.with_effects with an ordering token."""

    def forward(self, a, b):
        spd = a @ a.T + 4 * torch.eye(4)
        return (torch.linalg.det(spd), torch.logdet(spd), torch.linalg.slogdet(spd)[1],
                torch.linalg.inv(spd) @ b, torch.linalg.solve(spd, b), torch.linalg.cholesky(spd),
                torch.linalg.qr(a[:, :3])[1].abs(), torch.linalg.eigvalsh(spd), torch.linalg.svdvals(a),
                torch.linalg.matrix_norm(a) + torch.linalg.norm(a) + torch.linalg.norm(a, 2),
                torch.linalg.pinv(a[:, :3]), torch.linalg.matrix_power(a, 3))


class Regions(nn.Module):
    """Regions PyTorch exports as higher-order ops with a subgraph: autocast switched off (as
    timm's EfficientViT computes its attention in f32) and grad mode switched off; and
    torch.min / torch.max of two tensors (T5's attention)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        with torch.autocast("cpu", enabled=False):
            a = torch.softmax(h.float() * 2, -1)
        with torch.no_grad():
            b = h * 3 - 1
        return torch.min(a, b) + torch.max(h, b)


class SizesAsValues(nn.Module):
    """What public models do with a dynamic batch and sequence that a plain decoder does
    not: a convolution over the batch (torchvision, timm), positions from arange and diff,
    and advanced indexing with them (transformers' mask and position code)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.table = nn.Parameter(torch.randn(32, 4))

    def forward(self, img, ids):
        b, s = ids.shape
        pos = torch.arange(s).unsqueeze(0).expand(b, -1)
        steps = torch.diff(torch.cat([pos[:, :1] - 1, pos], dim=1), dim=1)
        picked = self.table[ids % 32]  # [b, s, 4]
        rows = torch.arange(b)
        sel = picked[rows[:, None], pos]  # two index tensors
        feat = F.adaptive_avg_pool2d(F.max_pool2d(self.conv(img), 2), 1).flatten(1)  # [b, 4]
        return sel * steps.unsqueeze(-1) + feat.unsqueeze(1)


def sizes_as_values():
    """SizesAsValues with a dynamic batch and sequence (both dialects), and PyTorch's results
    at a second shape in NAME_alt.safetensors."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    m = SizesAsValues()
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=16)
    dims = {"img": {0: batch}, "ids": {0: batch, 1: seq}}
    img, ids = torch.randn(2, 3, 8, 8, generator=g), torch.randint(0, 64, (2, 5), generator=g)
    alt_img, alt_ids = torch.randn(3, 3, 8, 8, generator=g), torch.randint(0, 64, (3, 11), generator=g)
    with torch.no_grad():
        out = m(alt_img, alt_ids)
    for name, core in (("sizes_dynamic", False), ("sizes_dynamic_core", True)):
        write(name, m, (img, ids), dynamic_shapes=dims, core=core)
        save_file({"input_0": alt_img, "input_1": alt_ids, "output_0": out.contiguous()},
                  OUT / f"{name}_alt.safetensors")


class DataDependent(nn.Module):
    """Sizes that are the data's (unbacked symbols u0, u1, ... in the file): nonzero's
    rows, boolean-mask selection and masked_select, each used after."""

    def forward(self, x):
        idx = torch.nonzero(x > 0)
        picked = x[x > 0.5] * 2
        neg = torch.masked_select(x, x < 0)
        return idx.sum(0), picked, neg.sum() + picked.sum()


class ItemSize(nn.Module):
    """A count read from a tensor (t.item()) used as a size, with torch._check facts."""

    def forward(self, x, n):
        k = n.item()
        torch._check_is_size(k)
        torch._check(k <= 6)
        return x[:k].sum(0), torch.zeros(k) + 1


class ItemValue(nn.Module):
    """A number read from a tensor (a float item()) used in arithmetic, negative included."""

    def forward(self, x, s):
        v = s.item()
        return x * v + v


class OneHot(nn.Module):
    """one_hot, which the core dialect decomposes with two torch._assert_async checks on the
    classes (non-negative, below num_classes): runtime assertions on tensor data."""

    def forward(self, idx, x):
        return F.one_hot(idx, 5).float() @ x


class UniqueCounts(nn.Module):
    """Distinct values and bins, whose counts are the data's: unique (with inverse and
    counts), unique_consecutive, unique along a dim, bincount."""

    def forward(self, x):
        values, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
        runs, run_counts = torch.unique_consecutive(x, return_counts=True)
        rows = torch.unique(x.reshape(4, 2), dim=0)
        return values * 2, inverse, counts, runs, run_counts, rows, torch.bincount(x, minlength=3)


def data_dependent():
    """DataDependent, OneHot and UniqueCounts in both dialects, ItemSize, and PyTorch's results for
    inputs with other counts (none positive, a count of 0, one value) in
    NAME_alt.safetensors."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 3, generator=g)
    item = ItemSize()
    write("item_size", item, (x, torch.tensor([2])))
    tensors = {"input_0": x, "input_1": torch.tensor([0])}
    tensors.update({f"output_{i}": y.contiguous() for i, y in enumerate(item(x, torch.tensor([0])))})
    save_file(tensors, OUT / "item_size_alt.safetensors")
    g = torch.Generator().manual_seed(6)
    x = torch.randn(3, 4, generator=g)
    write("item_value", ItemValue(), (x, torch.tensor(0.5)))
    save_file({"input_0": x, "input_1": torch.tensor(-2.0), "output_0": ItemValue()(x, torch.tensor(-2.0))},
              OUT / "item_value_alt.safetensors")
    uniq = UniqueCounts()
    x, alt = torch.tensor([3, 1, 1, 4, 3, 3, 0, 5]), torch.tensor([7, 7, 7, 7, 2, 2, 7, 7])
    for name, core in (("unique_counts", False), ("unique_counts_core", True)):
        write(name, uniq, (x,), core=core)
        tensors = {"input_0": alt}
        tensors.update({f"output_{i}": y.contiguous() for i, y in enumerate(uniq(alt))})
        save_file(tensors, OUT / f"{name}_alt.safetensors")
    g = torch.Generator().manual_seed(7)
    x, idx, alt = torch.randn(5, 3, generator=g), torch.tensor([0, 3, 4, 1]), torch.tensor([2, 2, 0, 4])
    for name, core in (("one_hot", False), ("one_hot_core", True)):
        write(name, OneHot(), (idx, x), core=core)
        save_file({"input_0": alt, "input_1": x, "output_0": OneHot()(alt, x)}, OUT / f"{name}_alt.safetensors")
    g = torch.Generator().manual_seed(4)
    x, alt = torch.randn(4, 5, generator=g), -torch.rand(4, 5, generator=g)
    m = DataDependent()
    outs = m(alt)
    for name, core in (("data_dependent", False), ("data_dependent_core", True)):
        write(name, m, (x,), core=core)
        tensors = {"input_0": alt.contiguous()}
        tensors.update({f"output_{i}": y.contiguous() for i, y in enumerate(outs)})
        save_file(tensors, OUT / f"{name}_alt.safetensors")


def regions():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    write("regions", Regions(), (torch.randn(3, 4, generator=g),))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


# ---- writing --------------------------------------------------------------------------

def layers():
    g = torch.Generator().manual_seed(3)
    inputs = (torch.randn(2, 4, 8, 8, generator=g), torch.randn(1, 2, 4, 6, 6, generator=g),
              torch.randn(2, 4, 10, generator=g), torch.randn(3, 4, generator=g), torch.tensor([0, 2, 1, 3]))
    torch.manual_seed(0)
    m = Layers()
    write("layers", m, inputs)
    write("layers_core", m, inputs, core=True)
    ab = (torch.randn(4, 4, generator=g), torch.randn(4, 2, generator=g))
    write("linalg", Linalg(), ab)
    write("linalg_core", Linalg(), ab, core=True)


def write(name, module, inputs, *, core=False, dynamic_shapes=None, train=False):
    torch.manual_seed(0)
    module.train(train)
    ep = torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes)
    if core:
        ep = ep.run_decompositions()
    path = OUT / f"{name}.pt2"
    torch.export.save(ep, path)
    # PyTorch's results, from the module itself (a copy, so buffers start where the
    # program's do), with the buffers it wrote
    import copy
    m = copy.deepcopy(module)
    with torch.no_grad():
        out = m(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    tensors = {f"input_{i}": x.contiguous() for i, x in enumerate(inputs)}
    tensors.update({f"output_{i}": y.contiguous() for i, y in enumerate(outs)})
    if train:
        for k, v in m.named_buffers():
            tensors[f"state.{k}"] = v.contiguous()
    save_file(tensors, OUT / f"{name}.safetensors")
    print(f"wrote {path.name} ({path.stat().st_size} bytes)")


def rewrite_devices(name, new_name, device):
    """A copy of NAME.pt2 whose tensors and device arguments name `device`: what an export
    on that device writes (this machine may lack the device, so the JSON is edited)."""
    src, dst = OUT / f"{name}.pt2", OUT / f"{new_name}.pt2"
    with zipfile.ZipFile(src) as zin, tempfile.TemporaryDirectory() as tmp:
        tmp_path = pathlib.Path(tmp) / "out.pt2"
        with zipfile.ZipFile(tmp_path, "w", zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                data = zin.read(info.filename)
                if info.filename.endswith(".json"):
                    text = data.decode()
                    text = text.replace('"device": {"type": "cpu", "index": null}', f'"device": {{"type": "cuda", "index": {device}}}')
                    text = text.replace('"device": {"type": "cpu"}', f'"device": {{"type": "cuda", "index": {device}}}')
                    data = text.encode()
                new = zipfile.ZipInfo(info.filename.replace(f"{name}/", f"{new_name}/", 1), info.date_time)
                zout.writestr(new, data, zipfile.ZIP_STORED)
        shutil.copy(tmp_path, dst)
    shutil.copy(OUT / f"{name}.safetensors", OUT / f"{new_name}.safetensors")
    print(f"wrote {dst.name} (devices rewritten to cuda:{device})")


def dynamic_decoder():
    """The decoder with a dynamic batch and sequence (both dialects), and PyTorch's results
    at a second shape in NAME_alt.safetensors: one imported program must run at both."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    dec = Decoder()
    toks = torch.randint(0, 64, (2, 9), generator=g)
    dims = {"ids": {0: torch.export.Dim("batch", min=1, max=8), 1: torch.export.Dim("seq", min=2, max=16)}}
    for name, core in (("decoder_dynamic", False), ("decoder_dynamic_core", True)):
        write(name, dec, (toks,), core=core, dynamic_shapes=dims)
        alt = torch.randint(0, 64, (3, 13), generator=g)
        with torch.no_grad():
            outs = dec(alt)
        tensors = {"input_0": alt.contiguous()}
        tensors.update({f"output_{i}": y.contiguous() for i, y in enumerate(outs)})
        save_file(tensors, OUT / f"{name}_alt.safetensors")


def main():
    if "--only-dynamic" in sys.argv:
        OUT.mkdir(parents=True, exist_ok=True)
        return dynamic_decoder()
    if "--only-regions" in sys.argv:
        OUT.mkdir(parents=True, exist_ok=True)
        return regions(), sizes_as_values()
    if "--only-data-dependent" in sys.argv:
        OUT.mkdir(parents=True, exist_ok=True)
        return data_dependent()
    if "--only-layers" in sys.argv:
        OUT.mkdir(parents=True, exist_ok=True)
        return layers()
    if "--only-mutating-custom-op" in sys.argv:
        OUT.mkdir(parents=True, exist_ok=True)
        return mutating_custom_op()
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)

    def randn(*s):
        return torch.randn(*s, generator=g)

    x = randn(8, 6)
    torch.manual_seed(0)
    write("mlp_bn_train", MlpBn(), (x,), train=True)
    torch.manual_seed(0)
    write("mlp_bn_train_core", MlpBn(), (x,), train=True, core=True)

    torch.manual_seed(0)
    cnn = Cnn()
    with torch.no_grad():  # running statistics that are not the defaults
        cnn.bn.running_mean.uniform_(-0.5, 0.5)
        cnn.bn.running_var.uniform_(0.5, 1.5)
    img = randn(2, 3, 16, 16)
    write("cnn", cnn, (img,))
    write("cnn_core", cnn, (img,), core=True)

    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 7), generator=g)
    keep = torch.ones(2, 7, dtype=torch.bool)
    keep[1, 5:] = False
    write("encoder", Encoder(), (ids, keep))

    torch.manual_seed(0)
    dec = Decoder()
    toks = torch.randint(0, 64, (2, 9), generator=g)
    write("decoder", dec, (toks,))
    write("decoder_core", dec, (toks,), core=True)

    torch.manual_seed(0)
    write("recurrent", Recurrent(), (randn(2, 5, 5),))

    torch.manual_seed(0)
    write("custom_op", CustomOp(), (randn(3, 4),))
    mutating_custom_op()

    torch.manual_seed(0)
    assorted = Assorted()
    xs = randn(2, 2, 5, 5)
    write("assorted", assorted, (xs,))
    write("assorted_core", assorted, (xs,), core=True)

    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=64)
    write("mlp_dynamic", Mlp(), (randn(5, 4),), dynamic_shapes={"x": {0: batch}})
    rewrite_devices("mlp_dynamic", "mlp_cuda0", 0)

    torch.manual_seed(0)
    write("birecurrent", BiRecurrent(), (randn(6, 2, 4),))

    dynamic_decoder()
    layers()
    regions()
    sizes_as_values()
    data_dependent()


if __name__ == "__main__":
    main()
