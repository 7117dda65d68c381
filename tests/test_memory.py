"""A translation memory: exact matches served without a search, fuzzy ones scored as rapidfuzz does (nmt.memory)."""

from __future__ import annotations

import logging
import random
import subprocess
import sys
import time

import pytest
from rapidfuzz import fuzz

from nmt.cli import main
from nmt.memory import TranslationMemory, memory_first, memory_key

TMX = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE tmx SYSTEM "tmx14.dtd">
<tmx version="1.4">
  <header creationtool="t" creationtoolversion="1" segtype="sentence" o-tmf="t" adminlang="en" srclang="de-DE"
          datatype="plaintext"/>
  <body>
    <tu><tuv xml:lang="de-DE"><seg>Lösche {0} Dateien?</seg></tuv>
        <tuv xml:lang="en-GB"><seg>Delete {0} files?</seg></tuv></tu>
    <tu><tuv xml:lang="de-DE"><seg>Ein <bpt i="1">&lt;b&gt;</bpt>Mann<ept i="1">&lt;/b&gt;</ept> fährt Rad.</seg></tuv>
        <tuv xml:lang="en-GB"><seg>A man rides a bike.</seg></tuv></tu>
    <tu><tuv xml:lang="de-DE"><seg>Nur Deutsch</seg></tuv></tu>
  </body>
