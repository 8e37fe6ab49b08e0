"""The prepared launcher's route choice (RouteTimes in backends/vulkan/launcher.py): nothing is chosen until both
routes have a full window of times, then the one with the smaller median, ties to the unmarked route;
only the latest window counts, and a choice is due every DECIDE_EVERY times. Pure Python: no device."""

from __future__ import annotations

import statistics

from hypothesis import given
from hypothesis import strategies as st

from ironaccel.backends.vulkan.launcher import DECIDE_EVERY, WINDOW, RouteTimes

seconds = st.floats(min_value=1e-7, max_value=1e-2, allow_nan=False)


def test_nothing_is_chosen_until_both_routes_have_a_window():
    times = RouteTimes()
    for _ in range(WINDOW):
        times.add(True, 1e-6)
    for _ in range(WINDOW - 1):
        times.add(False, 1e-3)
    assert times.marked_is_faster() is None
    times.add(False, 1e-3)
    assert times.marked_is_faster() is True


@given(st.lists(seconds, min_size=WINDOW, max_size=3 * WINDOW), st.lists(seconds, min_size=WINDOW, max_size=3 * WINDOW))
def test_the_choice_is_the_smaller_median_of_the_latest_window(marked, plain):
    times = RouteTimes()
    for t in marked:
        times.add(True, t)
    for t in plain:
        times.add(False, t)
    m, p = statistics.median(marked[-WINDOW:]), statistics.median(plain[-WINDOW:])
    assert times.median(True) == m and times.median(False) == p  # WINDOW is odd: the median is a time
    assert times.marked_is_faster() is (m < p)


def test_a_tie_keeps_launches_unmarked():
    times = RouteTimes()
    for route in (True, False):
        for _ in range(WINDOW):
            times.add(route, 2e-5)
    assert times.marked_is_faster() is False


def test_one_outlier_does_not_move_the_choice():
    """A preempted look (milliseconds) among microsecond times: the median ignores it, a mean would not."""
    times = RouteTimes()
    for _ in range(WINDOW):
        times.add(True, 20e-6)
        times.add(False, 17e-6)
    times.add(False, 5e-3)
    assert times.marked_is_faster() is False


def test_a_choice_is_due_every_decide_every_times():
    times = RouteTimes()
    due = [times.add(i % 2 == 0, 1e-5) for i in range(4 * DECIDE_EVERY)]
    assert [i + 1 for i, d in enumerate(due) if d] == [DECIDE_EVERY * k for k in range(1, 5)]
