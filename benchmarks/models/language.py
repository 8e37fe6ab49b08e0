"""The zoo's language models: BERT-base (transformers' ``BertModel``) and one layer of the Llama-style decoder of
``examples/decode.py``, as a prefill and as one decode step over a KV cache.

Both are built with random weights from a fixed seed (no download). Each is a ``torch.nn.Module`` whose
``forward`` takes tensors only and returns a tensor or a tuple of them, as ``ironaccel.torch.export``,
``torch.onnx.export`` and torch eager all call it; ``make_inputs(model, seed)`` gives inputs of its shapes.
``tests/torch/test_zoo_language.py`` exports small configurations of the same modules (with this folder on
``sys.path``, as the zoo has it).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]


def _decode() -> Any:
    """examples/decode.py, the decoder's one definition, imported by path (examples/ is no package)."""
    if "decode" not in sys.modules:
        spec = importlib.util.spec_from_file_location("decode", REPO / "examples" / "decode.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["decode"] = module
        spec.loader.exec_module(module)
    return sys.modules["decode"]


# -- BERT ---------------------------------------------------------------------------------------------
class BertEncoder(torch.nn.Module):
    """transformers' ``BertModel`` as the zoo calls it: int32 token ids [1, S] in, the last hidden states
    [1, S, hidden] out.

    ExecuTorch's TOSA path lowers no int64 tensor that is not a constant, and ``BertModel(input_ids)`` makes
    several: the ids themselves (embedding indices), the position and token-type ids it slices and gathers
    from its int64 buffers, and the aranges from which it builds the attention mask. So the ids are int32,
    the positions and token types are int32 constants passed in, and the mask is given in the prepared,
    additive 4D form (zeros: no padding), which transformers uses as it is instead of building one."""

    def __init__(self, model: Any, seq: int) -> None:
        super().__init__()
        self.bert = model
        self.register_buffer("token_type_ids", torch.zeros(1, seq, dtype=torch.int32))
        self.register_buffer("position_ids", torch.arange(seq, dtype=torch.int32)[None])
        self.register_buffer("mask", torch.zeros(1, 1, 1, seq))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        out = self.bert(
            input_ids=input_ids,
            token_type_ids=self.token_type_ids,
            position_ids=self.position_ids,
            attention_mask=self.mask,
        )
        return out.last_hidden_state


def bert(seed: int, seq: int = 128, **config: Any) -> BertEncoder:
    """``BertModel(BertConfig(**config))`` (BERT-base by default) without its pooler, weights drawn as
    transformers initializes them, from ``seed``."""
    from compat import import_torchvision

    try:
        import_torchvision()  # transformers imports it whenever it is installed
    except ImportError:
        pass  # not installed: transformers does without
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    model = BertModel(BertConfig(**config), add_pooling_layer=False)
    return BertEncoder(model, seq).eval()


def bert_inputs(model: BertEncoder, seed: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    seq = model.position_ids.shape[1]
    return (torch.randint(0, model.bert.config.vocab_size, (1, seq), generator=generator, dtype=torch.int32),)


# -- the decoder layer --------------------------------------------------------------------------------
def decoder_config(hidden: int = 2048, heads: int = 16) -> Any:
    """examples/decode.py's Config for one layer (the vocabulary only sizes weights the layer does not use)."""
    return _decode().Config(hidden=hidden, heads=heads, layers=1, max_len=1, vocab=8)


class DecoderLayer(torch.nn.Module):
    """Layer 0 of examples/decode.py's model, its weights (``make_weights``) as parameters."""

    def __init__(self, cfg: Any, seed: int) -> None:
        super().__init__()
        self.cfg = cfg
        weights = _decode().make_weights(cfg, seed)
        self.w = torch.nn.ParameterDict(
            {
                name.split(".", 1)[1]: torch.nn.Parameter(torch.from_numpy(value), requires_grad=False)
                for name, value in weights.items()
                if name.startswith("0.")
            }
        )

    def weights(self) -> dict[str, torch.Tensor]:
        return {f"0.{name}": value for name, value in self.w.items()}


class Prefill(DecoderLayer):
    """The layer over ``tokens`` tokens at positions 0.. with no cache before them (causal attention):
    (x [S, H], cos [S, D], sin [S, D]) -> (output [S, H], keys [N, S, D], values [N, S, D]), the keys and
    values being what a cache keeps."""

    def __init__(self, cfg: Any, seed: int, tokens: int) -> None:
        super().__init__(cfg, seed)
        future = torch.triu(torch.ones(tokens, tokens, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", torch.where(future, _decode().MASKED, 0.0).float())

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, ...]:
        decode = _decode()
        q, k, v = decode.torch_qkv(self.cfg, self.weights(), 0, x, cos, sin)
        return decode.torch_attend_mlp(self.cfg, self.weights(), 0, x, q, k, v, self.mask), k, v


class DecodeStep(DecoderLayer):
    """One token after a cache of P rows: (x [1, H], cos [1, D], sin [1, D], keys [N, P, D], values [N, P, D])
    -> (output [1, H], the token's key [N, 1, D] and value [N, 1, D], which the caller appends to its cache).
    The token attends to every cached row and to itself."""

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        decode = _decode()
        q, k, v = decode.torch_qkv(self.cfg, self.weights(), 0, x, cos, sin)
        keys, values = torch.cat([keys, k], dim=1), torch.cat([values, v], dim=1)
        return decode.torch_attend_mlp(self.cfg, self.weights(), 0, x, q, keys, values), k, v


def rotary(cfg: Any, positions: range) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, [len(positions), D], from examples/decode.py's ``rotary``."""
    pairs = [_decode().rotary(cfg, p) for p in positions]
    return tuple(torch.from_numpy(np.stack(column)) for column in zip(*pairs, strict=True))  # type: ignore[return-value]


def prefill_inputs(model: Prefill, seed: int) -> tuple[torch.Tensor, ...]:
    """Token embeddings of unit variance (as decode.py's table draws them) and the rotary tables of 0..S-1."""
    tokens = model.mask.shape[0]
    x = torch.randn(tokens, model.cfg.hidden, generator=torch.Generator().manual_seed(seed))
    return (x, *rotary(model.cfg, range(tokens)))


def step_inputs(model: DecodeStep, seed: int, cached: int) -> tuple[torch.Tensor, ...]:
    """One token at position ``cached`` and a cache of ``cached`` rows: the keys and values the same layer's
    prefill makes of ``cached`` random tokens, so the cache holds what a real one does."""
    prefill = Prefill(model.cfg, 0, cached)
    prefill.load_state_dict(model.state_dict(), strict=False)  # the same weights; the mask is its own
    with torch.no_grad():
        _, keys, values = prefill(*prefill_inputs(prefill, seed + 1))
    x = torch.randn(1, model.cfg.hidden, generator=torch.Generator().manual_seed(seed))
    # Contiguous: the export takes an input's memory layout from its example, and the heads come out of the
    # prefill as a transposed view.
    return (x, *rotary(model.cfg, range(cached, cached + 1)), keys.contiguous(), values.contiguous())
