"""Marian models imported from the Hugging Face layout compute what transformers computes.

Every model is built here (tests/marian_models.py): SentencePiece models trained on Multi30k
sentences, seeded random MarianMTModels of several shapes, and one trained for a few hundred steps
so that greedy search has varied outputs to agree on.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil

import pytest
import torch

from marian_models import assert_import_refused, save_marian

transformers = pytest.importorskip("transformers")

from nmt.checkpoint import load_model_dir  # noqa: E402
from nmt.cli import main  # noqa: E402
from nmt.config import DecodeConfig  # noqa: E402
from nmt.pretrained.importing import import_marian  # noqa: E402
from nmt.pretrained.marian import MarianFormatError  # noqa: E402
from nmt.tokenizer import load_tokenizers  # noqa: E402
from nmt.translator import Translator  # noqa: E402

SHAPES = {
    "swish, scaled, shared vocabulary": {},
    "gelu, unscaled embeddings": {"activation": "gelu", "scale_embedding": False},
    "relu, 3+1 layers": {"activation": "relu", "layers": (3, 1)},
    "separate vocabularies": {"separate_vocabs": True},
    "multi-target (>>xx<< tokens)": {"language_codes": ("en", "fr")},
}
MAX_NEW = 40  # one output cap for both searches


@pytest.fixture(scope="module")
def corpus(marian_corpus):
    return marian_corpus


@pytest.fixture(scope="module")
def shapes(tmp_path_factory, spm_models):
    """{shape name: (Hugging Face directory, imported nmt directory)} of seeded random models."""
    built = {}
    for i, (name, options) in enumerate(SHAPES.items()):
        folder = tmp_path_factory.mktemp(f"shape{i}")
        hf = save_marian(folder / "hf", *spm_models, seed=i, **options)
        built[name] = hf, import_marian(hf, folder / "nmt")
    return built


def hf_model(directory):
    model = transformers.MarianMTModel.from_pretrained(directory).eval()
    return model, transformers.MarianTokenizer.from_pretrained(directory)


# --- tokenisation -----------------------------------------------------------------------------


def test_ids_and_text_are_marian_tokenizer_s(trained, corpus):
    hf_dir, nmt_dir = trained
    _, tokenizer = hf_model(hf_dir)
    src_tok, tgt_tok = load_tokenizers(nmt_dir)
    _, en, test = corpus
    odd = ["", "  Zwei   Leute. ", "Ein Mann mit 漢字 und ☃.", "Ein </s> im Text"]
    for sentence in test + odd:
        assert src_tok.encode(sentence) == tokenizer(sentence)["input_ids"], sentence
    for sentence in en[600:] + odd[:3]:
        expected = tokenizer(text_target=sentence)["input_ids"]
        ours = tgt_tok.encode(sentence)
        assert ours == [tgt_tok.start_id, *expected], sentence  # nmt's target holds the decoder's start
        assert tgt_tok.decode(ours) == tokenizer.decode(expected[:-1]), sentence


def test_a_multi_target_model_keeps_the_language_token_whole(shapes):
    hf_dir, nmt_dir = shapes["multi-target (>>xx<< tokens)"]
    _, tokenizer = hf_model(hf_dir)
    src_tok, _ = load_tokenizers(nmt_dir)
    assert src_tok.target_languages == ["en", "fr"]
    for text in (">>fr<< Ein Mann läuft.", ">>en<<Zwei Hunde", ">>xx<< unbekannt"):
        assert src_tok.encode(text) == tokenizer(text)["input_ids"]
    assert src_tok.encode(">>fr<< Ein Mann.")[0] == src_tok._vocab[">>fr<<"]


# --- the network --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_log_probabilities_of_given_targets_match_transformers(shape, shapes, corpus):
    hf_dir, nmt_dir = shapes[shape]
    model, tokenizer = hf_model(hf_dir)
    ours = load_model_dir(nmt_dir)
    de, en, _ = corpus
    batch = tokenizer(de[:16], text_target=en[:16], return_tensors="pt", padding=True)
    labels = batch["labels"]  # (batch, tgt_len), padded with <pad>
    pad = ours.config.pad_id
    start = torch.full((labels.size(0), 1), ours.config.bos_id)
    with torch.no_grad():
        theirs = model(**batch).logits.log_softmax(-1)
        mine = ours(batch["input_ids"], torch.cat([start, labels[:, :-1]], dim=1)).log_softmax(-1)
    real = labels != pad
    pick = labels.unsqueeze(-1)
    difference = (theirs.gather(-1, pick) - mine.gather(-1, pick)).squeeze(-1)[real].abs().max()
    assert difference < 1e-4


def test_greedy_output_is_transformers_token_for_token(trained, corpus):
    hf_dir, nmt_dir = trained
    model, tokenizer = hf_model(hf_dir)
    _, _, test = corpus
    src_tok, tgt_tok = load_tokenizers(nmt_dir)
    translator = Translator(
        load_model_dir(nmt_dir),
        src_tok,
        tgt_tok,
        decode=DecodeConfig(beam=1, max_len_a=0, max_len_b=MAX_NEW, min_len=0),
    )
    ours = [best[0] for best in translator.translate_detailed(test, beam=1)]
    with torch.no_grad():  # forced_eos off: nmt cuts a sentence at its limit, it does not force </s> there
        generated = model.generate(
            **tokenizer(test, return_tensors="pt", padding=True),
            num_beams=1,
            do_sample=False,
            max_new_tokens=MAX_NEW,
            forced_eos_token_id=None,
        )
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    ended = 0
    for sentence, mine, row in zip(test, ours, generated.tolist(), strict=True):
        tokens = [t for t in row[1:] if t != pad]
        ended += tokens[-1:] == [eos]
        assert mine.tokens == [t for t in tokens if t != eos], sentence
        assert mine.text == tokenizer.decode(tokens, skip_special_tokens=True)
    assert len(test) >= 100 and ended >= len(test) // 2  # most end with </s>: a real test of stopping


# --- the command and its refusals -------------------------------------------------------------------


def test_nmt_import_then_translate(trained, tmp_path, capsys):
    hf_dir, _ = trained
    out = tmp_path / "imported"
    assert main(["import", "--from", "marian", str(hf_dir), "--out", str(out)]) == 0
    source = tmp_path / "in.de"
    source.write_text("Ein Mann läuft.\nZwei Hunde spielen im Schnee.\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["translate", "--model", str(out), "--input", str(source), "--beam", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    model, tokenizer = hf_model(hf_dir)
    with torch.no_grad():
        generated = model.generate(
            **tokenizer(source.read_text().splitlines(), return_tensors="pt", padding=True),
            num_beams=1,
            max_new_tokens=40,
            forced_eos_token_id=None,
        )
    assert lines == tokenizer.batch_decode(generated, skip_special_tokens=True)


def damage(name):
    """A function that damages a copied Marian directory in one way."""

    def edit_config(**changes):
        def apply(d):
            config = json.loads((d / "config.json").read_text())
            (d / "config.json").write_text(json.dumps({**config, **changes}))

        return apply

    def drop_vocab_entry(d):
        vocab = json.loads((d / "vocab.json").read_text())
        vocab.pop("<pad>")
        vocab["<pad>"] = len(vocab) + 5
        (d / "vocab.json").write_text(json.dumps(vocab))

    def cut(d):
        data = (d / "model.safetensors").read_bytes()
        (d / "model.safetensors").write_bytes(data[: len(data) // 2])

    return {
        "mbart": (edit_config(model_type="mbart"), r"config.json: model_type is 'mbart'; nmt imports Marian"),
        "activation": (edit_config(activation_function="gelu_new"), r"activation_function 'gelu_new' is not supp"),
        "no source.spm": (lambda d: (d / "source.spm").unlink(), r"source.spm"),
        "no weights": (lambda d: (d / "model.safetensors").unlink(), r"no weights \(model.safetensors or pytorch"),
        "vocabulary size": (drop_vocab_entry, r"vocab.json: the vocabulary has \d+ ids but the weights' source"),
        "cut weights": (cut, r"model.safetensors: not a readable safetensors file"),
        "heads differ": (edit_config(decoder_attention_heads=2), r"encoder_attention_heads \(4\) differs from decoder"),
    }[name]


@pytest.mark.parametrize(
    "name", ["mbart", "activation", "no source.spm", "no weights", "vocabulary size", "cut weights", "heads differ"]
)
def test_unsupported_input_is_one_line_and_nothing_is_written(name, trained, tmp_path, capsys):
    hf_dir, _ = trained
    broken = tmp_path / "broken"
    shutil.copytree(hf_dir, broken)
    apply, message = damage(name)
    apply(broken)
    assert_import_refused(broken, message, capsys)


def test_pickled_weights_are_read_without_unpickling_objects(trained, tmp_path):
    hf_dir, nmt_dir = trained
    pickled = tmp_path / "pickled"
    shutil.copytree(hf_dir, pickled)
    model = transformers.MarianMTModel.from_pretrained(hf_dir)
    (pickled / "model.safetensors").unlink()
    torch.save(model.state_dict(), pickled / "pytorch_model.bin")
    imported = import_marian(pickled, tmp_path / "from_bin")
    a, b = load_model_dir(imported).state_dict(), load_model_dir(nmt_dir).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)

    torch.save({"weights": pathlib.PurePosixPath("/etc")}, pickled / "pytorch_model.bin")  # an object: refused
    with pytest.raises(MarianFormatError, match="pytorch_model.bin: not a readable weights file"):
        import_marian(pickled, tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_an_existing_output_directory_is_refused(trained, tmp_path):
    hf_dir, _ = trained
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="already exists"):
        import_marian(hf_dir, tmp_path / "taken")


# --- CTranslate2 -------------------------------------------------------------------------------------


def test_ctranslate2_export_is_ctranslate2_s_own_conversion(trained, corpus, tmp_path):
    """nmt's export of the imported model and CTranslate2's converter on the original agree, greedy."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    hf_dir, nmt_dir = trained
    _, _, test = corpus
    _, tokenizer = hf_model(hf_dir)
    theirs_dir = tmp_path / "converted"
    ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(theirs_dir))
    theirs = ctranslate2.Translator(str(theirs_dir), device="cpu", intra_threads=1)
    sources = [tokenizer.convert_ids_to_tokens(tokenizer(s)["input_ids"]) for s in test]
    results = theirs.translate_batch(sources, beam_size=1, max_decoding_length=MAX_NEW)
    expected = [tokenizer.convert_tokens_to_string(r.hypotheses[0]) for r in results]

    exported = tmp_path / "exported"
    assert main(["export", "--model", str(nmt_dir), "--to", "ctranslate2", "--out", str(exported)]) == 0
    # laid out as CTranslate2 lays out a Marian model: no <pad> (the decoder starts from zeros)
    vocabulary = [json.loads((d / "shared_vocabulary.json").read_text()) for d in (exported, theirs_dir)]
    assert vocabulary[0] == vocabulary[1] and "<pad>" not in vocabulary[0]
    limits = DecodeConfig(beam=1, max_len_a=0, max_len_b=MAX_NEW, min_len=0)
    for engine_dir in (exported, nmt_dir):  # nmt's CTranslate2 engine, then nmt's own engine
        translator = Translator.load(engine_dir, engine="ctranslate2" if engine_dir == exported else "torch")
        translator.decode = limits
        translator.engine.decode = limits
        assert translator.translate(test, beam=1) == expected, engine_dir


