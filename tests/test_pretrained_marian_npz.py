"""Marian's own release format (decoder.yml, model.npz, vocabulary .yml) imports with the weights of
its Hugging Face conversion, and computes what Marian computes: transformers and CTranslate2's
Marian converter agree once given Marian's own position table (which their conversions replace).

The releases are written here from the Hugging Face models of tests/marian_models.py
(`save_marian_release`: transformers' conversion run backwards); CTranslate2's own reader of
Marian models checks that layout independently of nmt's reader, and `marian_position_table`
follows Marian's C++.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
import yaml

from marian_models import assert_import_refused, marian_position_table, save_marian, save_marian_release

transformers = pytest.importorskip("transformers")

from nmt.checkpoint import load_model_dir  # noqa: E402
from nmt.cli import main  # noqa: E402
from nmt.config import DecodeConfig  # noqa: E402
from nmt.model_dir import read_decode_config  # noqa: E402
from nmt.pretrained.importing import import_marian  # noqa: E402
from nmt.tokenizer import load_tokenizers  # noqa: E402
from nmt.translator import Translator  # noqa: E402

MAX_NEW = 40


@pytest.fixture(scope="module")
def release(trained, tmp_path_factory):
    """(Hugging Face directory, its release, the release imported, the Hugging Face directory imported)."""
    hf_dir, hf_import = trained
    folder = tmp_path_factory.mktemp("release")
    written = save_marian_release(hf_dir, folder / "release", beam=4, normalize=1.0)
    return hf_dir, written, import_marian(written, folder / "nmt"), hf_import


def greedy(model_dir, sentences):
    src_tok, tgt_tok = load_tokenizers(model_dir)
    decode = DecodeConfig(beam=1, max_len_a=0, max_len_b=MAX_NEW, min_len=0)
    return Translator(load_model_dir(model_dir), src_tok, tgt_tok, decode=decode).translate(sentences, beam=1)


def same_weights_as_the_conversion(a, b):
    """The release's import `a` holds the Hugging Face import `b`'s weights; only the two settings where
    transformers' conversion departs from Marian differ."""
    ours, theirs = load_model_dir(a), load_model_dir(b)
    assert (ours.config.layer_norm_eps, ours.config.position_layout) == (1e-6, "marian")  # Marian's own
    assert (theirs.config.layer_norm_eps, theirs.config.position_layout) == (1e-5, "halves")  # transformers'
    apart = {"layer_norm_eps": 0, "position_layout": ""}
    assert {**ours.config.__dict__, **apart} == {**theirs.config.__dict__, **apart}
    mine, other = ours.state_dict(), theirs.state_dict()
    # <pad>'s output row and bias: Marian has no <pad>, so the release gives them zeros (transformers'
    # conversion does too); the test's Hugging Face model drew them at random. Never used: <pad> is
    # never a choice.
    pad = ours.config.pad_id
    for name in ("output.bias", "output.weight"):
        assert not mine[name][pad].any()
        mine[name][pad] = other[name][pad]
    assert mine.keys() == other.keys() and all(torch.equal(mine[k], other[k]) for k in mine)


def test_a_release_is_read_as_its_hugging_face_conversion(release):
    _, _, from_release, from_hf = release
    same_weights_as_the_conversion(from_release, from_hf)
    release_src, release_tgt = load_tokenizers(from_release)
    hf_src, hf_tgt = load_tokenizers(from_hf)
    text = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."
    assert release_src.encode(text) == hf_src.encode(text)
    assert (release_tgt.start_id, release_tgt.eos_id, release_tgt.pad_id) == (hf_tgt.start_id, 0, hf_tgt.pad_id)


