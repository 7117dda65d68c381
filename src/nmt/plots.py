"""Pictures for people: learning curves, attention heatmaps, the positional encodings.

    plot_learning_curves("runs/de_en")                      # -> runs/de_en/learning_curves.png
    plot_attention(translator, "Ein Mann fährt Fahrrad.", "attention/")
    plot_positional_encoding("positional_encoding.png")

Each picture has a `..._figure` function that builds a matplotlib Figure without writing
anything, so tests (and notebooks) can look at the axes, and a `plot_...` function that
saves it as PNG. We use `matplotlib.figure.Figure` directly rather than pyplot: no global
figure registry to leak memory in a server, no backend switched behind a notebook's back,
and saving to PNG always goes through the Agg renderer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure

from .alignment import Words, word_attention
from .model import ModelConfig
from .model.embedding import sinusoidal_encoding
from .model_dir import METRICS as METRICS_FILE
from .model_dir import MODEL_CONFIG, read_metrics
from .search_settings import SearchRequest
from .translator import Translator

DPI = 120
FONT = "DejaVu Sans"  # ships with matplotlib, with the letters of most scripts' words
MAX_PANEL_INCHES = 6.0  # one heatmap's largest side: a 6-layer, 8-head grid stays a few thousand pixels
MAX_LABELS = 60  # most word labels along one side of a heatmap
ATTENTION_KINDS = ("cross_attention", "encoder_self_attention", "decoder_self_attention")
ATTENTION_TITLES = {
    "cross_attention": "Cross-attention: target queries over source keys",
    "encoder_self_attention": "Encoder self-attention",
    "decoder_self_attention": "Decoder self-attention (causal: no position sees the future)",
}


def _save(fig: Figure, out: str | Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI, format="png")
    return out


def _shorten(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- learning curves ----------------------------------------------------------------------
def _series(records: list[dict[str, Any]], kind: str, key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric. float() because the log writes NaN/inf as strings."""
    pairs = [(r["step"], float(r[key])) for r in records if r.get("kind") == kind and key in r]
    return [s for s, _ in pairs], [v for _, v in pairs]


def learning_curves_figure(records: list[dict[str, Any]]) -> Figure:
    """Stacked panels over training steps: losses, validation BLEU/chrF (when measured), learning rate.

    The train "loss" is label-smoothed, so it sits above the validation loss (a plain NLL)
    even without over-fitting; the train "nll" is drawn too, as the like-for-like comparison.
    """
    if not any(r.get("kind") == "train" for r in records):
        raise ValueError("no train records to plot")
    has_scores = any(r.get("kind") == "valid" and ("bleu" in r or "chrf" in r) for r in records)
    names = ["loss", *(["scores"] if has_scores else []), "lr"]
    fig = Figure(figsize=(8, 2.6 * len(names) + 0.4), layout="constrained")
    axes = dict(zip(names, fig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0], strict=True))

    ax = axes["loss"]
    ax.plot(*_series(records, "train", "loss"), lw=1, color="tab:blue", alpha=0.6, label="train loss (label-smoothed)")
    ax.plot(*_series(records, "train", "nll"), lw=1, color="tab:blue", label="train NLL")
    ax.plot(*_series(records, "valid", "loss"), "o-", ms=3, color="tab:orange", label="valid NLL")
    skipped = [r["step"] for r in records if r.get("kind") == "skipped"]
    for i, step in enumerate(skipped):  # updates dropped for a non-finite loss: worth seeing
        ax.axvline(step, color="tab:red", lw=0.8, alpha=0.5, label="skipped update" if i == 0 else None)
    ax.set_ylabel("loss (nats / token)")
    ax.set_title("Loss")

    if has_scores:
        ax = axes["scores"]
        for key, label, color in (("bleu", "valid BLEU", "tab:green"), ("chrf", "valid chrF", "tab:purple")):
            steps, values = _series(records, "valid", key)
            if steps:
                ax.plot(steps, values, "o-", ms=3, color=color, label=label)
                finite = [i for i, v in enumerate(values) if math.isfinite(v)]
                if finite:  # label the best score, the number people look for
                    best = max(finite, key=values.__getitem__)
                    ax.annotate(
                        f"{values[best]:.1f}",
                        (steps[best], values[best]),
                        textcoords="offset points",
                        xytext=(0, 6),
                        ha="center",
                        fontsize=8,
                        color=color,
                    )
        # a multilingual model's directions, each a thin line beside their mean (the "valid BLEU" above)
        directions = sorted(
            {k[len("bleu_") :] for r in records if r.get("kind") == "valid" for k in r if k.startswith("bleu_")}
        )
        for direction in directions:
            ax.plot(*_series(records, "valid", f"bleu_{direction}"), "--", lw=1, label=f"valid BLEU {direction}")
        ax.set_ylabel("score (0-100)")
        ax.set_title("Validation BLEU and chrF (greedy, sacreBLEU)" + (", mean over directions" if directions else ""))

    ax = axes["lr"]
    ax.plot(*_series(records, "train", "lr"), lw=1, color="tab:gray")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    ax.set_ylabel("learning rate")
    ax.set_title("Learning rate")
    ax.set_xlabel("training step")

    for ax in axes.values():
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
    return fig


