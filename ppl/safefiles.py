"""Files ppl writes and the private files it reads back, safe in a directory others can write.

Every file is written to a fresh temporary name beside its target (``mkstemp``: created with
O_EXCL, so a link planted at any name is never followed), flushed, then renamed over the target:
a reader sees the old file or the new one, and a symlink at the target is replaced, never written
through. Temporary names carry the writer's process id, so the leftovers of a killed run are
recognised (and removed) by the next write, never read. Files ppl reads back without the user
naming them (the parser cache, the checkpoint key) are trusted only when they and their directory
belong to the user and no one else can write them: another local user must not be able to choose
what ppl loads.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from pathlib import Path

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: a FIFO opened for reading must not block
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
#: Sticky world-writable directories (/tmp): others cannot rename or delete entries they do not own.
_SHARED_OK = stat.S_ISVTX


def umask() -> int:
    """The process's umask, read without changing it where /proc allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def default_mode(directory: bool = False) -> int:
    """The mode an ordinary open()/mkdir() would give: 0666 (0777) less the umask."""
    return (0o777 if directory else 0o666) & ~umask()


def _uid() -> int | None:
    return os.getuid() if hasattr(os, "getuid") else None


def untrusted(st: os.stat_result, private: bool = False) -> str | None:
    """Why a file or directory of this stat is not the user's alone (None when it is): owned by
    someone else, or writable by group or others (with `private`, readable by them too)."""
    uid = _uid()
    if uid is not None and st.st_uid != uid:
        return f"it belongs to user id {st.st_uid}, not to you ({uid})"
    if st.st_mode & (0o077 if private else 0o022):
        return f"its mode {stat.S_IMODE(st.st_mode):o} lets others " + (
            "read or write it" if private else "write it"
        )
    return None


def untrusted_dir(path: str | os.PathLike) -> str | None:
    """Why `path` (a directory) is not safe to load files from: it, or a directory above it, can
    be changed by another user (not owned by you or root, or writable by others without the
    sticky bit). None when it is safe."""
    uid = _uid()
    if uid is None:
        return None
    path = os.path.abspath(path)
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"{path}: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    reason = untrusted(st)
    if reason:
        return f"{path}: {reason}"
    parent = os.path.dirname(path)
    while True:
        try:
            st = os.stat(parent)
        except OSError as e:
            return f"{parent}: {e.strerror}"
        if st.st_uid not in (uid, 0):
            return f"{parent}: it belongs to user id {st.st_uid}"
        if st.st_mode & 0o022 and not st.st_mode & _SHARED_OK:
            return f"{parent}: others can write it"
        if parent == os.path.dirname(parent):
            return None
        parent = os.path.dirname(parent)


def private_dir(path: str | os.PathLike) -> Path:
    """`path` created (mode 0700) if missing, made private if it is the user's, then checked:
    OSError when another user could change what is in it."""
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == _uid() and st.st_mode & 0o022:
        os.chmod(path, 0o700)  # the user's own, made by an older ppl under umask 002: tighten
    reason = untrusted_dir(path)
    if reason:
        raise PermissionError(f"not a private directory ({reason})")
    return path


def read_trusted(path: str | os.PathLike, private: bool = False, limit: int = 64 << 20) -> bytes:
    """The bytes of `path`, a regular file of the user's that others cannot write (with
    `private`, nor read), in a directory only the user can change; never through a symlink.
    OSError otherwise."""
    path = Path(path)
    reason = untrusted_dir(path.parent)
    if reason:
        raise PermissionError(f"untrusted directory ({reason})")
    fd = os.open(path, os.O_RDONLY | NOFOLLOW | NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PermissionError(f"{path} is not a regular file")
        reason = untrusted(st, private)
        if reason:
            raise PermissionError(f"{path}: {reason}")
        if st.st_size > limit:
            raise PermissionError(f"{path} is larger than {limit} bytes")
        return f.read(limit + 1)[:limit]


def _temp_prefix(path: Path) -> str:
    return f".{path.name}.{os.getpid()}."


_TEMP = re.compile(r"\.(?P<pid>\d+)\.[A-Za-z0-9_]+\.tmp")


def remove_stale(path: str | os.PathLike) -> None:
    """Remove the temporary files a killed writer of `path` left beside it: the user's own, of
    a process that is gone."""
    path = Path(path)
    uid = _uid()
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            if not entry.name.startswith(f".{path.name}."):
                continue
            m = _TEMP.fullmatch(entry.name[len(path.name) + 1 :])
            if not m or _alive(int(m["pid"])):
                continue
            with contextlib.suppress(OSError):
                if uid is None or entry.stat(follow_symlinks=False).st_uid == uid:
                    if entry.is_dir(follow_symlinks=False):
                        _rmtree(entry.path)
                    else:
                        os.unlink(entry.path)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def _rmtree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _write_parts(f, data) -> None:
    """`data`: bytes, or an iterable of bytes made as they are written (a large file is then
    never whole in memory)."""
    for part in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
        f.write(part)


def temporary(path: str | os.PathLike, data, mode: int | None = None) -> str:
    """`data` (bytes, or an iterable of bytes) written and flushed to a new file beside `path`
    (O_EXCL, mode `mode` or the umask's); its name, to be renamed over `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            _write_parts(f, data)
            f.flush()
            os.fchmod(f.fileno(), default_mode() if mode is None else mode)
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def write_atomic(path: str | os.PathLike, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` whole or not at all: a temporary file beside it (never following
    a link), renamed over it. Leftovers of killed writers of `path` are removed first."""
    remove_stale(path)
    tmp = temporary(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_new(path: str | os.PathLike, data, mode: int | None = None) -> None:
    """`data` (bytes, or an iterable of bytes) to a file that must not exist yet (O_EXCL, no
    link followed), flushed to disk."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as f:
        _write_parts(f, data)
        f.flush()
        os.fchmod(f.fileno(), default_mode() if mode is None else mode)
        os.fsync(f.fileno())


def temporary_dir(path: str | os.PathLike) -> str:
    """A new empty directory beside `path` (mode 0700), to be put in its place when whole."""
    path = Path(path)
    return tempfile.mkdtemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".tmp")


_RENAME_EXCHANGE = 2


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap two directories in one step (Linux renameat2 RENAME_EXCHANGE); False where the
    system cannot, leaving both as they were."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    errno = ctypes.get_errno()
    import errno as E

    if errno in (E.EINVAL, E.ENOSYS, E.EOPNOTSUPP):
        return False
    raise OSError(errno, os.strerror(errno), str(a))
