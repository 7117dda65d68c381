"""SearchLimits.no_repeat_ngram_size: no output repeats an n-gram, by CTranslate2's rule."""

import dataclasses
import math

import pytest
import torch

from nmt.decoding import SearchLimits, beam_search, greedy_search, sample
from nmt.decoding.constrained import constrained_beam_search
from nmt.decoding.logits_rules import NoRepeatNgram
from nmt.decoding.state import SearchState

from fake_model import BOS, EOS, PAD, A, B, C, ScriptedModel, source_batch, tiny_model

LONGER = SearchLimits(max_len_a=1.0, max_len_b=6)  # len(source) + 6 steps: room for the tiny model to loop
BIGRAMS = dataclasses.replace(LONGER, no_repeat_ngram_size=2)


def repeats(tokens: list[int], n: int = 2) -> bool:
    """Whether `tokens` holds some n-gram twice."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


def ctranslate2_banned(sequence: list[int], n: int) -> set[int]:
    """CTranslate2's NoRepeatNgram::apply (src/decoding_utils.cc) for one row, step for step: search
    the sequence for its own last n - 1 tokens (std::search; an empty pattern is found at once) and
    ban the token after each occurrence that leaves room for a whole n-gram."""
    if len(sequence) < n:
        return set()
    pattern, end = sequence[len(sequence) - n + 1 :], len(sequence)
    banned, begin = set(), 0
    while True:
        found = (p for p in range(begin, end - len(pattern) + 1) if sequence[p : p + len(pattern)] == pattern)
        begin = next(found, end)
        if begin + n > end:
            return banned
        banned.add(sequence[begin + n - 1])
        begin += 1


def state_over(prefix: torch.Tensor, n: int, vocabulary: torch.Tensor | None = None) -> SearchState:
    """A SearchState holding just `prefix` (rows, 1 + steps), enough for the n-gram rule."""
    model = ScriptedModel({}, vocab_size=12)
    state = SearchState(
        model, None, None, prefix, torch.ones(prefix.size(0)), limits=SearchLimits(no_repeat_ngram_size=n)
    )
    state.vocabulary = vocabulary
    return state


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("shortlist", [False, True])
def test_the_ban_is_ctranslate2s_rule(n, shortlist):
    # Random outputs over 4 tokens repeat a lot; BOS may be emitted too, and counts only as output.
    g = torch.Generator().manual_seed(n)
    vocabulary = torch.tensor([EOS, 4, 6, 8, 9, 11]) if shortlist else None  # 5 and 7 outside it
    columns = 6 if shortlist else 12
    for steps in range(0, 9):
        output = torch.tensor([BOS, 4, 5, 6, 7, 8])[torch.randint(0, 6, (16, steps), generator=g)]
        if shortlist:  # only shortlist ids can be in an output, BOS among them then
            output = torch.tensor([4, 6, 8, 9])[torch.randint(0, 4, (16, steps), generator=g)]
        prefix = torch.cat([torch.full((16, 1), BOS), output], dim=1)
        logits = torch.zeros(16, columns)
        NoRepeatNgram(n).apply(logits, state_over(prefix, n, vocabulary))
        for row, tokens in zip(logits, output.tolist(), strict=True):
            banned = {int(c) for c in (row == -math.inf).nonzero()}
            want = ctranslate2_banned(tokens, n)
            if shortlist:
                want = {int(torch.searchsorted(vocabulary, t)) for t in want}
            assert banned == want, (tokens, n)
            assert not row[row != -math.inf].any()  # the others untouched


def test_the_end_token_is_never_banned():
    # A row that ended rides along in greedy search until the batch is compacted: its output holds EOS.
    prefix = torch.tensor([[BOS, EOS, A, EOS, B]])
    logits = torch.zeros(1, 12)
    NoRepeatNgram(1).apply(logits, state_over(prefix, 1, None))
    assert (logits[0] == -math.inf).nonzero().squeeze(1).tolist() == [A, B]


# Greedy says A B A B (then ends); with bigrams banned, B after A the second time is gone.
ALTERNATING = {
    (): {A: 1.0},
    (A,): {B: 0.6, C: 0.4},
    (A, B): {A: 0.7, C: 0.3},
    (A, B, A): {B: 0.5, C: 0.3, EOS: 0.2},
    (A, B, A, C): {EOS: 1.0},
}


def test_a_repeated_bigram_is_banned_and_the_rest_renormalised():
    model, src = ScriptedModel(ALTERNATING), torch.tensor([[BOS, 7, EOS]])
    assert greedy_search(model, src, limits=LONGER)[0].tokens == [A, B, A, B]
    (found,) = greedy_search(model, src, limits=BIGRAMS)
    # Step 4 follows A B A: "A B" is in the output, so B may not come; C gets 0.3 / 0.5, EOS 0.2 / 0.5.
    assert found.tokens == [A, B, A, C]
    assert found.log_prob == pytest.approx(math.log(0.6 * 0.7 * 0.6), abs=1e-6)


# The model's first choice is the start token itself, then A, A again, ...
START_THEN_A = {
    (): {BOS: 0.6, A: 0.4},
    (BOS,): {A: 0.5, BOS: 0.3, EOS: 0.2},
    (BOS, A): {A: 0.5, B: 0.3, EOS: 0.2},
    (BOS, A, B): {A: 0.4, C: 0.35, EOS: 0.25},
}


def test_unigrams_ban_every_token_emitted_but_not_the_start_token():
    # The start token is fed, not emitted: CTranslate2 does not count it, so BOS may come at step 1.
    # Then each token emitted is gone: BOS at step 2, BOS and A at step 3, BOS, A and B at step 4.
    model, src = ScriptedModel(START_THEN_A), torch.tensor([[BOS, 7, EOS]])
    (found,) = greedy_search(model, src, limits=SearchLimits(no_repeat_ngram_size=1))
    assert found.tokens == [BOS, A, B, C]
    assert found.log_prob == pytest.approx(math.log(0.6 * (0.5 / 0.7) * (0.3 / 0.5) * (0.35 / 0.6)), abs=1e-6)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_no_output_repeats_a_bigram_of_a_real_model(search):
    model, src = tiny_model(), source_batch()

    def run(limits, **options):
        if search == "greedy":
            return [[h] for h in greedy_search(model, src, limits=limits, **options)]
        return beam_search(model, src, beam_size=3, n_best=3, limits=limits, **options)

    plain = run(LONGER)
    assert any(repeats(h.tokens) for hyps in plain for h in hyps)  # the tiny model loops: the rule has work to do
    found = run(BIGRAMS)
    assert all(not repeats(h.tokens) for hyps in found for h in hyps)
    assert [[h.tokens for h in hyps] for hyps in found] != [[h.tokens for h in hyps] for hyps in plain]
    uncached = run(BIGRAMS, use_cache=False)
    assert [[h.tokens for h in hyps] for hyps in uncached] == [[h.tokens for h in hyps] for hyps in found]
    for a, b in zip(uncached, found, strict=True):
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.parametrize("n", [1, 3])
def test_other_sizes_hold_too(n):
    model, src = tiny_model(), source_batch()
    limits = dataclasses.replace(LONGER, no_repeat_ngram_size=n)
    for hyps in beam_search(model, src, beam_size=3, n_best=3, limits=limits):
        assert all(not repeats(h.tokens, n) for h in hyps)


def test_size_0_is_the_plain_search_and_costs_nothing(monkeypatch):
    model, src = tiny_model(), source_batch()
    plain_greedy = greedy_search(model, src, limits=LONGER)
    plain_beam = beam_search(model, src, beam_size=3, n_best=3, limits=LONGER)

    def never(self, logits, state):
        raise AssertionError("no_repeat_ngram_size 0 must not look for n-grams")

    monkeypatch.setattr(NoRepeatNgram, "apply", never)
    assert SearchLimits().no_repeat_ngram_size == 0
    zero = dataclasses.replace(LONGER, no_repeat_ngram_size=0)
    assert [(h.tokens, h.score) for h in greedy_search(model, src, limits=zero)] == [
        (h.tokens, h.score) for h in plain_greedy
    ]
    found = beam_search(model, src, beam_size=3, n_best=3, limits=zero)
    assert [[(h.tokens, h.score) for h in hyps] for hyps in found] == [
        [(h.tokens, h.score) for h in hyps] for hyps in plain_beam
    ]


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_the_rule_holds_within_a_shortlist(search):
    model, src = tiny_model().model, source_batch()  # the Transformer itself: a shortlist needs its output layer
    shortlist = torch.tensor([BOS, EOS, 5, 6, 7, 10, 16, 17])  # the tiny model's favourite tokens, and a few others
    every = torch.tensor([i for i in range(24) if i != PAD])

    def run(limits, source=src, **options):
        if search == "greedy":
            return [[h] for h in greedy_search(model, source, limits=limits, **options)]
        return beam_search(model, source, beam_size=2, n_best=2, limits=limits, **options)

    assert any(repeats(hyps[0].tokens) for hyps in run(LONGER, vocabulary=shortlist))
    found = run(BIGRAMS, vocabulary=shortlist)
    assert all(not repeats(h.tokens) and set(h.tokens) <= set(shortlist.tolist()) for hyps in found for h in hyps)
    # Each sentence within its own columns of the batch's shortlist: the bans are mapped onto the
    # batch's columns, and the result is the sentence's own search over its own shortlist.
    allowed = torch.ones(src.size(0), shortlist.numel(), dtype=torch.bool)
    allowed[::2, 3] = False  # even sentences may not say 6
    together = run(BIGRAMS, vocabulary=shortlist, allowed=allowed)
    for i, hyps in enumerate(together):
        alone = run(BIGRAMS, src[i : i + 1], vocabulary=shortlist[allowed[i]])[0]
        assert [h.tokens for h in hyps] == [h.tokens for h in alone]
        assert all(not repeats(h.tokens) for h in hyps)
    # Over every token but PAD, a shortlist's columns are the model's ids shifted by one: the same
    # bans, mapped, give the tokens of the search without a shortlist.
    restricted, plain = run(BIGRAMS, vocabulary=every), run(BIGRAMS)
    assert [[h.tokens for h in hyps] for hyps in restricted] == [[h.tokens for h in hyps] for hyps in plain]


def test_sampling_and_the_constrained_search_apply_it_too():
    model, src = tiny_model(), source_batch()
    drawn = sample(model, src, top_k=2, generator=torch.Generator().manual_seed(0), limits=LONGER)
    assert any(repeats(h.tokens) for h in drawn)
    drawn = sample(model, src, top_k=2, generator=torch.Generator().manual_seed(0), limits=BIGRAMS)
    assert all(not repeats(h.tokens) for h in drawn)
    one = src[3:4]
    assert repeats(constrained_beam_search(model, one, [[12]], limits=LONGER).hypotheses[0].tokens)
    result = constrained_beam_search(model, one, [[12]], beam_size=3, n_best=3, limits=BIGRAMS)
    assert result.missed == [] and all(not repeats(h.tokens) for h in result.hypotheses)


def test_search_limits_refuse_a_negative_ngram_size():
    with pytest.raises(ValueError, match="no_repeat_ngram_size >= 0"):
        SearchLimits(no_repeat_ngram_size=-1)
