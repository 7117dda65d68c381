"""Raw text to a tokenised, lower-cased corpus's form and back (nmt.text_form), and the Translator using it."""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import pytest

from nmt.config import DecodeConfig, ExperimentConfig
from nmt.decoding import Hypothesis
from nmt.model_dir import read_text_form, write_text_form
from nmt.text_form import (
    TOKENISED_LEFTOVERS,
    TextForm,
    capitalize_sentences,
    case_from_source,
    detokenize_treebank,
    drop_annotations,
    starts_in_lower_case,
    tidy_punctuation,
    tokenize_like_treebank,
)
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
        ("( laughter ) it was 9:30 .", "(Laughter) it was 9:30."),
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


def test_english_months_and_days_take_a_capital_and_march_and_may_only_in_a_date():
    said = "on the 11th of march , we may go on monday . in march 2020 the troops march . it may rain in may ."
    assert PT_EN.to_running_text(said) == (
        "On the 11th of March, we may go on Monday. In March 2020 the troops march. It may rain in may."
    )
    assert capitalize_sentences("el 5 de mayo, lunes", "es") == "El 5 de mayo, lunes"  # English only


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


def test_reading_an_output_back_unescapes_nothing_the_corpus_form_never_escaped():
    # fuzz/fuzz_text_form.py's find: the Moses detokenizer made "&#124;" a "|", a character the model never wrote
    assert detokenize_treebank("at &#124; t &amp; &lt;b&gt; .", "en") == "at &#124; t &amp; &lt;b&gt;."


def test_every_ted_english_line_reads_back_with_no_tokenised_punctuation_left():
    """The dev and test sets' target side, the corpus's own garbled quotes included ("`` please
    meet `` '' tomorrow 's child . '' '' ``"), as running text: none of the corpus's form remains."""
    form = TextForm(src_lang="pt", tgt_lang="en")
    for name in ("en.dev.gz", "en.test.gz"):
        if not (TED / name).exists():
            pytest.skip(f"TED mirror not found at {TED}")
        lines = _lines(TED / name)
        assert len(lines) > 1000 and sum("``" in line for line in lines) > 20  # quotes to read back
        left = [out for line in lines if TOKENISED_LEFTOVERS.search(out := form.to_running_text(line))]
        assert left == [], f"{name}: {len(left)} lines, e.g. {left[:3]}"


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
    form = read_text_form(ted_like_model)
    assert dataclasses.replace(form, src_annotations=(), tgt_annotations=()) == PT_EN
    # the transcript annotations of the corpus's each side, found by the run (nmt.data.annotations)
    assert form.tgt_annotations == ("(applause)", "(laughter)", "(music)", "(video)")
    assert {"(risos)", "(aplausos)"} <= set(form.src_annotations)
    assert read_text_form(tiny_model_dir) is None  # Multi30k is running text


def test_the_translator_puts_typed_text_into_the_corpus_form_and_reads_the_output_back(ted_like_model):
    translator = Translator.load(ted_like_model)
    typed = ['Olá, Mundo! Eu disse-lhe: "Não."', "O que é isto?"]
    raw = translator.translate_detailed(typed, beam=1, return_attention=True)
    corpus_form = [PT_EN.to_corpus_form(t) for t in typed]
    as_corpus = translator.translate_detailed(corpus_form, beam=1, return_attention=True, pretokenized=True)
    for r, c, source in zip(raw, as_corpus, typed, strict=True):
        assert r[0].src_pieces == c[0].src_pieces  # the model saw the corpus's form
        assert r[0].tokens == c[0].tokens
        assert r[0].text == PT_EN.to_running_text(c[0].text, source)
    # Typed as it is, the cased text would reach the model untouched: the form is what changed it.
    untouched = translator.translate_detailed(typed, beam=1, return_attention=True, pretokenized=True)
    assert untouched[0][0].src_pieces != raw[0][0].src_pieces


def test_pretokenized_is_refused_for_pages_and_documents_which_are_running_text(ted_like_model, capsys):
    from nmt.cli import main

    for fmt in ("html", "srt"):
        assert main(["translate", "--model", str(ted_like_model), "--pretokenized", "--format", fmt]) != 0
        assert f"--pretokenized is for lines of a tokenised corpus, not --format {fmt}" in capsys.readouterr().err


