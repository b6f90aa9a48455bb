"""Resource limits: runaway input (a loop over 1:10^9, `matrix[10^5, 10^5]`, N = 10^12 from a
data file, `/dev/zero` as the model) stops with a user error naming the statement or variable and
the limit, before the time or memory is spent, instead of running for hours or ending in a
MemoryError. The CLI sets them from `--max-loop-iterations` and `--max-memory`."""

from __future__ import annotations

import math
import os
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ppl.errors import PplError


class ResourceLimit(PplError):
    """A size or an amount of work over a limit the user can raise."""


@dataclass
class Limits:
    #: element-iterations of loops (`for`, `while`, foreach) in one run of a block
    max_loop_iterations: int = 10**7
    #: bytes one array (or the draws of a fit) may take
    max_bytes: int = 4 * 2**30
    #: bytes of a model file
    max_model_bytes: int = 16 * 2**20
    #: statements (semicolons outside comments) of a model, counted before it is parsed
    max_statements: int = 20_000


LIMITS = Limits()

#: Stan's int is 32 bits: to_int and integer arithmetic outside it are errors, as in Stan
INT_RANGE = [-(2**31), 2**31 - 1]

BYTES_PER_VALUE = 8


def describe_bytes(n: float) -> str:
    for unit, size in (("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} bytes"


def over_budget(what: str, count: float) -> str | None:
    """Why `count` float64 values (an array, the draws) are refused, or None when they fit."""
    need = float(count) * BYTES_PER_VALUE
    if need <= LIMITS.max_bytes:
        return None
    return (
        f"{what}: {describe_bytes(need)}, over the memory budget of "
        f"{describe_bytes(LIMITS.max_bytes)}; raise it with --max-memory GB if the machine has "
        "the memory"
    )


def check_values(what: str, count: float) -> None:
    """Refuse an allocation over the memory budget before making it."""
    over = over_budget(what, count)
    if over:
        raise ResourceLimit(over)


def elements(shape) -> float:
    """The number of values of an array of this shape, as a float (no overflow)."""
    return math.prod(float(n) for n in shape)


def not_regular(path: str) -> str | None:
    """Why `path` is no file to read whole (a device such as /dev/zero, a FIFO that would block,
    a socket), by stat before opening; None for a regular file (or one stat cannot see: opening
    it then says why)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = "a pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device or a socket"
    return f"{path}: is {kind}, not a regular file; save it to a file first"


def read_limited(path: str, limit: int, what: str, hint: str = "") -> bytes:
    """A file's bytes, refused past `limit` by its size before reading; a device or a pipe
    (`/dev/zero`, a FIFO) is refused by stat, before it is opened."""
    why = not_regular(path)
    if why:
        raise ResourceLimit(f"{why} (the {what} is read from regular files only)")
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
        size = max(size, len(data))
    if size > limit:
        raise ResourceLimit(
            f"{path}: the {what} is over {describe_bytes(limit)}; is it the right file?{hint}"
        )
    return data


# ---- time: a `while` or sequential loop is bounded in seconds too ---------------------------

#: loop iterations a second that the time budget assumes: --max-loop-iterations 10^7 (the default)
#: allows 5 s of loops in one run of a block (`while (1) s += 1;` runs 2-4 10^5 iterations a
#: second, so the count alone let it run for 40 to 100 s)
ITERATIONS_PER_SECOND = 2 * 10**6
#: the least time budget, whatever --max-loop-iterations says
MIN_LOOP_SECONDS = 2.0


def loop_seconds() -> float:
    """The seconds the loops of one run of a block may take: the loop budget in seconds."""
    return max(MIN_LOOP_SECONDS, LIMITS.max_loop_iterations / ITERATIONS_PER_SECOND)


# ---- interrupts: a Ctrl-C is never lost ------------------------------------------------------
#
# autograd's `wraps` catches BaseException (around the naming of every make_vjp's function), so a
# KeyboardInterrupt raised there by Python's own SIGINT handler vanishes and the fit runs on. The
# handler below notes the signal before raising; the model's evaluation and the fit loops poll the
# note (poll_interrupt), and the run raises KeyboardInterrupt at its end if it is still there.

_PENDING: list[int] = []
_NOTING: list[bool] = []  # non-empty while interrupts_noted's handler is installed


def note_interrupt(signum: int = signal.SIGINT) -> None:
    """Remember a SIGINT/SIGTERM until a poll raises it (a handler's KeyboardInterrupt may be
    swallowed); only under interrupts_noted, which forgets it at its end: a note outside one
    (a library caller's own signal handling) would raise in some later, unrelated run."""
    if _NOTING:
        _PENDING.append(signum)


def poll_interrupt() -> None:
    """Raise the KeyboardInterrupt of a noted signal that has not ended the run yet."""
    if _PENDING:
        _PENDING.clear()
        raise KeyboardInterrupt


def _on_sigint(signum, frame) -> None:
    note_interrupt(signum)
    raise KeyboardInterrupt


@contextmanager
def interrupts_noted(replacing=None) -> Iterator[None]:
    """Run with a SIGINT handler that notes the signal, then raises KeyboardInterrupt as Python's
    does; a note left at the end (its exception swallowed, no poll since) is raised then. Only in
    the main thread, and only over Python's default handler or `replacing` (the command's handler
    while it starts); a user's own handler stays."""
    ours = (signal.default_int_handler, replacing or signal.default_int_handler)
    main = threading.current_thread() is threading.main_thread()
    install = main and signal.getsignal(signal.SIGINT) in ours
    if not install:  # nested in one that did, or another handler rules
        yield
        return
    _PENDING.clear()
    signal.signal(signal.SIGINT, _on_sigint)
    _NOTING.append(True)
    try:
        yield
        poll_interrupt()
    finally:
        _NOTING.clear()
        _PENDING.clear()
        signal.signal(signal.SIGINT, signal.default_int_handler)
