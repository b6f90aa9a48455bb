"""Read the values a model's ``data`` block declares from CSV files, Stan JSON files and ``--set``.

The compiler describes each data variable with a :class:`DataSpec`; :func:`load_data` finds every
variable in the sources, infers sizes that were not given, checks shapes, integrality and bounds,
and returns exact-shape numpy arrays.  Every problem a user can cause raises
:class:`ppl.errors.DataError` whose message names the variable, the file and the place in it.

Places are reported the way users look for them: CSV rows are numbered from 1 *not counting the
header row*; JSON indices are 1-based like Stan's (``y[3, 2]``).
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppl.errors import DataError, PplError
from ppl.library.transforms import make_transform
from ppl.limits import LIMITS, elements, over_budget, read_limited

Dim = int | str | Callable[[dict[str, np.ndarray]], int]
Bound = None | float | Callable[[dict[str, np.ndarray]], "float | np.ndarray"]

__all__ = ["Bound", "CsvText", "DataSpec", "Dim", "file_error", "load_data", "open_data_file"]

_INT64_MAX = 2**63


@dataclass
class DataSpec:
    """One declaration of the ``data`` block, as the compiler hands it over.

    ``dims`` is the full shape, outermost first: literal sizes, names of int data variables
    ("size variables", which may be inferred from the arrays using them) or callables evaluated
    on the values loaded so far.  ``decl`` is optional source text of the type (e.g.
    ``"vector<lower=0>[N]"``), used only to make messages read like the model.
    """

    name: str
    elem: str  # "int" or "real"
    dims: list[Dim]
    lower: Bound = None
    upper: Bound = None
    line: int = 0
    decl: str = ""
    constraint: str | None = None  # a constrained type: "simplex", "cov_matrix", ...


# ----------------------------------------------------------------------------------------------
# small helpers for messages


def _num(v: object) -> str:
    """Format a number the way a user wrote it: integral floats without ``.0``."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e16:
            return str(int(v))
        return repr(v)
    return str(v)


def _cell(text: str) -> str:
    """Quote a (possibly huge) cell for a message."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _dim_text(d: Dim) -> str:
    if isinstance(d, str):
        return d
    if isinstance(d, (int, np.integer)):
        return str(int(d))
    return str(getattr(d, "text", "?"))


def _decl(spec: DataSpec) -> str:
    """The declared type, for messages: the compiler's text if given, else ``real[N, 3]``."""
    if spec.decl:
        return spec.decl
    if not spec.dims:
        return spec.elem
    return f"{spec.elem}[{', '.join(_dim_text(d) for d in spec.dims)}]"


def _what(spec: DataSpec) -> str:
    """``y (vector[N], line 4)``: how a variable is introduced in messages."""
    line = f", line {spec.line}" if spec.line else ""
    return f"{spec.name} ({_decl(spec)}{line})"


def _index_text(name: str, index: tuple[int, ...]) -> str:
    if not index:
        return name
    return f"{name}[{', '.join(str(i + 1) for i in index)}]"


def _first(mask: np.ndarray) -> tuple[int, ...]:
    """Index of the first True element of a boolean array (C order)."""
    flat = int(np.flatnonzero(mask.ravel())[0])
    return tuple(int(i) for i in np.unravel_index(flat, mask.shape))


def _shape_text(shape: tuple[int, ...]) -> str:
    if not shape:
        return "a single number"
    if len(shape) == 1:
        return f"length {shape[0]}"
    return f"shape ({', '.join(str(n) for n in shape)})"


# ----------------------------------------------------------------------------------------------
# reading files


def file_error(path: str, e: OSError) -> DataError:
    """The message for a data file that cannot be opened or read."""
    if isinstance(e, FileNotFoundError):
        return DataError(f"{path}: data file not found")
    if isinstance(e, IsADirectoryError):
        return DataError(f"{path}: is a directory, not a data file")
    return DataError(f"{path}: cannot read the data file: {e.strerror or e}")


def _read_bytes(path: str) -> bytes:
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


def _read_text(path: str) -> str:
    """Read a whole data file as UTF-8, turning every OS/decoding problem into a DataError."""
    return _decode(path, _read_bytes(path))


# what str.strip() removes from ASCII text
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def _read_utf8(path: str) -> bytes:
    """A data file's bytes, checked as :func:`_read_text` checks them (a BOM dropped), without
    keeping a decoded copy: CSV files are parsed from their bytes."""
    raw = _read_bytes(path)
    if raw.isascii():
        if not raw.strip(_ASCII_SPACE):
            raise DataError(f"{path}: the file is empty")
        return raw
    _decode(path, raw)
    return raw[len(codecs.BOM_UTF8) :] if raw.startswith(codecs.BOM_UTF8) else raw


def _field_count(row: str | list[str]) -> int:
    """Fields in one CSV line (a plain string) or csv row; an empty line has none, like csv's."""
    if isinstance(row, str):
        return row.count(",") + 1 if row else 0
    return len(row)


def _parse_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


_DOTTED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\.[0-9]+)+)")
_BRACKET = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[\s*([0-9]+(?:\s*,\s*[0-9]+)*)\s*\]")
_MISSING_WORDS = {"na", "n/a", "null", "none", "nil", "missing", "."}


def _split_column_name(name: str) -> tuple[str, tuple[int, ...]]:
    """``X.2.3`` or ``X[2,3]`` -> ("X", (2, 3)); anything else is a plain name."""
    m = _DOTTED.fullmatch(name)
    if m:
        idx = tuple(int(p) for p in m.group(2)[1:].split("."))
    else:
        m = _BRACKET.fullmatch(name)
        idx = tuple(int(p) for p in m.group(2).split(",")) if m else ()
    if m and all(i >= 1 for i in idx):
        return m.group(1), idx
    return name, ()