def test_attention_plots_show_what_the_model_read(ted_like_model):
    from nmt.plots import attention_maps

    translator = Translator.load(ted_like_model)
    maps = attention_maps(translator, "Olá, Mundo!")
    corpus_form = translator.src_tokenizer.lookup(translator.encode_source("olá , mundo !")[0])
    assert maps.src_pieces == corpus_form
    assert maps.weights["cross_attention"].shape[-1] == len(corpus_form)


@pytest.mark.parametrize(
    "output, running_text",
    [
        ("it was taken . '' ''", 'It was taken."'),  # a model's doubled closing quote
        ("been `` `` charged by its cardiology . ''", 'Been "charged by its cardiology."'),
        ("-lrb- see above -rrb- it 's fine .", "(See above) it's fine."),
        ("-LSB- 1 -RSB- the rate is 5 % .", "[1] the rate is 5%."),
        ("what ? ! yes ...", "What?! Yes..."),
        ("`` why ? '' she asked .", '"Why?" she asked.'),
        ("he said `` it 's here", "He said \"it's here"),  # an unpaired quote opens on its word
        ("it 's '' here .", "It's\" here."),
    ],
)
def test_treebank_forms_a_model_writes_leave_no_tokenised_punctuation(output, running_text):
    assert PT_EN.to_running_text(output) == running_text


def test_french_keeps_its_space_before_double_punctuation():
    assert tidy_punctuation("Quoi ? Oui !", "fr") == "Quoi ? Oui !"
    assert tidy_punctuation("Quoi ? Oui !", "en") == "Quoi? Oui!"


def test_words_the_output_shares_with_the_source_take_the_source_s_capitals():
    source = "Em Wuhan, a OMS disse que o SARS-CoV-2 causa a COVID-19. China e Brasil agiram."
    output = "in wuhan , the who said that sars-cov-2 causes covid-19 . china and brazil acted ."
    assert PT_EN.to_running_text(output, source) == (
        "In Wuhan, the who said that SARS-CoV-2 causes COVID-19. China and brazil acted."
    )  # "China" starts a source sentence: its capital says nothing (the output's starts its own)
    assert case_from_source("a man and an iphone", "Um homem e um iPhone") == "a man and an iPhone"
    assert case_from_source("a is a", "A casa é A") == "a is a"  # one letter is no name
    assert case_from_source("the porto team", "O time do Porto") == "the Porto team"
    off = TextForm("pt", "en", case_from_source=False)
    assert off.to_running_text(output, source).startswith("In wuhan, the who said that sars-cov-2")


def test_a_source_that_starts_in_lower_case_goes_on_from_text_before_it_and_so_does_its_translation():
    # the second piece of a cut sentence, a subtitle cue that goes on, a line that starts mid-sentence
    assert PT_EN.to_running_text("and the fever . it went away .", "e a febre. Ela passou.") == (
        "and the fever. It went away."
    )
    assert PT_EN.to_running_text("and the fever .", "E a febre.") == "And the fever."
    assert PT_EN.to_running_text("and the fever .") == "And the fever."  # no source: a sentence of its own
    assert PT_EN.to_running_text("i know .", "sei.") == "I know."  # "I" is a capital of its own
    # a number, an annotation or a target token first says nothing of a sentence going on
    assert PT_EN.to_running_text("on may 5 , it rained .", "5 de maio, choveu.") == "On May 5, it rained."
    assert PT_EN.to_running_text("( laughter ) yes .", "(Risos) Sim.") == "(Laughter) yes."
    assert starts_in_lower_case(">>en<< e a febre") and starts_in_lower_case('"e disse')
    assert not starts_in_lower_case("5 de maio") and not starts_in_lower_case("¿Qué?")


def test_a_source_word_recases_as_many_output_words_as_it_has_occurrences():
    # "US Open": the acronym once, not the pronoun beside it
    assert case_from_source("the us open told us", "O US Open nos disse") == "the US Open told us"
    assert case_from_source("wuhan and wuhan", "Em Wuhan e Wuhan") == "Wuhan and Wuhan"


