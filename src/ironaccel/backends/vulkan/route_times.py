"""Which completion route a prepared launch should take, from how long each recently took (ADR 0021).

A launch is seen finished either through the timeline semaphore's counter or, when it is *marked*,
through a word of host memory its mark command buffer writes (:mod:`.launcher`). Which is sooner depends
on the driver's state, which can change between sessions of one machine, and the mark itself costs
device time, which an unmarked launch saves (ADRs 0016 and 0021 give the figures). Neither route's own
signals can settle it, since a marked launch's semaphore is signalled after its mark, so both routes are
timed as the caller sees them: from the submit to the look that found the launch finished.

Only launches submitted onto an idle launcher, and looked at by a caller that was already looking, are
timed: otherwise the time holds earlier launches or the caller's own pauses.
"""

from __future__ import annotations

from collections import deque

WINDOW = 15  # the latest times of each route that count (odd: a median is one of them)
DECIDE_EVERY = 8  # times added between two decisions, so a launch pays for a sort only now and then


class RouteTimes:
    """The latest submit -> seen times of marked and of unmarked launches, in seconds."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.times: tuple[deque[float], deque[float]] = (deque(maxlen=window), deque(maxlen=window))
        self.added = 0

    def add(self, marked: bool, seconds: float) -> bool:
        """Record one launch's time; whether a decision is due."""
        self.times[marked].append(seconds)
        self.added += 1
        return self.added % DECIDE_EVERY == 0

    def known(self) -> bool:
        """Both routes have a full window of times."""
        return all(len(t) == self.window for t in self.times)

    def median(self, marked: bool) -> float | None:
        times = sorted(self.times[marked])
        return times[len(times) // 2] if times else None

    def marked_is_faster(self) -> bool | None:
        """Whether marked launches were seen finished sooner (median against median); None until both
        routes are known. A tie keeps launches unmarked: the mark is device work."""
        if not self.known():
            return None
        marked, plain = self.median(True), self.median(False)
        assert marked is not None and plain is not None
        return marked < plain


__all__ = ["DECIDE_EVERY", "WINDOW", "RouteTimes"]
