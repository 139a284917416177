"""Per-layer counts of a vision network at one image size: parameters, MACs, saved activations.

A builder walks an architecture description (``architectures.toml``) and appends one ``Layer``
per operator group (a convolution with its norm and activation, a linear on tokens, an attention
core). Counts are per sample; callers multiply by the batch. The formulas are the textbook ones:

- convolution: ``H_out = floor((H + 2p - k) / s) + 1``; MACs = ``H_out·W_out·C_out·(C_in/groups)·k²``;
- linear on T tokens: MACs = ``T·in·out``; attention core: ``2·T·S·d`` (QKᵀ and AV, S keys);
- saved activations follow what autograd keeps, tensor by tensor: a convolution/linear keeps its
  input, a norm keeps its input, ReLU (in place) keeps its output, SiLU/GELU keep their input,
  SDPA keeps q, k, v and its output (eager attention also the softmax of the scores).

Elements are counted in two dtypes, because autocast runs GroupNorm/LayerNorm in fp32: ``saved``
is every kept tensor, ``saved_fp32`` the part of it that autocast keeps in fp32 (under pure
fp32/bf16/fp16 every tensor takes the compute dtype).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Activation", "Builder", "Layer", "LayerKind", "Norm"]


LayerKind = Literal["conv", "linear", "attention", "norm", "pool"]
Norm = Literal["bn", "gn", "ln", "none"]
Activation = Literal["relu", "silu", "gelu", "none"]


@dataclass(frozen=True)
class Layer:
    """One operator group, per sample."""

    name: str
    kind: LayerKind
    params: int
    macs: float
    saved: float  # activation elements autograd keeps for backward
    saved_fp32: float  # of which autocast keeps in fp32 (GroupNorm/LayerNorm inputs and outputs)
    output: float  # elements of the output (inference working set: input + output of a layer)
    block: str  # checkpointing unit (a residual block, a transformer block)
    scores: float = 0.0  # eager attention: elements of the softmax matrix (all heads)
    index_bytes: float = 0.0  # int64 indices kept for backward (max pooling)
    adapts: tuple[tuple[int, int], ...] = ()  # (in, out) of each attention projection: LoRA targets


@dataclass
class Builder:
    """Tracks the running tensor (channels × height × width, or tokens × width) and collects layers."""

    channels: int
    height: int
    width: int
    layers: list[Layer] = field(default_factory=list)
    block_inputs: dict[str, float] = field(default_factory=dict)
    block: str = "stem"
    input_elements: float = 0.0  # the network's input (images or latents): the first layer keeps it

    def __post_init__(self) -> None:
        self.input_elements = self.elements

    @property
    def elements(self) -> float:
        """Elements of the current feature map: channels × height × width (per sample)."""
        return float(self.channels * self.height * self.width)

    def start_block(self, name: str, elements: float | None = None) -> None:
        """Enter a checkpointing unit; its input is what full recompute keeps."""
        self.block = name
        self.block_inputs[name] = self.elements if elements is None else elements

    def add(
        self,
        name: str,
        kind: LayerKind,
        params: int,
        macs: float,
        saved: float,
        adapts: tuple[tuple[int, int], ...] = (),
        **kw: float,
    ) -> None:
        """Append a layer with its parameters, MACs and the elements it saves for backward (per sample);
        the output is the current feature map."""
        self.layers.append(
            Layer(
                name,
                kind,
                params,
                macs,
                saved,
                kw.get("saved_fp32", 0.0),
                kw.get("output", self.elements),
                self.block,
                kw.get("scores", 0.0),
                kw.get("index_bytes", 0.0),
                adapts,
            )
        )

    def conv(
        self,
        name: str,
        out: int,
        kernel: int,
        stride: int = 1,
        groups: int = 1,
        bias: bool = False,
        norm: Norm = "none",
        act: Activation = "none",
        padding: int | None = None,
    ) -> None:
        """A convolution and the norm/activation that follow it (one kernel group)."""
        pad = kernel // 2 if padding is None else padding
        self.height = (self.height + 2 * pad - kernel) // stride + 1
        self.width = (self.width + 2 * pad - kernel) // stride + 1
        params = out * (self.channels // groups) * kernel * kernel + (out if bias else 0)
        macs = self.height * self.width * out * (self.channels // groups) * kernel * kernel
        self.channels = out
        self._unit(name, "conv", params, macs, norm, act)

    def _unit(
        self,
        name: str,
        kind: LayerKind,
        params: int,
        macs: float,
        norm: Norm,
        act: Activation,
        op: bool = True,
    ) -> None:
        """Saved tensors of op → norm → activation, each the size of the output (see module doc).

        The unit's final output counts as saved (its consumer, a convolution, linear or norm, keeps it);
        a norm adds its output when a SiLU/GELU keeps it, and an op followed by a norm adds its own output.
        """
        n = self.elements
        kept = 1.0 + (1.0 if op and norm != "none" else 0.0)
        if act in ("silu", "gelu") and (norm != "none" or op):
            kept += 1.0
        fp32 = 0.0
        if norm in ("gn", "ln"):
            fp32 = min(kept, 2.0 if act in ("silu", "gelu") else 1.0)
        if norm != "none":
            params += 2 * self.channels
        self.add(name, kind, params, macs, kept * n, saved_fp32=fp32 * n)

    def norm(self, name: str, kind: Norm, act: Activation = "none") -> None:
        """A norm on its own (e.g. GroupNorm + SiLU before a convolution)."""
        self._unit(name, "norm", 0, 0.0, kind, act, op=False)

    def linear(
        self, name: str, tokens: int, d_in: int, d_out: int, bias: bool = True, act: Activation = "none"
    ) -> None:
        """A linear on ``tokens`` tokens of width ``d_in`` (the running tensor becomes tokens × d_out)."""
        params = d_in * d_out + (d_out if bias else 0)
        self.channels, self.height, self.width = d_out, tokens, 1
        self._unit(name, "linear", params, float(tokens) * d_in * d_out, "none", act)

    def attention(self, name: str, tokens: int, keys: int, dim: int, heads: int) -> None:
        """The attention core (SDPA): q·kᵀ and probabilities·v; keeps q, k, v and the output."""
        macs = 2.0 * tokens * keys * dim
        saved = 2.0 * tokens * dim + 2.0 * keys * dim
        self.add(
            name, "attention", 0, macs, saved, output=float(tokens * dim), scores=float(heads) * tokens * keys
        )

    def pool(self, name: str, kernel: int, stride: int, keeps_input: bool = True) -> None:
        """A max pool of ``kernel``/``stride``: shrinks the map, keeps its input and int64 indices for
        backward."""
        pad = kernel // 2
        inp = self.elements
        self.height = (self.height + 2 * pad - kernel) // stride + 1
        self.width = (self.width + 2 * pad - kernel) // stride + 1
        # Max pooling keeps its input and int64 indices of its output.
        self.add(name, "pool", 0, 0.0, inp if keeps_input else 0.0, index_bytes=8.0 * self.elements)
