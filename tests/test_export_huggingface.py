"""Models nmt trained, written as Hugging Face MarianMTModels: transformers computes what nmt computes.

The models are seeded random Transformers with a joint BPE tokenizer trained on Multi30k
(conftest's tiny_model_dir), one of them multi-target with `>>de<<`/`>>fr<<` tokens.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")

from nmt.checkpoint import load_model_dir, save_model_dir  # noqa: E402
from nmt.cli import main  # noqa: E402
from nmt.config import load_config  # noqa: E402
from nmt.decoding import SearchLimits, greedy_search  # noqa: E402
from nmt.model import ModelConfig, Transformer  # noqa: E402
from nmt.model.embedding import sinusoidal_encoding  # noqa: E402
from nmt.pretrained.feature_order import interleaved_to_halves, with_halves_layout  # noqa: E402
from nmt.tokenizer import EOS_ID, load_tokenizers, save_tokenizers  # noqa: E402

from conftest import TINY_SHAPE  # noqa: E402

SENTENCES = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau mit rotem Hut liest ein Buch.",
    "Kinder!",
]
MAX_NEW = 12


def export(model_dir, out) -> int:
    return main(["export", "--model", str(model_dir), "--to", "huggingface", "--out", str(out)])


def hf_model(directory):
    model = transformers.MarianMTModel.from_pretrained(directory).eval()
    return model, transformers.AutoTokenizer.from_pretrained(directory)


def nmt_greedy(model_dir, texts):
    """nmt's greedy output ids for `texts` (a multilingual model's led by their >>xx<< token)."""
    model = load_model_dir(model_dir).eval()
    tokenizer, _ = load_tokenizers(model_dir)
    ids = [torch.tensor(tokenizer.encode(t)) for t in texts]
    src = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=tokenizer.pad_id)
    with torch.no_grad():
        found = greedy_search(model, src, limits=SearchLimits(max_len_a=0, max_len_b=MAX_NEW, min_len=0))
    return [[int(t) for t in h.tokens] for h in found]


def hf_greedy(model, tokenizer, texts):
    """transformers' greedy output ids: without the start token, cut at the end token."""
    inputs = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = model.generate(**inputs, num_beams=1, max_new_tokens=MAX_NEW, forced_eos_token_id=None)
    outputs = []
    for row in generated.tolist():
        tokens = row[1:]
        outputs.append(tokens[: tokens.index(EOS_ID)] if EOS_ID in tokens else tokens)
    return outputs


def spread(model: Transformer) -> Transformer:
    """The model's weights drawn wider (seeded): default-initialised tiny models write one token
    over and over, which would let a wrong export agree on greedy output by chance."""
    torch.manual_seed(2)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    return model


@pytest.fixture(scope="module")
def varied_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with wider weights (see `spread`)."""
    model_dir = tmp_path_factory.mktemp("varied")
    shutil.copytree(tiny_model_dir, model_dir, dirs_exist_ok=True)
    save_model_dir(spread(load_model_dir(tiny_model_dir)), model_dir)
    return model_dir


@pytest.fixture(scope="module")
def multi_target_dir(tiny_model_dir, tmp_path_factory):
    """A random en->{de, fr} model: the tiny model's tokenizer with two target tokens, and data.pairs."""
    model_dir = tmp_path_factory.mktemp("en_xx")
    tokenizer, _ = load_tokenizers(tiny_model_dir)
    tokenizer = tokenizer.with_language_tokens(["de", "fr"])
    save_tokenizers(tokenizer, tokenizer, model_dir)
    torch.manual_seed(1)
    size = tokenizer.vocab_size
    save_model_dir(spread(Transformer(ModelConfig(src_vocab_size=size, tgt_vocab_size=size, **TINY_SHAPE))), model_dir)
    config = load_config(None, ["data.pairs=[multi30k:en-de, multi30k:en-fr]"])
    config.save(model_dir / "config.yaml")
    return model_dir


def test_reordered_features_with_a_halves_table_compute_the_interleaved_model_s_logits():
    torch.manual_seed(0)
    config = ModelConfig(src_vocab_size=50, tgt_vocab_size=50, **TINY_SHAPE)
    original = Transformer(config).eval()
    halves = Transformer(ModelConfig(**{**config.to_dict(), "position_layout": "halves"})).eval()
    halves.load_state_dict(with_halves_layout(original.state_dict(), config))
    src, tgt = torch.randint(4, 50, (3, 9)), torch.randint(4, 50, (3, 7))
    with torch.no_grad():
        assert torch.allclose(original(src, tgt), halves(src, tgt), atol=1e-5)
        unpermuted = Transformer(ModelConfig(**{**config.to_dict(), "position_layout": "halves"})).eval()
        unpermuted.load_state_dict(original.state_dict())
        assert not torch.allclose(original(src, tgt), unpermuted(src, tgt), atol=1e-2)  # the order matters
    assert interleaved_to_halves(6).tolist() == [0, 2, 4, 1, 3, 5]
    positions = torch.arange(300)
    halves_table = sinusoidal_encoding(positions, 32, layout="halves")
    assert torch.equal(sinusoidal_encoding(positions, 32)[:, interleaved_to_halves(32)], halves_table)