def test_greedy_output_is_transformers_and_ctranslate2_s_marian_converter_s(release, marian_corpus, tmp_path):
    """Both given Marian's position table: transformers' model its embed_positions overwritten,
    CTranslate2's converter through the archive's `Wpos`, which it takes in place of its own."""
    hf_dir, written, from_release, _ = release
    _, _, test = marian_corpus
    ours = greedy(from_release, test)
    model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(hf_dir)
    with torch.no_grad():
        for side in (model.model.encoder, model.model.decoder):
            table = side.embed_positions.weight
            table.copy_(torch.from_numpy(marian_position_table(table.size(0), table.size(1))))
        generated = model.generate(
            **tokenizer(test, return_tensors="pt", padding=True),
            num_beams=1,
            do_sample=False,
            max_new_tokens=MAX_NEW,
            forced_eos_token_id=None,
        )
    assert ours == tokenizer.batch_decode(generated, skip_special_tokens=True)
    assert sum(tokenizer.eos_token_id in row for row in generated.tolist()) >= len(test) // 2  # most end

    ctranslate2 = pytest.importorskip("ctranslate2")
    converted = tmp_path / "ct2"
    vocabs = [str(written / name) for name in yaml.safe_load((written / "decoder.yml").read_text())["vocabs"]]
    with np.load(written / "model.npz") as archive:
        arrays = {name: archive[name] for name in archive.files}
    arrays["Wpos"] = marian_position_table(256, int(arrays["Wemb"].shape[1]))
    np.savez(tmp_path / "with_positions.npz", **arrays)
    ctranslate2.converters.MarianConverter(str(tmp_path / "with_positions.npz"), vocabs).convert(str(converted))
    theirs = ctranslate2.Translator(str(converted), device="cpu", intra_threads=1)
    sources = [tokenizer.convert_ids_to_tokens(tokenizer(s)["input_ids"])[:-1] for s in test]  # it adds </s>
    results = theirs.translate_batch(sources, beam_size=1, max_decoding_length=MAX_NEW)
    assert ours == [tokenizer.convert_tokens_to_string(r.hypotheses[0]) for r in results]


