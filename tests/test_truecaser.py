"""A truecaser learned from cased text recases a lower-cased model's output, and only where the text is clear."""

import shutil

import pytest

from nmt.cli import main
from nmt.cli.common import load_translator
from nmt.cli.main import build_parser
from nmt.model_dir import TRUECASE_PAIRS, TRUECASER, read_text_form, write_text_form
from nmt.text_form import TextForm
from nmt.truecaser import MIN_COUNT, load_truecaser, recase, train_truecaser, usual_case

CASED = [
    "In January the Chinese team met the English one.",
    "We went there in January with a Chinese friend.",
    "You may see it in May, or you may not.",
    "The results may change.",
    "A man called Wood carried wood.",
    "There is wood in the shed and more wood outside.",
    "Ask Obama.",
    "Obama said nothing.",  # a sentence start: not counted
    "We met Obama.",
]


@pytest.fixture(scope="module")
def truecaser():
    return train_truecaser(CASED, "en")


def test_a_word_takes_the_case_the_text_shows_most_and_at_least_twice(truecaser):
    assert recase("the chinese team arrived in january .", truecaser) == "the Chinese team arrived in January ."
    assert recase("you may ask in may .", truecaser) == "you may ask in may ."  # "may" is lower case more often
    assert recase("wood and obama", truecaser) == "wood and Obama"  # "Wood" once against "wood" three times
    assert recase("english", truecaser) == "english"  # "English" seen once: below MIN_COUNT
    assert MIN_COUNT == 2


def test_a_sentence_start_teaches_nothing_and_cased_words_are_left_as_they_are(truecaser):
    assert recase("in the end", truecaser) == "in the end"  # "In" and "The" only start sentences
    assert recase("the CHINESE team", truecaser) == "the CHINESE team"  # not lower case: someone's choice


NAMES = [
    "We flew to the United States in May.",
    "Both parties in the United States agree.",
    "Some states have no coast.",
    "Several states and the States of Jersey met.",
    "We met at Times Square twice.",
    "She went to Times Square with us.",
    "He called three times.",
]


@pytest.fixture(scope="module")
def name_truecaser():
    return train_truecaser(NAMES, "en")


def test_a_pair_of_words_takes_the_case_of_the_name_it_makes(name_truecaser):
    assert name_truecaser.pairs == {
        ("united", "states"): (("United", "States"), 2),
        ("times", "square"): (("Times", "Square"), 2),
    }
    assert recase("the united states and the states", name_truecaser) == "the United States and the states"
    # The capitals "Times" and "United" have only inside a name are the name's: alone they stay lower case,
    # and no pair with another word ("the United", seen twice) brings them back.
    assert recase("three times on times square", name_truecaser) == "three times on Times Square"
    assert recase("the united front", name_truecaser) == "the united front"
    assert usual_case("united", name_truecaser) == "united" and usual_case("times", name_truecaser) == "times"
    assert recase("United states", name_truecaser) == "United States"  # a capital given already counts as the pair's
    assert recase("UNITED states", name_truecaser) == "UNITED States"  # and is left as it is


def test_a_word_capitalised_beside_lower_case_words_keeps_its_own_case():
    truecaser = train_truecaser(
        ["I saw an American flag.", "He is an American citizen.", "An American flag waved."], "en"
    )
    assert usual_case("american", truecaser) == "American"  # "an American", "American flag": no name of two words
    assert truecaser.pairs == {}  # the words' own cases give every pair: none is kept
    assert recase("an american flag", truecaser) == "an American flag"


def test_names_that_overlap_take_a_word_off_its_own_counts_once_a_place():
    lines = [
        "I read the New York Times daily.",
        "She reads the New York Times too.",
        "A York pub, York ham and York stone.",
    ]
    truecaser = train_truecaser(lines, "en")
    assert set(truecaser.pairs) == {("new", "york"), ("york", "times")}
    # "York" 5 times: 3 alone, and once in each "New York Times" (not twice: in two names, one place).
    assert truecaser.words.model["casing"]["york"] == {"York": 3}
    assert recase("the new york times in york", truecaser) == "the New York Times in York"


def test_the_files_are_moses_model_and_a_list_of_pairs_and_read_back_the_same(truecaser, name_truecaser, tmp_path):
    path, pairs = tmp_path / "truecase-model.en", tmp_path / "truecase-pairs.en"
    truecaser.save(path, pairs)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert "Chinese (2/2)" in lines and "may (3/4) May (1)" in lines  # each word's casings, most frequent first
    again = load_truecaser(path, pairs)
    text = "the chinese team arrived in january . wood and obama"
    assert recase(text, again) == recase(text, truecaser)
    name_truecaser.save(path, pairs)
    assert "United States\t2" in pairs.read_text(encoding="utf-8").splitlines()
    again = load_truecaser(path, pairs)
    assert again.pairs == name_truecaser.pairs
    assert load_truecaser(path).pairs == {}  # a Moses model alone (train-truecaser.perl's) reads too
    pairs.write_text("United States\t2\nNew\t3\n", encoding="utf-8")
    with pytest.raises(ValueError, match="truecase-pairs.en:2: expected"):
        load_truecaser(path, pairs)
    with pytest.raises(FileNotFoundError, match="truecaser model not found"):
        load_truecaser(tmp_path / "missing")
    with pytest.raises(ValueError, match="no text to learn case from"):
        train_truecaser(["", "  "], "en")


