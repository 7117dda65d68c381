"""Reduced precision: int8 stays close to fp32 and keeps cached decoding exact; bad choices are refused."""

import pytest
import torch

from nmt.decoding import SearchLimits, beam_search
from nmt.inference.precision import (
    INT8_PACK_ENCODER_FROM,
    PrecisionError,
    check_precision,
    int8_here,
    prepare_for_inference,
)
from nmt.model import ModelConfig, Transformer
from nmt.model.attention import MultiHeadAttention
from nmt.translator import Translator

from conftest import read_head


@pytest.fixture(scope="module")
def sources(multi30k_dir):
    return read_head(multi30k_dir / "data/task1/raw/val.de.gz", 8)


def model_for(**overrides) -> Transformer:
    torch.manual_seed(0)
    config = dict(
        src_vocab_size=300,
        tgt_vocab_size=300,
        encoder_layers=2,
        decoder_layers=2,
        d_model=64,
        num_heads=4,
        d_ff=128,
        dropout=0.0,
    )
    return Transformer(ModelConfig(**{**config, **overrides})).eval()


@pytest.mark.parametrize("sharing", ["all", "none"])
def test_int8_log_probs_stay_close_to_fp32_and_every_linear_layer_is_quantized(sharing):
    fp32 = model_for(sharing=sharing)
    int8 = prepare_for_inference(model_for(sharing=sharing), "int8")
    assert not any(type(m) is torch.nn.Linear for m in int8.modules())  # the output projection too
    src = torch.randint(4, 300, (4, 12))
    tgt = torch.randint(4, 300, (4, 9))
    with torch.inference_mode():
        a, b = fp32(src, tgt).log_softmax(-1), int8(src, tgt).log_softmax(-1)
    kl = (a.exp() * (a - b)).sum(-1)  # KL(fp32 || int8) per position
    assert (a - b).abs().mean() < 0.03 and kl.max() < 0.01
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.9


AMX = frozenset({"amx_bf16", "amx_int8", "amx_tile", "avx512_bf16"})
NO_AMX = frozenset({"avx2", "avx512f", "avx512_vnni"})


@pytest.mark.parametrize("flags", [AMX, NO_AMX], ids=["amx", "no-amx"])
def test_int8_cached_decoding_equals_uncached_decoding(tiny_model_dir, sources, flags, monkeypatch):
    """Cross-attention keys/values come from the split, quantized projections on both paths; with
    AMX the decoder keeps them in bf16 on both paths too."""
    monkeypatch.setattr("nmt.inference.precision.cpu_flags", lambda: flags)
    translator = Translator.load(tiny_model_dir, precision="int8")
    kept = {m.kv_dtype for layer in translator.model.decoder_layers for m in (layer.self_attn, layer.cross_attn)}
    assert kept == ({torch.bfloat16} if flags is AMX else {None})
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(translator.encode_source(s)[0]) for s in sources], batch_first=True
    )
    with torch.inference_mode():
        cached = beam_search(translator.model, src, beam_size=3, limits=SearchLimits(max_len_b=5))
        uncached = beam_search(translator.model, src, beam_size=3, limits=SearchLimits(max_len_b=5), use_cache=False)
    assert [h[0].tokens for h in cached] == [h[0].tokens for h in uncached]


def test_only_int8_on_amx_keeps_the_decoder_s_keys_in_bf16_and_its_answers_stay_int8_s(monkeypatch):
    monkeypatch.setattr("nmt.inference.precision.cpu_flags", lambda: AMX)
    src, tgt = torch.randint(4, 300, (4, 12)), torch.randint(4, 300, (4, 9))
    fp32 = prepare_for_inference(model_for(), "fp32")
    assert all(m.kv_dtype is None for m in fp32.modules() if isinstance(m, MultiHeadAttention))
    bf16_keys = prepare_for_inference(model_for(), "int8")
    attention = [m for m in bf16_keys.modules() if isinstance(m, MultiHeadAttention)]
    decoder = {id(m) for layer in bf16_keys.decoder_layers for m in (layer.self_attn, layer.cross_attn)}
    assert [m.kv_dtype for m in attention] == [torch.bfloat16 if id(m) in decoder else None for m in attention]
    monkeypatch.setattr("nmt.inference.precision.cpu_flags", lambda: NO_AMX)
    fp32_keys = prepare_for_inference(model_for(), "int8")
    with torch.inference_mode():
        a, b = fp32_keys(src, tgt).log_softmax(-1), bf16_keys(src, tgt).log_softmax(-1)
    assert not torch.equal(a, b)  # the keys were rounded
    kl = (a.exp() * (a - b)).sum(-1)  # the bounds int8 itself keeps to fp32 (the first test)
    assert (a - b).abs().mean() < 0.03 and kl.max() < 0.01
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.9


@pytest.mark.parametrize("flags", [AMX, NO_AMX], ids=["amx", "no-amx"])
def test_nmt_info_s_int8_line_says_what_this_cpu_runs(flags, monkeypatch):
    monkeypatch.setattr("nmt.inference.precision.cpu_flags", lambda: flags)
    line = int8_here()
    amx = flags == AMX
    assert line.endswith("decoder keys and values in bf16 (this CPU has AMX)" if amx else "in fp32 (no AMX here)")
    onednn = amx and "onednn" in torch.backends.quantized.supported_engines
    assert ("oneDNN's AMX kernels" in line) == onednn
    model = prepare_for_inference(model_for(), "int8")  # what the line says is what int8 does
    assert (model.decoder_layers[0].self_attn.kv_dtype == torch.bfloat16) == amx
    assert (model.output.onednn_packed is not None) == onednn


