"""Checkpoints of a stochastic fit (``--checkpoint``, ``--resume``) and a clean stop on Ctrl-C or
SIGTERM.

A checkpoint is the fit loop's whole state between two iterations (ppl.inference.loop): the
variational parameters, the step-size history, the random generators (the loop's and the
minibatch sampler's), the ELBO trace and the counters. A fit of several loops (stages) keeps
the results of the finished ones too, and a resumed fit takes them from it. Restoring the state
and running on replays exactly the draws the uninterrupted run would have made, so the result is
the same, bit for bit. It is pickled, and the pickle signed with HMAC-SHA256 under a per-user key
(``$XDG_CACHE_HOME/ppl/checkpoint.key``, default ``~/.cache/ppl``, created mode 0600): unpickling
runs code, so a file is unpickled only after its signature checks, and a crafted file is refused
without running anything. The signed bytes go to a fresh temporary file beside PATH (never
following a link), renamed over PATH: a crash while writing leaves the previous checkpoint
whole. A fingerprint of the model, the data files and the options that shape the fit is stored
with it and compared on resume.

A first SIGINT or SIGTERM only asks the loop to stop: it finishes the iteration under way, writes
a final checkpoint and raises ``Interrupted``; a second one stops at once.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import signal
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ppl import safefiles
from ppl.errors import PplError
from ppl.limits import LIMITS, not_regular, note_interrupt

FORMAT = "ppl-checkpoint/2"
#: The file starts with this line, then the HMAC-SHA256 of the pickle under the user's key.
MAGIC = b"ppl-checkpoint/2 hmac-sha256\n"
KEY_BYTES = 32
#: Data files up to this size are fingerprinted by their content, larger ones by size and mtime.
HASHED_BYTES = 64 * 2**20


class CheckpointError(PplError):
    """A checkpoint that cannot be read, or that belongs to another model, data or options."""


class Interrupted(PplError):
    """The fit stopped on a signal after writing its checkpoint: 128 + the signal's number."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


class Stateful(Protocol):
    """An object the loop draws from (a minibatch sampler) whose state must travel with it."""

    def get_state(self) -> Any: ...

    def set_state(self, state: Any) -> None: ...


@dataclass
class Checkpointer:
    """Where and how often to checkpoint, what to resume from, and what else to save."""

    path: Path
    every: int = 100
    fingerprint: dict = field(default_factory=dict)
    resume: dict | None = None  # the payload read by load(): "state" (the loop's), "extras"
    extras: dict[str, Stateful] = field(default_factory=dict)
    stop_signal: int | None = None
    between_loops: bool = False  # no loop running (after one ended): a signal stops at once
    written: int = 0
    stages: int = 0  # loops begun in this run
    finished: dict[int, Any] = field(default_factory=dict)  # stage -> its loop's result
    clock: float | None = None  # when this run's first loop began

    def begin(self) -> tuple[int, Any, dict | None]:
        """The next loop's stage number; its result, when it finished before the interruption;
        its saved state, when it was under way."""
        stage = self.stages
        self.stages += 1
        if self.clock is None:
            self.clock = time.perf_counter()
        if self.resume is None:
            return stage, None, None
        state = self.resume["state"]
        if stage in state.get("finished", {}):
            self.finished[stage] = state["finished"][stage]
            return stage, self.finished[stage], None
        return stage, None, (state if state.get("stage", 0) == stage else None)

    def finish(self, stage: int, result: Any) -> None:
        self.finished[stage] = result
        self.between_loops = True  # a signal now has no iteration to wait for

    @property
    def elapsed_before(self) -> float:
        """Seconds the fit ran before the interruption it resumes from."""
        return 0.0 if self.resume is None else self.resume["state"].get("elapsed", 0.0)

    def save(self, stage: int, state: dict) -> None:
        now = time.perf_counter()
        state = dict(state, stage=stage, finished=dict(self.finished),
                     elapsed=self.elapsed_before + now - (self.clock or now))  # fmt: skip
        payload = {
            "format": FORMAT,
            "fingerprint": self.fingerprint,
            "state": state,
            "extras": {name: obj.get_state() for name, obj in self.extras.items()},
        }
        write_atomic(self.path, sign(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)))
        self.written += 1

    def restore_extras(self) -> None:
        extras = self.resume["extras"]
        for name, obj in self.extras.items():
            if name not in extras:
                raise CheckpointError(f"{self.path}: the checkpoint has no state for '{name}'")
            obj.set_state(extras[name])

    def interrupted(self, iteration: int, unit: str = "iteration") -> Interrupted:
        name = signal.Signals(self.stop_signal).name
        return Interrupted(
            f"{name} at {unit} {iteration}: wrote the checkpoint {self.path}; continue the "
            f"fit with the same command and --resume {self.path}",
            self.stop_signal,
        )


def write_atomic(path: Path, data: bytes) -> None:
    """Write then rename: readers see the old file or the new one, never a part. The bytes go to
    a fresh temporary name beside PATH (created exclusively, so a link planted there is never
    followed; a symlink at PATH itself is replaced, not written through), mode 0600: the state
    can hold values computed from the data."""
    try:
        safefiles.write_atomic(path, data, mode=0o600)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot write the checkpoint ({e.strerror or e})") from None


