"""Reduced precision for inference: int8 linear layers on CPU, bf16 where the hardware is fast at it.

    model = prepare_for_inference(model, "int8")   # every nn.Linear, the output projection included

int8 is dynamic quantisation: each linear layer's weight is stored as int8 with one scale per
layer, and each input is quantised on the fly (per batch) before an int8 matmul that accumulates
in int32 (fbgemm's AVX2 / AVX-512 VNNI kernels, and oneDNN's AMX kernels for large calls on CPUs
with AMX: nmt.inference.int8_linear). Only the matmuls change: embeddings, LayerNorm,
attention scores and softmax stay in fp32, except on CPUs with AMX, where the decoder keeps its
attention keys and values in bf16 (`keep_decoder_keys_in`): a decoding step reads the whole cache,
and in bf16 it reads half the bytes (about 5% of an int8 translation's time, BLEU unchanged on
Multi30k: docs/results.md). int8 answers differ from fp32's anyway; fp32 keeps fp32 throughout.
One scale per call's input means a sentence's int8 translation depends on its batch: the rows
beside it set the scale its activations are rounded to (beam 5 on Multi30k: 22% of outputs differ
between batches of 8,000 and 1,000 tokens, none in fp32). CTranslate2 scales each row apart, so
its int8 does not; torch has no per-row dynamic int8 kernel on CPU as fast as this one.

Which API: `torch.ao.quantization.quantize_dynamic` (PyTorch's own, deprecated in favour of
torchao but still shipped in torch 2.13). torchao's int8 dynamic quantisation is the maintained
one, but on CPU without torch.compile it runs as decomposed eager ops, tens of times slower than
torch.ao's fused kernel on a layer of the `small` model (docs/benchmarks-log.md). Whole
translations gain less than single layers: attention, softmax and search stay in fp32.

fp32 is fp32 throughout; on AMD CPUs its output projection runs in oneDNN rather than MKL
(nmt.inference.packed_linear: the same products, faster).

bf16 runs through autocast. It is allowed on CUDA and on CPUs with AMX tiles; on CPUs without
AMX (AVX-512 BF16 or AVX2 only) bf16 matmuls were slower than fp32 on this project's machines
(both kinds seen), so it is refused there. Autocast caches its bf16 copy of a weight only for
tensors that require grad and never under inference_mode, so a translator would cast every
weight matrix again at every decoding step: a frozen model's linear weights are cast to bf16
once instead (`cast_linear_weights`), which gives the same numbers. On CUDA bf16 is not the
default for this engine: it decoded several times slower than fp32 on an H100 (one run, before
that change: docs/results.md), a gap the casts alone are too small to explain; its cause is
not known yet.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import torch
from torch import nn

from .choices import PRECISIONS
from .packed_linear import onednn_linear_available, pack_output_projection, unpack_output_projection

# int8 linear layers take a third to a half of fp32's time, and the copies into and out of the
# encoder's packed layout (nmt.model.packing) stay what they were: packing paid from 40% padding
# but not at 15-25% (per batch, one thread: docs/benchmarks-log.md, "A padding-free encoder").
INT8_PACK_ENCODER_FROM = 0.35


class PrecisionError(ValueError):
    """A precision this machine cannot run, or runs slower than fp32."""


@functools.cache
def cpu_info() -> Mapping[str, str]:
    """The first processor's fields in /proc/cpuinfo ("vendor_id", "flags", ...); empty where there is none (macOS)."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():  # the end of the first processor
                break
            key, _, value = line.partition(":")
            info[key.strip()] = value.strip()
    except OSError:
        pass
    return MappingProxyType(info)  # cached: read-only


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (empty where unknown)."""
    return frozenset(cpu_info().get("flags", "").split())


def packed_output_is_faster() -> bool:
    """Whether fp32 decoding should run the output projection as a oneDNN PackedLinear.

    Measured faster on AMD Zen 3 (the only AMD generation measured; it is applied to every AMD
    CPU, since MKL's sgemm re-packs the weight on every call on all of them, see
    nmt.inference.packed_linear). On Intel (a Xeon with AMX) whole translations measured level with
    MKL (1.03x / 1.00x its time, greedy / beam 5): MKL stays there.
    """
    return cpu_info().get("vendor_id") == "AuthenticAMD" and onednn_linear_available()


def check_precision(precision: str, device: torch.device) -> None:
    """Raise PrecisionError, saying why and what to use instead, unless `precision` runs well on `device`."""
    if precision not in PRECISIONS:
        raise PrecisionError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "int8":
        if device.type != "cpu":
            raise PrecisionError(f"int8 runs on CPU only (fbgemm kernels); on {device.type} use bf16 or fp32")
        engines = torch.backends.quantized.supported_engines
        if not {"x86", "fbgemm"} & set(engines) or torch.backends.cpu.get_cpu_capability() == "DEFAULT":
            raise PrecisionError(
                f"int8 needs an x86 CPU with AVX2 or AVX-512 (quantized engines here: "
                f"{engines}, CPU capability {torch.backends.cpu.get_cpu_capability()}); use fp32"
            )
    if precision == "bf16" and device.type == "cpu" and "amx_bf16" not in cpu_flags():
        raise PrecisionError(
            "bf16 is slower than fp32 on a CPU without AMX (this one has "
            f"{torch.backends.cpu.get_cpu_capability()}): use int8 or fp32"
        )


def is_int8(model: nn.Module) -> bool:
    """Whether `quantize_int8` has already run on `model`."""
    return any(getattr(m, "kv_proj", None) is not None for m in model.modules())


def prepare_for_inference(model: nn.Module, precision: str) -> nn.Module:
    """The model ready to translate in `precision`, changed in place: for int8 its fp32 linear
    weights are replaced (so the model belongs to the engine afterwards; load it again for fp32).

    fp32 on a CPU where it was measured faster (`packed_output_is_faster`) runs the output
    projection in oneDNN on a packed copy of its weight (nmt.inference.packed_linear), if that weight is
    frozen (requires_grad False: `Translator.load` freezes its model); a model in training,
    translated between steps for validation, keeps nn.Linear. bf16 runs under `autocast_for`; a
    frozen model's linear weights are cast to bf16 once here (see the module docstring), after
    which the model, too, belongs to the engine.
    """
    device = next(model.parameters()).device
    check_precision(precision, device)
    already = is_int8(model)
    if already and precision != "int8":
        raise PrecisionError(f"this model was already quantised to int8 and cannot run as {precision}: load it again")
    if has_bf16_linear_weights(model) and precision != "bf16":
        raise PrecisionError(f"this model's linear weights are bf16 and cannot run as {precision}: load it again")
    model.eval()
    if precision == "fp32" and device.type == "cpu" and packed_output_is_faster():
        pack_output_projection(model)
    else:  # int8 quantises plain nn.Linear layers only; bf16 has nothing to gain from an fp32 copy
        unpack_output_projection(model)
    if precision == "int8" and not already:
        quantize_int8(model)
        if bf16_keys_are_faster():
            keep_decoder_keys_in(model, torch.bfloat16)
        if hasattr(model, "pack_encoder_from"):
            model.pack_encoder_from = INT8_PACK_ENCODER_FROM
    if precision == "bf16" and not any(p.requires_grad for p in model.parameters()):
        cast_linear_weights(model, torch.bfloat16)
    return model


def has_bf16_linear_weights(model: nn.Module) -> bool:
    """Whether `cast_linear_weights` has made `model`'s linear layers bf16."""
    return any(type(m) is nn.Linear and m.weight.dtype == torch.bfloat16 for m in model.modules())


