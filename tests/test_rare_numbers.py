"""Rare numbers kept exactly through a model that garbles them (nmt.rare_numbers)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from nmt.decoding import Hypothesis
from nmt.rare_numbers import NumberStandIns, translate_keeping_numbers
from nmt.translator import Translator


@dataclass
class Said:
    text: str


def apart(translate):
    """A one-list scripted model as translate_keeping_numbers calls one: on each group in turn."""
    return lambda groups: [translate(group) for group in groups]


# A tokenizer that cuts every character: single digits are whole, every longer number is rare.
BY_CHARACTER = NumberStandIns(len, len)


def garbling(calls: list[list[str]], *, drop: str = "", repeat: str = ""):
    """A scripted model: the words in reverse (so a number's place is the model's, not the source's),
    each number of several digits garbled as a small model garbles one ("1045" -> "10005"); the
    single digits in `drop` left out, those in `repeat` written twice. calls: what it was given."""

    def translate(texts: list[str]) -> list[list[Said]]:
        calls.append(list(texts))
        out = []
        for text in texts:
            text = re.sub(r"\d{2,}", lambda m: m.group(0)[:-1] + "00" + m.group(0)[-1], text)
            text = re.sub(r"\b\d\b", lambda m: _said(m.group(0), drop, repeat), text)
            out.append([Said(" ".join(reversed(text.split())))])
        return out

    return translate


def _said(digit: str, drop: str, repeat: str) -> str:
    return "" if digit in drop else f"{digit} {digit}" if digit in repeat else digit


def test_rare_numbers_come_back_exactly_where_the_model_wrote_their_stand_ins():
    text = "Startnummer 1045 um 10:45 Uhr am 2026-12-02, 3,14 Meter"
    unprotected = garbling([])([text])[0][0].text
    assert "1045" not in unprotected  # the scripted model does garble them
    calls: list[list[str]] = []
    (found,) = translate_keeping_numbers([text], apart(garbling(calls)), BY_CHARACTER)
    assert found[0].text == "Meter 3,14 2026-12-02, am Uhr 10:45 um 1045 Startnummer"
    assert calls[0] == [text]  # as it is first (kept where a stand-in is lost), then with stand-ins:
    (read,) = calls[1]
    assert re.fullmatch(r"Startnummer \d um \d Uhr am \d, \d Meter", read)  # one whole piece each


def test_a_sentence_without_a_rare_number_gets_exactly_its_translation_without_the_option():
    def batch_shaped(texts: list[str]) -> list[list[Said]]:  # as a search rounds by its batch's shape
        calls.append(list(texts))
        return [[Said(f"{t.upper()} /{max(map(len, texts))}")] for t in texts]

    texts = ["Ein Mann mit 3 Hunden.", "Kein Wort mit Zahlen.", "Zimmer 1045 in Stock 12345678"]
    calls: list[list[str]] = []
    found = translate_keeping_numbers(texts, apart(batch_shaped), BY_CHARACTER)
    unprotected = batch_shaped(texts)
    assert calls[0] == texts and calls[1] == ["Zimmer 2 in Stock 3"]
    assert [f[0].text for f in found[:2]] == [f[0].text for f in unprotected[:2]]
    assert found[2][0].text == "ZIMMER 1045 IN STOCK 12345678 /19"


def test_stand_ins_differ_from_each_other_and_from_every_number_of_the_sentence():
    swap = BY_CHARACTER.swap("Zimmer 2 und 1045, Tisch 3.4 und 2000 und wieder 1045")
    words = swap.text.replace(",", "").split()
    assert words[:2] == ["Zimmer", "2"]  # a number the model knows stays
    first, decimal, second, again = words[3], words[5], words[7], words[10]
    assert first == again and len({first, decimal, second, "2", "3", "4"}) == 6  # nor a digit group
    assert swap.originals == {first: "1045", decimal: "3.4", second: "2000"}
    assert swap.restored(f"room 2 and {first} again {first}, table {decimal} and {second}") == (
        "room 2 and 1045 again 1045, table 3.4 and 2000"
    )


@pytest.mark.parametrize("how", ["drop", "repeat"])
def test_a_stand_in_the_model_drops_or_repeats_leaves_the_sentence_as_it_is_without_the_option(how):
    texts = ["Startnummer 1045 im Zimmer 7", "Zimmer 1045"]
    calls: list[list[str]] = []
    found = translate_keeping_numbers(texts, apart(garbling(calls, **{how: "23456"})), BY_CHARACTER)
    # no stand-in is left in the output, nor a number lost: each keeps its translation as it is
    assert calls[1] == ["Startnummer 2 im Zimmer 7", "Zimmer 2"]
    assert [f[0].text for f in found] == ["7 Zimmer im 104005 Startnummer", "104005 Zimmer"]


def test_past_the_last_stand_in_a_rare_number_stays_as_it_is():
    two_stand_ins = NumberStandIns(lambda t: 1 if t in ("5", "6") else 2, len)
    swap = two_stand_ins.swap("11 22 33 11")
    assert swap.text == "5 6 33 5" and swap.restored("5 6 33 5") == "11 22 33 11"


def test_a_number_is_rare_where_the_tokenizer_cuts_it_or_it_is_long():
    one_piece = NumberStandIns(lambda t: 1, lambda t: 1)
    assert not one_piece.is_rare("2026") and one_piece.is_rare("123456")
    assert BY_CHARACTER.is_rare("10") and not BY_CHARACTER.is_rare("7")
    assert one_piece.stand_ins[:2] == ["2", "3"]  # 0 and 1 read as words too often to stand in


@pytest.fixture(scope="module")
def translator(tiny_model_dir):
    return Translator.load(tiny_model_dir, device="cpu")


def test_every_translation_keeps_its_numbers_unless_asked_not_to(translator, monkeypatch):
    """Through the Translator (so through every edge: files, documents, both APIs): a model that
    copies its source but garbles the numbers it reads in pieces: each "0" piece written twice."""
    tokenizer = translator.tgt_tokenizer

    def garbling_copy(ids, request, groups=None):  # the groups come back in one call, in place
        out = []
        for sentence in ids:
            pieces = tokenizer.lookup(sentence[1:-1])
            tokens = [t for t, piece in zip(sentence[1:-1], pieces, strict=True) for _ in range(1 + (piece == "0"))]
            out.append([Hypothesis(tokens, 0.0, 0.0)])
        return out

    monkeypatch.setattr(translator.engine, "translate_ids", garbling_copy)
    text = "Startnummer 1045 um 10:45 Uhr"
    assert translator.number_stand_ins.is_rare("1045")  # the tiny tokenizer cuts it
    assert translator.translate([text]) == [text]
    garbled = translator.translate([text], protect_numbers=False)[0]
    assert "1045" not in garbled and garbled.startswith("Startnummer")
    assert translator.translate(["Ein Mann."]) == translator.translate(["Ein Mann."], protect_numbers=False)


def test_asking_for_alternatives_never_changes_the_best_and_a_lost_alternative_gives_way(caplog):
    def n_best(texts: list[str]) -> list[list[Said]]:  # the best carries the number, the second drops it
        out = []
        for text in texts:
            garbled = re.sub(r"\d{2,}", lambda m: m.group(0) + "0", text)  # what a small model writes
            first, second = text.upper(), re.sub(r"\d", "", text).upper()
            out.append([Said(first if re.search(r"\b\d\b", text) else garbled.upper()), Said(second), Said("X")])
        return out

    (found,) = translate_keeping_numbers(["Zimmer 1045"], apart(n_best), BY_CHARACTER)
    # The two alternatives that lost the stand-in give way to the first call's, in its order.
    assert [h.text for h in found] == ["ZIMMER 1045", "ZIMMER 10450", "ZIMMER "]
    best_alone = translate_keeping_numbers(["Zimmer 1045"], apart(lambda t: [h[:1] for h in n_best(t)]), BY_CHARACTER)
    assert best_alone[0][0].text == found[0].text

    def best_drops(texts: list[str]) -> list[list[Said]]:
        return [[Said(re.sub(r"\b\d\b", "", t)), Said(t)] for t in texts]

    with caplog.at_level("INFO", logger="nmt.rare_numbers"):
        (kept,) = translate_keeping_numbers(["Zimmer 1045"], apart(best_drops), BY_CHARACTER)
    assert [h.text for h in kept] == ["Zimmer 1045", "Zimmer 1045"]  # the first call's list, as it was
    assert "1 of 1 sentences with rare numbers" in caplog.text  # told: those numbers are the model's


def test_a_sentence_whose_glossary_term_holds_a_number_is_not_swapped():
    class Terms:
        def matches(self, sentence: str) -> list[tuple[str, str]]:
            return [("Startnummer 1045", "bib 1045")] if "Startnummer 1045" in sentence else []

    calls: list[list[str]] = []
    texts = ["Der Mann mit der Startnummer 1045 läuft.", "Zimmer 1045"]
    translate_keeping_numbers(texts, apart(garbling(calls)), BY_CHARACTER, Terms())
    assert calls[1] == [re.sub(r"1045", calls[1][0].split()[1], "Zimmer 1045")]  # only the other one swapped


def test_the_stand_in_pass_shares_the_search_call_unless_a_forced_pass_follows(translator, monkeypatch):
    """One engine call, the stand-in sentences batched apart (so they run beside the first pass);
    but where scores follow, whose teacher-forced batches would mix the two, one call each as before."""
    calls = []
    translate_ids = translator.engine.translate_ids

    def spy(ids, request, groups=None):
        calls.append(None if groups is None else [len(g) for g in groups])
        return translate_ids(ids, request, groups)

    monkeypatch.setattr(translator.engine, "translate_ids", spy)
    texts = ["Startnummer 1045 um 10 Uhr", "Ein Mann."]
    plain = translator.translate(texts)
    assert calls == [[2, 1]]
    calls.clear()
    detailed = translator.translate_detailed(texts, scores=True)
    assert calls == [None, None]
    assert [found[0].text for found in detailed] == plain