def check_target(path: Path, inputs: list[str], overwrite: bool = False) -> None:
    """--checkpoint PATH must not replace one of the fit's inputs, nor (without --overwrite) a
    file that is not a ppl checkpoint."""
    real = os.path.realpath(path)
    for name in inputs:
        if os.path.exists(name) and os.path.realpath(name) == real:
            raise CheckpointError(f"--checkpoint {path} is one of the fit's inputs ({name}); "
                                  "give another path")  # fmt: skip
    if overwrite or not os.path.lexists(path):
        return
    if os.path.isdir(path):
        raise CheckpointError(f"--checkpoint {path} is a directory; give a file name")
    try:  # non-blocking: a FIFO named as the checkpoint must not hang the fit
        fd = os.open(path, os.O_RDONLY | safefiles.NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            head = f.read(len(MAGIC)) or b""
    except OSError:
        head = b""
    if head != MAGIC:
        raise CheckpointError(f"--checkpoint {path} exists and is not a ppl checkpoint: it would "
                              "be replaced; give another path, or --overwrite")  # fmt: skip


def key_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ppl" / "checkpoint.key"


def user_key() -> bytes:
    """The per-user signing key, created (mode 0600, never replaced) on first use. A key others
    can read or write, or one in a directory others can change, is refused: with it they could
    sign a checkpoint that runs code."""
    path = key_path()
    try:
        safefiles.private_dir(path.parent)  # made 0700, or an old one of the user's tightened
        if not path.exists():
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(KEY_BYTES))
            try:
                os.link(tmp, path)  # never over a key another process made meanwhile
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
        key = safefiles.read_trusted(path, private=True, limit=4096)
    except PermissionError as e:
        raise CheckpointError(
            f"{path}: the checkpoint key must belong to you and be private (chmod 600), in a "
            f"directory only you can change ({e})"
        ) from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot use the checkpoint key ({e.strerror})") from None
    if len(key) < KEY_BYTES:
        raise CheckpointError(f"{path}: the checkpoint key is damaged; delete it to make a new one")
    return key


def sign(data: bytes) -> bytes:
    return MAGIC + hmac.new(user_key(), data, hashlib.sha256).digest() + data


def read_payload(path: Path) -> Any:
    """The unpickled checkpoint, unpickled only when its signature is this user's."""
    digest_end = len(MAGIC) + hashlib.sha256().digest_size
    why = not_regular(str(path))  # /dev/zero, a FIFO: refused before a byte is read
    if why:
        raise CheckpointError(f"--resume {why}")
    try:
        with open(path, "rb") as f:  # the header first: another file is refused unread
            blob = f.read(digest_end)
            if blob.startswith(MAGIC) and len(blob) == digest_end:
                blob += f.read(LIMITS.max_bytes + 1)
    except FileNotFoundError:
        raise CheckpointError(f"--resume {path}: no such checkpoint file") from None
    except OSError as e:
        raise CheckpointError(f"--resume {path}: cannot read it ({e.strerror})") from None
    if not blob.startswith(MAGIC) or len(blob) < digest_end:
        raise CheckpointError(f"--resume {path}: not a ppl checkpoint of format {FORMAT}")
    data = blob[digest_end:]
    expected = hmac.new(user_key(), data, hashlib.sha256).digest()
    if not hmac.compare_digest(blob[len(MAGIC) : digest_end], expected):
        raise CheckpointError(
            f"--resume {path}: not a ppl checkpoint signed by you (the signature does not match "
            f"{key_path()}); it was not loaded"
        )
    try:
        return pickle.loads(data)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
        raise CheckpointError(f"--resume {path}: not a ppl checkpoint (or a damaged one)") from None


def load(path: Path, fingerprint: dict) -> dict:
    """The checkpoint's payload, after checking that it belongs to this model, data and options."""
    payload = read_payload(path)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"--resume {path}: not a ppl checkpoint of format {FORMAT}")
    theirs = payload["fingerprint"]
    keys = sorted(set(theirs) | set(fingerprint))
    differ = [k for k in keys if theirs.get(k) != fingerprint.get(k)]
    if differ:
        shown = "; ".join(
            f"{k}: {theirs.get(k)!r} then, {fingerprint.get(k)!r} now" for k in differ
        )
        raise CheckpointError(
            f"--resume {path}: the checkpoint was written by a fit with other inputs ({shown}); "
            "resume with the same model, data and options"
        )
    return payload


def file_fingerprint(path: str) -> str:
    """Content hash for files up to HASHED_BYTES, else size and modification time."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # a device or a pipe: never read to its end
            return "not a regular file"
        if st.st_size > HASHED_BYTES:
            return f"{st.st_size} bytes, mtime {st.st_mtime_ns}"
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(2**20), b""):
                digest.update(block)
        return digest.hexdigest()[:16]
    except OSError:
        return "unreadable"


@contextmanager
def stop_on_signals(checkpointer: Checkpointer) -> Iterator[None]:
    """SIGINT/SIGTERM ask the fit to stop at the next iteration (it then writes a checkpoint); a
    second signal, or one after the loop has ended (the polish, the PSIS check, the outputs),
    raises KeyboardInterrupt at once; the last checkpoint written stays. Only the main thread can
    install handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if checkpointer.stop_signal is not None or checkpointer.between_loops:
            note_interrupt(signum)  # kept until polled, should autograd swallow the raise
            raise KeyboardInterrupt  # a second signal, or no loop to stop after an iteration
        checkpointer.stop_signal = signum

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
