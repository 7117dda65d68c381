import json
import logging
import math
import shutil

import pytest

from nmt import tuning
from nmt.evaluation import Scores, score_translations
from nmt.model_dir import RUN_CONFIG, read_decode_config, write_decode_settings
from nmt.search_settings import SearchRequest
from nmt.translator import Translator
from nmt.tuning import (
    PenaltyTrial,
    PrecisionTrial,
    best_trial,
    choose_decoding,
    chosen_precision,
    cpu_precisions,
    length_ratio,
    try_length_penalties,
    try_precisions,
    write_length_penalty,
    write_precision,
)

from conftest import model_dir_with, read_head

SOURCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Ein Kind.", "Eine Frau mit einem Hut."]
REFERENCES = ["A man rides a bike.", "Two dogs play in the snow.", "A child.", "A woman with a hat."]


def trial(alpha: float, bleu: float) -> PenaltyTrial:
    scores = Scores(bleu=bleu, bleu_lowercase=bleu, chrf=0.0, bleu_signature="", chrf_signature="", sentences=1)
    return PenaltyTrial(alpha, scores, 1.0)


def test_best_trial_is_the_highest_cased_bleu_and_the_earliest_of_equals():
    assert best_trial([trial(0.6, 30.0), trial(1.0, 31.5), trial(2.0, 29.0)]).alpha == 1.0
    assert best_trial([trial(0.6, 30.0), trial(1.0, 30.0)]).alpha == 0.6


def test_length_ratio_counts_words_over_the_whole_set():
    assert length_ratio(["a b", "c"], ["a b c", "d e f"]) == 0.5


def test_each_trial_scores_the_translations_made_with_its_alpha(tiny_model_dir):
    translator = Translator.load(tiny_model_dir)
    trials = try_length_penalties(translator, SOURCES, REFERENCES, [0.0, 2.0], request=translator.request(beam=3))
    assert [t.alpha for t in trials] == [0.0, 2.0]
    for t in trials:
        hypotheses = translator.translate(SOURCES, beam=3, length_penalty=t.alpha)
        assert t.scores == score_translations(hypotheses, REFERENCES)
        assert t.length_ratio == length_ratio(hypotheses, REFERENCES)
    for bad, message in (([], "alphas must be one or more"), ([-1.0], "must be >= 0"), ([math.nan], "finite")):
        with pytest.raises(ValueError, match=message):
            try_length_penalties(translator, SOURCES, REFERENCES, bad)


def test_written_alpha_becomes_the_models_default_and_the_rest_stays(tiny_model_dir, tmp_path):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    before = read_decode_config(model_dir)
    write_length_penalty(model_dir, 2.5)
    after = read_decode_config(model_dir)
    assert after.length_penalty == 2.5 and Translator.load(model_dir).decode.length_penalty == 2.5
    assert (after.beam, after.max_len_b) == (before.beam, before.max_len_b)  # the fixture's max_len_b: 5


def test_a_model_without_config_gets_the_defaults_and_the_alpha(tiny_model_dir, tmp_path):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    (model_dir / RUN_CONFIG).unlink()
    write_length_penalty(model_dir, 1.5)
    assert read_decode_config(model_dir).length_penalty == 1.5


def scores(bleu: float) -> Scores:
    return Scores(bleu=bleu, bleu_lowercase=bleu, chrf=0.0, bleu_signature="", chrf_signature="", sentences=1)


def test_int8_is_chosen_only_where_it_is_faster_and_within_the_tolerance():
    def trials(fp32_bleu, int8_bleu, fp32_s=2.0, int8_s=1.0):
        return [PrecisionTrial("fp32", scores(fp32_bleu), fp32_s), PrecisionTrial("int8", scores(int8_bleu), int8_s)]

    assert chosen_precision(trials(35.3, 35.1)) == "int8"  # 0.2 lower, faster
    assert chosen_precision(trials(35.3, 34.9)) == "fp32"  # 0.4 lower
    assert chosen_precision(trials(35.3, 35.5, int8_s=2.5)) == "fp32"  # better but slower here
    assert chosen_precision(trials(35.3, 34.9), tolerance=0.5) == "int8"


