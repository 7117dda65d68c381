"""Models for the decoding tests: a scripted fake with known answers, and a tiny real one.

Search only calls encode / new_cache / decode / logits and reorders the cache, so a
stand-in that implements those can script exact next-token distributions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.decoding import SearchLimits
from nmt.model import Decoded, Encoded, ModelConfig, Transformer, padding_mask

PAD, UNK, BOS, EOS = 0, 1, 2, 3
A, B, C = 4, 5, 6  # the scripted model's ordinary tokens


@dataclass
class ScriptedCache:
    """Remembers the fed target tokens (the only state the scripted model needs)."""

    tokens: torch.Tensor  # (batch, steps)
    length: int = 0

    def reorder(self, order: torch.Tensor) -> None:
        self.tokens = self.tokens[order]

    def select_sentences(self, sentences: torch.Tensor) -> None:
        pass  # the scripted model ignores the source


class ScriptedModel:
    """Next-token probabilities looked up by output prefix (no BOS), whatever the source.

    table: {(token, ...): {token: probability}}; an unlisted prefix puts all mass on EOS.
    The "decoder states" are already the log-probabilities, and logits() is the identity.
    """

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], vocab_size: int = 8):
        self.table, self.vocab_size = table, vocab_size
        self.config = ModelConfig(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size)  # the special-token ids

    def log_probs(self, prefix: tuple[int, ...]) -> torch.Tensor:
        probs = torch.zeros(self.vocab_size)
        for token, p in self.table.get(prefix, {EOS: 1.0}).items():
            probs[token] = p
        return probs.log()

    def sequence_log_prob(self, tokens: list[int], ended: bool = True) -> float:
        """log P(tokens [+ EOS]) according to the table."""
        targets = tokens + [EOS] if ended else tokens
        return sum(self.log_probs(tuple(targets[:j]))[t].item() for j, t in enumerate(targets))

    def encode(self, src: torch.Tensor, need_weights: bool = False) -> Encoded:
        return Encoded(torch.zeros(src.size(0), src.size(1), 1), padding_mask(src, PAD))

    def new_cache(self, encoded: Encoded) -> ScriptedCache:
        return ScriptedCache(torch.zeros(encoded.memory.size(0), 0, dtype=torch.long))

    def decode(
        self, tgt_in: torch.Tensor, encoded: Encoded, *, cache: ScriptedCache | None = None, need_weights: bool = False
    ) -> Decoded:
        full = tgt_in
        if cache is not None:
            full = cache.tokens = torch.cat([cache.tokens, tgt_in], dim=1)
            cache.length += tgt_in.size(1)
        self.fed_first = int(full[0, 0])  # the start token the search chose
        start = full.size(1) - tgt_in.size(1)
        rows = [[self.log_probs(tuple(row[1 : j + 1])) for j in range(start, len(row))] for row in full.tolist()]
        return Decoded(torch.stack([torch.stack(r) for r in rows]))  # (batch, new_len, vocab)

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        return states


# Greedy takes A (0.6) then must end: P(A EOS) = 0.24. Beam 2 keeps B and finds B EOS = 0.36.
GREEDY_TRAP = {(): {A: 0.6, B: 0.4}, (A,): {EOS: 0.4, A: 0.3, B: 0.3}, (B,): {EOS: 0.9, A: 0.05, B: 0.05}}

# The empty output (EOS at once, log 0.5 = -0.69) beats A A EOS (log 0.4275 = -0.85) on
# plain log-prob, but with alpha=1 A A EOS scores -0.85 / (8/6) = -0.64 and wins.
LENGTH_TRADE = {(): {EOS: 0.5, A: 0.5}, (A,): {A: 0.95, B: 0.05}, (A, A): {EOS: 0.9, A: 0.1}, (A, B): {EOS: 1.0}}


class EosBiased:
    """A real Transformer with `bias` added to the EOS logit, so random weights end some outputs."""

    def __init__(self, model: Transformer, bias: float):
        self.model, self.bias = model, bias
        self.config = model.config

    def parameters(self):
        return self.model.parameters()

    def encode(self, src, need_weights=False):
        return self.model.encode(src, need_weights)

    def new_cache(self, encoded):
        return self.model.new_cache(encoded)

    def decode(self, tgt_in, encoded, *, cache=None, need_weights=False):
        return self.model.decode(tgt_in, encoded, cache=cache, need_weights=need_weights)

    def logits(self, states):
        shift = torch.zeros(self.model.config.tgt_vocab_size)
        shift[EOS] = self.bias
        return self.model.logits(states) + shift


def tiny_config(**changes) -> ModelConfig:
    """The tests' tiny Transformer: 2+2 layers, d_model 32, a 24-token vocabulary (and `changes`)."""
    sizes = dict(src_vocab_size=24, tgt_vocab_size=24, encoder_layers=2, decoder_layers=2, d_model=32)
    return ModelConfig(**sizes, num_heads=4, d_ff=64, dropout=0.0, **changes)


def tiny_model(seed: int = 2, eos_bias: float = 2.5) -> EosBiased:
    """A seeded random 2+2-layer model; with these defaults and `source_batch(LENGTHS)` under
    LIMITS, some outputs end with EOS at different lengths and some hit the limit."""
    torch.manual_seed(seed)
    return EosBiased(Transformer(tiny_config()).eval(), eos_bias)


LENGTHS = [2, 3, 4, 5, 6, 7, 8, 9]  # source lengths of the standard test batch (2 = just BOS EOS)
LIMITS = SearchLimits(max_len_a=1.0, max_len_b=2)  # allows len(source) + 2 steps


def source_batch(lengths: list[int] = LENGTHS, seed: int = 1, vocab: int = 24) -> torch.Tensor:
    """Right-padded sources [BOS, w..., EOS] of the given total lengths."""
    g = torch.Generator().manual_seed(seed)
    src = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for i, n in enumerate(lengths):
        words = torch.randint(4, vocab, (n - 2,), generator=g)
        src[i, :n] = torch.cat([torch.tensor([BOS]), words, torch.tensor([EOS])])
    return src


@torch.no_grad()
def teacher_forced_log_prob(model, src_row: torch.Tensor, tokens: list[int], ended: bool) -> float:
    """Sum of the model's log-softmax over the tokens a search may emit (all but PAD) at each output
    token (and EOS if ended), in one full forward pass."""
    src_row = src_row[src_row != PAD].unsqueeze(0)
    targets = tokens + [EOS] if ended else tokens
    tgt_in = torch.tensor([[BOS] + tokens])
    states = model.decode(tgt_in, model.encode(src_row)).states
    logits = model.logits(states)[0]
    logits[:, PAD] = float("-inf")
    log_probs = logits.log_softmax(dim=-1)[: len(targets)]  # (len(targets), vocab)
    return log_probs[torch.arange(len(targets)), torch.tensor(targets)].sum().item()


def ended(tokens: list[int], src_row: torch.Tensor) -> bool:
    """Whether an output stopped at EOS rather than at the LIMITS limit."""
    return len(tokens) < int((src_row != PAD).sum()) + LIMITS.max_len_b
