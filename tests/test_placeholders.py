"""Placeholders kept exactly once, in order, none invented (nmt.placeholders)."""

from __future__ import annotations

import random

import pytest
from scripted import reversed_words, upper

from nmt.placeholders import MaskedNodes, MaskedText, codes_of, without_codes


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("Delete %d files from {folder}?", ["%d", "{folder}"]),
        ("%1$s of %2$s, %(name)s and %-5.2f", ["%1$s", "%2$s", "%(name)s", "%-5.2f"]),
        ("Hello {{user}}, ${count} new <b>messages</b> &amp; more", ["{{user}}", "${count}", "<b>", "</b>", "&amp;"]),
        ("Line one\\n%%done", ["\\n", "%%"]),
        (
            "Used %<PRIuMAX> bytes: %6<PRIu32> %#<PRIx64>",
            ["%<PRIuMAX>", "%6<PRIu32>", "%#<PRIx64>"],
        ),  # gettext's portable conversions
        ("{0:.2f} and {name!r} at {when, time, short}", ["{0:.2f}", "{name!r}", "{when, time, short}"]),
        ("100% sure, {this is prose}", []),  # neither a conversion nor a field
        ("%d.%m.%Y um %H:%M Uhr", ["%d", "%m", "%Y", "%H", "%M"]),  # strftime's fields
        (
            "Siehe https://example.com/hilfe?x=1. Oder mail an hilfe@example.com!",
            ["https://example.com/hilfe?x=1", "hilfe@example.com"],
        ),
    ],
)
def test_each_kind_of_placeholder_is_found_as_written(text, codes):
    assert codes_of(text) == codes


def test_a_string_with_no_letter_outside_its_codes_is_not_translated():
    for text in ("%d.%m.%Y", "{count}: ", "%s – %s"):
        masked = MaskedText(text, "en")
        assert masked.sentences == [] and masked.rebuilt([]) == text


def test_the_model_reads_the_text_around_the_placeholders():
    masked = MaskedText("Delete %d files from {folder}?", "en")
    assert [s.split() for s in masked.sentences] == [["Delete", "files", "from", "?"]]
    assert masked.rebuilt(upper(masked.sentences)) == "DELETE %d FILES FROM {folder}?"


def test_an_icu_plural_keeps_its_structure_and_translates_each_message():
    text = "You have {count, plural, =0 {no files} one {# file} other {# files}} in ${dir}."
    masked = MaskedText(text, "en")
    assert masked.sentences[1:] == ["no files", "file", "files"]
    assert masked.rebuilt(upper(masked.sentences)) == (
        "YOU HAVE {count, plural, =0 {NO FILES} one {# FILE} other {# FILES}} IN ${dir}."
    )
    select = MaskedText("{gender, select, female {She} other {They}} replied", "en")
    assert select.rebuilt(upper(select.sentences)) == "{gender, select, female {SHE} other {THEY}} REPLIED"


def test_unbalanced_braces_are_text_not_a_construct():
    masked = MaskedText("{count, plural, one {# file", "en")
    assert masked.codes == []


def test_each_line_is_translated_on_its_own_and_line_breaks_stay():
    masked = MaskedText("First line %s\r\nsecond line\n", "en")
    assert masked.sentences == ["First line", "second line"]
    assert masked.rebuilt(upper(masked.sentences)) == "FIRST LINE %s\r\nSECOND LINE\n"


def test_a_word_ending_in_an_underscore_before_a_final_mark_is_placed():
    masked = MaskedText("Replace %s with underscores (`_`).", "en")
    assert masked.rebuilt(reversed_words(masked.sentences)).count("%s") == 1


def test_words_placed_after_a_placeholder_are_not_glued_to_it():
    masked = MaskedText("Lösche Dateien aus {ordner}?", "de")
    # the model's words aligned to the "?" that followed the placeholder
    out = masked.rebuilt([("Delete files from the folder?", [(0, 0), (1, 1), (3, 2), (4, 3), (4, 4)])])
    assert out.count("{ordner}") == 1 and "{ordner}?" in out or "{ordner} " in out, out  # never "{ordner}the"
    assert (
        MaskedText("Größe: %dMB", "de").rebuilt([("Size: MB", [(0, 0), (1, 1)])]) == "Size: %dMB"
    )  # glued in the source


