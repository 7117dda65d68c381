"""Beam search: keep the `beam_size` best prefixes of each sentence at every step.

Two parts, as in fairseq: `beam_step` is the pure search rule (best continuations over
beam x vocab), and `beam_search` is the loop that calls the model, collects finished
hypotheses, reorders the KV cache and drops finished sentences from the batch.

Scores inside the beam are plain log-prob sums: every live beam of a sentence has the
same length, so a length penalty would not change their order. The penalty is applied
when a hypothesis finishes, where lengths differ.
"""

from __future__ import annotations

import functools

import torch

from nmt.model import Transformer

from . import penalties
from .hypothesis import Hypothesis
from .penalties import SearchLimits
from .ranking import top_tokens
from .state import SearchState, Step


def beam_step(
    beam_scores: torch.Tensor, log_probs: torch.Tensor, num_candidates: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The best `num_candidates` (beam, token) continuations of each sentence, best first.

    beam_scores: (batch, beam) each beam's running log-prob; log_probs: (batch, beam, vocab)
    each next token's log-prob. A candidate scores beam_score + log_prob. Returns (scores,
    beams, tokens), each (batch, num_candidates): the candidate's total score, the beam it
    extends, and the token it appends.

    Two small top-k's instead of one over beam x vocab: a beam's score is a constant
    offset for all its tokens, so the n best candidates overall are among the n best
    tokens of each beam. Ranking (beam x n) totals then picks them exactly, without
    materialising beam_score + log_prob over the whole vocabulary.
    """
    batch, beams, vocab = log_probs.shape
    n = num_candidates
    token_scores, token_ids = top_tokens(log_probs.reshape(batch * beams, vocab), n)  # each beam's best tokens
    token_scores, token_ids = token_scores.view(batch, beams, n), token_ids.view(batch, beams, n)
    totals = (beam_scores.unsqueeze(2) + token_scores).view(batch, beams * n)
    top_scores, flat = totals.topk(n, dim=1)  # (batch, n) over beam * n
    return top_scores, flat // n, token_ids.view(batch, beams * n).gather(1, flat)


def live_positions(is_eos: torch.Tensor, beam_size: int) -> torch.Tensor:
    """(batch, 2 * beam) EOS flags of ranked candidates -> (batch, beam) positions of the best non-EOS ones.

    There are at most `beam` EOS candidates (one per beam), so 2 * beam candidates always
    leave `beam` that go on: an ending hypothesis never starves the live beam.
    """
    num = is_eos.size(1)
    rank = torch.arange(num, device=is_eos.device) + num * is_eos  # push EOS behind every live candidate
    return rank.topk(beam_size, dim=1, largest=False).indices  # ascending: still best first


def ended_candidates(is_eos: torch.Tensor, scores: torch.Tensor, room: torch.Tensor) -> torch.Tensor:
    """Which of the top `beam` candidates finish now: (batch, beam) bool.

    is_eos, scores: (batch, beam) for the best `beam` of the 2 * beam candidates: only those
    would be in a plain beam, so only they may end (as in fairseq). A candidate ends when it
    is EOS, reachable (finite score) and its sentence still has `room` (batch,) for finished
    hypotheses, taken best first.
    """
    ended = is_eos & scores.isfinite()
    return ended & (ended.cumsum(dim=1) <= room.unsqueeze(1))


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    *,
    beam_size: int = 5,
    n_best: int = 1,
    length_penalty: float = 0.6,
    length_normalization: str = "gnmt",
    limits: SearchLimits = SearchLimits(),
    use_cache: bool = True,
    return_attention: bool = False,
    vocabulary: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
    early_stopping: bool = True,
) -> list[list[Hypothesis]]:
    """Translate a batch with beam search; return up to `n_best` hypotheses per sentence, best first.

    model: a Transformer in eval mode. src: (batch, src_len) right-padded source ids.
    length_penalty is GNMT's alpha (see `gnmt_length_penalty`): a finished hypothesis is
    ranked by log_prob / ((5 + length) / 6) ** alpha; 0.6 is the value Wu et al. (2016)
    found best; 0 ranks by plain log-prob. length_normalization "average" divides by
    length ** alpha instead (transformers' rule: with its early_stopping=True, the same search).
    Stopping, early_stopping=True (fairseq's rule, and CTranslate2's, Marian's and transformers'
    early_stopping=True): a sentence is done once it has `beam_size` finished hypotheses, or when
    it reaches its length limit (`limits.max_steps`); there its live beams are finished without
    EOS and ranked with the penalty of their own length. early_stopping=False (transformers'
    default): finished hypotheses keep coming, the best `beam_size` kept, until the best live beam,
    scored as if it ended at its current length, cannot beat the worst of them; at the length
    limit the top `beam_size` candidates all finish (see `_bound_reached`).
    The first step extends one beam per sentence (the empty prefix), so the k beams start
    distinct; the vocabulary needs at least 2 * beam_size tokens.
    limits, use_cache, return_attention, vocabulary and allowed as in `greedy_search`. An empty batch gives [].

    Long (nearly 100 lines) on purpose: one function, read top to bottom as one step of the search.
    The per-sentence tensors (scores, rows, room, max_len, best_finished) change together at every
    step and shrink together when sentences finish; split into helpers, each step would pass them
    all back and forth. The steps that stand alone (beam_step, ended_candidates, live_positions,
    _collect) are functions already.
    """
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"need 1 <= n_best <= beam_size, got n_best={n_best}, beam_size={beam_size}")
    batch, k = src.size(0), beam_size
    if batch == 0:
        return []
    options = dict(use_cache=use_cache, return_attention=return_attention, vocabulary=vocabulary, allowed=allowed)
    state = SearchState.start(model, src, limits=limits, **options)  # one row per sentence until the first step
    max_len = limits.max_steps(state.src_lengths)  # (active,)
    sentence = torch.arange(batch, device=src.device)  # (active,) input position of each sentence
    room = torch.full((batch,), k, device=src.device)  # (active,) finished hypotheses still wanted
    scores = torch.zeros(batch, 1, device=src.device)  # (active, beams): one beam, the empty prefix
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    best_finished = torch.full((batch, k), float("-inf"), device=src.device)  # early_stopping=False's pool

    for step in range(1, int(max_len.max()) + 1):
        beams = scores.size(1)  # 1 at the first step, then k: the k best first tokens are all distinct
        now = state.next_step()
        log_probs = now.log_probs  # (active * beams, vocab)
        cand_scores, cand_beams, cand_tokens = beam_step(
            scores, log_probs.view(-1, beams, log_probs.size(-1)), 2 * k
        )  # (active, 2k)
        cand_rows = cand_beams + beams * torch.arange(sentence.numel(), device=src.device).unsqueeze(1)
        is_eos = cand_tokens == state.eos_id

        # this step's hypotheses that end: into `finished`, ranked under the length penalty
        collect = functools.partial(
            _collect, finished, state, now, sentence, alpha=length_penalty, normalization=length_normalization
        )

        if early_stopping:
            ended = ended_candidates(is_eos[:, :k], cand_scores[:, :k], room)  # (active, k)
            room = room - ended.sum(dim=1)
        else:  # every reachable EOS among the top k ends; at the limit every top-k candidate does
            ended = (is_eos[:, :k] | (max_len <= step).unsqueeze(1)) & cand_scores[:, :k].isfinite()
        collect(ended, cand_rows[:, :k], cand_tokens[:, :k], cand_scores[:, :k])

        live = live_positions(is_eos, k)  # (active, k)
        scores, rows, tokens = cand_scores.gather(1, live), cand_rows.gather(1, live), cand_tokens.gather(1, live)
        if early_stopping:
            capped = (max_len <= step) & (room > 0)  # at the limit and still short of hypotheses: take the live beams
            collect(capped.unsqueeze(1) & scores.isfinite(), rows, tokens, scores)
            done = (room <= 0) | (max_len <= step)  # (active,)
        else:
            penalty = penalties.length_penalty(step, length_penalty, length_normalization)  # each has `step` tokens
            ended_scores = torch.where(ended, cand_scores[:, :k] / penalty, float("-inf"))
            best_finished = torch.cat([best_finished, ended_scores], dim=1).topk(k, dim=1).values
            done = (max_len <= step) | _bound_reached(best_finished, scores[:, 0] / penalty)
        if not done.any():  # beams move only within their sentence: its encoder output stays put
            state.advance(now, tokens.view(-1), rows.view(-1))
            continue
        keep = (~done).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        state.advance(now, tokens[keep].view(-1), rows[keep].view(-1), sentences=keep)  # finished sentences leave
        scores, sentence, room, max_len = scores[keep], sentence[keep], room[keep], max_len[keep]
        best_finished = best_finished[keep]
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:n_best] for hyps in finished]


def _bound_reached(best_finished: torch.Tensor, best_live: torch.Tensor) -> torch.Tensor:
    """transformers' early_stopping=False rule: (active,) whether a sentence is done.

    best_finished: (active, k) the k best finished scores so far (-inf where fewer have finished);
    best_live: (active,) the best live beam's log-prob under the penalty of its current length.
    Done once k have finished and that beam does not beat the worst of them. A heuristic: with a
    length penalty a live beam can still gain by growing, which this bound does not foresee.
    """
    return best_finished[:, -1].isfinite() & (best_live <= best_finished[:, -1])


def _collect(
    finished: list[list[Hypothesis]],
    state: SearchState,
    step: Step,
    sentence: torch.Tensor,
    mask: torch.Tensor,
    rows: torch.Tensor,
    tokens: torch.Tensor,
    scores: torch.Tensor,
    *,
    alpha: float,
    normalization: str,
) -> None:
    """Add the candidates where `mask` (active, n) is True to their sentences' finished lists.

    rows, tokens, scores: (active, n) each candidate's state row, token and total log-prob.
    """
    if not mask.any():
        return
    owners = sentence.unsqueeze(1).expand_as(mask)[mask].tolist()
    hypotheses = state.finish(step, rows[mask], tokens[mask], scores[mask], alpha=alpha, normalization=normalization)
    for owner, hypothesis in zip(owners, hypotheses, strict=True):
        finished[owner].append(hypothesis)