#: From this size a plain CSV's columns are read by pandas' C reader when pandas is installed
#: (8x numpy's casts; its import, ~0.3 s, pays off from here).
PANDAS_MIN_BYTES = 8 << 20
_WIDEST = 64  # wider cells are parsed as strings: no number needs more characters
_BLOCK_BYTES = 1 << 20  # the byte matrix of one block of rows


def _cast_spans(data: bytes, starts: np.ndarray, ends: np.ndarray, dtype) -> np.ndarray | None:
    """The cells data[starts[i]:ends[i]] cast to ``dtype`` by numpy (as float() / int() would
    parse them), or None if a cell does not parse or is wider than _WIDEST bytes. The cells are
    copied into a NUL-padded (rows, width) byte matrix a block of rows at a time."""
    lengths = ends - starts
    out = np.empty(len(lengths), dtype=dtype)
    if not len(lengths):
        return out
    width = int(lengths.max())
    if width > _WIDEST:
        return None
    width = max(width, 1)
    buf = np.frombuffer(data, dtype=np.uint8)
    offsets = np.arange(width)
    step = max(1, _BLOCK_BYTES // width)
    for i in range(0, len(lengths), step):
        index = starts[i : i + step, None] + offsets
        np.minimum(index, len(buf) - 1, out=index)
        cells = buf[index]
        cells[offsets >= lengths[i : i + step, None]] = 0
        try:
            out[i : i + step] = cells.view(f"S{width}").ravel().astype(dtype)
        except (ValueError, OverflowError, TypeError):
            return None
    return out


class CsvText:
    """A parsed CSV file: header, where each cell is, and lazily converted numeric columns.

    Plain files (no quotes, no lone carriage returns) are parsed from their bytes with numpy: the
    lines and fields are found once (an array of where each cell ends), and a column is turned
    into numbers only when a variable asks for it, a block of rows at a time, without a Python
    string per cell. Files that quote fields go through the csv module and keep their cells as
    strings. Either way a column is parsed exactly as float() / int() parse its cells, and a bad
    cell is reported with its row and column.
    """

    kind = "csv"

    def __init__(self, path: str, text: str | bytes, row0: int = 0) -> None:
        """`text`: the file's text, or its UTF-8 bytes without a BOM (as :func:`_read_utf8`
        gives them); `row0`: rows of the file before this text (a chunk of a streamed file), for
        messages."""
        self.path, self.row0 = path, row0
        data = text.encode("utf-8") if isinstance(text, str) else text
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        self._ends: np.ndarray | None = None
        if b'"' in data or b"\r" in data:
            original = text if isinstance(text, str) else text.decode("utf-8")
            header, lines = self._split_with_csv(original)
            self._set_header(header)
            self._check_counts(np.fromiter(map(_field_count, lines), np.int64, len(lines)))
            # all cells, row after row: column j is cells[j::ncol]
            self.cells: list[str] = [c for row in lines for c in (row or [""])]
        else:  # no quoting: the fields are where the commas and line breaks are
            self._split_bytes(data)
        self._check_header()
        self._cache: dict[tuple[int, bool], np.ndarray] = {}
        self._pandas: dict[int, np.ndarray] | None = None

    def _set_header(self, header: list[str]) -> None:
        self.header = [c.strip() for c in header]
        self.ncol = len(self.header)

    def _check_counts(self, counts: np.ndarray) -> None:
        """Every data row must have the header's number of fields (an empty line has none)."""
        self.nrows = len(counts)
        if self.ncol == 1:  # a blank line in a one-column file is an empty cell
            counts[counts == 0] = 1
        bad = np.flatnonzero(counts != self.ncol)
        if bad.size:
            i = int(bad[0])
            raise DataError(
                f"{self.path}: row {self.row0 + i + 1} has {counts[i]} "
                f"field{'s' if counts[i] != 1 else ''}, the header has {self.ncol}"
            )

    def _split_bytes(self, data: bytes) -> None:
        """Header, row count and cell ends of a CSV text that has no quotes and only \\n
        breaks. Blank lines before the header are skipped, blank lines at the end dropped."""
        pos = 0
        while True:  # the header: the first line with more than commas and blanks
            nl = data.find(b"\n", pos)
            stop = len(data) if nl < 0 else nl
            line = data[pos:stop].decode("utf-8")
            if line.replace(",", "").strip():
                break
            if nl < 0:
                raise DataError(f"{self.path}: the file is empty")
            pos = nl + 1
        self._set_header(line.split(","))
        start = len(data) if nl < 0 else nl + 1
        end = len(data)
        while end > start and data[end - 1] == 10:  # blank lines at the end of the file
            end -= 1
        self._data, self._start = data, start
        if end == start:
            self._check_counts(np.zeros(0, dtype=np.int64))
            self._ends = np.zeros((0, self.ncol), dtype=np.int64)
            return
        body = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start)
        seps = np.flatnonzero((body == 44) | (body == 10))  # commas and line breaks
        breaks = np.flatnonzero(body[seps] == 10)  # which separators end a line
        # fields per line: its separators, the line break included (the last line has none)
        counts = np.diff(np.concatenate(([-1], breaks, [len(seps)])))
        line_starts = np.concatenate(([0], seps[breaks] + 1))
        line_ends = np.concatenate((seps[breaks], [len(body)]))
        counts[line_starts == line_ends] = 0  # an empty line has no fields
        self._check_counts(counts)
        dtype = np.int32 if len(data) < 2**31 else np.int64
        ends = np.concatenate((seps, [len(body)])).astype(dtype) + dtype(start)
        self._ends = ends.reshape(self.nrows, self.ncol)

    def _split_with_csv(self, text: str) -> tuple[list[str], list[list[str]]]:
        """Header and data rows via the csv module, for files that use quoting or \\r breaks."""
        reader = csv.reader(io.StringIO(text, newline=""))
        header: list[str] | None = None
        rows: list[list[str]] = []
        try:
            for row in reader:
                if header is None:
                    if any(c.strip() for c in row):
                        header = row
                    continue
                rows.append(row)
        except csv.Error as e:
            raise DataError(f"{self.path}: line {reader.line_num}: malformed CSV: {e}") from None
        if header is None:
            raise DataError(f"{self.path}: the file is empty")
        while rows and not rows[-1]:  # blank lines at the end of the file
            rows.pop()
        return header, rows

    def _check_header(self) -> None:
        named = [c for c in self.header if c]
        if all(_parse_float(c) is not None for c in named):
            shown = ", ".join(named[:4]) + (", ..." if len(named) > 4 else "")
            raise DataError(
                f"{self.path}: the first row must be a header naming the columns, "
                f"but it holds numbers ({shown})"
            )
        if len(self.header) == 1 and any(sep in self.header[0] for sep in ";\t|"):
            raise DataError(
                f'{self.path}: the header has a single column "{self.header[0][:60]}"; '
                "data CSV files must be comma-separated"
            )
        seen: dict[str, int] = {}
        self.vars: dict[str, dict[tuple[int, ...], int]] = {}
        for j, name in enumerate(self.header):
            if not name:  # e.g. R's unnamed row-name column: nothing can refer to it
                continue
            if name in seen:
                raise DataError(
                    f'{self.path}: column name "{name}" appears twice in the header '
                    f"(columns {seen[name] + 1} and {j + 1})"
                )
            seen[name] = j
            base, idx = _split_column_name(name)
            cols = self.vars.setdefault(base, {})
            if idx in cols:
                raise DataError(
                    f'{self.path}: columns "{self.header[cols[idx]]}" and "{name}" both give '
                    f"{base}{''.join('.' + str(i) for i in idx)}"
                )
            cols[idx] = j

    def _cell_error(self, row: int, col: int, text: str) -> DataError:
        where = f'{self.path}: row {self.row0 + row + 1}, column "{self.header[col]}"'
        stripped = text.strip()
        if not stripped:
            return DataError(f"{where}: missing value (empty cell)")
        if stripped.lower() in _MISSING_WORDS:
            return DataError(f"{where}: missing value ({_cell(stripped)})")
        return DataError(f"{where}: {_cell(stripped)} is not a number")

    def column(self, col: int, want_int: bool) -> np.ndarray:
        """Column ``col`` as int64 (when asked and exact) or float64; vectorised when possible."""
        key = (col, want_int)
        if key not in self._cache:
            if self._ends is None:
                self._cache[key] = self._numbers(self.cells[col :: self.ncol], col, want_int)
            else:
                self._cache[key] = self._column_from_bytes(col, want_int)
        return self._cache[key]

    def _spans(self, col: int) -> tuple[np.ndarray, np.ndarray]:
        """Where the cells of column ``col`` start and end in the bytes (end exclusive)."""
        ends = self._ends[:, col].astype(np.int64)
        if col:
            starts = self._ends[:, col - 1].astype(np.int64) + 1
        else:
            starts = np.empty_like(ends)
            starts[:1] = self._start
            starts[1:] = self._ends[:-1, -1] + 1
        return starts, ends

    def _cells(self, col: int) -> list[str]:
        """The cells of column ``col`` as strings (for the exact, slow path)."""
        data = self._data
        starts, ends = self._spans(col)
        spans = zip(starts.tolist(), ends.tolist(), strict=True)
        return [data[a:b].decode("utf-8") for a, b in spans]

    def _column_from_bytes(self, col: int, want_int: bool) -> np.ndarray:
        """Numpy's string casts on blocks of the cells' bytes (float() / int() semantics);
        anything they refuse goes through :meth:`_numbers` on the decoded cells, which finds the
        bad cell or parses what only Python's float() accepts (e.g. non-ASCII digits). A large
        file's columns come from pandas' C reader first, when pandas is installed."""
        fast = self._by_pandas().get(col) if len(self._data) >= PANDAS_MIN_BYTES else None
        if fast is not None and (want_int or fast.dtype.kind == "f"):
            return fast
        if fast is not None and not (fast == 0).any():  # (a zero may have been "-0": -0.0)
            return fast.astype(np.float64)
        starts, ends = self._spans(col)
        if b"\x00" not in self._data:  # numpy's byte strings drop trailing NULs
            for dtype in (np.int64, np.float64) if want_int else (np.float64,):
                out = _cast_spans(self._data, starts, ends, dtype)
                if out is not None:
                    return out
        return self._numbers(self._cells(col), col, want_int)

    def _by_pandas(self) -> dict[int, np.ndarray]:
        """Every column pandas' C reader parses as int64 or float64 (exactly as float() and
        int() would: pandas >= 3 rounds correctly, older ones are asked to), by position; none
        when pandas is missing or reads the file differently (the numpy path then decides, and
        finds any bad cell with its row)."""
        if self._pandas is None:
            self._pandas = {}
            try:
                import pandas as pd
            except ImportError:
                return self._pandas
            major = int(pd.__version__.split(".")[0])
            exact = {} if major >= 3 else {"float_precision": "round_trip"}
            try:
                frame = pd.read_csv(io.BytesIO(self._data), header=0, na_filter=False,
                                    keep_default_na=False, engine="c", **exact)  # fmt: skip
            except Exception:  # noqa: BLE001 - any disagreement: the numpy path reads it
                return self._pandas
            if frame.shape == (self.nrows, self.ncol):
                for j in range(self.ncol):
                    column = frame.iloc[:, j].to_numpy()
                    if column.dtype.kind in "if":
                        self._pandas[j] = column.astype(np.int64 if column.dtype.kind == "i"
                                                        else np.float64, copy=False)  # fmt: skip
        return self._pandas

    def _numbers(self, cells: list[str], col: int, want_int: bool) -> np.ndarray:
        out: np.ndarray | None = None
        for dtype in (np.int64, np.float64) if want_int else (np.float64,):
            try:
                out = np.array(cells, dtype=dtype)
                break
            except (ValueError, OverflowError, TypeError):
                out = None
        if out is None:  # slow path: also finds the offending cell for the message
            out = np.empty(len(cells), dtype=np.float64)
            for i, c in enumerate(cells):
                v = _parse_float(c)
                if v is None:
                    raise self._cell_error(i, col, c)
                out[i] = v
        return out

    def source_for(self, spec: DataSpec) -> _Source | None:
        """The columns that give ``spec`` in this file, or None if the file does not mention it."""
        entry = self.vars.get(spec.name)
        if not entry or not spec.dims:
            return None
        arity = len(spec.dims) - 1
        cols = {t: j for t, j in entry.items() if len(t) == arity}
        if cols:
            return _CsvSource(self, spec.name, cols)
        found = ", ".join(f'"{self.header[j]}"' for j in list(entry.values())[:4])
        if arity == 0:
            need = f'a single column "{spec.name}"'
        else:
            pattern = ".".join(["i", "j", "k", "l", "m"][:arity]) if arity <= 5 else "..."
            need = f"columns named {spec.name}.{pattern}"
        raise DataError(
            f"{self.path}: {_what(spec)} has {len(spec.dims)} dimension"
            f"{'s' if len(spec.dims) != 1 else ''}, so it needs {need}, but the file has {found}"
        )


