"""A data file's bytes or text, refused past the memory budget, with every OS or decoding problem
(missing file, directory, not UTF-8, empty) turned into a DataError naming the file."""

from __future__ import annotations

import codecs

from ppl.errors import DataError
from ppl.limits import LIMITS, read_limited


def file_error(path: str, e: OSError) -> DataError:
    """The message for a data file that cannot be opened or read."""
    if isinstance(e, FileNotFoundError):
        return DataError(f"{path}: data file not found")
    if isinstance(e, IsADirectoryError):
        return DataError(f"{path}: is a directory, not a data file")
    return DataError(f"{path}: cannot read the data file: {e.strerror or e}")


def read_bytes(path: str) -> bytes:
    """The file whole, refused past the memory budget before reading on (a device, a huge file)."""
    try:
        return read_limited(
            path, LIMITS.max_bytes, "data file", " (--max-memory GB raises the limit)"
        )
    except OSError as e:
        raise file_error(path, e) from None


def _decode(path: str, raw: bytes) -> str:
    """The UTF-8 text of a data file (a BOM dropped); a DataError if it is not UTF-8 or empty."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(
            f"{path}: line {line}: the file is not UTF-8 text "
            f"(byte 0x{raw[e.start]:02x} at offset {e.start})"
        ) from None
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    return text


def read_text(path: str) -> str:
    """Read a whole data file as UTF-8, turning every OS/decoding problem into a DataError."""
    return _decode(path, read_bytes(path))


# what str.strip() removes from ASCII text
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def read_utf8(path: str) -> bytes:
    """A data file's bytes, checked as :func:`read_text` checks them (a BOM dropped), without
    keeping a decoded copy: CSV files are parsed from their bytes."""
    raw = read_bytes(path)
    if raw.isascii():
        if not raw.strip(_ASCII_SPACE):
            raise DataError(f"{path}: the file is empty")
        return raw
    _decode(path, raw)
    return raw[len(codecs.BOM_UTF8) :] if raw.startswith(codecs.BOM_UTF8) else raw
