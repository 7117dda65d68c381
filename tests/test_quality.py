"""What a model's quality scores mean: the calibration fitted on a set with references, kept in the
model directory and read by every interface."""

import json
import shutil

import pytest

from nmt.cli import main
from nmt.quality import BINS, QUALITY_FILE, QualityCalibration, fit_calibration, sentence_score

from conftest import read_head


def test_the_flag_marks_the_least_sure_fifth_and_the_bins_hold_each_tenth_s_chrf():
    scores = [-i / 10 for i in range(100)]  # 0.0 (surest) down to -9.9
    chrfs = [100 - i for i in range(100)]  # the less sure, the worse
    calibration = fit_calibration(scores, chrfs, fitted_on="a set")
    assert sum(calibration.doubtful(s) for s in scores) == 20
    assert calibration.doubtful(-9.9) and not calibration.doubtful(-7.9)
    assert calibration.caught == 1.0  # the worst tenth by chrF is the least sure tenth here
    assert len(calibration.bin_chrf) == BINS and calibration.bin_chrf == sorted(calibration.bin_chrf)
    assert calibration.expected_chrf(-9.5) == pytest.approx(5.5)  # the least sure tenth: chrF 1..10
    assert calibration.expected_chrf(0.0) == pytest.approx(95.5)


def test_a_calibration_round_trips_and_a_bad_file_is_named(tmp_path):
    calibration = fit_calibration([float(i) for i in range(20)], [float(i) for i in range(20)], fitted_on="x")
    calibration.save(tmp_path)
    assert QualityCalibration.load(tmp_path) == calibration
    assert QualityCalibration.load(tmp_path / "elsewhere") is None
    (tmp_path / QUALITY_FILE).write_text('{"threshold": 1}')
    with pytest.raises(ValueError, match=f"{QUALITY_FILE}: not a quality calibration"):
        QualityCalibration.load(tmp_path)
    with pytest.raises(ValueError, match="at least 10 sentences"):
        fit_calibration([0.0] * 3, [1.0] * 3, fitted_on="x")