def test_words_moved_next_to_a_code_never_make_a_new_one():
    masked = MaskedText("% of{count}", "en")  # found by fuzz/fuzz_masked_text.py
    out = masked.rebuilt(reversed_words(masked.sentences))
    assert codes_of(out) == ["{count}"], out


def test_words_placed_in_a_later_piece_of_a_paragraph_are_not_glued_to_a_code():
    # found by fuzz/fuzz_masked_nodes.py: the piece after the URL came out empty, and the next
    # piece's word was written against it ("http://srn", a URL that the source never had)
    masked = MaskedNodes(["http://s: h", "c r", "n."], "de")
    out = masked.rebuilt(reversed_words(masked.sentences))
    assert codes_of("".join(out)) == ["http://s"], out


def test_two_codes_the_source_s_words_parted_stay_parted_when_the_words_move():
    # found by fuzz/fuzz_masked_nodes.py: "<" moved away left "http:///{}", one longer URL
    masked = MaskedNodes(["http:///<{}</b"], "de")
    out = masked.rebuilt(upper(masked.sentences))
    assert codes_of("".join(out)) == ["http:///", "{}"], out


@pytest.mark.parametrize(
    "nodes, translate",
    [  # found by fuzz/fuzz_masked_nodes.py
        (["\x01http:///<", "", "e\ufffd "], upper),  # a piece kept as it was, now against the URL: "http:///\x01E"
        (["/%se", "p\vt", "\x01", "", "http://%1"], reversed_words),  # a word against a URL's start: "phttp://"
        (["http://>b <", "b"], reversed_words),  # code characters left out made a URL: "http://b"
    ],
)
def test_the_pieces_of_a_paragraph_keep_its_codes_exactly_whatever_moves(nodes, translate):
    masked = MaskedNodes(nodes, "de")
    out = masked.rebuilt(translate(masked.sentences))
    assert codes_of("".join(out)) == masked.codes, out


@pytest.mark.parametrize(
    "text",
    [  # found by fuzz/fuzz_masked_text.py once it held every string to its codes, exactly
        "Delete %d of %d files } x {a!b",  # "{a!b %d x %d }" read as one code, {name!r} with a spec
        "{n, plural, =0 {no {no files} more}}",  # a message's own "{...}" parted: the plural unread
        "You have {n, plural, one {a {b c} d} other {#}}",
        "{n, plural, =0 {no {# file} more} other {#}}",
    ],
)
def test_braces_of_the_text_moved_around_a_code_never_make_or_unmake_one(text):
    masked = MaskedText(text, "en")
    out = masked.rebuilt(reversed_words(masked.sentences))
    assert codes_of(out) == masked.codes, out


def test_a_code_taken_out_of_the_model_s_words_leaves_none_behind():
    """Removing "${d. [n}" from "in{${d. [n}}" left "in{}", a code (found by fuzz/fuzz_masked_text.py)."""
    masked = MaskedText("a [n}} in{${d.", "en")
    assert codes_of(masked.rebuilt(reversed_words(masked.sentences))) == []
    assert without_codes("in{${d. [n}} x") == "in x"


def test_a_placeholder_the_model_writes_is_removed():
    masked = MaskedText("Save %s now", "en")
    invented = [("Speichern {0} %d jetzt", [(0, 0), (1, 2), (2, 3)])]
    out = masked.rebuilt(invented)
    assert codes_of(out) == ["%s"]
    assert without_codes("a %d b {x}") == "a b "


@pytest.mark.parametrize("translate", [upper, reversed_words])
def test_random_strings_keep_every_placeholder_once_and_in_order(translate):
    rng = random.Random(0)
    words = ["open", "the", "file", "now", "please", "error", "saved", "Ünïcode"]
    codes = ["%s", "%1$d", "%(n)s", "{0}", "{name}", "{{count}}", "${v}", "<b>", "</b>", "&lt;", "\\n", "%%"]
    for _ in range(300):
        parts = [rng.choice(words + codes) for _ in range(rng.randint(1, 12))]
        text = " ".join(parts) + rng.choice(["", ".", "?"])
        masked = MaskedText(text, "en")
        out = masked.rebuilt(translate(masked.sentences))
        assert codes_of(out) == masked.codes == [p for p in parts if p in codes], (text, out)
