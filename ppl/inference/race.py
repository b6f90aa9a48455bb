"""Two starts of the default road raced on the same first draws: the second solve stops as soon
as it cannot catch the first.

Where the mode is a suspect (ppl.inference.suspect) the road solves both the mode's Gaussian and
Stan's plain start, and keeps the higher ELBO. Which one wins is not known before the solves:
the ELBO of q at the start says nothing (eight schools, centred: the mode's Gaussian is 1e22
nats below the plain start there, and its fit ends 0.5 nats above). But both first rounds run
on the same fixed draws, so once the first start's round is solved its optimum is a mark the
second can be held to: when the second is still below it by more than its recent gains,
continued over the evaluations it has left, could make up, it is hopeless and stops (on the
edge partition model the mode's fit crept 40 nats in its last 4,500 gradients, 1,000 nats below
the plain start's: 31 of the fit's 108 CPU seconds; on the measurement-error model the plain
start's stood still at -17,530 nats for 2,500 evaluations, 17,000 below the mode's).
"""

from __future__ import annotations

from collections import deque

#: The second solve's gain is measured over its last WINDOW evaluations (of the objective on
#: all the round's draws): per evaluation, not per iteration, as a line search that cannot find
#: a step spends many evaluations on one iteration.
WINDOW = 64


class Rival:
    """The ELBO the first start's solve reached on the shared first draws (`mark`), and the
    second solve's trace on those draws. `hopeless(left)` says whether the second, gaining as
    it did over its last WINDOW evaluations, would still be below the mark after `left` more."""

    def __init__(self, mark: float):
        self.mark = float(mark)
        self.values: deque = deque()  # (evaluations, ELBO) of the second solve's iterations
        self.stopped = False

    def seen(self, value: float, evaluations: float) -> None:
        if self.values and value < self.values[-1][1]:
            # L-BFGS never goes down: a new objective (a natural-gradient restart re-bases the
            # control variates; a value they inflated, eight schools' +2.8e12, drops back)
            self.reset()
        self.values.append((float(evaluations), float(value)))
        while len(self.values) > 1 and self.values[1][0] <= evaluations - WINDOW:
            self.values.popleft()  # keep one value at or before the window's start

    def reset(self) -> None:
        self.values.clear()

    def hopeless(self, left: float) -> bool:
        if self.stopped:
            return True
        if not self.values or self.values[-1][0] - self.values[0][0] < WINDOW:
            return False
        now = self.values[-1][1]
        gain = now - self.values[0][1]
        self.stopped = now < self.mark and self.mark - now > gain * left / WINDOW
        return self.stopped


class Race:
    """A fixed-draw fit's side of the race (ppl.inference.saa.fit_fixed_draws): its first
    round's trace goes to the rival (if any), and `stop` ends that round on the gradient budget
    (`spent`) or once it is hopeless; `lost` after that."""

    def __init__(self, rival: Rival | None, counter: dict, draws: int, max_iter: int,
                 max_evals: int | None):  # fmt: skip
        self.rival, self.counter, self.draws = rival, counter, draws
        self.max_iter, self.max_evals, self.iteration = max_iter, max_evals, 0

    @property
    def lost(self) -> bool:
        return self.rival is not None and self.rival.stopped

    def seen(self, iteration: int, value: float, rounds: list) -> None:
        if self.rival is not None and not rounds:
            self.iteration = iteration
            self.rival.seen(value, self.counter["evals"] / self.draws)

    def reset(self) -> None:
        if self.rival is not None:
            self.rival.reset()

    def stop(self, spent, rounds: list):
        def stop() -> bool:
            if spent():
                return True
            if self.rival is None or rounds:
                return False
            left = self.max_iter - self.iteration
            if self.max_evals is not None:
                left = min(left, (self.max_evals - self.counter["evals"]) / self.draws)
            return self.rival.hopeless(left)

        return stop
