"""A lexical shortlist: the few target pieces a sentence may translate into, so that each decoding
step scores those instead of the whole vocabulary.

    logits = h W_out^T          W_out: (vocab, d_model)  ->  W_out[candidates]: (k, d_model)

The output projection costs d_model x vocab multiply-adds per output token, and the softmax and
the search read every one of its vocab scores: for a student with a shallow decoder that is a
third or more of a decoding step. Most of the vocabulary cannot appear in a given sentence's
translation, so the field's fast CPU systems (Marian's and Bergamot's lexical shortlists,
CTranslate2's vocabulary map) project onto a per-batch candidate set: the likely translations
of each source piece, plus the most frequent target pieces (articles, punctuation, ...). A
sentence gets ~100-500 candidates; a batch projects onto the union of its sentences' (a few
thousand for a batch of a hundred sentences). nmt's engine then masks each sentence's row to its
own candidates, so a translation does not depend on the sentences batched with it; CTranslate2's
vocabulary map scores the whole union for every sentence of its batch. The log-probabilities a
search ranks by are normalised over the candidates; `--scores` still scores over the vocabulary.

Translation probabilities p(t|s) between source and target pieces come from IBM Model 1 (Brown
et al., 1993), estimated by EM on the training pairs' subword ids: t(t|s) is the expected share
of target piece t explained by source piece s, over every alignment of each sentence pair

    E-step:  c(s, t) += t(t|s) / sum_{s' in source + NULL} t(t|s')    for each (s, t) in a pair
    M-step:  t(t|s) = c(s, t) / sum_t' c(s, t')

A few iterations over sparse (s, t) co-occurrences suffice (Model 1's log-likelihood is concave:
EM climbs to its maximum from a uniform start); no aligner is needed for a table of candidates.
Memory grows with the (source x target) grid cells of the pairs estimated on, so a large corpus
is estimated on a random sample of pairs of at most `max_cells` cells (about 50 bytes each).
Each source piece keeps its `per_source` likeliest target pieces. With a joint vocabulary a
sentence's own pieces are candidates too, so names and numbers can be copied.

    shortlist = build_shortlist(pairs, src_tokenizer, tgt_tokenizer)   # pairs of id lists
    shortlist.save(model_dir / SHORTLIST)
    ids = shortlist.candidates(batch_ids)       # sorted target ids a batch's search may emit
    each = [shortlist.candidates([s]) for s in batch_ids]   # each sentence's own
"""

from __future__ import annotations

import hashlib
import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from ..files import atomic_write
from ..tokenizer import SubwordTokenizer, load_tokenizers
from .choices import SHORTLIST_FREQUENT, SHORTLIST_PER_SOURCE

SHORTLIST = "shortlist.safetensors"  # in a model directory
VOCABULARY_MAP = "vmap.txt"  # in a CTranslate2 export: the same shortlist, in CTranslate2's format
# (source + NULL) x target grid cells Model 1 is estimated on at most: ~1 GB (Multi30k's train has 7M)
MAX_CELLS = 20_000_000

log = logging.getLogger(__name__)


class ShortlistError(ValueError):
    """A shortlist that does not belong to the model's vocabulary, or a file that is not one."""


def vocabulary_fingerprint(tokenizer: SubwordTokenizer) -> str:
    """sha256 of a tokenizer's pieces in id order: what a shortlist's ids mean."""
    pieces = tokenizer.lookup(list(range(tokenizer.vocab_size)))
    return hashlib.sha256("\n".join(pieces).encode()).hexdigest()