def plot_learning_curves(model_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw <model_dir>/metrics.jsonl to a PNG (default <model_dir>/learning_curves.png); returns its path.

    Raises FileNotFoundError when there is no metrics file, ValueError when it holds no train records.
    """
    records = read_metrics(model_dir)
    try:
        fig = learning_curves_figure(records)
    except ValueError as err:
        raise ValueError(f"{Path(model_dir) / METRICS_FILE}: {err}") from None
    fig.suptitle(f"{Path(model_dir).name}: learning curves")
    return _save(fig, out if out is not None else Path(model_dir) / "learning_curves.png")


# --- attention ----------------------------------------------------------------------------------
@dataclass
class AttentionMaps:
    """Every attention weight of one teacher-forced pass over a sentence and its translation.

    weights[kind]: (layers, heads, queries, keys), each row summing to 1, for kind in
    ATTENTION_KINDS. Source positions are the source pieces (BOS/EOS included); target
    positions are the decoder inputs, [START] followed by the output pieces, so query
    row t is the attention while predicting output token t (row 0 predicts the first word).
    src_words, tgt_words: those pieces as the words a reader sees (nmt.alignment.word_groups),
    which label the pictures.
    """

    source: str
    translation: str
    src_pieces: list[str]
    tgt_pieces: list[str]
    weights: dict[str, torch.Tensor]
    src_words: Words
    tgt_words: Words

    def sides(self, kind: str) -> tuple[Words, Words]:
        """(query words, key words) of one kind of attention."""
        return {
            "cross_attention": (self.tgt_words, self.src_words),
            "encoder_self_attention": (self.src_words, self.src_words),
            "decoder_self_attention": (self.tgt_words, self.tgt_words),
        }[kind]

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(query labels, key labels) of one kind of attention: words, "(start)" and "(end)"."""
        queries, keys = self.sides(kind)
        return queries.labels, keys.labels

    def word_weights(self, kind: str) -> torch.Tensor:
        """(layers, heads, query words, key words): the attention to a word is the sum over its
        pieces, from a word the mean over its pieces (nmt.alignment.word_attention), so that each
        row still sums to 1."""
        return word_attention(self.weights[kind], *self.sides(kind))


@torch.no_grad()
def attention_maps(translator: Translator, sentence: str, request: SearchRequest | None = None) -> AttentionMaps:
    """Translate `sentence`, then re-run the model once, teacher-forced on its own output, to get weights.

    One full pass rather than the weights of the search itself because the search sees one
    step at a time (and beam search reorders rows); the full pass gives every layer's self-
    and cross-attention over the finished sentence, and equals the step-by-step weights.
    """
    best = translator.translate_detailed([sentence], request)[0][0]
    src_ids, _ = translator.encode_source(translator.model_input(sentence))  # as the search read it
    tgt_ids = [translator.model.config.bos_id, *best.tokens]  # the model's own start token (Marian: <pad>)
    model = translator.model
    src = torch.tensor([src_ids], device=translator.device)  # (1, src_len): one sentence, no padding
    tgt_in = torch.tensor([tgt_ids], device=translator.device)  # (1, tgt_len)
    with translator.engine.autocast():  # bf16: the linear weights are bf16 (nmt.inference.precision)
        encoded = model.encode(src, need_weights=True)
        decoded = model.decode(tgt_in, encoded, need_weights=True)

    def stack(per_layer: list[torch.Tensor]) -> torch.Tensor:
        # per layer (1, heads, queries, keys) -> (layers, heads, queries, keys)
        return torch.stack([w[0] for w in per_layer]).float().cpu()

    weights = {
        "cross_attention": stack(decoded.cross_weights),
        "encoder_self_attention": stack(encoded.self_weights),
        "decoder_self_attention": stack(decoded.self_weights),
    }
    src_pieces, tgt_pieces = translator.src_tokenizer.lookup(src_ids), translator.tgt_tokenizer.lookup(tgt_ids)
    src_words, tgt_words = translator.scorer.words(src_ids, source=True), translator.scorer.words(tgt_ids, source=False)
    return AttentionMaps(sentence, best.text, src_pieces, tgt_pieces, weights, src_words, tgt_words)


def attention_figure(maps: AttentionMaps, kind: str) -> Figure:
    """A layers x heads grid of heatmaps (rows: queries, columns: keys) on one shared colour scale,
    by words: a reader looks for words, not for subword pieces (AttentionMaps.word_weights)."""
    weights = maps.word_weights(kind)  # (layers, heads, query words, key words)
    layers, heads, n_queries, n_keys = weights.shape
    queries, keys = maps.labels(kind)
    # Panels grow with the sentence so that every word keeps a readable row, up to a cap; past
    # it (long inputs) only every `step`-th word is labelled, so the labels never overprint.
    panel_w = min(max(1.8, 0.22 * n_keys + 0.9), MAX_PANEL_INCHES)
    panel_h = min(max(1.8, 0.22 * n_queries + 0.6), MAX_PANEL_INCHES)
    x_step, y_step = math.ceil(n_keys / MAX_LABELS), math.ceil(n_queries / MAX_LABELS)
    fig = Figure(figsize=(panel_w * heads + 1.2, panel_h * layers + 1.0), layout="constrained")
    grid = fig.subplots(layers, heads, squeeze=False)
    vmax = float(weights.max())  # one scale for every panel, so heads can be compared by colour
    for layer in range(layers):
        for head in range(heads):
            ax = grid[layer, head]
            image = ax.imshow(
                weights[layer, head].numpy(),
                cmap="viridis",
                vmin=0.0,
                vmax=vmax,
                aspect="auto",
                interpolation="nearest",
            )
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=9)
            # Word labels on the outer panels only: the columns and rows line up across the grid
            # (and the hundreds of tick labels of a big grid are what makes drawing it slow).
            if layer == layers - 1:
                ax.set_xticks(range(0, n_keys, x_step), keys[::x_step], rotation=90, fontsize=7, fontname=FONT)
            else:
                ax.set_xticks([])
            if head == 0:
                ax.set_yticks(range(0, n_queries, y_step), queries[::y_step], fontsize=7, fontname=FONT)
            else:
                ax.set_yticks([])
            ax.tick_params(length=2)
    query_side = "source" if kind == "encoder_self_attention" else "decoder input"
    key_side = "target" if kind == "decoder_self_attention" else "source"
    fig.supylabel(f"query ({query_side} words)")
    # said once, small: how a word of several pieces got its cells (AttentionMaps.word_weights)
    fig.supxlabel(
        f"key ({key_side} words)\nweight on a word: its pieces' sum; a word's row: its pieces' mean", fontsize=8
    )
    fig.colorbar(image, ax=grid, shrink=min(1.0, 4.0 / layers + 0.3), label="attention weight")
    fig.suptitle(
        f"{ATTENTION_TITLES[kind]}\nsource: {_shorten(maps.source)}\noutput: {_shorten(maps.translation)}",
        fontname=FONT,
    )
    return fig