def cast_linear_weights(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Give every nn.Linear of a frozen model its own `dtype` copy of its weight and bias, in place.

    What autocast would cast at every call, done once; embeddings and LayerNorm stay fp32. A weight
    shared with an embedding (tied output projection) is copied, not converted, so the embedding
    keeps its fp32 table and the numbers stay those of autocast over fp32 weights.
    """
    for module in model.modules():
        if type(module) is nn.Linear and module.weight.dtype == torch.float32:
            module.weight = nn.Parameter(module.weight.detach().to(dtype), requires_grad=False)
            if module.bias is not None:
                module.bias = nn.Parameter(module.bias.detach().to(dtype), requires_grad=False)
    return model


def bf16_keys_are_faster() -> bool:
    """Whether int8 decoding should keep the decoder's attention keys and values in bf16: on CPUs
    with AMX, where the conversions are cheap and bf16 attention was measured faster (the only kind
    measured; AVX-512 BF16 without AMX was not)."""
    return "amx_bf16" in cpu_flags()


def keep_decoder_keys_in(model: nn.Module, dtype: torch.dtype | None) -> nn.Module:
    """Keep the keys and values of every decoder attention (self and cross) in `dtype`, the decoding
    cache's type (None: the computation's), in place; see MultiHeadAttention's kv_dtype."""
    for layer in getattr(model, "decoder_layers", []):
        layer.self_attn.kv_dtype = layer.cross_attn.kv_dtype = dtype
    return model


def amx_int8_available() -> bool:
    """Whether this CPU has AMX tiles for int8 and this torch build oneDNN's quantized kernels for them."""
    return "amx_int8" in cpu_flags() and "onednn" in torch.backends.quantized.supported_engines


def quantize_int8(model: nn.Module, onednn: bool | None = None) -> nn.Module:
    """Replace every nn.Linear of a Transformer by an int8 dynamically quantized one, in place.

    Cross-attention first gets W_Q and [W_K; W_V] as separate layers: it uses the row blocks of the
    fused projection apart, and a packed int8 weight cannot be sliced. The layers are
    `nmt.inference.int8_linear.Int8Linear`: torch.ao's, called more cheaply; with `onednn` (default:
    on CPUs with AMX for int8) large calls run oneDNN's kernels.
    """
    onednn = amx_int8_available() if onednn is None else onednn
    with warnings.catch_warnings():  # the deprecation notes of torch.ao (see the module docstring)
        warnings.simplefilter("ignore")
        from torch.ao.quantization import quantize_dynamic  # noqa: PLC0415 - only int8 users pay the import

        from .int8_linear import Int8Linear  # noqa: PLC0415 - it imports torch.ao

        for layer in getattr(model, "decoder_layers", []):
            layer.cross_attn.split_cross_projections()
        quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, mapping={nn.Linear: Int8Linear}, inplace=True)
    if onednn:
        for module in model.modules():
            if isinstance(module, Int8Linear):
                module.add_onednn_kernels()
    return model


def int8_here() -> str:
    """What nmt's own int8 engine (`--engine torch --precision int8`) runs on this CPU, in one line:
    the kernels of its linear layers and the type of the decoder's cached keys and values."""
    try:
        check_precision("int8", torch.device("cpu"))
    except PrecisionError as err:
        return f"not available: {err}"
    kernels = "fbgemm, oneDNN's AMX kernels for large calls" if amx_int8_available() else "fbgemm"
    keys = "bf16 (this CPU has AMX)" if bf16_keys_are_faster() else "fp32 (no AMX here)"
    return f"linear layers {kernels}; decoder keys and values in {keys}"


def autocast_for(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The autocast context of a translation call: bf16 matmuls for "bf16", nothing otherwise."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
