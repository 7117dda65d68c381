"""A truecaser learned from cased text recases a lower-cased model's output, and only where the text is clear."""

import shutil

import pytest

from nmt.cli import main
from nmt.cli.common import load_translator
from nmt.cli.main import build_parser
from nmt.model_dir import TRUECASER, read_text_form, write_text_form
from nmt.text_form import TextForm
from nmt.truecaser import MIN_COUNT, load_truecaser, recase, train_truecaser

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


def test_the_model_file_is_moses_own_format_and_reads_back_the_same(truecaser, tmp_path):
    path = tmp_path / "truecase-model.en"
    truecaser.save_model(str(path))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert "Chinese (2/2)" in lines and "may (3/4) May (1)" in lines  # each word's casings, most frequent first
    again = load_truecaser(path)
    text = "the chinese team arrived in january . wood and obama"
    assert recase(text, again) == recase(text, truecaser)
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
        "The chinese team from Wuhan arrived in january."
    )
    assert form == plain  # a reader's choice, not the corpus's form: text_form.json is the same


def test_nmt_truecaser_writes_the_model_that_every_translator_of_the_directory_reads(tiny_model_dir, tmp_path, capsys):
    model_dir = tmp_path / "ted"
    shutil.copytree(tiny_model_dir, model_dir)
    text = tmp_path / "cased.en"
    text.write_text("\n".join(CASED) + "\n", encoding="utf-8")

    assert main(["truecaser", str(model_dir), "--text", str(text)]) == 2  # running text: nothing to recase
    assert "writes cased text already" in capsys.readouterr().err
    write_text_form(model_dir, TextForm("de", "en"))
    assert main(["truecaser", str(model_dir)]) == 2
    assert "give cased text in the target language" in capsys.readouterr().err

    assert main(["truecaser", str(model_dir), "--text", str(text)]) == 0
    assert "the output takes another case than lower for 3 of them" in capsys.readouterr().err  # chinese january obama
    assert (model_dir / TRUECASER.format(lang="en")).is_file()
    form = read_text_form(model_dir)
    assert form.truecaser is not None and recase("january", form.truecaser) == "January"

    translate = ["translate", "--model", str(model_dir), "--engine", "torch"]
    assert load_translator(build_parser().parse_args(translate)).text_form.truecaser is not None
    assert load_translator(build_parser().parse_args([*translate, "--no-truecase"])).text_form.truecaser is None