</tmx>
"""


def test_a_string_read_for_translation_finds_its_segment_and_gets_it_without_placeholders():
    memory = TranslationMemory([("Hallo {name}, willkommen!", "Hello {name}, welcome!")])
    assert memory.lookup("Hallo , willkommen!").target == "Hello , welcome!"  # the codes go back by alignment
    assert memory.lookup("Hallo %s, willkommen!").target == "Hello %s, welcome!"
    assert not memory.lookup("Hallo %s, %s willkommen!").exact  # placeholders that cannot pair up


def test_an_exact_match_ignores_spacing_and_takes_the_sentences_placeholders(tmp_path):
    path = tmp_path / "m.tmx"
    path.write_text(TMX)
    memory = TranslationMemory.load(path, target="en")
    assert len(memory) == 2  # the unit without English is skipped
    match = memory.lookup("Lösche  %d   Dateien?")
    assert match.exact and match.target == "Delete %d files?" and match.source == "Lösche {0} Dateien?"
    assert memory.lookup("Ein Mann fährt Rad.").target == "A man rides a bike."  # inline codes' content is no text


def test_a_fuzzy_match_is_scored_as_rapidfuzz_scores_the_keys():
    memory = TranslationMemory([("Ein Mann fährt ein rotes Fahrrad.", "A man rides a red bike.")], threshold=70)
    query = "Ein Mann fährt ein blaues Fahrrad."
    match = memory.lookup(query)
    expected = fuzz.ratio(memory_key(query), memory_key("Ein Mann fährt ein rotes Fahrrad."))
    assert not match.exact and match.score == pytest.approx(expected) and 70 <= match.score < 100
    assert memory.lookup("Eine Frau liest ein Buch im Park.") is None  # below the threshold
    assert TranslationMemory([("a b c", "x")], threshold=99).lookup("a b d") is None


def test_the_fuzzy_index_finds_what_a_full_scan_finds():
    rng = random.Random(0)
    words = [f"w{i}" for i in range(300)]
    pairs = [(" ".join(rng.choices(words, k=rng.randint(3, 12))), f"t{i}") for i in range(3000)]
    memory = TranslationMemory(pairs, threshold=60)
    for _ in range(200):
        source = rng.choice(pairs)[0].split()
        source[rng.randrange(len(source))] = rng.choice(words)  # one word changed
        query = " ".join(source)
        best = max(fuzz.ratio(memory_key(query), memory_key(s)) for s, _ in pairs)
        match = memory.lookup(query)
        if best >= 60:
            assert match is not None and match.score == pytest.approx(min(best, 99.99)), query
        else:
            assert match is None


def test_a_large_memory_answers_in_milliseconds():
    rng = random.Random(1)
    vocabulary = [f"word{i}" for i in range(20_000)]
    memory = TranslationMemory(
        ((" ".join(rng.choices(vocabulary, k=10)), str(i)) for i in range(100_000)), threshold=75
    )
    queries = [" ".join(rng.choices(vocabulary, k=10)) for _ in range(100)]
    queries += [memory.sources[i] + " extra" for i in range(0, 100_000, 1000)]  # fuzzy hits
    start = time.perf_counter()
    found = [memory.lookup(q) for q in queries]
    per_lookup_ms = (time.perf_counter() - start) / len(queries) * 1000
    assert sum(m is not None for m in found) >= 100
    assert per_lookup_ms < 20, per_lookup_ms


def test_exact_matches_are_never_searched():
    memory = TranslationMemory([("Hallo Welt", "Hello world")])
    searched = []

    def translate(texts):
        searched.extend(texts)
        return [t.upper() for t in texts]

    results, matches = memory_first(memory, ["Hallo  Welt", "Guten Tag"], translate, lambda m: m.target)
    assert results == ["Hello world", "GUTEN TAG"] and searched == ["Guten Tag"]
    assert matches[0].exact and matches[1] is None


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.tsv", "a\tb\nc\n", r"bad\.tsv:2: a memory line is source TAB target; this one has 1 columns"),
        ("bad.tmx", "<tmx><body><tu>", r"bad\.tmx: not well-formed XML"),
        # found by fuzzing (fuzz/fuzz_memory.py tmx): libxml2's message broke the line
        (
            "nul.tmx",
            "<tmx>\x00</tmx>",
            r"nul\.tmx: not well-formed XML \(Invalid character: Char 0x0 out of allowed range, ",
        ),
        (
            "bad.tmx",
            '<!DOCTYPE tmx [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><tmx><body>&b;</body></tmx>',
            r"bad\.tmx: declares a DTD of its own",
        ),
        (
            "bad.tmx",
            '<!DOCTYPE tmx [<!ENTITY e SYSTEM "file:///etc/passwd">]><tmx><body>&e;</body></tmx>',
            r"bad\.tmx: declares a DTD of its own",
        ),
        (
            "three.tmx",
            '<tmx><body><tu><tuv xml:lang="de"><seg>a</seg></tuv><tuv xml:lang="en"><seg>b</seg></tuv>'
            '<tuv xml:lang="fr"><seg>c</seg></tuv></tu></body></tmx>',
            r"three\.tmx:1: a unit in 3 languages \(de, en, fr\): name the memory's source and target",
        ),
    ],
)
def test_a_bad_memory_file_is_one_error_naming_it(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as raised:
        TranslationMemory.load(path)
    assert "\n" not in str(raised.value)


def test_translate_with_a_memory_from_the_command_line_and_feed_it(tiny_model_dir, tmp_path, caplog, capsys):
    memory = tmp_path / "memory.tsv"
    memory.write_text("Ein Hund läuft.\tA dog runs.\n")
    command = [sys.executable, "-m", "nmt", "translate", "--model", str(tiny_model_dir), "--beam", "1"]
    run = subprocess.run(
        [*command, "--memory", str(memory)], input="Ein Hund  läuft.\nZwei Katzen.\n", capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "A dog runs." and lines[1] != "A dog runs."
    assert "1 of 2 sentences from the memory" in run.stderr
    # a document translated twice: the second time every sentence comes from the memory the first fed
    page = tmp_path / "page.json"  # placeholders too: the memory holds the strings as they are read
    page.write_text('{"title": "Ein Titel", "text": "Hallo {name}, willkommen! Lösche %d Dateien?"}')
    fed, model = tmp_path / "fed.tsv", ["--model", str(tiny_model_dir), "--beam", "1", "--input", str(page)]
    with caplog.at_level(logging.INFO):
        assert (
            main(["translate", *model, "--output", str(tmp_path / "1.json"), "--memory", str(fed), "--memory-update"])
            == 0
        )
        assert "0 of 3 sentences from the memory" in caplog.text and len(fed.read_text().splitlines()) == 3
        assert main(["translate", *model, "--output", str(tmp_path / "2.json"), "--memory", str(fed)]) == 0
    assert "3 of 3 sentences from the memory" in caplog.text
    assert (tmp_path / "1.json").read_text() == (tmp_path / "2.json").read_text()  # hits aligned by the model
    assert "{name}" in (tmp_path / "2.json").read_text() and "%d" in (tmp_path / "2.json").read_text()
    lines = tmp_path / "lines.txt"
    lines.write_text("Hallo\n")
    refused = ["translate", *model[:4], "--input", str(lines), "--memory", str(fed), "--scores"]
    assert main(refused) == 2
    assert "without --scores" in capsys.readouterr().err
