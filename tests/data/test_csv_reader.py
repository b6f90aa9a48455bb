"""The CSV reader's byte path (numpy casts on blocks of cell bytes) gives exactly what the
string path gives (float() / int() on every cell): the same values, dtypes and messages."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ppl.data.csv_text as data
from ppl.data.csv_text import CsvText
from ppl.errors import DataError

ODD = ["1", "-0", "+4", ".5", "5.", "1e5", "-1E-7", "1_000", " 7 ", "\t6", "inf", "-Infinity",
       "nan", "NA", "", " ", "x", "0x10", "1e400", "00012", "1.0", "9223372036854775807",
       "9223372036854775808", "12345678901234567890", "\u0661\u0662", "\u00e9", "1e",
       "--1"]  # fmt: skip

cells = st.one_of(
    st.sampled_from(ODD),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=False).map(repr),
    st.text(alphabet="0123456789+-.eE_ ", max_size=8),
)


def by_strings(table: CsvText, col: int, want_int: bool):
    """The string path: float() / int() semantics on the decoded cells."""
    return table._numbers(table._cells(col), col, want_int)


def outcome(fn):
    try:
        a = fn()
    except DataError as e:
        return str(e)
    return a.dtype.str, a.tobytes()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(cells, min_size=2, max_size=2), min_size=1, max_size=12))
def test_the_byte_path_parses_as_float_and_int_do(rows):
    rows = [[c.replace(",", "") for c in r] for r in rows]
    text = "a,b\n" + "\n".join(",".join(r) for r in rows) + "\n"
    table = CsvText("t.csv", text)
    assert table.nrows == len(rows) or rows[-1] == ["", ""]
    for col in range(2):
        for want_int in (False, True):
            fast = outcome(lambda: table._column_from_bytes(col, want_int))  # noqa: B023
            assert fast == outcome(lambda: by_strings(table, col, want_int))  # noqa: B023


def test_blocks_of_rows_give_the_same_column(monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.normal(0, 100, 1000)
    k = rng.integers(-(10**12), 10**12, 1000)
    text = "x,k\n" + "".join(f"{float(a)!r},{int(b)}\n" for a, b in zip(x, k, strict=True))
    whole = CsvText("t.csv", text)
    monkeypatch.setattr(data, "_BLOCK_BYTES", 64)  # a few rows per block
    blocked = CsvText("t.csv", text.encode())
    np.testing.assert_array_equal(blocked.column(0, False), x)
    np.testing.assert_array_equal(blocked.column(1, True), k)
    assert blocked.column(1, True).dtype == np.int64
    np.testing.assert_array_equal(whole.column(0, False), x)


def test_a_bad_cell_in_a_later_block_is_named_by_its_row(monkeypatch):
    monkeypatch.setattr(data, "_BLOCK_BYTES", 16)
    text = "y\n" + "1.5\n" * 50 + "oops\n" + "2\n" * 10
    with pytest.raises(DataError, match=r'row 51, column "y": \'oops\' is not a number'):
        CsvText("t.csv", text).column(0, False)


def test_unused_text_columns_cost_nothing_and_wide_cells_still_parse():
    wide = "0." + "1" * 100  # wider than any number needs: parsed through float()
    table = CsvText("t.csv", f"name,y\nalpha,{wide}\nbeta,2\n")
    np.testing.assert_array_equal(table.column(1, False), [float(wide), 2.0])
    with pytest.raises(DataError, match='row 1, column "name"'):
        table.column(0, False)


def test_nul_bytes_are_cells_not_ends():
    """numpy's byte strings drop trailing NULs; a NUL in a cell must still be an error."""
    with pytest.raises(DataError, match=r"'1\\x00' is not a number"):
        CsvText("t.csv", "y\n1\x00\n").column(0, False)


@pytest.mark.parametrize(
    "text, rows",
    [
        ("y\n1\n2", 2),
        ("y\n1\n2\n\n\n", 2),
        ("\n,,\ny\n1\n", 1),
        ("y\r\n1\r\n2\r\n", 2),
        ("y", 0),
        ("y\n", 0),
        ("y\n1\n\n2\n", 3),  # a blank line in a one-column file is an empty cell
    ],
)
def test_line_structure(text, rows):
    table = CsvText("t.csv", text)
    assert table.header == ["y"] and table.nrows == rows


def test_field_counts_name_the_row():
    with pytest.raises(DataError, match="row 3 has 0 fields, the header has 2"):
        CsvText("t.csv", "a,b\n1,2\n3,4\n\n5,6\n")
    with pytest.raises(DataError, match="row 12 has 3 fields, the header has 2"):
        CsvText("t.csv", "a,b\n1,2\n3,4,5\n", row0=10)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(cells, min_size=2, max_size=2), min_size=1, max_size=12))
def test_the_pandas_path_for_large_files_parses_as_float_and_int_do(rows):
    """Large files go through pandas' C reader: the same values, dtypes and messages."""
    pytest.importorskip("pandas")
    rows = [[c.replace(",", "") for c in r] for r in rows]
    text = "a,b\n" + "\n".join(",".join(r) for r in rows) + "\n"
    original = data.PANDAS_MIN_BYTES
    data.PANDAS_MIN_BYTES = 0
    try:
        table = CsvText("t.csv", text)
        for col in range(2):
            for want_int in (False, True):
                fast = outcome(lambda: table._column_from_bytes(col, want_int))  # noqa: B023
                assert fast == outcome(lambda: by_strings(table, col, want_int))  # noqa: B023
    finally:
        data.PANDAS_MIN_BYTES = original