@dataclass(frozen=True)
class LexicalShortlist:
    """Candidate target ids per source id, and those every sentence gets."""

    table: torch.Tensor  # (src_vocab, per_source) int32: each source id's likeliest target ids, -1 padded
    always: torch.Tensor  # (n,) int32: the most frequent target ids and the special ids
    copy_source: bool  # a joint vocabulary: a sentence's own source ids are candidates too
    src_fingerprint: str
    tgt_fingerprint: str
    tgt_vocab_size: int

    def candidates(self, sources: Sequence[Sequence[int]]) -> torch.Tensor:
        """The sorted target ids a batch of source id lists may translate into: (k,) int64."""
        return self.marks(sources).any(dim=0).nonzero().squeeze(1)

    def restrict(
        self, sources: Sequence[Sequence[int]], least: int = 1
    ) -> tuple[torch.Tensor, torch.Tensor] | tuple[None, None]:
        """A batch's search vocabulary: the union of its sentences' candidates (k,), projected onto once
        per step, and (batch, k) bool, which of them each sentence may emit.

        Beam search ranks 2 x beam tokens per beam: a sentence with fewer than `least` candidates
        may emit the whole union, and a union smaller than that is no restriction (None, None).
        """
        marks = self.marks(sources)  # (batch, vocab)
        union = marks.any(dim=0).nonzero().squeeze(1)  # (k,) sorted
        if union.numel() < least:
            return None, None
        allowed = marks[:, union]  # (batch, k)
        allowed[allowed.sum(dim=1) < least] = True
        return union, allowed

    def marks(self, sources: Sequence[Sequence[int]]) -> torch.Tensor:
        """(batch, tgt_vocab) bool: each source id list's candidate target ids."""
        vocab = outside = self.tgt_vocab_size  # one column past the vocabulary stands for "none"
        src = _padded([list(s) for s in sources])  # (batch, src_len), -1 padded
        known = (src >= 0) & (src < self.table.size(0))  # (batch, src_len)
        rows = self.table[src.clamp(0, self.table.size(0) - 1)].long()  # (batch, src_len, per_source)
        rows[~known] = -1
        ids = rows.flatten(1)
        ids[ids < 0] = outside
        marks = torch.zeros(len(sources), vocab + 1, dtype=torch.bool)
        marks.scatter_(1, ids, True)
        marks[:, self.always.long()] = True
        if self.copy_source:  # a joint vocabulary: the source's own pieces may be copied
            copied = src.masked_fill(~known | (src >= vocab), outside)
            marks.scatter_(1, copied, True)
        return marks[:, :vocab]

    def check_fits(self, src_tokenizer: SubwordTokenizer, tgt_tokenizer: SubwordTokenizer, where: str) -> None:
        """Raise ShortlistError unless this shortlist was built for these tokenizers' vocabularies."""
        for side, mine, tokenizer in (
            ("source", self.src_fingerprint, src_tokenizer),
            ("target", self.tgt_fingerprint, tgt_tokenizer),
        ):
            theirs = vocabulary_fingerprint(tokenizer)
            if mine != theirs:
                raise ShortlistError(
                    f"{where} was built for another vocabulary (its {side} vocabulary sha256 {mine[:12]}, the "
                    f"model's {theirs[:12]}): build it again with `nmt shortlist`, or translate with --no-shortlist"
                )

    def save(self, path: str | Path) -> None:
        """Write the shortlist as one safetensors file, atomically."""
        tensors = {"table": self.table.contiguous(), "always": self.always.contiguous()}
        metadata = {
            "copy_source": str(self.copy_source),
            "src_fingerprint": self.src_fingerprint,
            "tgt_fingerprint": self.tgt_fingerprint,
            "tgt_vocab_size": str(self.tgt_vocab_size),
        }
        atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=metadata))

    @classmethod
    def load(cls, path: str | Path) -> LexicalShortlist:
        """Read a shortlist file; ShortlistError, naming it, if it is not one."""
        path = Path(path)
        try:
            with safe_open(str(path), framework="pt") as f:
                metadata = f.metadata() or {}
            tensors = load_file(str(path))
            table, always = tensors["table"], tensors["always"]
            shortlist = cls(
                table=table,
                always=always,
                copy_source=metadata["copy_source"] == "True",
                src_fingerprint=metadata["src_fingerprint"],
                tgt_fingerprint=metadata["tgt_fingerprint"],
                tgt_vocab_size=int(metadata["tgt_vocab_size"]),
            )
        except (OSError, SafetensorError, KeyError, ValueError) as err:
            raise ShortlistError(f"{path}: not a readable shortlist ({type(err).__name__}: {err})") from None
        integers = (torch.int32, torch.int64)
        shapes = table.dim() == 2 and always.dim() == 1 and table.dtype in integers and always.dtype in integers
        vocab = shortlist.tgt_vocab_size
        in_range = all(
            t.numel() == 0 or (int(t.min()) >= low and int(t.max()) < vocab) for t, low in ((table, -1), (always, 0))
        )
        if not (shapes and in_range):
            raise ShortlistError(f"{path}: not a shortlist (its tables have the wrong shape, type or ids)")
        return shortlist

    def vocabulary_map(self, src_pieces: Sequence[str], tgt_pieces: Sequence[str]) -> str:
        """The shortlist in CTranslate2's vocabulary-map format: `source piece<TAB>target pieces`
        per line, and a line with an empty key for the pieces every sentence gets."""

        # CTranslate2 splits a line on its tab and each side on spaces (n-grams, candidates): a piece
        # holding white space (or nothing) cannot be written, so it is left out (as key or candidate)
        def writable(piece: str) -> bool:
            return bool(piece) and not any(c.isspace() for c in piece)

        lines = ["\t" + " ".join(tgt_pieces[i] for i in self.always.tolist() if writable(tgt_pieces[i]))]
        for s, row in enumerate(self.table.tolist()):
            targets = [t for t in row if t >= 0]
            if self.copy_source and s < self.tgt_vocab_size:
                targets.append(s)
            targets = [tgt_pieces[t] for t in targets if writable(tgt_pieces[t])]
            if targets and writable(src_pieces[s]):
                lines.append(src_pieces[s] + "\t" + " ".join(targets))
        return "\n".join(lines) + "\n"