SHAPES = {
    "separate vocabularies": {"separate_vocabs": True},
    "separate, untied output": {"separate_vocabs": True, "tie_output": False},
    "relu, 3+1 layers": {"activation": "relu", "layers": (3, 1)},
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_other_shapes_are_read_with_their_hugging_face_conversion_s_weights(name, spm_models, tmp_path):
    hf_dir = save_marian(tmp_path / "hf", *spm_models, seed=3, **SHAPES[name])
    from_release = import_marian(save_marian_release(hf_dir, tmp_path / "release"), tmp_path / "a")
    same_weights_as_the_conversion(from_release, import_marian(hf_dir, tmp_path / "b"))
    assert load_model_dir(from_release).config.sharing == (
        "none" if "untied" in name else "tgt_out" if "separate" in name else "all"
    )


def test_a_release_exported_to_hugging_face_translates_as_the_original(release, marian_corpus, tmp_path, caplog):
    hf_dir, _, from_release, _ = release
    _, _, test = marian_corpus
    out = tmp_path / "hf"
    with caplog.at_level("INFO"):
        assert main(["export", "--model", str(from_release), "--to", "huggingface", "--out", str(out)]) == 0
    assert "Marian's own positions and layer-norm epsilon 1e-06 become transformers' table and 1e-05" in caplog.text
    inputs = transformers.MarianTokenizer.from_pretrained(hf_dir)(test[:40], return_tensors="pt", padding=True)
    with torch.no_grad():
        original, exported = (
            transformers.MarianMTModel.from_pretrained(d).eval().generate(**inputs, num_beams=1, max_new_tokens=MAX_NEW)
            for d in (hf_dir, out)
        )
    assert torch.equal(original, exported)


def test_decoder_yml_s_search_settings_are_kept(release):
    _, _, from_release, _ = release
    decode = read_decode_config(from_release)
    settings = (decode.beam, decode.length_penalty, decode.length_normalization, decode.min_len, decode.early_stopping)
    assert settings == (4, 1.0, "average", 0, True)  # Marian ends a sentence once `beam` have finished


def test_marian_s_own_search_defaults_where_decoder_yml_sets_none(release, tmp_path):
    _, written, _, _ = release
    bare = tmp_path / "bare"
    shutil.copytree(written, bare)
    edit_decoder(**{"beam-size": None, "normalize": None})(bare)
    decode = read_decode_config(import_marian(bare, tmp_path / "nmt"))
    assert (decode.beam, decode.length_penalty) == (12, 0.0)  # marian-decoder's defaults


# --- refusals ---------------------------------------------------------------------------------------------


def rewrite_options(**changes):
    """A damage: the archive's saved options changed (Marian's own names; None drops one)."""

    def apply(d):
        with np.load(d / "model.npz") as archive:
            arrays = {name: archive[name] for name in archive.files}
        options = yaml.safe_load(arrays["special:model.yml"].tobytes().rstrip(b"\0"))
        options.update(changes)
        options = {name: value for name, value in options.items() if value is not None}
        arrays["special:model.yml"] = np.frombuffer(yaml.safe_dump(options).encode() + b"\0", dtype=np.int8)
        np.savez(d / "model.npz", **arrays)

    return apply


def add_array(name):
    def apply(d):
        with np.load(d / "model.npz") as archive:
            arrays = {n: archive[n] for n in archive.files}
        arrays[name] = np.zeros((8, 4), dtype=np.float32)
        np.savez(d / "model.npz", **arrays)

    return apply


def edit_decoder(**changes):
    """A change to decoder.yml (None drops a setting)."""

    def apply(d):
        decoder = {**yaml.safe_load((d / "decoder.yml").read_text()), **changes}
        (d / "decoder.yml").write_text(yaml.safe_dump({k: v for k, v in decoder.items() if v is not None}))

    return apply


def drop_last_piece(d):
    lines = (d / "vocab.yml").read_text(encoding="utf-8").splitlines()
    (d / "vocab.yml").write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")


def cut_archive(d):
    data = (d / "model.npz").read_bytes()
    (d / "model.npz").write_bytes(data[: len(data) // 2])


DAMAGES = {
    "pre-norm": (
        rewrite_options(**{"transformer-preprocess": "n"}),
        r"transformer-preprocess is 'n'; nmt imports a post",
    ),
    "average attention": (
        rewrite_options(**{"transformer-decoder-autoreg": "average-attention"}),
        r"transformer-decoder-autoreg is 'average-attention'",
    ),
    "gelu": (rewrite_options(**{"transformer-ffn-activation": "gelu"}), r"Marian's gelu is x \* sigmoid\(1.702 x\)"),
    "learned positions": (add_array("Wpos"), r"arrays nmt has no place for: Wpos"),
    "shared embedding, untied output": (
        add_array("decoder_ff_logit_out_Wt"),
        r"one embedding \(Wemb\) for both sides but an output matrix of its own",
    ),
    "ensemble": (edit_decoder(models=["model.npz", "model.npz"]), r"decoder.yml: models lists 2 \(an ensemble\)"),
    "vocabulary size": (
        drop_last_piece,
        r"vocab.yml: the vocabulary has \d+ pieces but the weights' encoder embedding",
    ),
    "cut archive": (cut_archive, r"model.npz: not a readable NumPy archive"),
    "no source.spm": (lambda d: (d / "source.spm").unlink(), r"source.spm"),
    "no options": (rewrite_options(**{"dim-emb": None}), r"dim-emb is None, not a positive integer"),
}


@pytest.mark.parametrize("name", list(DAMAGES))
def test_unsupported_releases_are_one_line_and_nothing_is_written(name, release, tmp_path, capsys):
    _, written, _, _ = release
    broken = tmp_path / "broken"
    shutil.copytree(written, broken)
    apply, message = DAMAGES[name]
    apply(broken)
    assert_import_refused(broken, message, capsys)


def test_nmt_s_ctranslate2_export_carries_marian_s_positions(release, marian_corpus, tmp_path):
    pytest.importorskip("ctranslate2")
    _, _, from_release, _ = release
    _, _, test = marian_corpus
    exported = tmp_path / "ct2"
    assert main(["export", "--model", str(from_release), "--to", "ctranslate2", "--out", str(exported)]) == 0
    decode = DecodeConfig(beam=1, max_len_a=0, max_len_b=MAX_NEW, min_len=0)
    translator = Translator.load(exported, engine="ctranslate2")
    translator.decode = translator.engine.decode = decode
    assert translator.translate(test, beam=1) == greedy(from_release, test)


def test_a_release_is_given_its_languages_at_import(release, tmp_path, capsys):
    from nmt.model_dir import read_languages

    _, written, from_release, _ = release
    assert read_languages(from_release) == (None, None)  # a release does not name them
    out = tmp_path / "with_languages"
    assert main(["import", "--from", "marian", str(written), "--out", str(out), "--source-lang", "de",
                 "--target-lang", "en"]) == 0  # fmt: skip
    assert read_languages(out) == ("de", "en")