# --- back to Hugging Face -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["swish, scaled, shared vocabulary", "separate vocabularies"])
def test_exported_to_huggingface_transformers_computes_the_original(shape, shapes, corpus, tmp_path):
    hf_dir, nmt_dir = shapes[shape]
    out = tmp_path / "hf"
    assert main(["export", "--model", str(nmt_dir), "--to", "huggingface", "--out", str(out)]) == 0
    original, tokenizer = hf_model(hf_dir)
    back, back_tokenizer = hf_model(out)
    de, en, test = corpus
    batch = tokenizer(de[:16], text_target=en[:16], return_tensors="pt", padding=True)
    assert torch.equal(
        back_tokenizer(de[:16], text_target=en[:16], return_tensors="pt", padding=True)["labels"], batch["labels"]
    )
    with torch.no_grad():
        assert torch.allclose(original(**batch).logits, back(**batch).logits, atol=1e-5)
        inputs = tokenizer(test[:20], return_tensors="pt", padding=True)
        assert torch.equal(
            original.generate(**inputs, num_beams=1, max_new_tokens=MAX_NEW),
            back.generate(**inputs, num_beams=1, max_new_tokens=MAX_NEW),
        )
    # generate() without arguments searches as the original's did (OPUS-MT's beam 4), up to the
    # length its position table holds (not transformers' default cut at 20 tokens)
    search = ("num_beams", "length_penalty", "early_stopping", "min_length", "bad_words_ids")
    assert original.generation_config.num_beams == 4
    assert back.generation_config.max_length == back.config.max_position_embeddings
    defaults = {"num_beams": 1, "length_penalty": 1.0, "early_stopping": False, "min_length": 0}  # transformers'
    assert {k: getattr(back.generation_config, k) or defaults.get(k) for k in search} == {
        k: getattr(original.generation_config, k) or defaults.get(k) for k in search
    }


