"""Pictures: each writes a real PNG of the figure's size, and draws exactly the numbers it is given."""

import json
import shutil
import struct
from pathlib import Path

import pytest
import torch

from nmt.cli import main
from nmt.model.embedding import sinusoidal_encoding
from nmt.plots import (
    ATTENTION_KINDS,
    DPI,
    attention_figure,
    attention_maps,
    learning_curves_figure,
    plot_learning_curves,
    plot_positional_encoding,
    positional_encoding_figure,
)
from nmt.translator import Translator

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SENTENCE = "Ein Mann schläft."


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's header, after checking that it is one."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def figure_pixels(fig) -> tuple[int, int]:
    width, height = fig.get_size_inches() * DPI
    return round(width), round(height)


def synthetic_records(with_scores: bool = True) -> list[dict]:
    records = []
    for step in range(100, 1001, 100):
        records.append(
            {"kind": "train", "step": step, "loss": 10 - step / 200, "nll": 9 - step / 200, "lr": step * 1e-6}
        )
        if step % 500 == 0:
            valid = {"kind": "valid", "step": step, "loss": 8 - step / 250}
            if with_scores:
                valid.update(bleu=step / 50, chrf=step / 20)
            records.append(valid)
    records.append({"kind": "train", "step": 1100, "loss": "nan", "nll": "nan", "lr": 1.1e-3})  # as the log writes it
    records.append({"kind": "skipped", "step": 1100, "consecutive": 1})
    return records


