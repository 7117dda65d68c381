import pytest

from nmt.training.schedule import inverse_sqrt_lr, noam_lr


def test_noam_matches_the_paper_formula():
    for step in (1, 10, 4000, 4001, 100000):
        expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
        assert noam_lr(step, d_model=512, warmup=4000) == pytest.approx(expected)


def test_noam_rises_then_falls_with_peak_at_warmup():
    lrs = [noam_lr(s, d_model=256, warmup=100, scale=2.0) for s in range(1, 400)]
    peak = max(range(len(lrs)), key=lrs.__getitem__) + 1
    assert peak == 100
    assert lrs[99] == pytest.approx(2.0 * (256 * 100) ** -0.5)


def test_inverse_sqrt_warms_up_to_peak_then_decays():
    assert inverse_sqrt_lr(50, peak_lr=1e-3, warmup=100) == pytest.approx(5e-4)
    assert inverse_sqrt_lr(100, peak_lr=1e-3, warmup=100) == pytest.approx(1e-3)
    assert inverse_sqrt_lr(400, peak_lr=1e-3, warmup=100) == pytest.approx(5e-4)
