import json

import pytest
import torch

from nmt.checkpoint import (
    atomic_write,
    average_best_checkpoints,
    average_checkpoints,
    latest_checkpoint,
    list_checkpoints,
    load_model_dir,
    load_state,
    load_weights,
    save_checkpoint,
    save_model_dir,
    validation_ranking,
)
from nmt.cli import main
from nmt.config import load_config
from nmt.model import ModelConfig, Transformer


def tiny(seed=0, sharing="all"):
    torch.manual_seed(seed)
    return Transformer(
        ModelConfig(
            src_vocab_size=20,
            tgt_vocab_size=20,
            encoder_layers=1,
            decoder_layers=1,
            d_model=16,
            num_heads=2,
            d_ff=32,
            dropout=0.0,
            sharing=sharing,
        )
    )


def test_weights_round_trip_and_stay_tied(tmp_path):
    model = tiny()
    save_model_dir(model, tmp_path)
    loaded = load_model_dir(tmp_path)
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert loaded.src_embed.weight is loaded.tgt_embed.weight is loaded.output.weight


def test_weights_of_another_shape_are_refused(tmp_path):
    save_model_dir(tiny(), tmp_path)
    other = Transformer(
        ModelConfig(
            src_vocab_size=20, tgt_vocab_size=20, encoder_layers=2, decoder_layers=1, d_model=16, num_heads=2, d_ff=32
        )
    )
    with pytest.raises(ValueError, match="do not fit"):
        load_weights(other, tmp_path / "model.safetensors")


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "state.pt"
    target.write_text("old")

    def broken(tmp):
        open(tmp, "w").write("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(target, broken)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pt"]  # no temporary left behind


def test_checkpoints_keep_last_k_and_latest_points_at_newest(tmp_path):
    model = tiny()
    for step in (10, 20, 30):
        save_checkpoint(tmp_path, step, model, {"step": step, "rng": torch.get_rng_state()}, keep_last=2)
    assert list_checkpoints(tmp_path) == ["step_00000020", "step_00000030"]
    weights, state = latest_checkpoint(tmp_path)
    assert weights.name == "step_00000030.safetensors"
    assert load_state(state)["step"] == 30
    state.unlink()
    with pytest.raises(FileNotFoundError, match="missing"):
        latest_checkpoint(tmp_path)


def test_average_is_the_elementwise_mean_and_the_cli_writes_it(tmp_path):
    a, b = tiny(0), tiny(1)
    save_model_dir(a, tmp_path)
    save_checkpoint(tmp_path, 1, a, {}, keep_last=5)
    save_checkpoint(tmp_path, 2, b, {}, keep_last=5)
    folder = tmp_path / "checkpoints"
    averaged = average_checkpoints([folder / "step_00000001.safetensors", folder / "step_00000002.safetensors"])
    shared = next(k for k in averaged if k.endswith("embed.weight") or k == "output.weight")  # stored once
    assert torch.allclose(averaged[shared], (a.tgt_embed.weight + b.tgt_embed.weight) / 2)
    assert main(["average", "--model", str(tmp_path), "--last", "2"]) == 0
    merged = load_model_dir(tmp_path, weights=tmp_path / "model.averaged.safetensors")
    untouched = load_model_dir(tmp_path)  # the best weights stay as they were
    assert torch.equal(untouched.output.weight, a.output.weight)
    expected = (a.encoder_layers[0].feed_forward.w_1.weight + b.encoder_layers[0].feed_forward.w_1.weight) / 2
    assert torch.allclose(merged.encoder_layers[0].feed_forward.w_1.weight, expected)
    assert torch.allclose(merged.output.weight, (a.output.weight + b.output.weight) / 2)
    assert merged.output.weight is merged.src_embed.weight


def write_records(model_dir, records):
    with (model_dir / "metrics.jsonl").open("a") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


def steps_on_disk(model_dir):
    return [int(name.removeprefix("step_")) for name in list_checkpoints(model_dir)]


def test_validation_ranking_orders_by_the_metric_and_skips_what_is_not_a_score(tmp_path):
    write_records(
        tmp_path,
        [
            {"kind": "train", "step": 1, "loss": 0.1},  # a training record is no validation
            {"kind": "valid", "step": 1, "loss": 3.0, "bleu": 20.0},
            {"kind": "valid", "step": 2, "loss": 2.0, "bleu": 25.0},
            {"kind": "valid", "step": 3, "loss": "nan", "bleu": 25.0},  # a tie on bleu: the later step first
            {"kind": "valid", "step": 4, "loss": 2.5},  # no bleu (valid_bleu_sentences 0)
            {"kind": "valid", "step": 1, "loss": 1.0, "bleu": 5.0},  # a step's last record counts
            {"kind": "valid", "step": 2, "loss": "nan", "bleu": 25.0},  # ... even when its loss is NaN
        ],
    )
    assert validation_ranking(tmp_path, "bleu") == [3, 2, 1]
    assert validation_ranking(tmp_path, "loss") == [1, 4]
    assert validation_ranking(tmp_path / "nowhere", "bleu") == []
    with pytest.raises(ValueError, match="metric"):
        validation_ranking(tmp_path, "chrf")


