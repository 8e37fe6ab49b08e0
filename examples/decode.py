"""Generate tokens greedily with a small Llama-style decoder whose KV cache never leaves the device.

    python examples/decode.py                  # cpu, tiny shapes: a few seconds
    python examples/decode.py vulkan --hidden 128 --heads 4 --layers 2 --max-len 64 --steps 32

The step program is built operator by operator with ``ProgramBuilder``: the token's embedding (GATHER),
then per layer RMSNorm, Q/K/V projections, rotary embeddings, attention over a fixed-size KV cache, the
output projection, RMSNorm, a SwiGLU MLP and the residuals, and last RMSNorm and the LM head. The weights
are constants of the program, so they reach the device once, when it is loaded. Each call takes every
layer's K and V caches as DeviceArrays and returns them updated; the loop hands those to the next call,
so per token only the id and a few position inputs go in, and only the logits come out. A numpy
version of the same model, with the same weights, checks the tokens and logits. The layer in torch
(``torch_qkv``, ``torch_attend_mlp``) times torch eager here and is the model zoo's decoder layer
(benchmarks/models/language.py), over a sequence of tokens as well as one.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import ironaccel as ia
from ironaccel.runtime import Device, Executable
from ironaccel.tosa import Program, ProgramBuilder, Value

EPS = 1e-5
MASKED = -1e9  # added to the scores of cache rows past the current position: exp() of it is 0
PROMPT_LEN = 4


@dataclass
class Config:
    hidden: int
    heads: int
    layers: int
    max_len: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def ffn(self) -> int:
        return (8 * self.hidden // 3 + 7) // 8 * 8  # Llama's 8/3 of hidden, rounded up to a multiple of 8


def make_weights(cfg: Config, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    weights = {"embed": rng.standard_normal((cfg.vocab, cfg.hidden)).astype(np.float32)}
    for i in range(cfg.layers):
        h, f = cfg.hidden, cfg.ffn
        weights.update({f"{i}.wq": w(h, h), f"{i}.wk": w(h, h), f"{i}.wv": w(h, h), f"{i}.wo": w(h, h)})
        weights.update({f"{i}.w1": w(h, f), f"{i}.w3": w(h, f), f"{i}.w2": w(f, h)})
        weights[f"{i}.norm1"] = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
        weights[f"{i}.norm2"] = (1 + 0.1 * rng.standard_normal(h)).astype(np.float32)
    weights["norm"] = (1 + 0.1 * rng.standard_normal(cfg.hidden)).astype(np.float32)
    weights["head"] = w(cfg.hidden, cfg.vocab)
    return weights


def rotary(cfg: Config, position: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of the position's angles, [head_dim], in the rotate-half layout (each angle twice)."""
    half = cfg.head_dim // 2
    angles = position * 10000.0 ** (-np.arange(half) / half)
    angles = np.concatenate([angles, angles])
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def step_inputs(cfg: Config, token: int, position: int) -> list[np.ndarray]:
    """The host side of one step: the token id, the rotary cos / sin, the mask and the cache row index."""
    cos, sin = rotary(cfg, position)
    mask = np.where(np.arange(cfg.max_len) <= position, 0.0, MASKED).astype(np.float32)
    d = cfg.head_dim
    return [
        np.array([[token]], np.int32),
        cos.reshape(1, 1, d),
        sin.reshape(1, 1, d),
        mask.reshape(1, 1, cfg.max_len),
        np.full((cfg.heads, 1), position, np.int32),
    ]


# -- the step as a TOSA program --------------------------------------------------------------------


