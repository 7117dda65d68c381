"""Guided alignment (nmt.training.guided_alignment): the loss, the links of a batch, and the head it trains."""

import json

import numpy as np
import pytest
import torch

from nmt.config import load_config
from nmt.config_checks import ConfigError
from nmt.data.encoded import RaggedArray
from nmt.model import ModelConfig, Transformer
from nmt.training import datasets
from nmt.training.guided_alignment import batch_links, guided_alignment_loss
from nmt.training.run import train

SHORT = ["train.valid_every=100", "train.valid_bleu_sentences=0", "train.best_metric=loss", "train.max_steps=4"]


def test_the_loss_is_the_heads_cross_entropy_against_each_target_pieces_links():
    weights = torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]])  # (batch 1, 2 steps, 3 source pieces)
    links = torch.tensor([[0, 0, 0], [0, 0, 1], [0, 1, 2]])  # step 0 -> sources 0 and 1; step 1 -> source 2
    expected = -(np.log(0.5) + np.log(0.25)) / 2 - np.log(0.8)
    assert guided_alignment_loss(weights, links).item() == pytest.approx(expected)
    assert guided_alignment_loss(weights, torch.zeros(0, 3, dtype=torch.long)).item() == 0


def test_a_batchs_links_point_at_src_columns_and_tgt_out_steps():
    # pair 0: source piece 1 -> target piece 1, source 2 -> target 3; pair 1: source 1 -> target 2
    links = RaggedArray.from_sequences([[1, 1, 2, 3], [1, 2]])
    assert batch_links(links, np.array([1, 0])).tolist() == [[0, 1, 1], [1, 0, 1], [1, 2, 2]]
    # shifted: the step where the target piece is the decoder's input (tgt_in's position = its own)
    assert batch_links(links, np.array([1, 0]), shift=True).tolist() == [[0, 2, 1], [1, 1, 1], [1, 3, 2]]


def test_the_alignment_head_is_head_0_of_its_layers_cross_attention():
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(
            src_vocab_size=30,
            tgt_vocab_size=30,
            d_model=16,
            num_heads=4,
            d_ff=32,
            encoder_layers=1,
            decoder_layers=3,
            alignment_layer=-2,
            alignment_heads=1,
        )
    )
    model.eval()
    src, tgt = torch.randint(4, 30, (2, 7)), torch.randint(4, 30, (2, 5))
    src[1, 5:] = 0  # padding: no weight on it
    decoded = model.decode(tgt, model.encode(src), need_weights=True, need_alignment=True)
    fused = model.decode(tgt, model.encode(src), need_alignment=True)
    assert torch.allclose(fused.alignment, decoded.cross_weights[1][:, 0], atol=1e-6)
    assert torch.equal(fused.states, model.decode(tgt, model.encode(src)).states)  # the head changes nothing
    assert fused.alignment[1, :, 5:].abs().max() == 0


def test_the_alignment_loss_alone_teaches_the_head_given_links():
    """A reversing task: target token x + 20 translates source token x, in reverse order. Trained on the
    alignment loss alone, the head points each target piece at its source piece: the step that
    outputs target piece t (whose input is piece t - 1) at source piece length - 1 - t."""
    torch.manual_seed(0)
    generator = np.random.default_rng(0)
    model = Transformer(
        ModelConfig(
            src_vocab_size=60,
            tgt_vocab_size=60,
            d_model=32,
            num_heads=4,
            d_ff=64,
            encoder_layers=1,
            decoder_layers=2,
            dropout=0.0,
            alignment_heads=1,
        )
    )

    def batch(n=16, length=6):
        src = np.stack([generator.choice(np.arange(4, 24), length, replace=False) for _ in range(n)])
        order = np.tile(np.arange(length)[::-1], (n, 1))
        tgt = np.take_along_axis(src, order, axis=1) + 20
        tgt_in = np.concatenate([np.full((n, 1), 2), tgt[:, :-1]], axis=1)  # BOS, then the target
        # tgt_out step t outputs tgt[t], the translation of source position order[t]
        links = [[row, t, order[row, t]] for row in range(n) for t in range(length)]
        return torch.tensor(src), torch.tensor(tgt_in), torch.tensor(links), order

    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        src, tgt_in, links, _ = batch()
        weights = model.decode(tgt_in, model.encode(src), need_alignment=True).alignment
        loss = guided_alignment_loss(weights, links) / links.size(0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    src, tgt_in, _, order = batch(64)
    with torch.no_grad():
        pointed = model.decode(tgt_in, model.encode(src), need_alignment=True).alignment.argmax(dim=-1)
    assert (pointed.numpy() == order).mean() > 0.95


def test_a_run_trains_the_head_and_says_so_in_model_json(overrides, tmp_path, monkeypatch):
    aligned = []
    real = datasets.piece_links
    monkeypatch.setattr(datasets, "piece_links", lambda *a, **k: aligned.append(1) or real(*a, **k))
    corpus = {o.split("=", 1)[0]: o.split("=", 1)[1] for o in overrides if o.startswith("data.train_")}
    for key, name in (("data.train_src", "src"), ("data.train_tgt", "tgt")):  # copies this test may edit
        (tmp_path / name).write_text(open(corpus[key], encoding="utf-8").read(), encoding="utf-8")
    config = [o for o in overrides if not o.startswith("data.train_")] + [
        f"data.train_src={tmp_path / 'src'}",
        f"data.train_tgt={tmp_path / 'tgt'}",
        *SHORT,
        "model.decoder_layers=2",
    ]
    run = tmp_path / "run"
    train(load_config(None, config), run, progress_bar=False)
    model = json.loads((run / "model.json").read_text())
    assert (model["alignment_layer"], model["alignment_heads"]) == (-2, 1)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(r["align"] > 0 for r in records if r["kind"] == "train")
    # another run on the same corpus and tokenizer reads the links back; an edited corpus is aligned anew
    train(load_config(None, config), tmp_path / "again", progress_bar=False)
    assert len(aligned) == 1
    for name, line in (("src", "Ein Hund."), ("tgt", "A dog.")):
        with open(tmp_path / name, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    train(load_config(None, config), tmp_path / "edited", progress_bar=False)
    assert len(aligned) == 2


def test_off_and_where_it_cannot_apply(overrides, tmp_path, caplog):
    off = tmp_path / "off"
    train(load_config(None, overrides + SHORT + ["train.guided_alignment=off"]), off, progress_bar=False)
    assert json.loads((off / "model.json").read_text())["alignment_heads"] == 0
    dropout = ["data.bpe_dropout=0.1"]
    with caplog.at_level("INFO"):
        train(load_config(None, overrides + SHORT + dropout), tmp_path / "auto", progress_bar=False)
    assert "guided alignment off: BPE-dropout" in caplog.text
    assert json.loads((tmp_path / "auto" / "model.json").read_text())["alignment_heads"] == 0
    with pytest.raises(ConfigError, match="guided_alignment=true: BPE-dropout"):
        train(load_config(None, overrides + SHORT + dropout + ["train.guided_alignment=true"]), tmp_path / "on")