def test_transcript_annotations_the_source_lacks_are_dropped():
    assert PT_EN.to_running_text("( laughter ) the test was negative . ( applause )", "O teste deu negativo.") == (
        "The test was negative."
    )
    assert PT_EN.to_running_text("( laughter ) thank you .", "(Risos) Obrigado.") == "(Laughter) thank you."
    assert drop_annotations("the result (in percent) is high", "O resultado é alto") == "the result is high"
    # Quotes left empty where an annotation stood go with it; no space is left before punctuation.
    source = 'A proteína chamada "espícula" entra.'
    assert PT_EN.to_running_text("the spike called `` ( laughter ) '' enters .", source) == "The spike called enters."
    assert PT_EN.to_running_text("it enters ( applause ) , they say .", source) == "It enters, they say."
    # Two quotations either side of a dropped annotation stay two.
    said = "he said `` yes '' ( laughter ) `` no '' ."
    assert PT_EN.to_running_text(said, source) == 'He said "yes" "no".'
    assert tidy_punctuation('he said "yes" "no".') == 'he said "yes" "no".'  # a closing and an opening quote
    assert tidy_punctuation('it was "here.""') == 'it was "here."'  # a doubled one is one
    assert tidy_punctuation('the First-"""clock') == 'the First-"clock'  # a model's stutter too


def test_a_name_in_the_source_keeps_its_case_through_the_translator(ted_like_model, monkeypatch):
    translator = Translator.load(ted_like_model)
    said = "the virus came from wuhan , says the who . ( laughter )"
    ids = translator.tgt_tokenizer.encode(said, add_special=False)
    assert translator.tgt_tokenizer.decode(ids) == said  # the scripted output reads as it is
    scripted = lambda ids_, request, groups=None: [[Hypothesis(ids, 0.0, 0.0)]]  # noqa: E731
    monkeypatch.setattr(translator.engine, "translate_ids", scripted)
    [[found]] = translator.translate_detailed(["O vírus veio de Wuhan, diz a OMS."])
    assert found.text == "The virus came from Wuhan, says the who."
    translator.text_form = dataclasses.replace(translator.text_form, case_from_source=False)
    [[found]] = translator.translate_detailed(["O vírus veio de Wuhan, diz a OMS."])
    assert found.text == "The virus came from wuhan, says the who."
    # A source without capitals of its own costs no alignment pass.
    translator.text_form = dataclasses.replace(translator.text_form, case_from_source=True)
    forced = []
    score_ids = translator.engine.score_ids
    monkeypatch.setattr(translator.engine, "score_ids", lambda *a, **k: forced.append(1) or score_ids(*a, **k))
    translator.translate_detailed(["o vírus veio de longe."])
    assert forced == []
    translator.translate_detailed(["O vírus veio de Wuhan."])
    assert forced == [1]


def test_every_interface_gives_the_python_api_s_running_text(ted_like_model, tmp_path, monkeypatch, capsys):
    """One output path: the CLI (lines, --format html, a subtitle file), both HTTP APIs and a
    document upload read a lower-cased model's output back as the Python API does: the source's
    name in its case, no "(laughter)", no tokenised punctuation."""
    from fastapi.testclient import TestClient

    from nmt.cli.main import main
    from nmt.server import ServerLimits, create_app, model_info

    translator = Translator.load(ted_like_model, engine="torch")
    said = translator.tgt_tokenizer.encode("the virus came from wuhan , says the who . ( laughter )", add_special=False)
    scripted = lambda self, ids, request, groups=None: [[Hypothesis(said, 0.0, 0.0)] for _ in ids]  # noqa: E731
    monkeypatch.setattr(type(translator.engine), "translate_ids", scripted)
    source = "O vírus veio de Wuhan, diz a OMS."
    [[expected]] = translator.translate_detailed([source])
    assert expected.text == "The virus came from Wuhan, says the who."  # as the test above has it

    (tmp_path / "in.txt").write_text(source + "\n")
    (tmp_path / "in.html").write_text(f"<p>{source}</p>\n")
    (tmp_path / "in.srt").write_text(f"1\n00:00:01,000 --> 00:00:02,000\n{source}\n")
    model = ["--model", str(ted_like_model), "--engine", "torch"]
    for name, extra in (("in.txt", []), ("in.html", ["--format", "html"]), ("in.srt", [])):
        out = tmp_path / f"out.{name}"
        assert main(["translate", *model, "--input", str(tmp_path / name), "--output", str(out), *extra]) == 0
        assert expected.text in out.read_text(), (name, out.read_text())
    capsys.readouterr()

    app = create_app(translator, ServerLimits(), info=model_info(ted_like_model, translator))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        libre = client.post("/translate", json={"q": source, "source": "pt", "target": "en"}).json()
        assert libre == {"translatedText": expected.text}
        own = client.post("/translate", json={"text": [source]}).json()
        assert own["translations"][0]["text"] == expected.text
        upload = {"file": ("a.srt", (tmp_path / "in.srt").read_bytes(), "text/plain")}
        url = client.post("/translate_file", data={"source": "pt", "target": "en"}, files=upload).json()
        path = url["translatedFileUrl"].split("127.0.0.1", 1)[1]
        assert expected.text in client.get(path).text