def model_shortlist(
    model_dir: Path, src_tokenizer: SubwordTokenizer, tgt_tokenizer: SubwordTokenizer
) -> LexicalShortlist | None:
    """The model directory's shortlist, checked against its tokenizers (ShortlistError if it does
    not fit them), or None where it has none."""
    path = model_dir / SHORTLIST
    if not path.is_file():
        return None
    shortlist = LexicalShortlist.load(path)
    shortlist.check_fits(src_tokenizer, tgt_tokenizer, str(path))
    return shortlist


def model1_probabilities(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    src_vocab: int,
    tgt_vocab: int,
    *,
    iterations: int = 5,
    chunk: int = 2048,
    max_cells: int = MAX_CELLS,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """IBM Model 1 translation probabilities t(t|s) of the (s, t) pairs that co-occur in `pairs`.

    pairs: (source ids, target ids) without specials. Source id `src_vocab` is NULL (a target
    piece explained by no source piece). Returns (src, tgt, prob): three (P,) tensors, one entry
    per co-occurring pair of ids. Where the pairs' grids hold more than `max_cells` cells, a
    seeded random sample of the pairs that fits is estimated on.
    """
    pairs = sample_pairs(pairs, max_cells, seed)
    keys, groups, offset = [], [], 0
    for start in range(0, len(pairs), chunk):  # the (source x target) grids, a chunk of sentences at a time
        block = pairs[start : start + chunk]
        src = _padded([[*s, src_vocab] for s, _ in block])  # (n, src_len + 1), NULL last
        tgt = _padded([list(t) for _, t in block])  # (n, tgt_len)
        grid = src.unsqueeze(2) * tgt_vocab + tgt.unsqueeze(1)  # (n, src_len + 1, tgt_len)
        valid = (src >= 0).unsqueeze(2) & (tgt >= 0).unsqueeze(1)
        # every target position of the whole corpus is one group: its source positions compete for it
        position = torch.arange(tgt.numel()).view_as(tgt) + offset  # (n, tgt_len)
        keys.append(grid[valid])
        groups.append(position.unsqueeze(1).expand_as(grid)[valid])
        offset += tgt.numel()
    key, group = torch.cat(keys), torch.cat(groups)  # (N,) one entry per (source position, target position)
    pair_keys, pair = torch.unique(key, return_inverse=True)  # (P,) distinct (s, t); (N,) which one
    pair_src = pair_keys // tgt_vocab
    prob = torch.ones(pair_keys.numel(), dtype=torch.float64)  # uniform start: posteriors are uniform
    for _ in range(iterations):
        weight = prob[pair]  # (N,)
        total = torch.zeros(offset, dtype=torch.float64).index_add_(0, group, weight)  # (positions,)
        counts = torch.zeros_like(prob).index_add_(0, pair, weight / total[group])  # E-step
        per_src = torch.zeros(src_vocab + 1, dtype=torch.float64).index_add_(0, pair_src, counts)
        prob = counts / per_src[pair_src]  # M-step
    return pair_src, pair_keys % tgt_vocab, prob


def sample_pairs(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]], max_cells: int, seed: int = 0
) -> Sequence[tuple[Sequence[int], Sequence[int]]]:
    """`pairs`, or a seeded random sample of them whose (source + NULL) x target grids fit `max_cells`."""
    cells = [(len(s) + 1) * len(t) for s, t in pairs]
    if sum(cells) <= max_cells:
        return pairs
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(seed)).tolist()
    kept, total = [], 0
    for i in order:
        if total + cells[i] > max_cells:
            continue
        kept.append(i)
        total += cells[i]
    log.info(
        "word translation probabilities from %d of %d pairs (their grids fit %d cells)",
        len(kept),
        len(pairs),
        max_cells,
    )
    return [pairs[i] for i in sorted(kept)]