def test_fine_tuned_with_init_from_then_exported_transformers_reproduces_nmt(trained, overrides, corpus, tmp_path):
    """Fine-tune the imported model 20 steps on other data, export it, and transformers translates as nmt does."""
    _, nmt_dir = trained
    child = tmp_path / "child"
    config = pathlib.Path(__file__).resolve().parents[1] / "configs" / "reference.yaml"
    argv = ["train", str(config), "--out", str(child), "--init-from", str(nmt_dir), "--quiet", "--set", *overrides]
    argv += [
        "train.max_steps=20",
        "train.valid_every=100",
        "train.valid_bleu_sentences=0",
        "train.best_metric=loss",
        "model.dropout=0.0",
    ]
    assert main(argv) == 0
    assert json.loads((child / "model.json").read_text())["dropout"] == 0.0  # the config's rate, Marian's model
    tuned, parent = load_model_dir(child), load_model_dir(nmt_dir)
    assert not torch.equal(
        tuned.state_dict()["encoder_layers.0.feed_forward.w_1.weight"],
        parent.state_dict()["encoder_layers.0.feed_forward.w_1.weight"],
    )  # it did train
    out = tmp_path / "hf"
    assert main(["export", "--model", str(child), "--to", "huggingface", "--out", str(out)]) == 0
    model, tokenizer = hf_model(out)
    _, _, test = corpus
    src_tok, tgt_tok = load_tokenizers(child)
    translator = Translator(
        tuned, src_tok, tgt_tok, decode=DecodeConfig(beam=1, max_len_a=0, max_len_b=MAX_NEW, min_len=0)
    )
    with torch.no_grad():
        generated = model.generate(
            **tokenizer(test[:50], return_tensors="pt", padding=True),
            num_beams=1,
            max_new_tokens=MAX_NEW,
            forced_eos_token_id=None,
        )
    assert translator.translate(test[:50], beam=1) == tokenizer.batch_decode(generated, skip_special_tokens=True)


