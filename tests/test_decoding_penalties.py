"""How a finished hypothesis's length changes its score: GNMT's penalty and the average."""

import pytest

from nmt.decoding import gnmt_length_penalty


def test_average_normalization_divides_by_length_to_the_alpha():
    from nmt.decoding import length_penalty

    assert length_penalty(4, 1.0, "average") == 4.0
    assert length_penalty(9, 0.5, "average") == 3.0
    assert length_penalty(7, 0.6) == gnmt_length_penalty(7, 0.6)  # gnmt stays the default
    with pytest.raises(ValueError, match="length normalization must be one of gnmt, average"):
        length_penalty(3, 1.0, "mean")


def test_the_normalizations_are_named_alike_everywhere():
    """The decoder's, the CLI's (torch-free) and the config's names are one list."""
    from nmt import search_settings
    from nmt.config import DecodeConfig
    from nmt.decoding import LENGTH_NORMALIZATIONS

    assert search_settings.LENGTH_NORMALIZATIONS == LENGTH_NORMALIZATIONS
    for name in LENGTH_NORMALIZATIONS:
        assert DecodeConfig(length_normalization=name).length_normalization == name
    with pytest.raises(ValueError, match="decode.length_normalization must be one of gnmt | average"):
        DecodeConfig(length_normalization="mean")
