"""Raw text to a tokenised, lower-cased corpus's form and back (nmt.text_form), and the Translator using it."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from nmt.config import DecodeConfig, ExperimentConfig
from nmt.model_dir import read_text_form, write_text_form
from nmt.text_form import TextForm, detokenize_treebank, tokenize_like_treebank
from nmt.training.run import corpus_text_form
from nmt.translator import Translator

PT_EN = TextForm(src_lang="pt", tgt_lang="en")
TED = Path(__file__).resolve().parents[2] / "shared" / "data" / "ted_hrlr" / "pt_to_en"


@pytest.mark.parametrize(
    "typed, corpus_form",
    [
        ("Olá, mundo!", "olá , mundo !"),
        ('Eu disse-lhe: "Não faças isso." Ele riu-se.', "eu disse-lhe : `` não faças isso . '' ele riu-se ."),
        ("São 9:30. A reunião é às 10h, certo?", "são 9:30 . a reunião é às 10h , certo ?"),
        ("O Dr. Silva chegou.  Depois saiu…", "o dr. silva chegou . depois saiu …"),
        ("Os agentes-chave (não todos) vieram; “ótimo”.", "os agentes-chave ( não todos ) vieram ; `` ótimo '' ."),
    ],
)
def test_portuguese_input_takes_the_corpus_form(typed, corpus_form):
    assert PT_EN.to_corpus_form(typed) == corpus_form


def test_english_contractions_are_split_as_the_treebank_splits_them():
    assert tokenize_like_treebank("Isn't it? I'm here, they're not.", "en") == "Is n't it ? I 'm here , they 're not ."
    assert tokenize_like_treebank("Mr. Smith can't come.", "en") == "Mr. Smith ca n't come ."


@pytest.mark.parametrize(
    "output, running_text",
    [
        ("i think it 's `` great '' , is n't it ? yes . i do .", "I think it's \"great\", isn't it? Yes. I do."),
        ("we 're trained to deal with conflicts .", "We're trained to deal with conflicts."),
        ("( laughter ) it was 9:30 .", "(laughter) it was 9:30."),
        ("", ""),
    ],
)
def test_english_output_reads_as_running_text(output, running_text):
    assert PT_EN.to_running_text(output) == running_text


def test_untokenised_or_cased_forms_leave_that_part_alone():
    lower_only = TextForm("pt", "en", tokenized=False, lowercased=True)
    assert lower_only.to_corpus_form("Olá, Mundo!") == "olá, mundo!"
    tokens_only = TextForm("pt", "en", tokenized=True, lowercased=False)
    assert tokens_only.to_corpus_form("Olá, Mundo!") == "Olá , Mundo !"
    assert tokens_only.to_running_text("it 's here .") == "it's here."


def _lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


@pytest.mark.parametrize("lang", ["pt", "en"])
def test_the_corpus_survives_the_round_trip(lang):
    """Each dev line read back as running text and put into the corpus's form again comes back as it
    was, but for a few: lines with the corpus's garbled quotes (`` `` '' ...) are left out, and
    abbreviations and single letters before a full stop ("mr.", "fator x .") are ambiguous."""
    path = TED / f"{lang}.dev.gz"
    if not path.exists():
        pytest.skip(f"TED mirror not found at {TED}")
    form = TextForm(src_lang=lang, tgt_lang=lang)
    lines = [line for line in _lines(path) if "``" not in line and "''" not in line]
    assert len(lines) > 1000
    kept = sum(form.to_corpus_form(form.to_running_text(line)) == line for line in lines)
    assert kept / len(lines) >= 0.98, f"{kept} of {len(lines)} lines survive"


def test_detokenising_joins_what_tokenising_split():
    assert detokenize_treebank("they said `` no '' , did n't they ?", "en") == 'they said "no", didn\'t they?'


# --- the Translator -------------------------------------------------------------------------------
@pytest.fixture
def ted_like_model(tiny_model_dir, tmp_path) -> Path:
    """The tiny model's directory, its config saying it was trained on TED pt->en (a tokenised corpus)."""
    model_dir = tmp_path / "ted_like"
    shutil.copytree(tiny_model_dir, model_dir)
    config = ExperimentConfig()
    config.data.corpus, config.data.src_lang, config.data.tgt_lang = "ted_hrlr", "pt", "en"
    config.decode = DecodeConfig(max_len_b=5)
    config.save(model_dir / "config.yaml")
    write_text_form(model_dir, corpus_text_form(config))  # what a run on ted_hrlr writes
    return model_dir


def test_a_model_knows_its_corpus_form(tiny_model_dir, ted_like_model):
    assert read_text_form(ted_like_model) == PT_EN
    assert read_text_form(tiny_model_dir) is None  # Multi30k is running text


def test_the_translator_puts_typed_text_into_the_corpus_form_and_reads_the_output_back(ted_like_model):
    translator = Translator.load(ted_like_model)
    typed = ['Olá, Mundo! Eu disse-lhe: "Não."', "O que é isto?"]
    raw = translator.translate_detailed(typed, beam=1, return_attention=True)
    corpus_form = [PT_EN.to_corpus_form(t) for t in typed]
    as_corpus = translator.translate_detailed(corpus_form, beam=1, return_attention=True, pretokenized=True)
    for r, c in zip(raw, as_corpus, strict=True):
        assert r[0].src_pieces == c[0].src_pieces  # the model saw the corpus's form
        assert r[0].tokens == c[0].tokens
        assert r[0].text == PT_EN.to_running_text(c[0].text)
    # Typed as it is, the cased text would reach the model untouched: the form is what changed it.
    untouched = translator.translate_detailed(typed, beam=1, return_attention=True, pretokenized=True)
    assert untouched[0][0].src_pieces != raw[0][0].src_pieces


def test_attention_plots_show_what_the_model_read(ted_like_model):
    from nmt.plots import attention_maps

    translator = Translator.load(ted_like_model)
    maps = attention_maps(translator, "Olá, Mundo!")
    corpus_form = translator.src_tokenizer.lookup(translator.encode_source("olá , mundo !")[0])
    assert maps.src_pieces == corpus_form
    assert maps.weights["cross_attention"].shape[-1] == len(corpus_form)
