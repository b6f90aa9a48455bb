"""Resource limits: runaway input (a loop over 1:10^9, `matrix[10^5, 10^5]`, N = 10^12 from a
data file, `/dev/zero` as the model) stops with a user error naming the statement or variable and
the limit, before the time or memory is spent, instead of running for hours or ending in a
MemoryError. The CLI sets them from `--max-loop-iterations` and `--max-memory`."""

from __future__ import annotations

import math
import os
import stat
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


LIMITS = Limits()

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


def read_limited(path: str, limit: int, what: str, hint: str = "") -> bytes:
    """A file's bytes, refused once past `limit`: a regular file by its size, before reading; a
    device or pipe (`/dev/zero`) as soon as it has given more, read a block at a time."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if stat.S_ISREG(st.st_mode):
            size = st.st_size
            data = f.read() if size <= limit else b""
        else:
            blocks, size = [], 0
            while size <= limit and (block := f.read(min(2**20, limit + 1 - size))):
                blocks.append(block)
                size += len(block)
            data = b"".join(blocks)
    if size > limit:
        raise ResourceLimit(
            f"{path}: the {what} is over {describe_bytes(limit)}; is it the right file?{hint}"
        )
    return data