def test_the_output_path_cases_the_source_s_names_then_the_language_s_words(truecaser):
    form = TextForm("pt", "en", truecaser=truecaser)
    source = "O time chinês de Wuhan chegou em janeiro."
    assert form.to_running_text("the chinese team from wuhan arrived in january .", source) == (
        "The Chinese team from Wuhan arrived in January."
    )
    plain = TextForm("pt", "en")
    assert plain.to_running_text("the chinese team from wuhan arrived in january .", source) == (
        "The chinese team from Wuhan arrived in January."  # months: English's own rule, truecaser or not
    )
    assert form == plain  # a reader's choice, not the corpus's form: text_form.json is the same


def test_nmt_truecaser_writes_the_model_that_every_translator_of_the_directory_reads(
    tiny_model_dir, tmp_path, capsys, monkeypatch
):
    model_dir = tmp_path / "ted"
    shutil.copytree(tiny_model_dir, model_dir)
    text = tmp_path / "cased.en"
    text.write_text("\n".join(CASED + NAMES) + "\n", encoding="utf-8")

    assert main(["truecaser", str(model_dir), "--text", str(text)]) == 2  # running text: nothing to recase
    assert "writes cased text already" in capsys.readouterr().err
    write_text_form(model_dir, TextForm("de", "en"))
    assert main(["truecaser", str(model_dir)]) == 2
    assert "give cased text in the target language" in capsys.readouterr().err

    assert main(["truecaser", str(model_dir), "--text", str(text)]) == 0
    # chinese january obama; united states, times square, and "in May" (twice, where "may" alone is lower case)
    assert "another case than lower for 3 of them, and for 3 pairs" in capsys.readouterr().err
    assert (model_dir / TRUECASER.format(lang="en")).is_file()
    assert (model_dir / TRUECASE_PAIRS.format(lang="en")).is_file()
    form = read_text_form(model_dir)
    assert form.truecaser is not None and recase("january", form.truecaser) == "January"
    assert recase("the united states in may", form.truecaser) == "the United States in May"  # the pairs are read too

    translate = ["translate", "--model", str(model_dir), "--engine", "torch"]
    assert load_translator(build_parser().parse_args(translate)).text_form.truecaser is not None
    assert load_translator(build_parser().parse_args([*translate, "--no-truecase"])).text_form.truecaser is None

    # the same switches, and the same output path, wherever the directory is read
    from nmt.translator import Translator

    assert Translator.load(model_dir, truecase=False).text_form.truecaser is None
    assert Translator.load(model_dir, source_case=False).text_form.case_from_source is False
    for command in ("evaluate", "tune-length-penalty", "tune-precision", "serve"):
        args = build_parser().parse_args([command, "--model", str(model_dir), "--no-truecase", "--no-source-case"])
        assert (args.truecase, args.source_case) == (False, False), command
    asked = {}

    def load(model, options=None, **settings):  # as the server loads its models; then stop
        asked.update(settings)
        raise RuntimeError("loaded")

    monkeypatch.setattr("nmt.server.running.Translator.load", load)
    assert main(["serve", "--model", str(model_dir), "--port", "0", "--no-truecase"]) != 0
    assert (asked["truecase"], asked["source_case"]) == (False, True)
    monkeypatch.undo()
    exported = tmp_path / "ct2"  # an export nmt reads again writes its text as the model's directory does
    assert main(["export", "--model", str(model_dir), "--to", "ctranslate2", "--out", str(exported)]) == 0
    copied = read_text_form(exported)
    assert copied == read_text_form(model_dir) and recase("january", copied.truecaser) == "January"


def test_a_corpus_built_from_archives_gives_the_target_side_of_its_training_split(monkeypatch, tmp_path):
    """nmt truecaser --corpus: a NamedCorpus's file, or the side of an archive corpus's first pair with
    that language; a lower-cased corpus is refused, naming why."""
    from nmt.cli.truecaser import cased_training_file

    asked = []

    def parallel_files(name, split, src, tgt):
        asked.append((name, split, src, tgt))
        return tmp_path / f"{split}.{src}", tmp_path / f"{split}.{tgt}"

    monkeypatch.setattr("nmt.data.registry.parallel_files", parallel_files)
    assert cased_training_file("wmt14", "en") == tmp_path / "train.en"
    assert cased_training_file("wmt14", "de") == tmp_path / "train.de"
    assert asked == [("wmt14", "train", "de", "en"), ("wmt14", "train", "en", "de")]
    with pytest.raises(ValueError, match="tokenised and lower-cased: a truecaser learns the case from cased text"):
        cased_training_file("ted_hrlr", "en")
    with pytest.raises(ValueError, match="wmt14 has no pt side; pairs: "):
        cased_training_file("wmt14", "pt")