def plot_attention(
    translator: Translator, sentence: str, out_dir: str | Path, request: SearchRequest | None = None
) -> list[Path]:
    """Translate `sentence` (request None: the model's own search, the sentence `translate` gives) and
    write cross_attention.png, encoder_self_attention.png and decoder_self_attention.png (layers x
    heads heatmaps) into out_dir; returns the paths."""
    maps = attention_maps(translator, sentence, request)
    return [_save(attention_figure(maps, kind), Path(out_dir) / f"{kind}.png") for kind in ATTENTION_KINDS]


# --- positional encoding ---------------------------------------------------------------------
def positional_encoding_figure(
    *, d_model: int = 128, length: int = 100, base: float = 10000.0, layout: str = "interleaved"
) -> Figure:
    """Left: the PE matrix as a heatmap (dimension against position). Right: a few sine dimensions as
    curves, showing that the wavelength grows geometrically from 2*pi to about base * 2*pi.
    layout: where the sines and cosines sit (nmt.model.embedding.sinusoidal_encoding)."""
    if d_model < 2 or length < 1:
        raise ValueError(f"need d_model >= 2 and length >= 1, got {d_model} and {length}")
    pe = sinusoidal_encoding(torch.arange(length), d_model, base, layout).numpy()  # (length, d_model)
    fig = Figure(figsize=(13, 4.8), layout="constrained")
    heat, curves = fig.subplots(1, 2, width_ratios=[1.5, 1])

    # Transposed as in the reference design: position along x, like time, dimension (depth) along y.
    mesh = heat.pcolormesh(pe.T, cmap="RdBu", vmin=-1, vmax=1)
    heat.set_xlabel("position")
    heat.set_ylabel("dimension (depth)")
    where = "even dimensions: sin, odd dimensions: cos" if layout == "interleaved" else "first half: sin, then cos"
    heat.set_title(f"PE(position, dimension), d_model={d_model}, base={base:g}\n{where}")
    fig.colorbar(mesh, ax=heat, label="value")

    # Sine pairs i from none to half of the pairs: wavelength 2*pi / (the pair's frequency).
    pairs = d_model // 2
    inv_freq = 1 / base ** (torch.arange(pairs, dtype=torch.float64) * 2 / d_model)
    if layout == "marian":
        inv_freq = 1 / base ** (torch.arange(pairs, dtype=torch.float64) / max(pairs - 1, 1))
    for i in sorted({min(round(pairs * f), pairs - 1) for f in (0, 1 / 8, 1 / 4, 3 / 8, 1 / 2)}):
        d = 2 * i if layout == "interleaved" else i
        wavelength = 2 * math.pi / float(inv_freq[i])
        curves.plot(range(length), pe[:, d], lw=1.2, label=f"dimension {d} (wavelength {wavelength:.0f})")
    curves.set_xlabel("position")
    curves.set_ylabel("value")
    curves.set_ylim(-1.15, 1.5)
    curves.set_title("sine dimensions as curves")
    curves.legend(fontsize=7, loc="upper right", ncols=2)
    curves.grid(alpha=0.3)
    return fig


def plot_positional_encoding(
    out: str | Path, *, d_model: int = 128, length: int = 100, base: float = 10000.0, layout: str = "interleaved"
) -> Path:
    """Write the sinusoidal positional encoding picture to `out` (PNG); returns its path."""
    return _save(positional_encoding_figure(d_model=d_model, length=length, base=base, layout=layout), out)


def plot_model_positions(model_dir: str | Path, out: str | Path, *, length: int = 100) -> Path:
    """The positional encoding picture of a model directory's own table (its d_model, base and layout)."""
    config = ModelConfig.load(Path(model_dir) / MODEL_CONFIG)
    layout = config.position_layout
    return plot_positional_encoding(
        out, d_model=config.d_model, length=length, base=config.positional_base, layout=layout
    )
