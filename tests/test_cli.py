import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from nmt.cli import main
from nmt.model_dir import read_decode_config
from nmt.translation_io import InputError, translate_stream
from nmt.translator import Translator


def run_cli(*args, stdin: bytes | None = None):
    return subprocess.run([sys.executable, "-m", "nmt", *args], input=stdin, capture_output=True, timeout=120)


def test_translate_writes_one_line_per_input_line_in_order(tiny_model_dir, tmp_path):
    source = tmp_path / "in.de"
    lines = ["Ein Mann fährt Fahrrad.", "", "Zwei Hunde spielen.", "Ein Kind."]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.en"
    assert (
        main(
            [
                "translate",
                "--model",
                str(tiny_model_dir),
                "--input",
                str(source),
                "--output",
                str(out),
                "--beam",
                "2",
                "--chunk",
                "2",
            ]
        )
        == 0
    )
    written = out.read_text(encoding="utf-8").split("\n")
    assert len(written) == len(lines) + 1 and written[-1] == ""
    assert written[1] == ""  # an empty line gives an empty line
    translator = Translator.load(tiny_model_dir)
    assert written[:-1] == translator.translate(lines, beam=2)


def test_translate_streams_before_the_input_ends(tiny_model_dir):
    translator = Translator.load(tiny_model_dir)

    class Source:
        """Yields two lines, then fails if read further before output was written."""

        def __init__(self, target):
            self.target, self.lines = target, [b"Ein Mann.\n", b"Ein Hund.\n", b"Eine Frau.\n"]

        def __iter__(self):
            for i, line in enumerate(self.lines):
                if i == 2:
                    assert self.target.getvalue().count("\n") == 2, "nothing written after the first chunk"
                yield line

    target = io.StringIO()
    assert translate_stream(translator, Source(target), target, translator.request(beam=1), chunk_lines=2) == 3


def test_invalid_utf8_names_the_line(tiny_model_dir):
    # The CLI's message for it is in test_cli_bad_input.py; this is the library's error.
    with pytest.raises(InputError, match=r"^x:2: not valid UTF-8"):
        translate_stream(Translator.load(tiny_model_dir), io.BytesIO(b"a\n\xff\n"), io.StringIO(), name="x")