class _JsonFile:
    """A parsed Stan-format JSON data file (an object of name -> number / nested lists)."""

    kind = "json"

    def __init__(self, path: str, text: str) -> None:
        self.path = path

        def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
            out: dict[str, object] = {}
            for k, v in items:
                if k in out:
                    raise DataError(f'{path}: key "{k}" appears twice')
                out[k] = v
            return out

        try:
            obj = json.loads(text, object_pairs_hook=pairs)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{path}: line {e.lineno}, column {e.colno}: malformed JSON: {e.msg}"
            ) from None
        except RecursionError:
            raise DataError(f"{path}: the JSON is nested too deeply") from None
        except ValueError as e:  # e.g. integers with more digits than Python allows
            raise DataError(f"{path}: malformed JSON: {e}") from None
        if not isinstance(obj, dict):
            raise DataError(
                f"{path}: the top level must be a JSON object mapping variable names to values, "
                f"not {_json_kind(obj)}"
            )
        self.obj = obj
        # numpy silently turns true/false into 1/0, so only trust it when no booleans are present
        self.fast_ok = "true" not in text and "false" not in text

    def source_for(self, spec: DataSpec) -> _Source | None:
        if spec.name not in self.obj:
            return None
        value = _json_array(self.path, spec.name, self.obj[spec.name], self.fast_ok)
        return _JsonSource(self.path, spec.name, value)