@pytest.mark.parametrize(
    ("metric", "kept"),
    [("bleu", [2, 4, 6]), ("loss", [3, 5, 6])],
)
def test_keep_best_keeps_the_best_validated_checkpoints_beside_the_last(tmp_path, metric, kept):
    bleu = {1: 10.0, 2: 30.0, 3: 20.0, 4: 25.0, 5: 5.0, 6: 15.0}
    loss = {1: 3.0, 2: 2.9, 3: 1.0, 4: 2.0, 5: 1.5, 6: 2.5}
    model = tiny()
    for step in range(1, 7):  # as in training: validate, then save the checkpoint of that step
        write_records(tmp_path, [{"kind": "valid", "step": step, "bleu": bleu[step], "loss": loss[step]}])
        save_checkpoint(tmp_path, step, model, {}, keep_last=1, keep_best=2, metric=metric)
    assert steps_on_disk(tmp_path) == kept  # the 2 best by the metric, and the newest


def test_without_keep_best_only_the_last_are_kept_whatever_their_scores(tmp_path):
    model = tiny()
    for step in range(1, 5):
        write_records(tmp_path, [{"kind": "valid", "step": step, "bleu": 40.0 - step}])
        save_checkpoint(tmp_path, step, model, {}, keep_last=2)
    assert steps_on_disk(tmp_path) == [3, 4]


def validated_run(model_dir, scores):
    """A model directory with one checkpoint (a different tiny model) per step of `scores`
    ({step: {"bleu": .., "loss": ..}}) and those validation records; returns {step: model}."""
    models = {step: tiny(step) for step in scores}
    save_model_dir(models[min(scores)], model_dir)
    for step, model in models.items():
        save_checkpoint(model_dir, step, model, {}, keep_last=5)
    write_records(model_dir, [{"kind": "valid", "step": step, **values} for step, values in scores.items()])
    return models


def test_average_best_averages_the_checkpoints_that_validated_best(tmp_path):
    scores = {1: {"bleu": 30.0, "loss": 2.0}, 2: {"bleu": 10.0, "loss": 1.0}, 3: {"bleu": 20.0, "loss": 1.5}}
    models = validated_run(tmp_path, scores)
    merged, names = average_best_checkpoints(tmp_path, 2, "bleu")
    assert names == ["step_00000001", "step_00000003"]  # steps 1 and 3, in step order
    expected = (models[1].output.weight + models[3].output.weight) / 2
    assert torch.allclose(merged.output.weight, expected)

    # The CLI takes the metric from the run's config (none here: bleu), or from --metric.
    assert main(["average", "--model", str(tmp_path), "--best", "2", "--metric", "loss"]) == 0
    by_loss = load_model_dir(tmp_path, weights=tmp_path / "model.averaged.safetensors")
    assert torch.allclose(by_loss.output.weight, (models[2].output.weight + models[3].output.weight) / 2)
    assert main(["average", "--model", str(tmp_path), "--best", "1"]) == 0
    by_bleu = load_model_dir(tmp_path, weights=tmp_path / "model.averaged.safetensors")
    assert torch.equal(by_bleu.output.weight, models[1].output.weight)


def test_average_best_refuses_what_it_cannot_rank(tmp_path, capsys):
    save_model_dir(tiny(), tmp_path)
    save_checkpoint(tmp_path, 1, tiny(), {}, keep_last=5)
    with pytest.raises(ValueError, match="has a validation bleu in .*metrics.jsonl .*try --metric loss"):
        average_best_checkpoints(tmp_path, 2, "bleu")  # no metrics.jsonl: nothing is ranked
    assert main(["average", "--model", str(tmp_path), "--best", "0"]) == 2
    assert "--best must be at least 1, got 0" in capsys.readouterr().err
    assert main(["average", "--model", str(tmp_path), "--metric", "loss"]) == 2
    assert "give --best K with it" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["average", "--model", str(tmp_path), "--best", "2", "--last", "2"])
    assert exit_.value.code == 2  # argparse: not allowed together


def test_a_damaged_metrics_log_keeps_every_checkpoint_rather_than_stop_the_run(tmp_path, caplog):
    model = tiny()
    for step in (1, 2):
        save_checkpoint(tmp_path, step, model, {}, keep_last=1, keep_best=1)
    damaged = '{"kind": "valid", "step": 1, "bleu": 3}\nnot json\n{"kind": "valid", "step": 2, "bleu": 4}\n'
    (tmp_path / "metrics.jsonl").write_text(damaged)  # a bad line in the middle: read_metrics refuses it
    save_checkpoint(tmp_path, 3, model, {}, keep_last=1, keep_best=1)
    assert steps_on_disk(tmp_path) == [2, 3]  # keep_last=1 would have deleted step 2: nothing was
    assert "no checkpoint is deleted until it can be read" in caplog.text


def test_average_best_takes_the_metric_from_the_runs_config_and_says_what_was_kept(tmp_path, capsys):
    models = validated_run(tmp_path, {1: {"bleu": 30.0, "loss": 2.0}, 2: {"bleu": 10.0, "loss": 1.0}})
    load_config(None, ["train.best_metric=loss", "train.valid_bleu_sentences=0"]).save(tmp_path / "config.yaml")
    assert main(["average", "--model", str(tmp_path), "--best", "1"]) == 0
    averaged = load_model_dir(tmp_path, weights=tmp_path / "model.averaged.safetensors")
    assert torch.equal(averaged.output.weight, models[2].output.weight)  # the lowest loss, not the best BLEU
    err = capsys.readouterr().err
    assert "its 0 best by loss" in err and "chosen among those" in err  # keep_best 0: the last 5 only
    assert main(["average", "--model", str(tmp_path), "--best", "3"]) == 0
    assert "only 2 kept checkpoints have a validation loss" in capsys.readouterr().err