def test_a_multi_target_model_translates_into_the_chosen_language(shapes, corpus, tmp_path, capsys):
    hf_dir, nmt_dir = shapes["multi-target (>>xx<< tokens)"]
    model, tokenizer = hf_model(hf_dir)
    _, _, test = corpus
    src_tok, tgt_tok = load_tokenizers(nmt_dir)
    translator = Translator(
        load_model_dir(nmt_dir),
        src_tok,
        tgt_tok,
        decode=DecodeConfig(beam=1, max_len_a=0, max_len_b=MAX_NEW, min_len=0),
    )
    for language in ("fr", "en"):
        translator.choose_target_language(language)
        with torch.no_grad():
            inputs = tokenizer([f">>{language}<< {s}" for s in test[:20]], return_tensors="pt", padding=True)
            generated = model.generate(**inputs, num_beams=1, max_new_tokens=MAX_NEW, forced_eos_token_id=None)
        assert translator.translate(test[:20], beam=1) == tokenizer.batch_decode(generated, skip_special_tokens=True)

    source = tmp_path / "in.de"
    source.write_text("Ein Mann.\n", encoding="utf-8")
    out = tmp_path / "out.en"
    for options, message in (
        ([], "--target-lang is needed: this model translates into several languages (en, fr)"),
        (["--target-lang", "de"], "--target-lang must be one of en, fr, got 'de'"),
    ):
        argv = ["translate", "--model", str(nmt_dir), "--input", str(source), "--output", str(out), *options]
        assert main(argv) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"nmt translate: error: {message}"
        assert not out.exists()  # refused before the output is opened
    assert main(["translate", "--model", str(nmt_dir), "--input", str(source), "--target-lang", "fr"]) == 0