def test_given_pairs_are_aligned_in_the_corpus_s_form_as_the_model_reads_them(ted_like_model):
    translator = Translator.load(ted_like_model, engine="torch")
    typed = translator.align(["O vírus veio de Wuhan."], ["The virus came from Wuhan."])
    as_corpus = translator.align(["o vírus veio de wuhan ."], ["the virus came from wuhan ."], pretokenized=True)
    assert typed == as_corpus
    [pairs] = typed
    assert {i for i, _ in pairs} <= set(range(6)) and {j for _, j in pairs} == set(range(6))  # "." a word


def test_a_glossary_term_is_written_as_the_glossary_spells_it_by_a_lower_cased_model(ted_like_model):
    from nmt.glossary import Glossary

    translator = Translator.load(ted_like_model, engine="torch")
    [[found]] = translator.translate_detailed(["A OMS disse."], beam=2, glossary=Glossary([("OMS", "WHO")]))
    assert "WHO" in found.text.split() and not found.glossary_missed  # the model itself wrote "who"


def test_an_output_s_names_take_the_source_s_capitals_through_the_alignment():
    source = "A OMS diz que os Estados Unidos e a Alemanha agiram."
    output = "the who says the united states and germany acted ."
    # source word -> output word, as Translation.alignment gives them (the corpus's words)
    alignment = [(0, 0), (1, 1), (2, 2), (4, 3), (5, 3), (5, 4), (6, 5), (7, 6), (9, 7), (10, 8), (11, 9)]
    assert PT_EN.to_running_text(output, source, alignment) == "The WHO says the United States and Germany acted."
    off = dataclasses.replace(PT_EN, case_from_source=False)
    assert off.to_running_text(output, source, alignment) == "The who says the united states and germany acted."
    # An acronym translated: of the words aligned to it, the last, of about its length.
    both = "A OMS e a UE agiram."
    spelled_out = "the world health organization and the eu acted ."
    alignment = [(0, 0), (1, 1), (1, 2), (1, 3), (2, 4), (3, 5), (4, 5), (4, 6), (5, 7), (6, 8)]
    assert PT_EN.to_running_text(spelled_out, both, alignment) == "The World Health Organization and the EU acted."
    alignment = [(0, 0), (1, 0), (1, 1), (2, 2), (3, 3), (4, 3), (4, 4), (5, 5), (6, 6)]  # "the" joined to OMS
    assert PT_EN.to_running_text("the who and the eu acted .", both, alignment) == "The WHO and the EU acted."
    alignment = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 3), (4, 4), (4, 5), (5, 6), (6, 7)]  # "'s" after "eu"
    assert PT_EN.to_running_text("the who and the eu 's acts .", both, alignment) == "The WHO and the EU's acts."
    usa = "Os EUA agiram."  # TED's English writes "u.s."
    assert PT_EN.to_running_text("the u.s. acted .", usa, [(0, 0), (1, 1), (2, 2), (3, 3)]) == "The U.S. acted."
    # An acronym left untranslated lends no capitals to the article that took its alignment, which
    # the output has again elsewhere; "u.k." for "Reino Unido" is an abbreviation.
    source = "A OMS alerta que o Reino Unido agiu."
    alignment = [(0, 0), (1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, 4), (7, 5), (8, 6)]
    assert PT_EN.to_running_text("the alerts that the u.k. acted .", source, alignment) == (
        "The alerts that the U.K. acted."
    )
    heading = "A OMS E OS EUA DE WUHAN AGIRAM"  # all in capitals: a shared word keeps them, no other takes any
    alignment = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]
    said = "the who and the us of wuhan acted"
    assert PT_EN.to_running_text(said, heading, alignment) == "The who and the us of WUHAN acted"
