"""Beam search that must produce given token sequences: terminology constraints.

Dynamic beam allocation (Post and Vilar 2018): at each step the candidates are the beam's usual best
continuations, each row's best token, and, for each row, the tokens that would advance a constraint
it has not met (the next token of the one it is in the middle of, or the first of any other). The
beam is then shared out in "banks" by how many constraint tokens a candidate has produced, so that
hypotheses which have placed a term are not crowded out by ones that put it off, and none can end
before every constraint is met. A partial match that the next token leaves is undone: a term's
tokens count only once it is whole.

A term is never pasted after the sentence: where the model's own best next token is the end, the
sentence is over for it, so a constraint met after that point counts as missed ("on the beach.
seaside."), and the hypothesis may end there too, its terms missed. Where no hypothesis places
every term within the sentence, the best of those that missed the fewest wins, which is then
usually the model's own sentence without the term (the caller is told which were missed).

One sentence at a time: each sentence has its own constraints. The beam is widened to one bank per
constraint token plus one (up to `max_beam`), which is the bound on its cost. A sentence whose
constraints cannot all be met within its length limit gets the hypothesis that met the most.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import torch

from nmt.model import Transformer

from .hypothesis import Hypothesis
from .penalties import SearchLimits
from .state import SearchState

# A constraint is a sequence of positions, each the set of tokens that may stand there: a term's last
# piece may also be written merged with the punctuation after it ("▁dog" or "▁dog." in a vocabulary
# learnt from sentences ending in "dog."), which the term is then met by too.
Constraints = Sequence[Sequence[frozenset[int]]]


def as_constraints(constraints: Sequence[Sequence[int | Collection[int]]]) -> list[list[frozenset[int]]]:
    """Each position as a set of tokens (a plain id: that token only); empty constraints dropped."""
    return [[frozenset([p]) if isinstance(p, int) else frozenset(p) for p in c] for c in constraints if len(c) > 0]


@dataclass(frozen=True)
class Progress:
    """What a hypothesis has of its constraints: those met whole, and every partial match it is in
    (constraint index, tokens done): terms may share their first tokens ("European Union", "European
    Court"), and a term may restart inside itself, so all partial matches are followed at once."""

    met: frozenset[int] = frozenset()
    partial: frozenset[tuple[int, int]] = frozenset()
    past_end: bool = False  # went on where the model would have ended the sentence
    outside: frozenset[int] = frozenset()  # constraints met only after that point: not placed

    def advance(self, token: int, constraints: Constraints, *, past_end: bool = False) -> Progress:
        """The progress after appending `token` (`past_end`: instead of the model's own end)."""
        grown = {(i, done + 1) for i, done in self.partial if token in constraints[i][done]}
        grown |= {(i, 1) for i, tokens in enumerate(constraints) if i not in self.met and token in tokens[0]}
        met = self.met | {i for i, done in grown if done == len(constraints[i])}
        past_end = self.past_end or past_end
        outside = self.outside | (met - self.met if past_end else frozenset())
        return Progress(met, frozenset((i, done) for i, done in grown if i not in met), past_end, outside)

    def missed(self, constraints: Constraints) -> list[int]:
        """The constraints not placed within the sentence: not met, or met after its end."""
        return sorted((set(range(len(constraints))) - self.met) | self.outside)

    def tokens_met(self, constraints: Constraints) -> int:
        """Constraint tokens produced: those of the met constraints and of the longest partial match."""
        return sum(len(constraints[i]) for i in self.met) + max((done for _, done in self.partial), default=0)

    def wanted(self, constraints: Constraints) -> set[int]:
        """The tokens that would advance a constraint from here: each partial match's next token and
        the first token of every constraint not met."""
        tokens = set().union(*(constraints[i][done] for i, done in self.partial))
        return tokens.union(*(c[0] for i, c in enumerate(constraints) if i not in self.met))


@dataclass
class ConstrainedResult:
    """The n best hypotheses and, for the best, the constraints (indices) it did not produce."""

    hypotheses: list[Hypothesis]
    missed: list[int]


@torch.no_grad()
def constrained_beam_search(
    model: Transformer,
    src: torch.Tensor,
    constraints: Sequence[Sequence[int | Collection[int]]],
    *,
    beam_size: int = 5,
    n_best: int = 1,
    length_penalty: float = 0.6,
    length_normalization: str = "gnmt",
    limits: SearchLimits = SearchLimits(),
    max_beam: int = 32,
) -> ConstrainedResult:
    """Beam search over one sentence, src (1, src_len), whose output must contain every constraint
    (a non-empty list of target ids, without BOS/EOS; a position may be a set of ids, any of which
    meets it); see the module's docstring."""
    constraints = as_constraints(constraints)
    total = sum(len(c) for c in constraints)
    beam = min(max(beam_size, total + 1, n_best), max(max_beam, beam_size, n_best))
    state = SearchState.start(model, src, limits=limits)
    eos = state.eos_id
    max_steps = int(limits.max_steps(state.src_lengths)[0])
    scores = torch.zeros(1, device=src.device)  # (rows,) running log-probs
    progress = [Progress()]
    finished: list[tuple[Hypothesis, list[int]]] = []  # (hypothesis, constraints missed)
    for step_index in range(max_steps):
        step = state.next_step()
        totals = scores.unsqueeze(1) + step.log_probs  # (rows, vocab)
        last = step_index == max_steps - 1
        row_best = totals.argmax(dim=1).tolist()  # each row's best next token (its running score shifts all alike)
        candidates = _candidates(totals, row_best, progress, constraints, beam)
        would_end = [token == eos for token in row_best]  # the model's own end of the sentence
        # Ending: EOS where every constraint is met or the model ends; at the length limit, whatever is reached.
        ending, going = [], []
        for row, token in candidates:
            after = progress[row].advance(token, constraints, past_end=would_end[row] and token != eos)
            if token == eos:
                if len(progress[row].met) == len(constraints) or would_end[row]:
                    ending.append((row, token, after))
            elif last:
                ending.append((row, token, after))
            else:
                going.append((row, token, after))
        for row, token, after in ending:
            rows_t, tokens_t = torch.tensor([row], device=src.device), torch.tensor([token], device=src.device)
            hyp = state.finish(
                step,
                rows_t,
                tokens_t,
                totals[row, token].reshape(1),
                alpha=length_penalty,
                normalization=length_normalization,
            )[0]
            finished.append((hyp, after.missed(constraints)))
        complete = [f for f in finished if not f[1]]
        if last or len(complete) >= beam or not going:
            break
        chosen = _allocate(going, totals, constraints, beam)
        rows = torch.tensor([row for row, _, _ in chosen], device=src.device)
        tokens = torch.tensor([token for _, token, _ in chosen], device=src.device)
        scores = totals[rows, tokens]
        progress = [after for _, _, after in chosen]
        state.advance(step, tokens, rows)
    if not finished:  # no step could be taken (max_steps 0 is refused by SearchLimits): nothing found
        return ConstrainedResult([], list(range(len(constraints))))
    finished.sort(key=lambda f: (len(f[1]), -f[0].score))  # fewest constraints missed, then best score
    fewest = len(finished[0][1])
    ranked = [h for h, missed in finished if len(missed) == fewest][:n_best]
    return ConstrainedResult(ranked, finished[0][1])


def _candidates(
    totals: torch.Tensor, row_best: list[int], progress: list[Progress], constraints: Constraints, beam: int
) -> list[tuple[int, int]]:
    """(row, token) candidates: the best `beam` overall, each row's best, and each row's constraint tokens."""
    rows, vocab = totals.shape
    found: set[tuple[int, int]] = set()
    k = min(beam, rows * vocab)
    for flat in totals.reshape(-1).topk(k).indices.tolist():
        found.add((flat // vocab, flat % vocab))
    found.update(enumerate(row_best))
    for row, p in enumerate(progress):
        for token in p.wanted(constraints):
            found.add((row, token))
    return [c for c in found if torch.isfinite(totals[c])]


def _allocate(
    going: list[tuple[int, int, Progress]], totals: torch.Tensor, constraints: Constraints, beam: int
) -> list[tuple[int, int, Progress]]:
    """`beam` candidates, shared out in banks by constraint tokens met (most first), each bank's best
    by score; slots a bank cannot fill go to the best of the rest."""
    banks: dict[int, list[tuple[float, tuple[int, int, Progress]]]] = {}
    for candidate in going:
        row, token, after = candidate
        banks.setdefault(after.tokens_met(constraints), []).append((float(totals[row, token]), candidate))
    for bank in banks.values():
        bank.sort(key=lambda item: -item[0])
    size = max(1, beam // (sum(len(c) for c in constraints) + 1))
    chosen = []
    for met in sorted(banks, reverse=True):
        chosen += [c for _, c in banks[met][:size]]
    rest = sorted((item for bank in banks.values() for item in bank[size:]), key=lambda item: -item[0])
    chosen += [c for _, c in rest[: max(0, beam - len(chosen))]]
    return chosen[:beam]