def test_nmt_calibrate_writes_what_every_interface_reads(tiny_model_dir, multi30k_dir, tmp_path, capsys):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    raw = multi30k_dir / "data/task1/raw"
    src, ref = tmp_path / "val.de", tmp_path / "val.en"
    src.write_text("\n".join(read_head(raw / "val.de.gz", 40)) + "\n", encoding="utf-8")
    ref.write_text("\n".join(read_head(raw / "val.en.gz", 40)) + "\n", encoding="utf-8")
    args = ["--model", str(model_dir), "--src", str(src), "--ref", str(ref), "--engine", "torch", "--beam", "1"]
    assert main(["calibrate", *args]) == 0
    assert f"wrote {model_dir / QUALITY_FILE}" in capsys.readouterr().out
    calibration = QualityCalibration.load(model_dir)
    assert calibration.sentences == 40 and calibration.fitted_on == str(src)

    from nmt.translator import Translator

    translator = Translator.load(model_dir)
    found = translator.translate_detailed(read_head(raw / "val.de.gz", 40), beam=1, scores=True)
    flagged = [best[0].doubtful for best in found]
    assert sum(flagged) == 8  # the same set: its least sure fifth
    assert all(calibration.doubtful(sentence_score(best[0].word_scores)) == best[0].doubtful for best in found)
    assert translator.translate_detailed(["Ein Mann."], beam=1)[0][0].doubtful is None  # only with scores

    assert main(["info", str(model_dir), "--device", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["quality scores"].startswith(f"fitted on {src} (40 sentences)")


def test_translate_qe_gives_each_line_its_score_flag_and_word_scores(tiny_model_dir, multi30k_dir, tmp_path, capsys):
    from nmt.translator import Translator

    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    sources = read_head(multi30k_dir / "data/task1/raw/val.de.gz", 12)
    src = tmp_path / "in.de"
    src.write_text("\n".join(sources) + "\n", encoding="utf-8")
    command = ["translate", "--model", str(model_dir), "--input", str(src), "--engine", "torch", "--beam", "1", "--qe"]
    assert main(command) == 0
    uncalibrated = capsys.readouterr().out.splitlines()
    assert [line.split(" ||| ")[2] for line in uncalibrated] == ["-"] * 12  # no calibration: no flag
    fit_calibration([float(i) for i in range(10)], [0.0] * 10, fitted_on="x").save(model_dir)  # line at 1.5
    assert main(command) == 0
    lines = capsys.readouterr().out.splitlines()
    found = Translator.load(model_dir).translate_detailed(sources, beam=1, scores=True)
    for line, best in zip(lines, found, strict=True):
        text, score, flag, words = line.split(" ||| ")
        t = best[0]
        assert text == t.text and float(score) == pytest.approx(sentence_score(t.word_scores), abs=1e-4)
        assert flag == "doubtful" and t.doubtful  # a log-probability is below 1.5
        assert [float(w) for w in words.split()] == pytest.approx(t.word_scores, abs=1e-4)


def with_dropout(translator, p: float):
    """`translator` with its model's residual dropout set to `p` (the tiny model is trained with none)."""
    from nmt.model.dropout import Dropout

    for module in translator.model.modules():
        if isinstance(module, Dropout):
            module.p = p
    return translator


def test_mc_dropout_averages_seeded_passes_and_one_pass_is_today_s_score(tiny_model_dir, multi30k_dir, caplog):
    from nmt.translator import Translator

    sources = read_head(multi30k_dir / "data/task1/raw/val.de.gz", 8)
    plain = Translator.load(tiny_model_dir)
    found = plain.translate_detailed(sources, beam=1, scores=True)
    today = [best[0].word_scores for best in found]
    one = plain.translate_detailed(sources, beam=1, scores=True, qe_passes=1)
    assert [best[0].word_scores for best in one] == today
    ids, outputs = [plain.encode_source(s)[0] for s in sources], [best[0].tokens for best in found]
    # the tiny model has no dropout: every pass is the one pass, and the average is today's score
    averaged = plain.scorer.mc_word_scores(ids, outputs, passes=3, seed=0)
    assert averaged == [pytest.approx(words, abs=1e-5) for words in today]
    assert "has no dropout" in caplog.text

    dropping = with_dropout(Translator.load(tiny_model_dir), 0.3)
    first = dropping.scorer.mc_word_scores(ids, outputs, passes=4, seed=5)
    assert first == dropping.scorer.mc_word_scores(ids, outputs, passes=4, seed=5)  # seeded: the same masks
    assert first != dropping.scorer.mc_word_scores(ids, outputs, passes=4, seed=6) and first != today
    assert [len(words) for words in first] == [len(words) for words in today]
    mc = dropping.translate_detailed(sources, beam=1, scores=True, qe_passes=4, qe_seed=5)
    assert [best[0].text for best in mc] == [best[0].text for best in found]  # the search keeps its dropout off
    assert [best[0].word_scores for best in mc] == first
    assert dropping.scorer.score(ids, outputs, alignments=False)[0].word_scores == today[0]  # off again after
    with pytest.raises(ValueError, match="with scores=True"):
        plain.translate_detailed(sources, beam=1, qe_passes=3)


def test_a_calibration_flags_only_scores_of_its_own_number_of_passes(tiny_model_dir, tmp_path, capsys):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    fit_calibration([float(i) for i in range(10)], [0.0] * 10, fitted_on="x").save(model_dir)  # one pass
    src = tmp_path / "in.de"
    src.write_text("Ein Hund.\nZwei Männer.\n", encoding="utf-8")
    command = ["translate", "--model", str(model_dir), "--input", str(src), "--beam", "1", "--qe"]
    assert main([*command, "--qe-passes", "3", "--seed", "2"]) == 0
    assert [line.split(" ||| ")[2] for line in capsys.readouterr().out.splitlines()] == ["-", "-"]
    fit_calibration([float(i) for i in range(10)], [0.0] * 10, fitted_on="x", passes=3).save(model_dir)
    assert QualityCalibration.load(model_dir).describe().startswith("fitted on x (10 sentences, MC dropout over 3")
    assert main([*command, "--qe-passes", "3"]) == 0
    assert [line.split(" ||| ")[2] for line in capsys.readouterr().out.splitlines()] == ["doubtful", "doubtful"]
    assert main(command) == 0
    assert [line.split(" ||| ")[2] for line in capsys.readouterr().out.splitlines()] == ["-", "-"]
