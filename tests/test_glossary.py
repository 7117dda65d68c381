"""Glossaries: reading them, finding their terms, and translations that use them (nmt.glossary)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nmt.glossary import Glossary, GlossaryError, spelled_as_given
from nmt.translator import Translator


def test_terms_match_whole_words_in_any_case_longest_first():
    glossary = Glossary([("Mann", "man"), ("alter Mann", "old man"), ("Hut", "hat")])
    assert glossary.matches("Ein alter Mann mit HUT.") == [("alter Mann", "old man"), ("HUT", "hat")]
    assert glossary.matches("Ein Mannschaftsbus.") == []  # not inside another word
    assert Glossary([]).matches("Ein Mann.") == []
    # The regex's case-insensitivity and case folding disagree on Turkish dotted capitals: no KeyError.
    assert Glossary([("bilgi", "information")]).matches("BİLGİ verdi.") == [("BİLGİ", "information")]


def test_a_glossary_file_is_read_and_its_faults_named_by_line(tmp_path):
    good = tmp_path / "good.tsv"
    good.write_text("# terms\nVertrag\tcontract\n\nEuropäische Union\tEuropean Union\n", encoding="utf-8")
    assert Glossary.load(good).entries == (("Vertrag", "contract"), ("Europäische Union", "European Union"))
    for text, line, problem in [
        ("Vertrag\tcontract\nnur eine Spalte\n", 2, "expected 'source term<TAB>target term'"),
        ("Vertrag\tcontract\nvertrag\tagreement\n", 2, "two translations"),
        ("\tcontract\n", 1, "expected"),
    ]:
        bad = tmp_path / "bad.tsv"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(GlossaryError, match=rf"bad\.tsv:{line}: .*{problem}"):
            Glossary.load(bad)
    with pytest.raises(GlossaryError, match="no such glossary file"):
        Glossary.load(tmp_path / "missing.tsv")


@pytest.fixture(scope="module")
def translator(tiny_model_dir):
    return Translator.load(tiny_model_dir, device="cpu")


def test_a_translation_uses_the_target_term_wherever_the_source_term_occurs(translator):
    glossary = Glossary([("Mann", "gentleman"), ("Hund", "puppy")])
    texts = ["Ein Mann fährt Fahrrad.", "Ein Hund und ein Mann.", "Zwei Katzen."]
    free = translator.translate_detailed(texts, beam=2)
    found = translator.translate_detailed(texts, beam=2, glossary=glossary)
    for text, best in zip(texts, found, strict=True):
        for _, target in glossary.matches(text):
            *head, last = translator.terms.constraint(target, translator.text_form)
            tokens = best[0].tokens
            n = len(head) + 1
            assert any(tokens[i : i + n - 1] == head and tokens[i + n - 1] in last for i in range(len(tokens) - n + 1))
            assert target in best[0].text
        assert best[0].glossary_missed == ([] if glossary.matches(text) else None)
    assert found[2][0].text == free[2][0].text  # a sentence without terms is translated as before
    assert "gentleman" not in free[0][0].text  # the random model would not have written it


def test_a_term_is_met_by_its_last_piece_merged_with_punctuation(translator):
    *head, last = translator.terms.constraint("dog", translator.text_form)
    pieces = translator.tgt_tokenizer.lookup(sorted(last))
    stem = translator.tgt_tokenizer.lookup([translator.terms.target_ids("dog", translator.text_form)[-1]])[0]
    assert stem in pieces and all(p == stem or p.rstrip(".,;:!?)\"'") == stem for p in pieces)


def translate_with_glossary(model_dir, terms, text: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nmt", "translate", "--model", str(model_dir), "--glossary", str(terms)],
        input=text,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_command_line_takes_a_glossary(tiny_model_dir, tmp_path):
    terms = tmp_path / "terms.tsv"
    terms.write_text("Mann\tgentleman\n", encoding="utf-8")
    run = translate_with_glossary(tiny_model_dir, terms, "Ein Mann fährt Fahrrad.\nZwei Katzen.\n")
    assert run.returncode == 0, run.stderr
    first, second = run.stdout.split("\n")[:2]
    assert "gentleman" in first and "gentleman" not in second
    terms.write_text("Mann\n", encoding="utf-8")
    run = translate_with_glossary(tiny_model_dir, terms, "Ein Mann.\n")
    assert run.returncode != 0 and "terms.tsv:1: expected" in run.stderr


def test_a_served_model_with_a_glossary_uses_it_for_every_request(tiny_model_dir):
    from fastapi.testclient import TestClient

    from nmt.server import ServerLimits, create_app, model_info

    translator = Translator.load(tiny_model_dir, device="cpu")
    translator.glossary = Glossary([("Mann", "gentleman")])
    app = create_app(translator, ServerLimits(), info=model_info(tiny_model_dir, translator))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        own = client.post("/translate", json={"text": ["Ein Mann.", "Ein Hund."], "attention": True}).json()
        first, second = own["translations"]
        assert "gentleman" in first["text"] and "gentleman" not in second["text"]
        steps = len(first["attention"]["weights"][0][0])  # attention from the forced pass: one row a step
        assert steps in (len(first["attention"]["tgt_pieces"]), len(first["attention"]["tgt_pieces"]) - 1)
        libre = client.post("/translate", json={"q": "Ein Mann fährt.", "source": "de", "target": "en"}).json()
        assert "gentleman" in libre["translatedText"].lower()  # a sentence's first word takes its capital


def test_a_placed_term_is_spelled_as_given_as_often_as_the_source_called_for_it():
    # a lower-cased model's output: "who" placed for "WHO", beside a "who" of its own
    assert spelled_as_given("who said the who would.", [("who", "WHO")]) == "WHO said the who would."
    assert spelled_as_given("The WHO, who said it.", [("who", "WHO")]) == "The WHO, who said it."  # spelled so already
    assert spelled_as_given("the who , who ...", [("who", "WHO")] * 2) == "the WHO , WHO ..."
    assert spelled_as_given("Fever was high.", [("fever", "fever")]) == "Fever was high."  # capitals only added
    assert spelled_as_given("I like c + + a lot.", [("c + +", "C++")]) == "I like C++ a lot."  # the corpus's spacing