def test_a_trained_model_s_export_computes_nmt_s_logits_and_greedy_output(varied_dir, tmp_path):
    out = tmp_path / "hf"
    assert export(varied_dir, out) == 0
    assert json.loads((out / "tokenizer_config.json").read_text())["source_lang"] == "de"
    model, tokenizer = hf_model(out)
    src_tok, _ = load_tokenizers(varied_dir)
    assert tokenizer(SENTENCES[0])["input_ids"] == src_tok.encode(SENTENCES[0])  # [START] ... [END] as nmt's
    ours = load_model_dir(varied_dir).eval()
    src = torch.tensor([src_tok.encode(SENTENCES[2])])
    tgt = torch.tensor([src_tok.encode("A woman reads.", add_special=False)])
    tgt_in = torch.cat([torch.tensor([[ours.config.bos_id]]), tgt], dim=1)
    with torch.no_grad():
        theirs = model(input_ids=src, decoder_input_ids=tgt_in).logits
        assert torch.allclose(ours(src, tgt_in), theirs, atol=1e-4)  # layer-norm epsilon 1e-6 against 1e-5
    expected = nmt_greedy(varied_dir, SENTENCES)
    assert hf_greedy(model, tokenizer, SENTENCES) == expected
    assert len({tuple(e) for e in expected}) > 1  # outputs that tell the sentences apart

    # generate() as a user calls it: the export's generation_config.json, not transformers' 20-token cut
    long = [" ".join([SENTENCES[1].rstrip(".")] * 6) + "."]
    with torch.no_grad():
        plain = model.generate(**tokenizer(long, return_tensors="pt"))
    assert model.generation_config.max_length == 512 and model.generation_config.num_beams in (None, 1)
    assert plain.size(1) > 21 or int(plain[0, -1]) == EOS_ID, plain  # ended, or ran past the default cut

    resaved = tmp_path / "resaved"  # transformers' own save drops the position table and rebuilds it
    model.save_pretrained(resaved)
    tokenizer.save_pretrained(resaved)
    assert hf_greedy(*hf_model(resaved), SENTENCES) == expected


def test_a_multi_target_export_keeps_the_token_whole_and_translates_as_nmt_into_each_language(
    multi_target_dir, tmp_path
):
    out = tmp_path / "hf"
    assert export(multi_target_dir, out) == 0
    settings = json.loads((out / "tokenizer_config.json").read_text())
    assert (settings["source_lang"], settings["target_lang"]) == ("en", None)
    model, tokenizer = hf_model(out)
    src_tok, _ = load_tokenizers(multi_target_dir)
    token = tokenizer.convert_tokens_to_ids(">>fr<<")
    assert tokenizer(">>fr<< A dog.")["input_ids"] == [src_tok.start_id, token, *src_tok.encode("A dog.")[1:]]
    ours = load_model_dir(multi_target_dir).eval()
    tgt_in = torch.tensor([[ours.config.bos_id, *src_tok.encode("Ein Hund.", add_special=False)]])
    logits = {}
    for lang in ("de", "fr"):
        texts = [f">>{lang}<< {s}" for s in SENTENCES]
        assert hf_greedy(model, tokenizer, texts) == nmt_greedy(multi_target_dir, texts), lang
        src = torch.tensor([src_tok.encode(texts[0])])
        with torch.no_grad():
            logits[lang] = model(input_ids=src, decoder_input_ids=tgt_in).logits
            assert torch.allclose(ours(src, tgt_in), logits[lang], atol=1e-4), lang
    assert not torch.allclose(logits["de"], logits["fr"], atol=1e-2)  # the token reaches the model


def test_what_marian_cannot_hold_is_refused_before_anything_is_written(tiny_model_dir, tmp_path, capsys):
    pre_norm = tmp_path / "pre"
    shutil.copytree(tiny_model_dir, pre_norm)
    config = load_model_dir(tiny_model_dir).config
    save_model_dir(Transformer(ModelConfig(**{**config.to_dict(), "norm_position": "pre"})), pre_norm)
    separate = tmp_path / "separate"
    shutil.copytree(tiny_model_dir, separate)
    tokenizer, _ = load_tokenizers(tiny_model_dir)
    (separate / "tokenizer.json").unlink()
    tokenizer.save(separate / "tokenizer.src.json")
    tokenizer.save(separate / "tokenizer.tgt.json")
    for model_dir, message in (
        (pre_norm, "MarianMTModel cannot hold norm_position='pre'"),
        (separate, "source and target tokenizers are separate"),
    ):
        out = tmp_path / f"{model_dir.name}_hf"
        assert export(model_dir, out) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("nmt export: error: ") and message in err[-1]
        assert not out.exists()