def _json_kind(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"the string {_cell(v)}"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    return "a number"


_JSON_SPECIALS = {"inf", "+inf", "infinity", "+infinity", "-inf", "-infinity", "nan"}


def _json_array(path: str, name: str, value: object, fast_ok: bool) -> np.ndarray:
    """Convert one JSON entry to an int64/float64 array, with a precise message if it is bad."""
    if fast_ok:
        try:
            a = np.asarray(value)
        except (ValueError, OverflowError, TypeError):
            a = None
        if a is not None and a.dtype.kind in "if":
            return a.astype(np.int64 if a.dtype.kind == "i" else np.float64)

    def shape_of(v: object, index: tuple[int, ...]) -> tuple[int, ...]:
        if isinstance(v, list):
            if not v:
                return (0,)
            shapes = [shape_of(x, (*index, i)) for i, x in enumerate(v)]
            for i, s in enumerate(shapes):
                if s != shapes[0]:
                    raise DataError(
                        f"{path}: {name} is a ragged nested list: "
                        f"{_index_text(name, (*index, i))} is {desc(s)} but "
                        f"{_index_text(name, (*index, 0))} is {desc(shapes[0])}"
                    )
            return (len(v), *shapes[0])
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool)) or (
            isinstance(v, str) and v.strip().lower() in _JSON_SPECIALS
        )
        if not ok:
            hint = " (missing values are not allowed)" if v is None else ""
            if isinstance(v, str):
                hint = ' (the only strings allowed are "inf", "-inf" and "NaN")'
            raise DataError(
                f"{path}: {_index_text(name, index)}: {_json_kind(v)} is not a number{hint}"
            )
        return ()

    def desc(sh: tuple[int, ...]) -> str:
        return "a number" if not sh else f"a list of {_shape_text(sh)}"

    def flatten(v: object) -> list[object]:
        if isinstance(v, list):
            return [y for x in v for y in flatten(x)]
        return [v]

    try:
        shape = shape_of(value, ())
    except RecursionError:
        raise DataError(f"{path}: {name} is nested too deeply") from None
    if len(shape) > 32:
        raise DataError(f"{path}: {name} has {len(shape)} dimensions, too many")
    flat = flatten(value)
    if all(isinstance(x, int) and -_INT64_MAX <= x < _INT64_MAX for x in flat):
        return np.array(flat, dtype=np.int64).reshape(shape)
    out = np.empty(len(flat), dtype=np.float64)
    for i, x in enumerate(flat):
        try:
            out[i] = float(x)  # type: ignore[arg-type]
        except OverflowError:
            idx = np.unravel_index(i, shape) if shape else ()
            raise DataError(
                f"{path}: {_index_text(name, tuple(int(j) for j in idx))}: the number is too large"
            ) from None
    return out.reshape(shape)


