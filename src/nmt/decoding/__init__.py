"""Search: turn a trained model's next-token distributions into output sequences.

greedy_search (argmax each step), beam_search (the beam_size best prefixes) and sample
(random draws) all work on batches of padded source ids and return Hypothesis objects.
This package imports only nmt.model.
"""

from .beam import beam_search, beam_step
from .greedy import greedy_search
from .hypothesis import Hypothesis
from .penalties import LENGTH_NORMALIZATIONS, SearchLimits, gnmt_length_penalty, length_penalty
from .sampling import sample, sampling_distribution

__all__ = [
    "Hypothesis",
    "greedy_search",
    "beam_search",
    "beam_step",
    "sample",
    "sampling_distribution",
    "gnmt_length_penalty",
    "length_penalty",
    "LENGTH_NORMALIZATIONS",
    "SearchLimits",
]
