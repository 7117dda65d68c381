"""fast_align's model and grow-diag-final-and (nmt.data.word_alignment) on corpora whose links are known."""

import random

from nmt.data.word_alignment import AlignerConfig, align_corpus, align_one_way, grow_diag_final_and


def dictionary_corpus(pairs: int, seed: int = 0):
    """Source sentences of random words, each target the word-for-word translation (word w -> 100 + w)
    with one neighbouring pair of words swapped: every link is known, and it is off the diagonal."""
    rng = random.Random(seed)
    src, tgt, gold = [], [], []
    for _ in range(pairs):
        words = [rng.randrange(40) for _ in range(rng.randint(3, 9))]
        order = list(range(len(words)))
        k = rng.randrange(len(words) - 1)
        order[k], order[k + 1] = order[k + 1], order[k]
        src.append(words)
        tgt.append([100 + words[i] for i in order])
        gold.append(sorted((i, j) for j, i in enumerate(order)))
    return src, tgt, gold


def test_the_model_finds_a_dictionarys_links_even_off_the_diagonal():
    src, tgt, gold = dictionary_corpus(800)
    found = align_corpus(src, tgt)
    right = sum(len(set(f) & set(g)) for f, g in zip(found, gold, strict=True))
    total = sum(len(g) for g in gold)
    extra = sum(len(set(f) - set(g)) for f, g in zip(found, gold, strict=True))
    assert right / total > 0.97 and extra / total < 0.03


def test_a_target_word_with_no_translation_is_left_to_null():
    # target word 999 appears with every source word in turn: no source word explains it
    src, tgt, _ = dictionary_corpus(600, seed=1)
    tgt = [[*t[:1], 999, *t[1:]] for t in tgt]
    links = align_one_way(src, tgt, AlignerConfig(p_null=0.2))
    linked_999 = sum(any(j == 1 for _, j in sentence) for sentence in links)
    assert linked_999 < 0.2 * len(links)


def test_grow_diag_final_and_by_hand():
    forward = [(0, 0), (1, 1), (2, 1), (3, 3)]
    backward = [(0, 0), (1, 1), (2, 2), (3, 2)]
    # From the intersection {(0,0), (1,1)}, grow takes union links next to a taken one that link a
    # word still unlinked on one side: (2,1) (source 2 new), then (2,2) (target 2 new); from (2,2),
    # (3,2) (source 3 new) before its diagonal (3,3) (target 3 new). Nothing is left for final-and.
    assert grow_diag_final_and(forward, backward) == [(0, 0), (1, 1), (2, 1), (2, 2), (3, 2), (3, 3)]
    # not grown: (1,2) of the union is next to (1,1), but source 1 and target 2... are both linked by then
    assert (1, 2) not in grow_diag_final_and([(0, 0), (1, 1), (2, 2)], [(0, 0), (1, 2), (2, 2)])
    assert grow_diag_final_and([(0, 1)], [(1, 0)]) == [(0, 1), (1, 0)]  # final-and: each links new words


def test_empty_and_mismatched_input():
    assert align_corpus([], []) == []
    assert align_corpus([[1]], [[]]) == [[]]
    try:
        align_corpus([[1]], [])
    except ValueError as err:
        assert "1 source but 0 target" in str(err)
    else:
        raise AssertionError("no error")