class PythonValues:
    """Data given from Python (ppl.api): a mapping of name -> number, list or numpy array, or a
    pandas DataFrame whose columns follow the CSV convention (``x``, ``X.1``, ``X.2``: a row per
    element of the first dimension)."""

    kind = "python"

    def __init__(self, label: str, values) -> None:
        self.label = self.path = label
        self.values = dict(values)
        self.rows_only = False  # a DataFrame gives arrays (a row per element), as CSV does

    @classmethod
    def from_frame(cls, frame, label: str = "the DataFrame") -> PythonValues:
        columns = {str(c): np.asarray(frame[c]) for c in frame.columns}
        return cls.from_columns(columns, len(frame), label)

    @classmethod
    def from_columns(cls, columns: dict[str, np.ndarray], rows: int, label: str) -> PythonValues:
        """Columns named as in a CSV file (``x``, ``X.1``, ``X[2,3]``), `rows` long."""
        grouped: dict[str, dict[tuple[int, ...], np.ndarray]] = {}
        for col, values in columns.items():
            name, index = _split_column_name(col)
            grouped.setdefault(name, {})[index] = values
        values = {}
        for name, cols in grouped.items():
            arities = {len(t) for t in cols}
            if len(arities) > 1:
                raise DataError(f"{label}: the columns of {name} mix index depths")
            if arities == {0}:
                values[name] = cols[()]
                continue
            trailing = tuple(max(t[k] for t in cols) for k in range(arities.pop()))
            keys = list(itertools.product(*(range(1, m + 1) for m in trailing)))
            missing = [t for t in keys if t not in cols]
            if missing:
                dotted = ".".join(str(i) for i in missing[0])
                raise DataError(f'{label}: column "{name}.{dotted}" is missing')
            values[name] = np.stack([cols[t] for t in keys], axis=1).reshape((rows, *trailing))
        out = cls(label, values)
        out.rows_only = True
        return out

    def source_for(self, spec: DataSpec) -> _Source | None:
        if spec.name not in self.values or (self.rows_only and not spec.dims):
            return None
        return _JsonSource(self.label, spec.name, _python_array(self.label, spec.name,
                                                               self.values[spec.name]))


def _python_array(label: str, name: str, value: object) -> np.ndarray:
    """A Python value as an int64/float64 array, with a message naming it if it is not numbers."""
    if hasattr(value, "to_numpy"):  # pandas Series, xarray
        value = value.to_numpy()
    if isinstance(value, (list, tuple)) and not isinstance(value, np.ndarray):
        try:
            a = np.asarray(value)
        except ValueError:
            a = np.asarray(None, dtype=object)
        if a.dtype.kind not in "biuf":
            return _json_array(label, name, [*value], fast_ok=False)
    else:
        a = np.asarray(value)
    if a.dtype.kind == "b":
        return a.astype(np.int64)
    if a.dtype.kind == "u" and a.size and int(a.max()) >= _INT64_MAX:
        return a.astype(np.float64)
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    first = _cell(str(a.flat[0])) if a.size else "empty"
    raise DataError(f"{label}: {name} holds {a.dtype} values ({first}); data must be numbers")


def open_data_file(path: str) -> CsvText | _JsonFile:
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return CsvText(path, _read_utf8(path))
    if suffix == ".json":
        return _JsonFile(path, _read_text(path))
    raise DataError(
        f"{path}: unknown data file type {suffix or '(no extension)'!s}; "
        "give a .csv or a .json file"
    )


# ----------------------------------------------------------------------------------------------
# sources: one place where a variable's value was found


class _Source:
    """Where a value came from: its shape, its raw numbers, and how to name one element."""

    label: str
    name: str

    @property
    def shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def raw(self, want_int: bool) -> np.ndarray:
        raise NotImplementedError

    def where(self, index: tuple[int, ...]) -> str:
        raise NotImplementedError

    def length_text(self, axis: int, n: int) -> str:
        if axis == 0:
            return f"length {n} in {self.label}"
        return f"size {n} in dimension {axis + 1} in {self.label}"


class _CsvSource(_Source):
    def __init__(self, file: CsvText, name: str, cols: dict[tuple[int, ...], int]) -> None:
        self.file, self.name, self.cols, self.label = file, name, cols, file.path
        arity = len(next(iter(cols)))
        self.trailing = tuple(max(t[k] for t in cols) for k in range(arity))

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.file.nrows, *self.trailing)

    def raw(self, want_int: bool) -> np.ndarray:
        if not self.trailing:
            return self.file.column(self.cols[()], want_int)
        keys = itertools.product(*(range(1, m + 1) for m in self.trailing))
        parts = [self.file.column(self.cols[k], want_int) for k in keys]
        return np.stack(parts, axis=1).reshape(self.shape)

    def where(self, index: tuple[int, ...]) -> str:
        key = tuple(i + 1 for i in index[1:])
        row = self.file.row0 + index[0] + 1
        return f'{self.label}: row {row}, column "{self.file.header[self.cols[key]]}"'

    def length_text(self, axis: int, n: int) -> str:
        if axis == 0:
            return f"{n} rows in {self.label}"
        return f"columns up to index {n} in dimension {axis + 1} in {self.label}"