def test_translate_from_stdin(tiny_model_dir):
    result = run_cli("translate", "--model", str(tiny_model_dir), "--beam", "1", stdin=b"Ein Mann.\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().count("\n") == 1


def test_evaluate_prints_sacrebleu_scores_with_signatures(tiny_model_dir, tmp_path, capsys):
    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text("Ein Mann.\nEin Hund.\n")
    ref.write_text("A man.\nA dog.\n")
    assert (
        main(
            ["evaluate", "--model", str(tiny_model_dir), "--src", str(src), "--ref", str(ref), "--json", "--beam", "1"]
        )
        == 0
    )
    scores = json.loads(capsys.readouterr().out)
    assert {"bleu", "bleu_lowercase", "chrf", "bleu_signature", "chrf_signature"} <= set(scores)
    assert scores["sentences"] == 2 and "tok:13a" in scores["bleu_signature"]


def test_length_penalty_option_is_the_alpha_the_search_ranks_with(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from nmt.inference.torch_engine import TorchEngine

    alphas = []
    search_with = TorchEngine.translate_ids

    def spy(self, ids, search, groups=None):
        alphas.append(search.length_penalty)
        return search_with(self, ids, search, groups)

    monkeypatch.setattr(TorchEngine, "translate_ids", spy)
    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text("Ein Mann.\nEin Hund.\n")
    ref.write_text("A man.\nA dog.\n")
    model = ["--model", str(tiny_model_dir), "--beam", "2", "--engine", "torch"]
    assert (
        main(["translate", *model, "--input", str(src), "--output", str(tmp_path / "out"), "--length-penalty", "1.5"])
        == 0
    )
    evaluate = ["evaluate", *model, "--src", str(src), "--ref", str(ref), "--json"]
    assert main([*evaluate, "--length-penalty", "0"]) == 0
    chosen = json.loads(capsys.readouterr().out)
    assert main(evaluate) == 0
    default = json.loads(capsys.readouterr().out)
    assert alphas == [1.5, 0.0, 0.6]  # unset: the model's decode.length_penalty
    assert (chosen["length_penalty"], default["length_penalty"]) == (0.0, 0.6)


def tuning_command(command, tiny_model_dir, tmp_path):
    """(a copy of the tiny model, the arguments of `command` on it with a two-line validation set)."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text("Ein Mann.\nEin Hund.\n")
    ref.write_text("A man.\nA dog.\n")
    return model_dir, [command, "--model", str(model_dir), "--src", str(src), "--ref", str(ref)]


def test_tune_length_penalty_prints_each_alpha_and_writes_the_best(tiny_model_dir, tmp_path, capsys):
    model_dir, args = tuning_command("tune-length-penalty", tiny_model_dir, tmp_path)
    args += ["--beam", "2"]
    assert main([*args, "--alphas", "0,2.5"]) == 0
    *lines, best = capsys.readouterr().out.splitlines()
    bleu = {line.split()[1]: float(line.split()[3]) for line in lines}  # "alpha 0  BLEU 12.34 ..."
    assert list(bleu) == ["0", "2.5"] and best.split()[2] == max(bleu, key=bleu.get)
    assert read_decode_config(model_dir).length_penalty == 0.6  # not written without --write
    assert main([*args, "--alphas", "2.5", "--write"]) == 0
    assert read_decode_config(model_dir).length_penalty == 2.5


def test_tune_precision_prints_both_and_writes_the_choice(tiny_model_dir, tmp_path, capsys, monkeypatch):
    import nmt.tuning
    from nmt.translator import Translator

    model_dir, args = tuning_command("tune-precision", tiny_model_dir, tmp_path)
    args += ["--beam", "1"]
    assert main(args) == 0
    *trials, choice = capsys.readouterr().out.splitlines()
    tried = nmt.tuning.cpu_precisions()  # bf16 too on a CPU with AMX
    assert [line.split()[0] for line in trials] == list(tried) and all("  BLEU" in line for line in trials)
    assert choice in [f"choice: {p}" for p in tried]  # timing decides on this machine (the rule: test_tuning)
    assert read_decode_config(model_dir).precision is None  # not written without --write
    seen = []
    monkeypatch.setattr(nmt.tuning, "chosen_precision", lambda trials, tolerance: seen.append(tolerance) or "int8")
    assert main([*args, "--tolerance", "0.5", "--write"]) == 0
    assert seen == [0.5] and capsys.readouterr().out.splitlines()[-1] == "choice: int8"
    assert read_decode_config(model_dir).precision == "int8"
    assert Translator.load(model_dir, engine="torch", device="cpu").engine.precision == "int8"  # then used
    assert main([*args, "--tolerance", "-1"]) == 2


def test_evaluate_pretokenized_scores_the_texts_own_tokens(tiny_model_dir, tmp_path, capsys):
    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text("ein mann .\n")
    ref.write_text("a man .\n")
    args = ["evaluate", "--model", str(tiny_model_dir), "--src", str(src), "--ref", str(ref), "--json"]
    assert main([*args, "--beam", "1", "--pretokenized"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["pretokenized"] and "tok:none" in scores["bleu_signature"]


def test_data_get_fetches_a_split_and_prints_its_files(multi30k_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NMT_MIRROR", str(multi30k_dir))
    monkeypatch.setenv("NMT_DATA_HOME", str(tmp_path))
    assert main(["data", "get", "multi30k", "de-en", "--split", "val"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("multi30k de-en val: ") and "val.de.gz" in line and "val.en.gz" in line
    assert main(["data", "list"]) == 0
    assert "ted_hrlr" in capsys.readouterr().out


def test_translate_sample_is_reproducible_with_a_seed(tiny_model_dir, tmp_path):
    source = tmp_path / "in.de"
    source.write_text("Ein Mann fährt Fahrrad.\n\nZwei Hunde spielen.\nEin Kind.\n", encoding="utf-8")
    outputs = []
    for _ in range(2):
        out = tmp_path / f"out{len(outputs)}.en"
        assert (
            main(
                [
                    "translate",
                    "--model",
                    str(tiny_model_dir),
                    "--input",
                    str(source),
                    "--output",
                    str(out),
                    "--sample",
                    "--temperature",
                    "1.5",
                    "--seed",
                    "7",
                    "--chunk",
                    "2",
                ]
            )
            == 0
        )
        outputs.append(out.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1]
    assert outputs[0].split("\n")[1] == ""  # an empty line still gives an empty line
    assert len(outputs[0].split("\n")) == 5


def test_worker_threads_keeps_every_worker_a_thread_of_this_process(tiny_model_dir):
    from nmt.cli import build_parser, load_translator
    from nmt.inference.plan import available_cores

    plain = ["translate", "--model", str(tiny_model_dir), "--engine", "torch", "--workers", "2", "--threads", "1"]
    threads_only = load_translator(build_parser().parse_args([*plain, "--worker-threads"]))
    assert threads_only.engine.runner.start_processes(1) is None
    if available_cores() > 1:  # where processes can help, the default keeps the weights to start them
        assert load_translator(build_parser().parse_args(plain)).engine.runner._process_weights is not None


def test_translate_scores_and_alignments_follow_each_line(tiny_model_dir, tmp_path):
    import math

    source = tmp_path / "in.de"
    lines = ["Ein Mann fährt Fahrrad.", "", "Zwei Hunde spielen im Schnee."]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = run_cli("translate", "--model", str(tiny_model_dir), "--input", str(source), "--scores", "--alignments")
    assert run.returncode == 0, run.stderr.decode()
    out = run.stdout.decode().split("\n")[:-1]
    assert len(out) == len(lines)
    translator = Translator.load(tiny_model_dir)
    expected = translator.translate_detailed(lines, scores=True, alignments=True)
    for line, source_text, best in zip(out, lines, expected, strict=True):
        text, confidence, probs, alignment = line.split(" ||| ")
        assert text == best[0].text
        probs = [float(p) for p in probs.split()]
        assert float(confidence) == pytest.approx(best[0].confidence, abs=1e-4)
        if source_text:
            assert float(confidence) == pytest.approx(sum(map(math.log, probs)) / len(probs), abs=1e-3)
            pairs = [tuple(map(int, pair.split("-"))) for pair in alignment.split()]
            assert all(i < len(source_text.split()) and j < len(text.split()) for i, j in pairs)
        else:
            assert (text, probs, alignment) == ("", [], "")


def test_scores_are_refused_with_documents_in_one_line(tiny_model_dir):
    run = run_cli("translate", "--model", str(tiny_model_dir), "--format", "text", "--scores", stdin=b"Ein Mann.\n")
    assert run.returncode != 0
    assert run.stderr.decode().strip().endswith("are per sentence: use them with --format lines")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_while_choosing_the_decoding_settings_says_so_and_exits_128_plus_the_signal(
    signum, tmp_path, monkeypatch, capsys
):
    """nmt train / nmt distill after training: the model is saved, so the stop costs only the choice;
    a status of 0 would let `nmt train ... && next-step` take the choice for made."""
    from nmt.cli import train as train_command

    def tune_decoding(out, config, *, precision=True):
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler's exception ends this at once
        raise AssertionError("not stopped")

    monkeypatch.setattr(train_command, "tune_decoding", tune_decoding)
    before = signal.getsignal(signum)
    started = time.monotonic()
    assert train_command.tune_after_training(tmp_path, None) == 128 + signum
    assert time.monotonic() - started < 4
    said = capsys.readouterr().err
    assert f"choosing the decoding settings stopped by {signal.Signals(signum).name}: the model in {tmp_path}" in said
    assert f"nmt tune-precision --model {tmp_path}" in said
    assert signal.getsignal(signum) is before  # the run's own handling is back
