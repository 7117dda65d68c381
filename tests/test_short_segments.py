"""A heading or label ends and begins as its source does (nmt.short_segments)."""

from __future__ import annotations

import pytest

from nmt.short_segments import like_source


@pytest.mark.parametrize(
    ("source", "translation", "target", "expected"),
    [
        ("Strand", "beach.", "en", "Beach"),  # a heading: no full stop, the source's capital
        ("Ein Mann läuft.", "a man is running.", "en", "A man is running."),
        ("Wo ist er?", "Where is he?", "en", "Where is he?"),
        ("Achtung", "Attention!", "en", "Attention!"),  # a mark the model chose says something: kept
        ("Weiter …", "More...", "en", "More..."),
        ("öffnen", "Open.", "en", "open"),  # a lower-case menu item
        ("open file", "Datei öffnen.", "de", "Datei öffnen"),  # German nouns keep their capital
        ("ok", "OK.", "en", "OK"),  # an acronym keeps its capitals
        ("ich", "I.", "en", "I"),
        ("  Strand  ", "  beach.  ", "en", "  Beach  "),  # the translation's own spacing kept
        ("", "x.", "en", "x."),
        ("42", "42.", "en", "42"),
    ],
)
def test_a_translation_ends_and_begins_as_its_source(source, translation, target, expected):
    assert like_source(source, translation, None, target)[0] == expected


def test_a_full_stop_written_as_a_word_takes_its_links_with_it():
    text, alignment = like_source("Die Überschrift", "The heading .", [(0, 0), (1, 1), (1, 2)], "en")
    assert text == "The heading" and alignment == [(0, 0), (1, 1)]
    text, alignment = like_source("Die Überschrift", "The heading.", [(0, 0), (1, 1)], "en")
    assert text == "The heading" and alignment == [(0, 0), (1, 1)]
