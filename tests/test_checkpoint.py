import pytest
import torch

from nmt.checkpoint import (
    atomic_write,
    average_checkpoints,
    latest_checkpoint,
    list_checkpoints,
    load_model_dir,
    load_state,
    load_weights,
    save_checkpoint,
    save_model_dir,
)
from nmt.cli import main
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