class _JsonSource(_Source):
    def __init__(self, path: str, name: str, value: np.ndarray) -> None:
        self.label, self.name, self.value = path, name, value

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    def raw(self, want_int: bool) -> np.ndarray:
        return self.value

    def where(self, index: tuple[int, ...]) -> str:
        return f"{self.label}: {_index_text(self.name, index)}"


class _SetSource(_Source):
    def __init__(self, spec: DataSpec, text: str) -> None:
        self.label, self.name, self.text = "--set", spec.name, text
        stripped = text.strip()
        value: int | float | None = None
        if spec.elem == "int":
            try:
                value = int(stripped)
            except ValueError:
                value = None
            if value is not None and not -_INT64_MAX <= value < _INT64_MAX:
                value = float(value)
        if value is None:
            value = _parse_float(stripped)
        if value is None:
            what = "missing value" if not stripped else f"{_cell(stripped)} is not a number"
            raise DataError(f"--set {spec.name}={text}: {what}")
        self.value = np.asarray(value)

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def raw(self, want_int: bool) -> np.ndarray:
        return self.value

    def where(self, index: tuple[int, ...]) -> str:
        return f"--set {self.name}={self.text}"


class _InferredSource(_Source):
    def __init__(self, name: str, n: int, origin: str) -> None:
        self.label, self.name, self.origin = "inferred", name, origin
        self.value = np.asarray(n, dtype=np.int64)

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def raw(self, want_int: bool) -> np.ndarray:
        return self.value

    def where(self, index: tuple[int, ...]) -> str:
        return f"{self.name} = {int(self.value)} (inferred from {self.origin})"


# ----------------------------------------------------------------------------------------------
# checking and converting


def _resolve_dims(spec: DataSpec, values: dict[str, np.ndarray]) -> list[int]:
    """Evaluate every dim of ``spec``; sizes must be non-negative integers."""
    dims: list[int] = []
    for axis, d in enumerate(spec.dims):
        label = f"size {axis + 1}"
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            n: object = int(d)
        elif isinstance(d, str):
            if d not in values:
                raise DataError(
                    f"{_what(spec)}: its size {d} is not a data variable declared before it"
                )
            n = values[d]
            label = d
        else:
            try:
                n = d(values)
            except PplError:
                raise
            except Exception as e:  # noqa: BLE001 - the compiler's expression, user's values
                raise DataError(f"{_what(spec)}: cannot evaluate {label}: {e}") from None
        a = np.asarray(n)
        ok = a.shape == () and a.dtype.kind in "iuf" and bool(np.isfinite(a))
        if ok and a.dtype.kind == "f":
            ok = float(a).is_integer()
        if not ok or int(a) < 0:
            shown = _num(a.item()) if a.shape == () and a.dtype.kind in "iufb" else str(a.shape)
            raise DataError(
                f"{_what(spec)}: {label} = {shown}, but sizes must be non-negative integers"
            )
        dims.append(int(a))
    if spec.constraint in ("simplex", "unit_vector") and dims and dims[-1] < 1:
        raise DataError(f"{_what(spec)}: a {spec.constraint} needs at least 1 element, got 0")
    over = over_budget(f"{_what(spec)}: size {dims}", elements(dims))
    if over:
        raise DataError(over)
    return dims


def _named_dims(spec: DataSpec, dims: list[int]) -> str:
    """`` (D = 5)``: the values of the named column dims (the row dim is obvious)."""
    pairs = zip(spec.dims[1:], dims[1:], strict=True)
    named = [f"{d} = {n}" for d, n in pairs if isinstance(d, str)]
    return f" ({', '.join(dict.fromkeys(named))})" if named else ""


def _check_shape(spec: DataSpec, src: _Source, dims: list[int]) -> None:
    """Raise a DataError describing the first way ``src`` does not fit the declared ``dims``."""
    shape = src.shape
    if isinstance(src, _CsvSource):
        if shape[0] != dims[0]:
            raise DataError(
                f"{spec.name} has {shape[0]} rows in {src.label} but {_want_text(spec, 0, dims[0])}"
            )
        _check_csv_columns(spec, src, dims)
        return
    if len(shape) != len(dims):
        # Stan writes an empty array as [] whatever its declared depth
        if len(shape) < len(dims) and 0 in shape and tuple(dims[: len(shape)]) == shape:
            return
        given = "a single number" if not shape else f"a list of {_shape_text(shape)}"
        if not dims:
            need = "a single number"
        else:
            need = f"{len(dims)} dimension{'s' if len(dims) != 1 else ''}"
        raise DataError(f"{src.label}: {_what(spec)} needs {need}, but the file gives {given}")
    for axis, (have, want) in enumerate(zip(shape, dims, strict=True)):
        if have != want:
            raise DataError(
                f"{spec.name} has {src.length_text(axis, have)} but {_want_text(spec, axis, want)}"
            )


def _want_text(spec: DataSpec, axis: int, want: int) -> str:
    d = spec.dims[axis]
    if isinstance(d, str):
        return f"{d} = {want}"
    return f"its declaration {_decl(spec)} needs {want}"