def _padded(rows: list[list[int]]) -> torch.Tensor:
    width = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), width), -1, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def build_shortlist(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    src_tokenizer: SubwordTokenizer,
    tgt_tokenizer: SubwordTokenizer,
    *,
    per_source: int = SHORTLIST_PER_SOURCE,
    frequent: int = SHORTLIST_FREQUENT,
    min_probability: float = 1e-3,
    iterations: int = 5,
    max_cells: int = MAX_CELLS,
) -> LexicalShortlist:
    """A shortlist from training pairs of id lists (specials left out).

    Every sentence gets the `frequent` most common target ids and the end, unknown and start ids; each
    source id adds its `per_source` likeliest other target ids by Model 1's t(t|s) (those of at
    least `min_probability`).
    """
    src_vocab, tgt_vocab = src_tokenizer.vocab_size, tgt_tokenizer.vocab_size
    pair_src, pair_tgt, prob = model1_probabilities(
        pairs, src_vocab, tgt_vocab, iterations=iterations, max_cells=max_cells
    )
    counts = torch.bincount(torch.tensor([t for _, ts in pairs for t in ts], dtype=torch.long), minlength=tgt_vocab)
    common = torch.argsort(counts, descending=True, stable=True)[:frequent]
    common = common[counts[common] > 0]
    # the ids CTranslate2's vocabulary map adds to every batch, so both engines search the same set
    specials = torch.tensor([tgt_tokenizer.eos_id, tgt_tokenizer.unk_id, tgt_tokenizer.start_id], dtype=torch.long)
    always = torch.unique(torch.cat([common, specials]))
    # NULL's row is not a source piece's; a row need not list what every sentence gets anyway
    keep = (pair_src < src_vocab) & (prob >= min_probability) & ~torch.isin(pair_tgt, always)
    pair_src, pair_tgt, prob = pair_src[keep], pair_tgt[keep], prob[keep]
    order = torch.argsort(prob, descending=True, stable=True)
    order = order[torch.argsort(pair_src[order], stable=True)]  # by source id, likeliest first within each
    pair_src, pair_tgt = pair_src[order], pair_tgt[order]
    first = torch.searchsorted(pair_src, pair_src, side="left")  # where each source id's run starts
    rank = torch.arange(pair_src.numel()) - first
    kept = rank < per_source
    table = torch.full((src_vocab, per_source), -1, dtype=torch.int32)
    table[pair_src[kept], rank[kept]] = pair_tgt[kept].int()
    src_fingerprint, tgt_fingerprint = vocabulary_fingerprint(src_tokenizer), vocabulary_fingerprint(tgt_tokenizer)
    return LexicalShortlist(
        table=table,
        always=always.int(),
        copy_source=src_fingerprint == tgt_fingerprint,
        src_fingerprint=src_fingerprint,
        tgt_fingerprint=tgt_fingerprint,
        tgt_vocab_size=tgt_vocab,
    )


def build_model_shortlist(
    model_dir: str | Path,
    pairs: Sequence[tuple[str, str]],
    *,
    per_source: int = SHORTLIST_PER_SOURCE,
    frequent: int = SHORTLIST_FREQUENT,
) -> tuple[Path, str]:
    """Build `model_dir`'s shortlist from training pairs of text, with its own tokenizers, and write it.

    Returns the file and a one-line summary (how many candidates a median sentence gets).
    """
    model_dir = Path(model_dir)
    src_tok, tgt_tok = load_tokenizers(model_dir)
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    ids = list(
        zip(
            src_tok.encode_batch(sources, add_special=False),
            tgt_tok.encode_batch(targets, add_special=False),
            strict=True,
        )
    )
    shortlist = build_shortlist(ids, src_tok, tgt_tok, per_source=per_source, frequent=frequent)
    path = model_dir / SHORTLIST
    shortlist.save(path)
    sample = [s for s, _ in ids[:: max(1, len(ids) // 500)]]
    per_sentence = statistics.median(len(shortlist.candidates([s])) for s in sample)
    summary = (
        f"a median training sentence gets {per_sentence:.0f} candidates of {tgt_tok.vocab_size:,} target pieces "
        f"({shortlist.always.numel()} of them every sentence)"
    )
    return path, summary


__all__ = [
    "MAX_CELLS",
    "SHORTLIST",
    "VOCABULARY_MAP",
    "LexicalShortlist",
    "ShortlistError",
    "build_model_shortlist",
    "build_shortlist",
    "model1_probabilities",
    "model_shortlist",
    "vocabulary_fingerprint",
]