def build_step(cfg: Config, weights: dict[str, np.ndarray]) -> Program:
    b = ProgramBuilder()
    n, d, h, t = cfg.heads, cfg.head_dim, cfg.hidden, cfg.max_len
    token = b.input("token", (1, 1), "int32")
    cos = b.input("cos", (1, 1, d), "fp32")
    sin = b.input("sin", (1, 1, d), "fp32")
    mask = b.input("mask", (1, 1, t), "fp32")
    row = b.input("row", (n, 1), "int32")
    caches = [(b.input(f"k{i}", (n, t, d), "fp32"), b.input(f"v{i}", (n, t, d), "fp32")) for i in range(cfg.layers)]

    def const(name: str) -> Value:
        w = weights[name]
        return b.const(w.reshape(1, *w.shape) if w.ndim == 2 else w.reshape(1, 1, -1))

    def rms_norm(x: Value, weight: str) -> Value:
        mean = b.mul(b.reduce_sum(b.mul(x, x), axis=2), b.const(np.full((1, 1, 1), 1 / h, np.float32)))
        return b.mul(b.mul(x, b.rsqrt(b.add(mean, b.const(np.full((1, 1, 1), EPS, np.float32))))), const(weight))

    def heads(x: Value) -> Value:  # [1, 1, H] -> [N, 1, D]: the heads become MATMUL's batch
        return b.transpose(b.reshape(x, (1, n, d)), (1, 0, 2))

    def rope(x: Value) -> Value:  # x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1)
        x1, x2 = b.slice(x, (0, 0, 0), (n, 1, d // 2)), b.slice(x, (0, 0, d // 2), (n, 1, d // 2))
        return b.add(b.mul(x, cos), b.mul(b.concat([b.negate(x2), x1], axis=2), sin))

    scale = b.const(np.full((1, 1, 1), 1 / np.sqrt(d), np.float32))
    x = b.gather(const("embed"), token)  # [1, 1, H]: the embedding table stays on the device
    updated = []
    for i, (k_cache, v_cache) in enumerate(caches):
        y = rms_norm(x, f"{i}.norm1")
        q = rope(heads(b.matmul(y, const(f"{i}.wq"))))
        k = rope(heads(b.matmul(y, const(f"{i}.wk"))))
        v = heads(b.matmul(y, const(f"{i}.wv")))
        # SCATTER writes the one new row of each head, where cache * (1 - onehot) + onehot * new would
        # read and write the whole cache three times for the same result.
        k_cache, v_cache = b.scatter(k_cache, row, k), b.scatter(v_cache, row, v)
        updated += [k_cache, v_cache]
        scores = b.add(b.mul(b.matmul(q, b.transpose(k_cache, (0, 2, 1))), scale), mask)  # [N, 1, T]
        e = b.exp(b.sub(scores, b.reduce_max(scores, axis=2)))
        p = b.mul(e, b.reciprocal(b.reduce_sum(e, axis=2)))
        attn = b.reshape(b.transpose(b.matmul(p, v_cache), (1, 0, 2)), (1, 1, h))
        x = b.add(x, b.matmul(attn, const(f"{i}.wo")))
        y = rms_norm(x, f"{i}.norm2")
        gate = b.matmul(y, const(f"{i}.w1"))
        mlp = b.mul(b.mul(gate, b.sigmoid(gate)), b.matmul(y, const(f"{i}.w3")))
        x = b.add(x, b.matmul(mlp, const(f"{i}.w2")))
    logits = b.reshape(b.matmul(rms_norm(x, "norm"), const("head")), (1, cfg.vocab))
    b.output(logits, *updated)
    return b.build()


def generate_on_device(
    dev: Device, exe: Executable, cfg: Config, prompt: list[int], steps: int
) -> tuple[list[int], list[np.ndarray], float]:
    """Greedy tokens, the logits of each generated token, and the seconds the generating steps took."""
    zeros = np.zeros((cfg.heads, cfg.max_len, cfg.head_dim), np.float32)
    caches = [dev.array(zeros) for _ in range(2 * cfg.layers)]  # the only cache bytes that cross
    tokens, logits, start = list(prompt), [], 0.0
    for position in range(len(prompt) + steps - 1):
        if position == len(prompt) - 1:
            start = time.perf_counter()  # the prompt is read one token at a time; generating starts here
        out, *caches = exe(*step_inputs(cfg, tokens[position], position), *caches)
        if position >= len(prompt) - 1:
            row = out.numpy()[0]  # the logits: the only output read back
            logits.append(row)
            tokens.append(int(np.argmax(row)))
    return tokens[len(prompt) :], logits, time.perf_counter() - start


# -- the same model in numpy, the check ------------------------------------------------------------


def reference_step(cfg: Config, w: dict[str, np.ndarray], caches: list[np.ndarray], token: int, pos: int) -> np.ndarray:
    """One step in numpy, the same math as the program: writes row ``pos`` of the caches, returns the logits."""
    n, d = cfg.heads, cfg.head_dim
    cos, sin = rotary(cfg, pos)

    def rms_norm(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x) + EPS) * weight

    def rope(x: np.ndarray) -> np.ndarray:
        return x * cos + np.concatenate([-x[:, d // 2 :], x[:, : d // 2]], axis=1) * sin

    x = w["embed"][token]
    for i in range(cfg.layers):
        k_cache, v_cache = caches[2 * i], caches[2 * i + 1]
        y = rms_norm(x, w[f"{i}.norm1"])
        q = rope((y @ w[f"{i}.wq"]).reshape(n, d))
        k_cache[:, pos] = rope((y @ w[f"{i}.wk"]).reshape(n, d))
        v_cache[:, pos] = (y @ w[f"{i}.wv"]).reshape(n, d)
        scores = np.einsum("nd,ntd->nt", q, k_cache[:, : pos + 1]) / np.sqrt(d)
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        x = x + np.einsum("nt,ntd->nd", p, v_cache[:, : pos + 1]).reshape(-1) @ w[f"{i}.wo"]
        y = rms_norm(x, w[f"{i}.norm2"])
        gate = y @ w[f"{i}.w1"]
        x = x + (gate / (1 + np.exp(-gate)) * (y @ w[f"{i}.w3"])) @ w[f"{i}.w2"]
    return rms_norm(x, w["norm"]) @ w["head"]


def generate_reference(
    step: Callable[[list[Any], int, int], Any], zeros: Callable[[], Any], cfg: Config, prompt: list[int], steps: int
) -> tuple[list[int], list[np.ndarray], float]:
    """Greedy generation with a host ``step(caches, token, position)``: tokens, logits, seconds."""
    caches = [zeros() for _ in range(2 * cfg.layers)]
    tokens, logits, start = list(prompt), [], 0.0
    for position in range(len(prompt) + steps - 1):
        if position == len(prompt) - 1:
            start = time.perf_counter()
        row = step(caches, tokens[position], position)
        if position >= len(prompt) - 1:
            logits.append(np.asarray(row, np.float32))
            tokens.append(int(np.argmax(logits[-1])))
    return tokens[len(prompt) :], logits, time.perf_counter() - start


def torch_rms_norm(x: Any, weight: Any) -> Any:
    """RMSNorm over the last axis, in torch."""
    import torch

    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * weight


def torch_qkv(cfg: Config, w: dict[str, Any], i: int, x: Any, cos: Any, sin: Any) -> tuple[Any, Any, Any]:
    """Layer ``i``'s queries, keys and values in torch, [N, S, D] each, for ``x`` [S, H] (or one token, [H]) at
    the positions whose rotary ``cos`` / ``sin`` are given ([S, D], or [D] for one token)."""
    import torch

    n, d = cfg.heads, cfg.head_dim

    def heads(t: Any) -> Any:
        return t.reshape(-1, n, d).transpose(0, 1)

    def rope(t: Any) -> Any:
        return t * cos + torch.cat([-t[..., d // 2 :], t[..., : d // 2]], dim=-1) * sin

    y = torch_rms_norm(x, w[f"{i}.norm1"])
    return rope(heads(y @ w[f"{i}.wq"])), rope(heads(y @ w[f"{i}.wk"])), heads(y @ w[f"{i}.wv"])


def torch_attend_mlp(
    cfg: Config, w: dict[str, Any], i: int, x: Any, q: Any, keys: Any, values: Any, mask: Any = None
) -> Any:
    """The rest of layer ``i`` in torch: attention of ``q`` [N, S, D] over ``keys`` / ``values`` [N, T, D] (the
    cache's rows and the new ones; ``mask`` [S, T], added to the scores, hides rows), the output projection,
    RMSNorm, the SwiGLU MLP and both residuals. Returns the layer's output, [S, H]."""
    import torch

    scores = q @ keys.transpose(1, 2) / cfg.head_dim**0.5
    if mask is not None:
        scores = scores + mask
    attn = (torch.softmax(scores, dim=-1) @ values).transpose(0, 1).reshape(-1, cfg.hidden)
    x = x + attn @ w[f"{i}.wo"]
    y = torch_rms_norm(x, w[f"{i}.norm2"])
    return x + (torch.nn.functional.silu(y @ w[f"{i}.w1"]) * (y @ w[f"{i}.w3"])) @ w[f"{i}.w2"]


def torch_tokens_per_second(cfg: Config, weights: dict[str, np.ndarray], prompt: list[int], steps: int) -> float | None:
    """The same model in torch (eager, on the CPU), when torch is installed: tokens/s, else None."""
    try:
        import torch
    except ImportError:
        return None
    w = {k: torch.from_numpy(v) for k, v in weights.items()}

    def step(caches, token, pos):
        cos, sin = (torch.from_numpy(a) for a in rotary(cfg, pos))
        x = w["embed"][token][None]  # [1, H]: one token
        for i in range(cfg.layers):
            k_cache, v_cache = caches[2 * i], caches[2 * i + 1]
            q, k, v = torch_qkv(cfg, w, i, x, cos, sin)
            k_cache[:, pos : pos + 1], v_cache[:, pos : pos + 1] = k, v
            x = torch_attend_mlp(cfg, w, i, x, q, k_cache[:, : pos + 1], v_cache[:, : pos + 1])
        return (torch_rms_norm(x, w["norm"]) @ w["head"])[0].numpy()

    with torch.inference_mode():
        zeros = lambda: torch.zeros(cfg.heads, cfg.max_len, cfg.head_dim)  # noqa: E731
        _, _, seconds = generate_reference(step, zeros, cfg, prompt, steps)
    return steps / seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("device", nargs="?", default="cpu", help="a device spec: cpu, vulkan, auto, ...")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--max-len", type=int, default=32)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv[1:])
    cfg = Config(args.hidden, args.heads, args.layers, args.max_len, args.vocab)
    if cfg.hidden % cfg.heads or cfg.head_dim % 2:
        parser.error("--hidden must be --heads times an even head size")
    if PROMPT_LEN + args.steps > cfg.max_len + 1 or args.steps < 1:
        parser.error(f"--steps must be 1 to --max-len - {PROMPT_LEN - 1} (the prompt is {PROMPT_LEN} tokens)")

    weights = make_weights(cfg, args.seed)
    prompt = [int(t) for t in np.random.default_rng(args.seed + 1).integers(0, cfg.vocab, PROMPT_LEN)]
    with ia.open(args.device) as dev:
        print(f"device: {dev.info.name}")
        exe = dev.compile(build_step(cfg, weights))  # validated, admitted, loaded: the weights go up here
        tokens, logits, seconds = generate_on_device(dev, exe, cfg, prompt, args.steps)

    def numpy_step(caches, token, pos):
        return reference_step(cfg, weights, caches, token, pos)

    zeros = lambda: np.zeros((cfg.heads, cfg.max_len, cfg.head_dim), np.float32)  # noqa: E731
    ref_tokens, ref_logits, _ = generate_reference(numpy_step, zeros, cfg, prompt, args.steps)
    diff = max(float(np.max(np.abs(a - r))) for a, r in zip(logits, ref_logits, strict=True))
    scale = max(float(np.max(np.abs(r))) for r in ref_logits)
    same = tokens == ref_tokens and diff <= 1e-4 * scale
    print(f"prompt: {prompt}")
    print(f"tokens: {tokens}")
    print("tokens match the numpy reference" if same else f"MISMATCH: numpy reference gives {ref_tokens}")
    torch_rate = torch_tokens_per_second(cfg, weights, prompt, args.steps)

    rows = [("device", dev.info.name), ("steps", str(args.steps)), ("tokens/s", f"{args.steps / seconds:.1f}")]
    rows.append(("max |logit diff| vs numpy", f"{diff:.2e} (largest |logit| {scale:.2f})"))
    if torch_rate is not None:
        rows.append(("torch (CPU, eager) tokens/s", f"{torch_rate:.1f}"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