def test_precisions_a_device_runs_badly_are_refused(monkeypatch):
    with pytest.raises(PrecisionError, match="CPU only"):
        check_precision("int8", torch.device("cuda"))
    with pytest.raises(PrecisionError, match="one of"):
        check_precision("fp8", torch.device("cpu"))
    monkeypatch.setattr("nmt.inference.precision.cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    with pytest.raises(PrecisionError, match="slower than fp32"):
        check_precision("bf16", torch.device("cpu"))
    monkeypatch.setattr("nmt.inference.precision.cpu_flags", lambda: frozenset({"amx_bf16", "amx_tile"}))
    check_precision("bf16", torch.device("cpu"))  # AMX: allowed
    check_precision("bf16", torch.device("cuda"))


def test_an_int8_model_is_not_quantised_twice_nor_passed_off_as_fp32(tiny_model_dir, sources):
    from nmt.checkpoint import load_model_dir
    from nmt.tokenizer import load_tokenizers

    model, tokenizers = load_model_dir(tiny_model_dir), load_tokenizers(tiny_model_dir)
    first = Translator(model, *tokenizers, precision="int8")
    again = Translator(model, *tokenizers, precision="int8")  # reuses the quantised layers
    assert again.translate(sources[:3], beam=2) == first.translate(sources[:3], beam=2)
    with pytest.raises(PrecisionError, match="already quantised"):
        Translator(model, *tokenizers, precision="fp32")


@pytest.mark.parametrize("sharing", ["all", "none"])
def test_bf16_casts_a_frozen_model_s_linear_weights_once_with_autocast_s_numbers(sharing, monkeypatch):
    """What autocast casts at every call, done once: same hypotheses and scores; embeddings stay fp32."""
    monkeypatch.setattr("nmt.inference.precision.cpu_flags", lambda: frozenset({"amx_bf16", "amx_tile"}))  # allow bf16
    model = model_for(sharing=sharing).requires_grad_(False)
    src = torch.randint(4, 300, (3, 10))
    limits = SearchLimits(max_len_b=6)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        before = beam_search(model, src, beam_size=3, n_best=3, limits=limits)
        prepare_for_inference(model, "bf16")
        after = beam_search(model, src, beam_size=3, n_best=3, limits=limits)
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    assert linears and all(m.weight.dtype == torch.bfloat16 for m in linears)
    assert model.tgt_embed.weight.dtype == model.src_embed.weight.dtype == torch.float32
    assert [[(h.tokens, h.score) for h in x] for x in after] == [[(h.tokens, h.score) for h in x] for x in before]
    with pytest.raises(PrecisionError, match="weights are bf16"):
        prepare_for_inference(model, "fp32")


def test_a_model_in_training_keeps_its_fp32_weights_under_bf16(monkeypatch):
    monkeypatch.setattr("nmt.inference.precision.cpu_flags", lambda: frozenset({"amx_bf16", "amx_tile"}))
    model = prepare_for_inference(model_for(), "bf16")  # requires grad: validation between training steps
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_a_bf16_translator_casts_at_load_and_plots_attention(tiny_model_dir, sources, monkeypatch):
    from nmt.plots import attention_maps

    monkeypatch.setattr("nmt.inference.precision.cpu_flags", lambda: frozenset({"amx_bf16", "amx_tile"}))
    bf16, fp32 = Translator.load(tiny_model_dir, precision="bf16"), Translator.load(tiny_model_dir)
    assert all(m.weight.dtype == torch.bfloat16 for m in bf16.model.modules() if type(m) is torch.nn.Linear)
    a, b = attention_maps(bf16, sources[0]), attention_maps(fp32, sources[0])
    assert a.weights["cross_attention"].shape[0] == b.weights["cross_attention"].shape[0]  # one map per layer
    for w in a.weights.values():  # each row a distribution
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), atol=2e-2, rtol=0)


def test_int8_packs_the_encoder_only_from_more_padding_and_packed_stays_close_to_padded():
    """int8's layers are cheaper against the same copies, so it packs from a larger share of padding
    (INT8_PACK_ENCODER_FROM); a batch above it runs packed through the quantized layers."""
    int8 = prepare_for_inference(model_for(), "int8")
    assert model_for().pack_encoder_from < int8.pack_encoder_from == INT8_PACK_ENCODER_FROM
    src = torch.randint(4, 300, (4, 12))
    src[1:, 4:] = int8.config.pad_id  # 24 of 48 positions: half padding, above either share
    real = src != int8.config.pad_id
    with torch.inference_mode():
        packed = int8.encode(src).memory
        int8.pack_encoder_from = 2.0
        padded = int8.encode(src).memory
    assert torch.count_nonzero(packed[~real]) == 0 and torch.count_nonzero(padded[~real]) > 0
    # the activations' int8 scales are measured per call, over real tokens only once packed
    assert (packed[real] - padded[real]).abs().mean() < 0.05 * padded[real].abs().mean()