def test_a_single_target_model_takes_its_own_target_language_and_refuses_another(trained, tmp_path, capsys):
    _, nmt_dir = trained  # imported from a de-en model whose tokenizer config names its languages
    source = tmp_path / "in.de"
    source.write_text("Ein Mann.\n", encoding="utf-8")
    plain, named = tmp_path / "plain.en", tmp_path / "named.en"
    translate = ["translate", "--model", str(nmt_dir), "--input", str(source)]
    assert main([*translate, "--output", str(plain)]) == 0
    assert main([*translate, "--output", str(named), "--target-lang", "en"]) == 0
    assert named.read_text(encoding="utf-8") == plain.read_text(encoding="utf-8")
    capsys.readouterr()
    assert main([*translate, "--target-lang", "fr"]) == 2
    assert "--target-lang 'fr' cannot be chosen: this model translates only into en" in capsys.readouterr().err


class RenormalisedWithoutPad:
    """A transformers logits processor: <pad> banned and the rest renormalised, as nmt, CTranslate2 and
    Marian (whose models have no <pad>) score. transformers' own bad_words_ids sets <pad> to -inf
    after the softmax and keeps the other log-probs as they were."""

    def __init__(self, pad: int):
        self.pad = pad

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        scores[:, self.pad] = float("-inf")
        return scores.log_softmax(dim=-1)


@pytest.mark.parametrize("early_stopping", [True, False])
def test_beam_5_is_transformers_beam_with_its_length_normalization(early_stopping, trained, corpus):
    """transformers' beam search ranks as nmt's with length_normalization=average, and stops as nmt's
    with the same early_stopping (False: transformers' default)."""
    hf_dir, nmt_dir = trained
    model, tokenizer = hf_model(hf_dir)
    _, _, test = corpus
    src_tok, tgt_tok = load_tokenizers(nmt_dir)
    decode = DecodeConfig(
        beam=5,
        length_penalty=1.0,
        length_normalization="average",
        max_len_a=0,
        max_len_b=MAX_NEW,
        min_len=0,
        early_stopping=early_stopping,
    )
    ours = Translator(load_model_dir(nmt_dir), src_tok, tgt_tok, decode=decode).translate(test, beam=5)
    with torch.no_grad():
        generated = model.generate(
            **tokenizer(test, return_tensors="pt", padding=True),
            num_beams=5,
            early_stopping=early_stopping,
            length_penalty=1.0,
            max_new_tokens=MAX_NEW,
            forced_eos_token_id=None,
            logits_processor=transformers.LogitsProcessorList([RenormalisedWithoutPad(tokenizer.pad_token_id)]),
        )
    assert ours == tokenizer.batch_decode(generated, skip_special_tokens=True)
    if not early_stopping:  # the rules part somewhere here, or this case would not test the heuristic
        other = dataclasses.replace(decode, early_stopping=True)
        assert ours != Translator(load_model_dir(nmt_dir), src_tok, tgt_tok, decode=other).translate(test, beam=5)