def write_metrics(model_dir: Path, records: list[dict]) -> None:
    model_dir.mkdir(exist_ok=True)
    (model_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture(scope="module")
def translator(tiny_model_dir) -> Translator:
    return Translator.load(tiny_model_dir, device="cpu")


@pytest.fixture(scope="module")
def maps(translator):
    return attention_maps(translator, SENTENCE)


# --- learning curves -------------------------------------------------------------------------
def test_learning_curves_png_lands_in_the_model_directory(tmp_path):
    write_metrics(tmp_path, synthetic_records())
    out = plot_learning_curves(tmp_path)
    assert out == tmp_path / "learning_curves.png"
    assert png_size(out) == figure_pixels(learning_curves_figure(synthetic_records()))


def test_learning_curves_draw_the_records():
    fig = learning_curves_figure(synthetic_records())
    loss, scores, lr = fig.axes
    assert [ax.get_title() for ax in fig.axes] == [
        "Loss",
        "Validation BLEU and chrF (greedy, sacreBLEU)",
        "Learning rate",
    ]
    train = next(line for line in loss.get_lines() if line.get_label() == "train NLL")
    assert list(train.get_xdata())[:3] == [100, 200, 300]
    assert list(train.get_ydata())[:3] == [8.5, 8.0, 7.5]
    bleu = next(line for line in scores.get_lines() if line.get_label() == "valid BLEU")
    assert list(bleu.get_ydata()) == [10.0, 20.0]
    # Without BLEU/chrF the scores panel is left out.
    assert len(learning_curves_figure(synthetic_records(with_scores=False)).axes) == 2


def test_a_multilingual_run_draws_each_direction_beside_the_mean():
    records = synthetic_records()
    for r in records:
        if r["kind"] == "valid" and "bleu" in r:
            r.update({"bleu_de-en": r["bleu"] + 2, "bleu_fr-en": r["bleu"] - 2})
    scores = learning_curves_figure(records).axes[1]
    lines = {line.get_label(): list(line.get_ydata()) for line in scores.get_lines()}
    assert lines["valid BLEU de-en"] == [12.0, 22.0] and lines["valid BLEU fr-en"] == [8.0, 18.0]
    assert lines["valid BLEU"] == [10.0, 20.0] and scores.get_title().endswith("mean over directions")


def test_missing_metrics_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        plot_learning_curves(tmp_path)
    write_metrics(tmp_path, [{"kind": "valid", "step": 10, "loss": 3.0}])
    with pytest.raises(ValueError, match="metrics.jsonl.*no train records"):
        plot_learning_curves(tmp_path)


# --- attention ------------------------------------------------------------------------------------
def test_attention_maps_are_distributions_of_the_right_shape(translator, maps):
    config = translator.model.config
    src, tgt = len(maps.src_pieces), len(maps.tgt_pieces)
    assert maps.tgt_pieces[0] == "[START]" and maps.src_pieces[-1] == "[END]"
    expected = {
        "cross_attention": (config.decoder_layers, config.num_heads, tgt, src),
        "encoder_self_attention": (config.encoder_layers, config.num_heads, src, src),
        "decoder_self_attention": (config.decoder_layers, config.num_heads, tgt, tgt),
    }
    for kind, shape in expected.items():
        weights = maps.weights[kind]
        assert weights.shape == shape
        assert torch.allclose(weights.sum(-1), torch.ones(shape[:-1]), atol=1e-5)
        queries, keys = maps.labels(kind)  # by words: fewer than the pieces, each row still summing to 1
        words = maps.word_weights(kind)
        assert words.shape == (*shape[:2], len(queries), len(keys)) and len(keys) < shape[3]
        assert torch.allclose(words.sum(-1), torch.ones(words.shape[:-1]), atol=1e-5)
    # The decoder sees no future: nothing above the diagonal.
    assert maps.weights["decoder_self_attention"].triu(diagonal=1).abs().max() == 0


def test_teacher_forced_cross_attention_equals_the_search(translator, maps):
    """The maps are of the sentence `nmt translate` gives: the model's own beam."""
    best = translator.translate_detailed([SENTENCE], return_attention=True)[0][0]
    steps = best.attention.size(2)  # one row per search step: len(tokens) (+1 for the EOS step)
    assert maps.translation == best.text
    assert maps.tgt_pieces == ["[START]", *best.pieces]  # decoder inputs: BOS, then the output
    assert maps.weights["cross_attention"].size(2) == len(best.tokens) + 1 >= steps
    assert torch.allclose(maps.weights["cross_attention"][:, :, :steps], best.attention.float(), atol=1e-5)


def test_the_pictures_are_labelled_by_the_words_of_the_source_and_the_output(maps):
    """A reader sees words and a plain "(start)" / "(end)", never a subword marker or "[START]"."""
    source, output = maps.labels("cross_attention")[1], maps.labels("cross_attention")[0]
    assert source == ["(start)", *SENTENCE.split(), "(end)"]  # "schläft." though it is several pieces
    assert output[0] == "(start)" and set(maps.translation.split()) <= set(output)
    for kind in ATTENTION_KINDS:
        fig = attention_figure(maps, kind)
        shown = [t.get_text() for ax in fig.axes for t in (*ax.get_xticklabels(), *ax.get_yticklabels())]
        assert shown and not [label for label in shown if "▁" in label or "[START]" in label or "[END]" in label]


def test_attention_figure_is_a_layers_by_heads_grid_of_the_weights(maps):
    for kind in ATTENTION_KINDS:
        weights = maps.word_weights(kind)
        layers, heads = weights.shape[:2]
        fig = attention_figure(maps, kind)
        panels = [ax for ax in fig.axes if ax.images]  # the colour bar is an axes without an image
        assert len(panels) == layers * heads
        assert panels[heads + 1].get_title() == "layer 2, head 2"
        assert torch.equal(torch.as_tensor(panels[heads + 1].images[0].get_array()), weights[1, 1])
        queries, keys = maps.labels(kind)
        bottom_left = panels[(layers - 1) * heads]
        assert [t.get_text() for t in bottom_left.get_xticklabels()] == keys
        assert [t.get_text() for t in bottom_left.get_yticklabels()] == queries


# --- positional encoding -------------------------------------------------------------------------
def test_positional_encoding_png_shows_the_encoding(tmp_path):
    out = plot_positional_encoding(tmp_path / "pe" / "positions.png", d_model=16, length=30)
    fig = positional_encoding_figure(d_model=16, length=30)
    width, height = png_size(out)
    assert (width, height) == figure_pixels(fig) and width > height
    heatmap = fig.axes[0].collections[0].get_array().reshape(16, 30)  # (dimension, position)
    assert torch.allclose(torch.as_tensor(heatmap).float(), sinusoidal_encoding(torch.arange(30), 16).T)


@pytest.mark.parametrize("layout", ["halves", "marian"])
def test_the_picture_follows_the_model_s_layout(layout):
    fig = positional_encoding_figure(d_model=16, length=30, base=100.0, layout=layout)
    heatmap = fig.axes[0].collections[0].get_array().reshape(16, 30)
    expected = sinusoidal_encoding(torch.arange(30), 16, 100.0, layout).T
    assert torch.allclose(torch.as_tensor(heatmap).float(), expected)
    assert not torch.allclose(expected, sinusoidal_encoding(torch.arange(30), 16, 100.0).T)
    for line in fig.axes[1].get_lines():  # each curve is a sine that starts at 0
        assert line.get_ydata()[0] == pytest.approx(0.0, abs=1e-6)


# --- the command line --------------------------------------------------------------------------
def test_cli_plot_and_positions_write_pngs(tmp_path, capsys):
    write_metrics(tmp_path / "run", synthetic_records())
    assert main(["plot", str(tmp_path / "run"), "--out", str(tmp_path / "curves.png")]) == 0
    assert main(["positions", "--out", str(tmp_path / "pe.png"), "--d-model", "32", "--length", "20"]) == 0
    for name in ("curves.png", "pe.png"):
        png_size(tmp_path / name)
    assert capsys.readouterr().out.split() == [str(tmp_path / "curves.png"), str(tmp_path / "pe.png")]


def test_cli_positions_of_a_model_are_its_own_and_written_beside_it(tiny_model_dir, tmp_path, capsys):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    assert main(["positions", "--model", str(model_dir), "--length", "20"]) == 0
    out = model_dir / "positional_encoding.png"
    assert capsys.readouterr().out.split() == [str(out)] and png_size(out)[0] > 0
    assert main(["positions", "--model", str(model_dir), "--d-model", "64"]) == 2  # one or the other


def test_cli_attention_writes_one_png_per_kind(tiny_model_dir, tmp_path):
    out_dir = tmp_path / "attention"
    assert (
        main(["attention", "--model", str(tiny_model_dir), SENTENCE, "--out-dir", str(out_dir), "--device", "cpu"]) == 0
    )
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(f"{kind}.png" for kind in ATTENTION_KINDS)
    for path in out_dir.iterdir():
        width, height = png_size(path)
        assert width > 300 and height > 300


def test_cli_attention_writes_beside_the_model_by_default(tiny_model_dir, tmp_path, capsys):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    assert main(["attention", "--model", str(model_dir), SENTENCE, "--device", "cpu"]) == 0
    assert capsys.readouterr().out.split() == [str(model_dir / "attention" / f"{kind}.png") for kind in ATTENTION_KINDS]


def test_cli_plot_without_metrics_fails_cleanly(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    assert "metrics.jsonl" in capsys.readouterr().err