def test_the_fastest_precision_within_the_tolerance_wins_and_bf16_is_tried_only_with_amx(monkeypatch):
    fp32, int8, bf16 = (
        PrecisionTrial(p, scores(b), s) for p, b, s in (("fp32", 35.3, 2.0), ("int8", 35.1, 1.0), ("bf16", 35.3, 0.8))
    )
    assert chosen_precision([fp32, int8, bf16]) == "bf16"
    assert chosen_precision([fp32, int8, PrecisionTrial("bf16", scores(34.0), 0.5)]) == "int8"  # too far below
    assert chosen_precision([fp32, int8, PrecisionTrial("bf16", scores(35.3), 1.5)]) == "int8"  # slower than int8
    monkeypatch.setattr(tuning, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert cpu_precisions() == ("fp32", "int8")  # AVX-512 BF16 alone: bf16 is slower there
    monkeypatch.setattr(tuning, "cpu_flags", lambda: frozenset({"avx512f", "amx_tile", "amx_bf16"}))
    assert cpu_precisions() == ("fp32", "int8", "bf16")


PRECISIONS = ("fp32", "int8")


def test_each_precision_trial_is_that_precision_s_translation(tiny_model_dir):
    greedy = SearchRequest.of(read_decode_config(tiny_model_dir), beam=1)
    found = try_precisions(
        tiny_model_dir, SOURCES, REFERENCES, engine="torch", request=greedy, precisions=("fp32", "int8")
    )
    assert [t.precision for t in found] == ["fp32", "int8"] and all(t.seconds > 0 for t in found)
    for t in found:
        translator = Translator.load(tiny_model_dir, engine="torch", precision=t.precision, device="cpu")
        assert t.scores == score_translations(translator.translate(SOURCES, beam=1), REFERENCES)


def test_a_written_precision_is_the_default_on_cpu_and_a_named_one_wins(tiny_model_dir, tmp_path):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    assert read_decode_config(model_dir).precision is None  # fp32
    write_precision(model_dir, "int8")
    assert read_decode_config(model_dir).precision == "int8"
    assert Translator.load(model_dir, engine="torch", device="cpu").engine.precision == "int8"
    assert Translator.load(model_dir, engine="torch", device="cpu", precision="fp32").engine.precision == "fp32"
    write_precision(model_dir, "fp32")
    assert read_decode_config(model_dir).precision is None


def test_a_written_bf16_is_the_default_only_where_it_can_run(tiny_model_dir, tmp_path, monkeypatch):
    """Tuning on an AMX CPU may choose bf16; the model, moved to a CPU without AMX (or run on
    CTranslate2, which has no bf16 on CPU), then decodes in fp32 rather than failing."""
    from nmt.inference import loading
    from nmt.inference import precision as inference_precision

    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    write_precision(model_dir, "bf16")
    assert read_decode_config(model_dir).precision == "bf16"
    monkeypatch.setattr(inference_precision, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert Translator.load(model_dir, engine="torch", device="cpu").engine.precision == "fp32"
    monkeypatch.setattr(inference_precision, "cpu_flags", lambda: frozenset({"avx512f", "amx_tile", "amx_bf16"}))
    assert loading.model_precision("bf16", "torch", model_dir) == "bf16"
    assert loading.model_precision("bf16", "auto", model_dir) == "bf16"
    assert loading.model_precision("bf16", "ctranslate2", model_dir) is None
    assert loading.model_precision("int8", "ctranslate2", model_dir) == "int8"
    export = tmp_path / "export"  # a CTranslate2 export alone: auto can only mean CTranslate2 there
    export.mkdir()
    (export / "model.bin").write_bytes(b"")
    assert loading.model_precision("bf16", "auto", export) is None


def test_an_imported_model_s_decode_settings_are_written_where_they_are_read(tiny_model_dir, tmp_path):
    """An imported model keeps its search in imported_from.json: a written alpha or precision goes
    there, not into a new config.yaml of the library's defaults (which would replace its beam)."""
    import json

    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    (model_dir / RUN_CONFIG).unlink()
    origin = {"format": "marian", "decode": {"beam": 4, "length_penalty": 1.0, "length_normalization": "average"}}
    (model_dir / "imported_from.json").write_text(json.dumps(origin))
    write_length_penalty(model_dir, 2.0)
    write_precision(model_dir, "int8")
    assert not (model_dir / RUN_CONFIG).exists()
    decode = read_decode_config(model_dir)
    assert (decode.beam, decode.length_penalty, decode.length_normalization) == (4, 2.0, "average")
    assert decode.precision == "int8"
    written = json.loads((model_dir / "imported_from.json").read_text())
    assert written["format"] == "marian"
    assert set(written["decode"]) == {"beam", "length_penalty", "length_normalization", "precision"}  # no more


def exact_matches(hypotheses, references, pretokenized=False) -> Scores:
    """A stand-in for BLEU that a random model's one-word outputs can move: the share of exact matches."""
    share = 100.0 * sum(h == r for h, r in zip(hypotheses, references, strict=True)) / len(references)
    return Scores(bleu=share, bleu_lowercase=share, chrf=0.0, bleu_signature="", chrf_signature="", sentences=1)


def test_choose_decoding_keeps_the_alpha_that_scores_best_on_the_held_out_set(
    tiny_model_dir, multi30k_dir, tmp_path, monkeypatch
):
    """References made by the model itself at one alpha: that alpha scores best and is chosen, the
    precision trials run under it, and both land in the model's config."""
    monkeypatch.setattr(tuning, "score_translations", exact_matches)
    model_dir = model_dir_with(tmp_path, tiny_model_dir, end_bias=2)  # beams that end at various lengths
    sources = read_head(multi30k_dir / "data/task1/raw/val.de.gz", 20)
    translator = Translator.load(model_dir)
    outputs = {alpha: translator.translate(sources, length_penalty=alpha) for alpha in (0.6, 3.0)}
    assert outputs[0.6] != outputs[3.0]  # the alphas must lead to different outputs for the test to mean anything
    choice = choose_decoding(model_dir, sources, outputs[3.0], alphas=(0.6, 3.0))
    assert [t.alpha for t in choice.penalties] == [0.6, 3.0] and choice.length_penalty == 3.0
    assert choice.penalties[1].scores.bleu == 100.0 > choice.penalties[0].scores.bleu
    assert [t.precision for t in choice.precisions] == list(tuning.cpu_precisions())  # bf16 too with AMX
    assert choice.precisions[0].scores.bleu == 100.0  # measured under the chosen alpha
    decode = read_decode_config(model_dir)
    assert (decode.length_penalty, decode.precision or "fp32") == (3.0, choice.precision)
    lines = choice.report(before=0.6, on="val.de")
    assert lines[0].startswith("length penalty: 3 (was 0.6); BLEU on val.de by alpha: 0.6: ")
    assert lines[1].startswith(f"precision: {choice.precision} on CPU (fp32 BLEU 100.00 in ")


def test_a_greedy_model_has_no_alpha_to_choose(tiny_model_dir, tmp_path):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "greedy")
    write_decode_settings(model_dir, beam=1)
    choice = choose_decoding(model_dir, SOURCES, REFERENCES, precision=False)
    assert (choice.penalties, choice.length_penalty, choice.precisions, choice.precision) == ([], None, [], None)
    assert choice.report(before=0.6, on="val") == []


def test_a_run_that_scored_below_tune_min_bleu_keeps_the_config_s_settings(tmp_path, monkeypatch, capsys):
    """nmt train's tuning at the end: skipped for a model too little trained to choose on (a short
    trial run, whose every output runs to the length limit), done where its BLEU reaches the floor
    or where validation measured none."""
    from nmt.cli.train import tune_decoding
    from nmt.config import load_config

    class Chosen(Exception):
        """The stand-in for choose_decoding: tuning went ahead."""

    def choose(*args, **kwargs):
        raise Chosen

    monkeypatch.setattr("nmt.tuning.choose_decoding", choose)

    def tuned(bleus: list[float | None], *sets: str) -> bool:
        records = [{"kind": "train", "step": 1, "loss": 9.0}]
        records += [{"kind": "valid", "step": i, "loss": 8.0, "bleu": b} for i, b in enumerate(bleus)]
        (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        try:
            tune_decoding(tmp_path, load_config(None, ["train.tune_decoding=true", *sets]))
        except Chosen:
            return True
        return False

    assert not tuned([0.0, 0.31])
    assert "the config's (best validation BLEU 0.31, below train.tune_min_bleu 1: too little" in capsys.readouterr().err
    assert tuned([0.2, 1.5])
    assert tuned([0.0, 0.31], "train.tune_min_bleu=0")
    assert tuned([None, None])  # validation measured no BLEU (valid_bleu_sentences 0): nothing to go by


def test_the_trials_do_not_log_each_translation_s_lost_numbers(tiny_model_dir, tmp_path, caplog):
    """A random model carries no number's stand-in through, so translating this set says so (once per
    translation); the trials translate it once per alpha and precision, and say nothing of it."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "numbers")
    sources = ["Zimmer 48213 ist frei.", *SOURCES[1:]]
    translator = Translator.load(model_dir)
    assert translator.number_stand_ins.swap(sources[0]).originals  # the model cuts this number
    with caplog.at_level("INFO", logger="nmt.rare_numbers"):
        translator.translate(sources)
        assert "1 of 1 sentences with rare numbers" in caplog.text
        caplog.clear()
        choose_decoding(model_dir, sources, REFERENCES, alphas=(0.6, 1.0), precision=False)
    assert "rare numbers" not in caplog.text
    assert logging.getLogger("nmt.rare_numbers").level == logging.NOTSET  # as it was