def test_an_imported_model_keeps_its_own_search_settings(trained, tmp_path, capsys):
    """The beam of its config, transformers' length penalty and normalisation; options still override."""
    from nmt.model_dir import read_decode_config

    _, nmt_dir = trained
    decode = read_decode_config(nmt_dir)
    assert (decode.beam, decode.length_penalty, decode.length_normalization) == (4, 1.0, "average")
    assert decode.min_len == 0  # transformers' min_length 0: an empty output stays possible, as there
    assert decode.early_stopping is False  # transformers' default stopping rule (OPUS-MT sets none)
    translator = Translator.load(nmt_dir, length_normalization="gnmt", length_penalty=0.6)
    assert translator.request().length_normalization == "gnmt" and translator.request().beam == 4
    source = tmp_path / "in.de"
    source.write_text("Ein Mann.\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        main(["translate", "--model", str(nmt_dir), "--input", str(source), "--length-normalization", "mean"])
    assert exit_info.value.code == 2 and "invalid choice: 'mean'" in capsys.readouterr().err


def test_transformers_min_length_counts_the_start_token_and_older_imports_keep_none(trained, tmp_path):
    from nmt.model_dir import read_decode_config
    from nmt.pretrained.marian import decode_defaults

    assert decode_defaults({"min_length": 3}, {})["min_len"] == 2  # at least 2 tokens after the start token
    assert decode_defaults({}, {"min_length": 1})["min_len"] == 0 and decode_defaults({}, {})["min_len"] == 0
    _, nmt_dir = trained
    older = tmp_path / "older"
    shutil.copytree(nmt_dir, older)
    origin = json.loads((older / "imported_from.json").read_text(encoding="utf-8"))
    del origin["decode"]["min_len"]  # written before nmt read min_length
    (older / "imported_from.json").write_text(json.dumps(origin), encoding="utf-8")
    assert read_decode_config(older).min_len == 0


def test_the_server_routes_each_target_language_of_a_multi_target_model(shapes, corpus):
    from fastapi.testclient import TestClient

    from nmt.server import ServerLimits, create_app, model_info
    from nmt.short_segments import like_source

    _, nmt_dir = shapes["multi-target (>>xx<< tokens)"]
    translator = Translator.load(nmt_dir)
    _, _, test = corpus
    app = create_app(translator, ServerLimits(), info=model_info(nmt_dir, translator))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/languages").json()[0] == {"code": "de", "name": "German", "targets": ["en", "fr"]}
        for language in ("fr", "en"):
            answer = client.post("/translate", json={"q": test[:3], "source": "de", "target": language}).json()
            searched = translator.translate(test[:3], target_lang=language)
            # each translation begins and ends as its source does (nmt.short_segments), the rest its own
            shaped = [like_source(s, t, None, language)[0] for s, t in zip(test[:3], searched, strict=True)]
            assert answer["translatedText"] == shaped
        own = client.post("/translate", json={"text": test[:2], "target_lang": "fr"}).json()
        assert [t["text"] for t in own["translations"]] == translator.translate(test[:2], target_lang="fr")
        missing = client.post("/translate", json={"text": test[:2]})
        assert missing.status_code == 422
        assert (
            "target_lang is needed: this model translates into several languages (en, fr)" in missing.json()["message"]
        )


@pytest.mark.parametrize("shape", ["swish, scaled, shared vocabulary", "separate vocabularies"])
def test_the_ctranslate2_export_starts_from_zeros_and_scores_and_shortlists_as_nmt(shape, shapes, corpus, tmp_path):
    """An imported model's export leaves <pad> out (the decoder starts from a zero vector): greedy
    output, teacher-forced scores and a shortlist's vocabulary map still agree with nmt's engine."""
    pytest.importorskip("ctranslate2")
    import math

    from nmt.inference.shortlist import build_model_shortlist

    _, imported = shapes[shape]
    model_dir = shutil.copytree(imported, tmp_path / "model")
    de, en, test = corpus
    build_model_shortlist(model_dir, list(zip(de, en, strict=True)))
    exported = tmp_path / "ct2"
    assert main(["export", "--model", str(model_dir), "--to", "ctranslate2", "--out", str(exported)]) == 0
    vmap = (exported / "vmap.txt").read_text(encoding="utf-8")
    assert "<pad>" not in vmap.split("\n", 1)[0] and all(
        "<pad>" not in line.split("\t")[1] for line in vmap.splitlines()[1:]
    )
    decode = DecodeConfig(beam=1, max_len_a=0, max_len_b=MAX_NEW, min_len=0)
    ours = Translator(load_model_dir(model_dir), *load_tokenizers(model_dir), decode=decode)
    theirs = Translator.load(exported, engine="ctranslate2", shortlist=False)
    theirs.decode = theirs.engine.decode = decode
    mine, found = ours.translate_detailed(test[:40], beam=1), theirs.translate_detailed(test[:40], beam=1, scores=True)
    assert [m[0].tokens for m in mine] == [f[0].tokens for f in found]
    for best in found:
        assert sum(math.log(p) for p in best[0].token_probs) == pytest.approx(best[0].log_prob, abs=1e-3)


def test_tune_precision_takes_a_multi_target_model_s_language(shapes, tmp_path, capsys):
    _, imported = shapes["multi-target (>>xx<< tokens)"]
    model_dir = shutil.copytree(imported, tmp_path / "model")
    src, ref = tmp_path / "src.de", tmp_path / "ref.fr"
    src.write_text("Ein Mann.\nEin Hund.\n", encoding="utf-8")
    ref.write_text("Un homme.\nUn chien.\n", encoding="utf-8")
    argv = ["tune-precision", "--model", str(model_dir), "--src", str(src), "--ref", str(ref), "--beam", "1"]
    assert main(argv) == 2 and "--target-lang is needed" in capsys.readouterr().err
    assert main([*argv, "--target-lang", "fr"]) == 0
    from nmt.tuning import cpu_precisions  # bf16 too on a CPU with AMX; timing decides

    assert capsys.readouterr().out.splitlines()[-1] in [f"choice: {p}" for p in cpu_precisions()]
