"""What a fit is doing while it does it. The inference code names its phases and reports its
steps; the command line (or a notebook) shows them.

The protocol: `progress(iteration, value)` is a callable that every loop calls with its
iteration and its objective (the ELBO, or the log density while finding the mode); it may also
have `phase(name, quantity)`, which starts a new phase. `start_phase` calls it when present, so a
plain callback still works.

`StatusLines` shows them without promises it cannot keep: on a terminal, the phase under way on
one line rewritten in place (its iteration, value and relative change), each finished phase left
as a line; in a log (not a terminal), one line per phase as it ends, and only once the fit has run
`log_after` seconds, so quick fits print nothing. No bar, no percentage and no ETA: an iteration
cap is not a forecast of when a fit ends.
"""

from __future__ import annotations

import time
from typing import TextIO


def start_phase(progress, name: str, quantity: str = "ELBO") -> None:
    """Tell `progress` (if it listens for phases) that `name` begins; its values are
    `quantity`."""
    phase = getattr(progress, "phase", None)
    if phase is not None:
        phase(name, quantity)


class StatusLines:
    def __init__(self, stream: TextIO, terminal: bool, *, delay: float = 0.5,
                 log_after: float = 10.0) -> None:  # fmt: skip
        self.stream, self.terminal = stream, terminal
        self.delay, self.log_after = delay, log_after
        self.start = time.perf_counter()
        self.name, self.quantity = "fit", "ELBO"
        self.iteration, self.value, self.change = 0, None, None
        self.shown = False  # the current phase's line is on the terminal, unfinished

    def phase(self, name: str, quantity: str = "ELBO") -> None:
        self._finish()
        self.name, self.quantity = name, quantity
        self.iteration, self.value, self.change = 0, None, None
        if self.terminal and time.perf_counter() - self.start >= self.delay:
            self.stream.write("\r\x1b[K" + name + " ...")
            self.stream.flush()
            self.shown = True

    def __call__(self, iteration: int, value: float | None = None) -> None:
        if value is not None and self.value is not None and value == value:
            self.change = abs(value - self.value) / max(abs(value), 1.0)
        self.iteration = iteration
        if value is not None:
            self.value = value
        if self.terminal and time.perf_counter() - self.start >= self.delay:
            self.stream.write("\r\x1b[K" + self._line())
            self.stream.flush()
            self.shown = True

    def close(self) -> None:
        self._finish()

    def _line(self) -> str:
        if not self.iteration and self.value is None:
            return f"{self.name}: done"
        parts = [f"{self.name}: iteration {self.iteration}"]
        if self.value is not None:
            parts.append(f"{self.quantity} {self.value:.6g}")
        if self.change is not None:
            parts.append(f"relative change {self.change:.1e}")
        return ", ".join(parts)

    def _finish(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K" + self._line() + "\n")
        elif not self.terminal and self.iteration and \
                time.perf_counter() - self.start >= self.log_after:  # fmt: skip
            self.stream.write(self._line() + "\n")
        self.stream.flush()
        self.shown = False
