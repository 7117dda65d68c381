"""What a model reads and writes, as one value: the checks the Translator, the CLI and the server ask."""

import pytest

from nmt.config_checks import ConfigError
from nmt.directions import Directions

MANY_TO_ONE = Directions((("de", "en"), ("fr", "en")), source="de", output="en")
ONE_TO_MANY = Directions((("en", "de"), ("en", "fr")), targets=("de", "fr"), source="en")
IMPORTED_MULTI_TARGET = Directions(targets=("de", "fr"), source="en")  # OPUS-MT's: no trained pairs known
ONE_PAIR = Directions((("de", "en"),), source="de", output="en")


def test_the_sources_are_the_trained_pairs_else_a_two_letter_source():
    assert MANY_TO_ONE.sources == ["de", "fr"]
    assert IMPORTED_MULTI_TARGET.sources == ["en"]
    assert Directions(source="mul").sources == []  # a group of languages: nothing to check against
    Directions(source="mul").check_source("pt")
    with pytest.raises(ConfigError, match=r"source_lang 'pt' was not trained: this model translates de-en, fr-en"):
        MANY_TO_ONE.check_source("pt")
    with pytest.raises(ConfigError, match="'pt' was not trained: this model translates from en"):
        IMPORTED_MULTI_TARGET.check_source("pt")


def test_a_pair_is_refused_only_where_both_sides_and_the_pairs_are_known():
    MANY_TO_ONE.check_pair("fr", None)  # the target is the one it writes
    MANY_TO_ONE.check_pair(None, "en")
    IMPORTED_MULTI_TARGET.check_pair("xx", "de")  # no pairs known
    with pytest.raises(ConfigError, match=r"de-fr is not a direction this model was trained for \(en-de, en-fr\)"):
        ONE_TO_MANY.check_pair("de", "fr")


def test_the_target_of_a_text_is_its_token_else_the_one_asked_for():
    assert ONE_TO_MANY.target_of(">>fr<< A dog.") == "fr"
    assert ONE_TO_MANY.target_of("A dog.", "de") == "de"
    assert MANY_TO_ONE.target_of("Ein Hund.") is None  # one target: no token
    with pytest.raises(ConfigError, match=r"target_lang is 'de', but the text asks for >>fr<<"):
        ONE_TO_MANY.target_of(">>fr<< A dog.", "de")
    with pytest.raises(ConfigError, match=r"target_lang is needed: this model translates into several languages"):
        ONE_TO_MANY.target_of("A dog.")
    with pytest.raises(ConfigError, match="target_lang must be one of de, fr, got 'cs'"):
        ONE_TO_MANY.target_of(">>cs<< A dog.")
    with pytest.raises(ConfigError, match="fr-de is not a direction"):
        ONE_TO_MANY.target_of("Un chien.", "de", source="fr")


def test_a_single_target_model_takes_its_own_language_by_name_only():
    MANY_TO_ONE.check_target("en")
    MANY_TO_ONE.check_target(None)
    with pytest.raises(ConfigError, match="'de' cannot be chosen: this model translates only into en"):
        MANY_TO_ONE.check_target("de")
    with pytest.raises(ConfigError, match="'de' cannot be chosen: this model translates into one language"):
        Directions().check_target("de")


def test_the_routes_a_server_sends_to_each_kind_of_model():
    assert MANY_TO_ONE.routes() == [(("de", "en"), None), (("fr", "en"), None)]
    assert ONE_TO_MANY.routes() == [(("en", "de"), "de"), (("en", "fr"), "fr")]
    assert IMPORTED_MULTI_TARGET.routes() == [(("en", "de"), "de"), (("en", "fr"), "fr")]
    assert ONE_PAIR.routes() == [(("de", "en"), None)]
    assert Directions(targets=("de", "fr")).routes() == []  # unknown source: nmt's own API only


def test_a_test_set_in_a_direction_never_trained_is_refused_before_a_model_loads():
    ONE_TO_MANY.check_test_set("en", "fr")
    Directions().check_test_set("pt", "en")  # an imported model: nothing to go by
    with pytest.raises(ConfigError, match=r"^writes de, fr \(en-de, en-fr\), not cs$"):
        ONE_TO_MANY.check_test_set("en", "cs", zero_shot=True)  # it would score another language
    with pytest.raises(ConfigError, match=r"^was trained for de-en, fr-en, not cs-en \(--zero-shot to try it"):
        MANY_TO_ONE.check_test_set("cs", "en", zero_shot=False)
    with pytest.raises(ConfigError, match=r"^was trained for de-en, fr-en, not cs-en$"):
        MANY_TO_ONE.check_test_set("cs", "en")  # a command without --zero-shot
    MANY_TO_ONE.check_test_set("cs", "en", zero_shot=True)
