"""The slowdown warning: once when a run falls far below its starting speed, again only after it recovered."""

from nmt.training.slowdown import SlowdownWatch


def test_a_run_far_below_its_starting_speed_is_reported_once_until_it_recovers():
    watch = SlowdownWatch(start_windows=3)
    said = [watch.observe(speed, threads=2) for speed in (900, 2400, 2500, 2450)]
    assert said == [None] * 4 and watch.reference == 2500  # the start-up window is no reference
    assert watch.observe(1400, threads=2) is None  # 56%: slower, not collapsed
    warning = watch.observe(300, threads=2)
    assert warning is not None and "300 target tokens/s, 12% of the 2,500" in warning and "another process" in warning
    assert watch.observe(280, threads=2) is None and watch.observe(1900, threads=2) is None  # said once; 76%
    assert watch.observe(2300, threads=2) is None  # recovered: the next collapse is news again
    assert watch.observe(600, threads=2) is not None


def test_a_steady_run_never_warns():
    watch = SlowdownWatch()
    assert all(watch.observe(speed, threads=2) is None for speed in [2000 + (i % 7) * 60 for i in range(200)])