def _check_csv_columns(spec: DataSpec, src: _CsvSource, dims: list[int]) -> None:
    """A k-D variable needs exactly the columns name.1.1 ... name.A.B (after the row dim)."""
    trailing = dims[1:]
    if not trailing:
        return

    def col(t: tuple[int, ...]) -> str:
        return spec.name + "".join(f".{i}" for i in t)

    wanted = itertools.product(*(range(1, m + 1) for m in trailing))
    missing = [t for t in wanted if t not in src.cols]
    extra = [t for t in src.cols if any(i > m for i, m in zip(t, trailing, strict=True))]
    if not missing and not extra:
        return
    kind = _decl(spec).split("[")[0].split("<")[0].strip() + " " if spec.decl else ""
    dims_text = ", ".join(_dim_text(d) for d in spec.dims)
    if 0 in trailing:
        need = "no columns"
    else:
        need = f"columns {col((1,) * len(trailing))} ... {col(tuple(trailing))}"
    head = f"{src.label}: {kind}{spec.name}[{dims_text}]{_named_dims(spec, dims)} needs {need}"
    if missing:
        shown = ", ".join(col(t) for t in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise DataError(f"{head}; missing {shown}")
    extra.sort()
    shown = ", ".join(f'"{src.file.header[src.cols[t]]}"' for t in extra[:5])
    raise DataError(f"{head}; the file also has {shown}" + (", ..." if len(extra) > 5 else ""))


def _convert(spec: DataSpec, src: _Source, dims: list[int]) -> np.ndarray:
    """The value of ``src`` as an exact-shape int64/float64 array; int elements must be integral."""
    want_int = spec.elem == "int"
    a = src.raw(want_int)
    if a.shape != tuple(dims):
        a = a.reshape(dims)  # only the zero-size case reaches here
    if not want_int:
        return a.astype(np.float64)
    if a.dtype.kind == "i":
        return a.astype(np.int64)
    integral = np.isfinite(a) & (a == np.trunc(a))
    fits = integral & (np.abs(a) < _INT64_MAX)
    if not fits.all():
        idx = _first(~fits)
        v = a[idx]
        problem = "is too large" if integral[idx] else "is not an integer"
        raise DataError(f"{src.where(idx)}: {_num(v)} for int variable '{spec.name}' {problem}")
    return a.astype(np.int64)


def _check_bounds(
    spec: DataSpec, value: np.ndarray, src: _Source | None, values: dict[str, np.ndarray]
) -> None:
    for which, bound in (("lower", spec.lower), ("upper", spec.upper)):
        if bound is None or value.size == 0 or src is None:
            continue
        if callable(bound):
            try:
                bound = bound(values)
            except PplError:
                raise
            except Exception as e:  # noqa: BLE001 - the compiler's expression, user's values
                raise DataError(f"{_what(spec)}: cannot evaluate its {which} bound: {e}") from None
        try:
            b = np.asarray(bound, dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError(f"{_what(spec)}: its {which} bound is not a number") from None
        if b.ndim == value.ndim + 1 and b.shape[:1] == (1,):
            b = b[0]  # a bound carrying the data batch axis of size 1
        try:
            b = np.broadcast_to(b, value.shape)
        except ValueError:
            raise DataError(
                f"{_what(spec)}: its {which} bound has shape {b.shape}, "
                f"which does not fit the value's shape {value.shape}"
            ) from None
        bad = value < b if which == "lower" else value > b
        if bad.any():
            idx = _first(bad)
            side = "below" if which == "lower" else "above"
            raise DataError(
                f"{src.where(idx)}: value {_num(value[idx])} is {side} the declared "
                f"{which} bound {_num(b[idx])} of {spec.name}"
            )


#: what each constrained type requires of a data value (Stan's tolerance: 1e-8)
CONSTRAINT_TEXT = {
    "simplex": "a simplex (non-negative entries summing to 1)",
    "ordered": "ordered (strictly increasing)",
    "positive_ordered": "positive and strictly increasing",
    "unit_vector": "a unit vector (Euclidean norm 1)",
    "sum_to_zero_vector": "a vector summing to 0",
    "cov_matrix": "a covariance matrix (symmetric positive definite)",
    "corr_matrix": "a correlation matrix (symmetric positive definite with a unit diagonal)",
    "cholesky_factor_cov": "a Cholesky factor (lower triangular with a positive diagonal)",
    "cholesky_factor_corr": (
        "the Cholesky factor of a correlation matrix "
        "(lower triangular, positive diagonal, rows of unit length)"
    ),
}


def _check_constraint(spec: DataSpec, value: np.ndarray, src: _Source | None) -> None:
    """A value of a constrained type (simplex, cov_matrix, ...) must satisfy its constraint."""
    if spec.constraint is None or value.size == 0:
        return
    t = make_transform(spec.constraint)
    lead = value.shape[: value.ndim - t.core_ndim]
    for idx in np.ndindex(*lead):
        if not t.in_support(value[idx]):
            where = f"{_index_text(spec.name, idx)} in {_what(spec)}" if idx else _what(spec)
            origin = f" ({src.where(idx + (0,) * t.core_ndim)})" if src is not None else ""
            raise DataError(f"{where} is not {CONSTRAINT_TEXT[spec.constraint]}{origin}")


def _missing(
    spec: DataSpec,
    paths: list[str],
    files: list[CsvText | _JsonFile],
    users: list[tuple[DataSpec, int]],
) -> DataError:
    where = ", ".join(paths) if paths else "the data (no data files were given)"
    n = len(spec.dims)
    if n == 0:
        how = f"give it as a JSON entry or --set {spec.name}=..."
    elif n == 1:
        how = f'give it as a CSV column "{spec.name}" or a JSON entry'
    else:
        first = spec.name + ".1" * (n - 1)
        how = f"give it as CSV columns {first}, ... or a JSON entry"
    line = f", line {spec.line}" if spec.line else ""
    msg = f"data variable '{spec.name}' ({_decl(spec)}{line}) was not found in {where}; {how}"
    if users:
        names = ", ".join(dict.fromkeys(u.name for u, _ in users))
        msg += f" (or give {names}, so that {spec.name} can be inferred from its size)"
    for f in files:
        if n == 0 and isinstance(f, CsvText) and spec.name in f.vars:
            msg += f'; {f.path} has a column "{spec.name}", but a CSV column cannot give a scalar'
            break
    return DataError(msg)


def _infer_size(
    spec: DataSpec,
    users: list[tuple[DataSpec, int]],
    sources: dict[str, list[_Source]],
) -> _InferredSource | None:
    """Infer a size variable from the lengths of the arrays that use it; they must agree."""
    found: list[tuple[str, _Source, int, int]] = []
    for user, axis in users:
        for src in sources[user.name]:
            if axis < len(src.shape):
                found.append((user.name, src, axis, src.shape[axis]))
    if not found:
        return None
    name0, src0, axis0, n0 = found[0]
    for name, src, axis, n in found[1:]:
        if n != n0:
            raise DataError(
                f"cannot infer {_what(spec)}: {name0} has {src0.length_text(axis0, n0)} "
                f"but {name} has {src.length_text(axis, n)}"
            )
    return _InferredSource(spec.name, n0, f"{name0} in {src0.label}")


def _check_set(name: str, text: str, by_name: dict[str, DataSpec]) -> DataSpec:
    spec = by_name.get(name)
    if spec is None:
        known = ", ".join(by_name) if by_name else "none"
        raise DataError(
            f"--set {name}={text}: the data block declares no variable '{name}' "
            f"(data variables: {known})"
        )
    if spec.dims:
        raise DataError(
            f"--set {name}={text}: {_what(spec)} is not a scalar; --set gives only single "
            "values, put arrays in a CSV or JSON file"
        )
    return spec


def load_data(
    specs: list[DataSpec],
    paths: list[str],
    sets: dict[str, str] | None = None,
    opened: list | None = None,
) -> dict[str, np.ndarray]:
    """Load every declared data variable from ``paths`` (CSV/JSON) and ``sets`` (``--set``).

    ``opened``: files already read (:func:`open_data_file`, or a chunk of a streamed CSV), used
    instead of reading ``paths`` again; ``paths`` then only name them in messages.
    Returns name -> array of exactly the declared shape (0-d for scalars), int64 for "int"
    and float64 for "real".  Raises DataError with a printable message for any problem.
    """
    for s in specs:
        if s.elem not in ("int", "real"):
            raise ValueError(f"DataSpec {s.name}: elem must be 'int' or 'real', not {s.elem!r}")
    by_name = {s.name: s for s in specs}
    set_specs = {name: _check_set(name, text, by_name) for name, text in (sets or {}).items()}
    files = [open_data_file(p) for p in paths] if opened is None else list(opened)

    users: dict[str, list[tuple[DataSpec, int]]] = {}
    for s in specs:
        for axis, d in enumerate(s.dims):
            if isinstance(d, str):
                users.setdefault(d, []).append((s, axis))

    sources: dict[str, list[_Source]] = {}
    for s in specs:
        found: list[_Source] = []
        for f in files:
            src = f.source_for(s)
            if src is not None:
                found.append(src)
        if s.name in set_specs:
            found.append(_SetSource(s, (sets or {})[s.name]))
        sources[s.name] = found

    values: dict[str, np.ndarray] = {}
    for s in specs:
        srcs = sources[s.name]
        first: _Source | None = None
        if not srcs:
            inferred = _infer_size(s, users[s.name], sources) if s.name in users else None
            if inferred is not None and not s.dims:
                first = inferred
                value = _convert(s, inferred, [])
            else:
                dims = _resolve_dims(s, values)
                if math.prod(dims) != 0:  # an empty array may be left out, as in CmdStan
                    raise _missing(s, paths, files, users.get(s.name, []))
                value = np.zeros(dims, dtype=np.int64 if s.elem == "int" else np.float64)
        else:
            dims = _resolve_dims(s, values)
            arrays = []
            for src in srcs:
                _check_shape(s, src, dims)
                arrays.append(_convert(s, src, dims))
            first, value = srcs[0], arrays[0]
            for src, other in zip(srcs[1:], arrays[1:], strict=True):
                diff = value != other
                if s.elem == "real":
                    diff &= ~(np.isnan(value) & np.isnan(other))
                if diff.any():
                    idx = _first(diff)
                    raise DataError(
                        f"{s.name} is given twice with different values: {first.where(idx)} "
                        f"has {_num(value[idx])} but {src.where(idx)} has {_num(other[idx])}"
                    )
        if s.name in users and first is not None and value.ndim == 0:
            v = value.item()
            if v < 0 or (isinstance(v, float) and not v.is_integer()):
                user = users[s.name][0][0]
                raise DataError(
                    f"{first.where(())}: {s.name} = {_num(v)} is the size of {_what(user)}, "
                    "but sizes must be non-negative integers"
                )
        _check_bounds(s, value, first, values)
        _check_constraint(s, value, first)
        values[s.name] = value
    return values
