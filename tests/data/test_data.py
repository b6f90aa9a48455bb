"""Tests for ppl.data.files: every source, size inference, and clear DataErrors for user
mistakes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppl.data.declaration import DataSpec
from ppl.data.files import load_data
from ppl.errors import DataError


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return str(p)


def wjson(tmp_path: Path, name: str, obj: object) -> str:
    return write(tmp_path, name, json.dumps(obj))


def N(**kw) -> DataSpec:
    return DataSpec("N", "int", [], lower=0, line=1, **kw)


def vec(name: str, dim="N", elem="real", **kw) -> DataSpec:
    return DataSpec(name, elem, [dim], line=4, **kw)


def raises(match_all: list[str], fn, *args, **kw) -> str:
    """Call fn expecting a DataError whose message contains every string in match_all."""
    with pytest.raises(DataError) as info:
        fn(*args, **kw)
    msg = str(info.value)
    for part in match_all:
        assert part in msg, f"{part!r} not in {msg!r}"
    assert "Traceback" not in msg
    return msg


# ---------------------------------------------------------------------------------------------
# happy paths


def test_csv_vectors_matrix_and_json_scalars(tmp_path):
    csv_path = write(
        tmp_path,
        "data.csv",
        "y, X.1 ,X.2,extra,k\n1.5,1,2,junk,3\n-2,3,4,,0\n 7 ,5,6,x,1\n",
    )
    json_path = wjson(tmp_path, "sizes.json", {"N": 3, "D": 2, "sigma": 0.5, "unused": [1]})
    specs = [
        N(),
        DataSpec("D", "int", [], line=2),
        DataSpec("sigma", "real", [], lower=0.0),
        vec("y"),
        DataSpec("X", "real", ["N", "D"], decl="matrix[N, D]"),
        DataSpec("k", "int", ["N"], lower=0),
    ]
    out = load_data(specs, [csv_path, json_path])
    assert out["N"].shape == () and out["N"].dtype == np.int64 and int(out["N"]) == 3
    assert out["sigma"].dtype == np.float64 and float(out["sigma"]) == 0.5
    np.testing.assert_array_equal(out["y"], [1.5, -2.0, 7.0])
    assert out["y"].dtype == np.float64
    np.testing.assert_array_equal(out["X"], [[1, 2], [3, 4], [5, 6]])
    assert out["X"].dtype == np.float64
    np.testing.assert_array_equal(out["k"], [3, 0, 1])
    assert out["k"].dtype == np.int64


def test_csv_bracket_headers_and_3d(tmp_path):
    text = "X[1],X[2],Z.1.1,Z.1.2,Z.2.1,Z.2.2,Z.3.1,Z.3.2\n1,2,1,2,3,4,5,6\n3,4,7,8,9,10,11,12\n"
    p = write(tmp_path, "d.csv", text)
    specs = [N(), DataSpec("X", "real", ["N", 2]), DataSpec("Z", "int", ["N", 3, 2])]
    out = load_data(specs, [p])
    assert int(out["N"]) == 2
    np.testing.assert_array_equal(out["X"], [[1, 2], [3, 4]])
    assert out["Z"].shape == (2, 3, 2) and out["Z"].dtype == np.int64
    np.testing.assert_array_equal(out["Z"][0], [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(out["Z"][1, 2], [11, 12])


def test_json_only_nested(tmp_path):
    p = wjson(
        tmp_path,
        "d.json",
        {
            "N": 2,
            "K": 3,
            "a": [[1, 2, 3], [4, 5, 6.5]],
            "M": [[1, 0], [0, 1]],
            "k": [1, 2],
            "s": "inf",
            "t": ["-inf", "NaN", 1],
        },
    )
    specs = [
        N(),
        DataSpec("K", "int", []),
        DataSpec("a", "real", ["N", "K"], decl="array[N] vector[K]"),
        DataSpec("M", "real", [2, 2]),
        DataSpec("k", "int", ["N"]),
        DataSpec("s", "real", []),
        DataSpec("t", "real", ["K"]),
    ]
    out = load_data(specs, [p])
    assert out["a"].shape == (2, 3) and out["a"][1, 2] == 6.5
    np.testing.assert_array_equal(out["M"], np.eye(2))
    assert out["k"].dtype == np.int64
    assert np.isinf(out["s"]) and out["s"].shape == ()
    assert out["t"][0] == -np.inf and np.isnan(out["t"][1]) and out["t"][2] == 1.0


def test_json_empty_arrays(tmp_path):
    p = wjson(tmp_path, "d.json", {"N": 0, "y": [], "a": []})
    specs = [N(), vec("y"), DataSpec("a", "real", ["N", 3]), DataSpec("b", "int", ["N"])]
    out = load_data(specs, [p])
    assert out["y"].shape == (0,)
    assert out["a"].shape == (0, 3)
    assert out["b"].shape == (0,) and out["b"].dtype == np.int64  # empty may be left out


def test_set_scalars(tmp_path):
    specs = [N(), DataSpec("mu", "real", []), DataSpec("flag", "int", [])]
    out = load_data(specs, [], {"N": "10", "mu": "-1.5e-1", "flag": " 1.0 "})
    assert int(out["N"]) == 10 and out["N"].dtype == np.int64
    assert float(out["mu"]) == -0.15 and out["mu"].dtype == np.float64
    assert int(out["flag"]) == 1 and out["flag"].dtype == np.int64


def test_size_inference_from_csv_and_json(tmp_path):
    c = write(tmp_path, "d.csv", "y,X.1,X.2,X.3\n1,1,2,3\n2,4,5,6\n3,7,8,9\n4,1,1,1\n")
    j = wjson(tmp_path, "e.json", {"z": [[1, 2], [3, 4], [5, 6], [7, 8]]})
    specs = [
        N(),
        DataSpec("D", "int", []),
        DataSpec("K", "int", []),
        vec("y"),
        DataSpec("X", "real", ["N", "D"]),
        DataSpec("z", "real", ["N", "K"]),
    ]
    out = load_data(specs, [c, j])
    assert (int(out["N"]), int(out["D"]), int(out["K"])) == (4, 3, 2)


def test_int_casting_and_big_ints(tmp_path):
    c = write(tmp_path, "d.csv", "k,j\n1.0,9007199254740993\n2e0,2\n")
    out = load_data([DataSpec("k", "int", [2]), DataSpec("j", "int", [2])], [c])
    np.testing.assert_array_equal(out["k"], [1, 2])
    assert out["j"][0] == 9007199254740993  # parsed exactly, not through float


def test_identical_values_in_two_sources_are_fine(tmp_path):
    c = write(tmp_path, "d.csv", "y\n1\n2\n")
    j = wjson(tmp_path, "d.json", {"y": [1.0, 2], "N": 2})
    out = load_data([N(), vec("y")], [c, j], {"N": "2"})
    np.testing.assert_array_equal(out["y"], [1, 2])


def test_callable_dims_and_bounds(tmp_path):
    j = wjson(tmp_path, "d.json", {"N": 2, "lo": [0, 1], "x": [[1, 2, 3, 4], [5, 6, 7, 8]]})
    specs = [
        N(),
        vec("lo"),
        DataSpec("x", "real", ["N", lambda v: 2 * int(v["N"])], lower=lambda v: v["lo"][:, None]),
    ]
    out = load_data(specs, [j])
    assert out["x"].shape == (2, 4)
    bad = wjson(tmp_path, "bad.json", {"N": 2, "lo": [0, 6], "x": [[1, 2, 3, 4], [5, 6, 7, 8]]})
    raises(
        ["bad.json: x[2, 1]", "value 5 is below the declared lower bound 6 of x"],
        load_data,
        specs,
        [bad],
    )


def test_crlf_bom_quoted_and_trailing_blank_lines(tmp_path):
    p = write(tmp_path, "d.csv", b'\xef\xbb\xbf"y","z"\r\n"1",2\r\n3,"4"\r\n\r\n\r\n')
    out = load_data([N(), vec("y"), vec("z")], [p])
    np.testing.assert_array_equal(out["z"], [2, 4])


def test_r_style_unnamed_first_column_is_ignored(tmp_path):
    p = write(tmp_path, "d.csv", '"","y"\n"1",0.5\n"2",0.25\n')
    out = load_data([N(), vec("y")], [p])
    np.testing.assert_array_equal(out["y"], [0.5, 0.25])


# ---------------------------------------------------------------------------------------------
# file-level errors


def test_file_not_found(tmp_path):
    raises(["nope.csv", "not found"], load_data, [N()], [str(tmp_path / "nope.csv")])


def test_directory(tmp_path):
    d = tmp_path / "dir.csv"
    d.mkdir()
    raises(["dir.csv", "directory"], load_data, [N()], [str(d)])


def test_not_utf8(tmp_path):
    p = write(tmp_path, "d.csv", b"y\n1\n\xff\xfe\n")
    raises(["d.csv", "line 3", "UTF-8"], load_data, [N(), vec("y")], [p])


def test_unknown_extension(tmp_path):
    p = write(tmp_path, "d.txt", "y\n1\n")
    raises(["d.txt", ".txt", ".csv", ".json"], load_data, [N(), vec("y")], [p])


@pytest.mark.parametrize("name", ["d.csv", "d.json"])
@pytest.mark.parametrize("text", ["", "  \n\n"])
def test_empty_file(tmp_path, name, text):
    p = write(tmp_path, name, text)
    raises([name, "empty"], load_data, [N()], [p])


# ---------------------------------------------------------------------------------------------
# CSV errors


def test_ragged_rows(tmp_path):
    p = write(tmp_path, "d.csv", "a,b,c,d\n1,2,3,4\n1,2,3,4\n1,2,3,4\n1,2,3,4\n1,2,3\n")
    raises(["d.csv", "row 5 has 3 fields, the header has 4"], load_data, [vec("a", 5)], [p])


def test_blank_line_inside_multi_column_csv_is_ragged(tmp_path):
    p = write(tmp_path, "d.csv", "a,b\n1,2\n\n3,4\n")
    raises(["d.csv", "row 2 has 0 fields"], load_data, [vec("a", 3)], [p])


def test_missing_header(tmp_path):
    p = write(tmp_path, "d.csv", "1,2\n3,4\n")
    raises(["d.csv", "header"], load_data, [vec("a", 2)], [p])


def test_semicolon_separated(tmp_path):
    p = write(tmp_path, "d.csv", "a;b\n1;2\n")
    raises(["d.csv", "comma-separated"], load_data, [vec("a", 1)], [p])


def test_duplicated_column(tmp_path):
    p = write(tmp_path, "d.csv", "y,x,y\n1,2,3\n")
    raises(["d.csv", '"y"', "twice", "columns 1 and 3"], load_data, [vec("x", 1)], [p])
    p = write(tmp_path, "e.csv", "X.1,X[1]\n1,2\n")
    raises(["e.csv", "X.1", "X[1]"], load_data, [DataSpec("X", "real", [1, 1])], [p])


def test_empty_cell(tmp_path):
    p = write(tmp_path, "d.csv", "x,y\n1,2\n3, \n")
    raises(['d.csv: row 2, column "y": missing value'], load_data, [N(), vec("y")], [p])


def test_na_cell(tmp_path):
    p = write(tmp_path, "d.csv", "y\n1\n2\nNA\n")
    raises(['d.csv: row 3, column "y": missing value', "NA"], load_data, [N(), vec("y")], [p])


def test_non_numeric_cell(tmp_path):
    p = write(tmp_path, "d.csv", "x,y\n1,2\n3,4\n5,abc\n")
    raises(["d.csv: row 3, column \"y\": 'abc' is not a number"], load_data, [N(), vec("y")], [p])


def test_huge_junk_cell(tmp_path):
    p = write(tmp_path, "d.csv", "y\n1\n" + "z" * 5000 + "\n")
    raises(['d.csv: row 2, column "y"', "is not a number"], load_data, [N(), vec("y")], [p])


def test_non_integer_in_int_column(tmp_path):
    p = write(tmp_path, "data.csv", "k\n1\n2.5\n")
    raises(
        ["data.csv: row 2, column \"k\": 2.5 for int variable 'k' is not an integer"],
        load_data,
        [N(), vec("k", elem="int")],
        [p],
    )


def test_unclosed_quote_or_field_too_large(tmp_path):
    p = write(tmp_path, "d.csv", 'y\n"' + "1" * 200_000 + "\n")
    raises(["d.csv"], load_data, [N(), vec("y")], [p])


def test_missing_variable_names_all_files(tmp_path):
    c = write(tmp_path, "data.csv", "x\n1\n")
    j = wjson(tmp_path, "scores.json", {"N": 1})
    msg = raises(
        [
            "data variable 'y' (vector[N], line 4) was not found in",
            "data.csv",
            "scores.json",
            "CSV column",
        ],
        load_data,
        [N(), vec("y", decl="vector[N]")],
        [c, j],
    )
    assert "--set" not in msg  # a vector cannot come from --set


def test_missing_scalar_suggests_set_and_inference(tmp_path):
    c = write(tmp_path, "data.csv", "N,x\n1,1\n")
    raises(
        ["data variable 'N'", "--set N=", "give y", 'has a column "N"', "cannot give a scalar"],
        load_data,
        [N(), vec("y")],
        [c],
    )


def test_missing_matrix_column(tmp_path):
    p = write(tmp_path, "data.csv", "X.1,X.2,X.3,X.5\n1,2,3,5\n")
    raises(
        ["data.csv: matrix X[N, 5] needs columns X.1 ... X.5; missing X.4"],
        load_data,
        [N(), DataSpec("X", "real", ["N", 5], decl="matrix[N, 5]")],
        [p],
    )


def test_extra_matrix_column(tmp_path):
    p = write(tmp_path, "data.csv", "X.1,X.2,X.3\n1,2,3\n")
    raises(
        ["data.csv", "X[N, D]", "D = 2", "X.3"],
        load_data,
        [N(), DataSpec("D", "int", []), DataSpec("X", "real", ["N", "D"])],
        [p],
        {"D": "2"},
    )


def test_matrix_with_plain_column(tmp_path):
    p = write(tmp_path, "data.csv", "X\n1\n")
    raises(["data.csv", "X", "X.i"], load_data, [N(), DataSpec("X", "real", ["N", 2])], [p])


def test_wrong_row_count(tmp_path):
    p = write(tmp_path, "data.csv", "y\n" + "1\n" * 99)
    raises(
        ["y has 99 rows in", "data.csv", "but N = 100"],
        load_data,
        [N(), vec("y")],
        [p],
        {"N": "100"},
    )


def test_wrong_literal_length_json(tmp_path):
    p = wjson(tmp_path, "d.json", {"y": [1, 2, 3]})
    raises(["y has length 3 in", "d.json", "needs 4"], load_data, [vec("y", 4)], [p])


def test_wrong_inner_length_json(tmp_path):
    p = wjson(tmp_path, "d.json", {"N": 2, "K": 3, "a": [[1, 2], [3, 4]]})
    raises(
        ["a has size 2 in dimension 2", "d.json", "K = 3"],
        load_data,
        [N(), DataSpec("K", "int", []), DataSpec("a", "real", ["N", "K"])],
        [p],
    )


def test_wrong_rank_json(tmp_path):
    p = wjson(tmp_path, "d.json", {"N": [3], "y": 1.0})
    raises(
        ["d.json: N (int, line 1) needs a single number, but the file gives a list of length 1"],
        load_data,
        [N()],
        [p],
    )
    raises(
        ["d.json: y (real[1], line 4) needs 1 dimension, but the file gives a single number"],
        load_data,
        [vec("y", 1)],
        [p],
    )


def test_conflicting_sources(tmp_path):
    c = write(tmp_path, "a.csv", "y\n1\n2\n3\n")
    j = wjson(tmp_path, "b.json", {"y": [1, 2, 4]})
    raises(
        ["y is given twice", 'a.csv: row 3, column "y" has 3', "b.json: y[3] has 4"],
        load_data,
        [N(), vec("y")],
        [c, j],
    )
    raises(
        ["N is given twice", "b.json: N has 3", "--set N=4 has 4"],
        load_data,
        [N()],
        [wjson(tmp_path, "b.json", {"N": 3})],
        {"N": "4"},
    )


def test_conflicting_inferred_sizes(tmp_path):
    c = write(tmp_path, "d.csv", "y\n1\n2\n")
    j = wjson(tmp_path, "e.json", {"z": [1, 2, 3]})
    raises(
        ["cannot infer N", "y has 2 rows in", "d.csv", "z has length 3 in", "e.json"],
        load_data,
        [N(), vec("y"), vec("z")],
        [c, j],
    )


def test_explicit_size_checked_against_arrays(tmp_path):
    c = write(tmp_path, "d.csv", "y\n1\n2\n")
    raises(["y has 2 rows", "N = 3"], load_data, [N(), vec("y")], [c], {"N": "3"})


def test_negative_size(tmp_path):
    raises(
        ["--set N=-1", "N = -1", "size", "non-negative"],
        load_data,
        [DataSpec("N", "int", []), vec("y")],
        [],
        {"N": "-1"},
    )


def test_non_integer_size(tmp_path):
    p = wjson(tmp_path, "d.json", {"N": 2.5})
    raises(["d.json: N: 2.5 for int variable 'N' is not an integer"], load_data, [N()], [p])
    raises(["y", "size 1 = 2.5", "non-negative integers"], load_data, [vec("y", lambda v: 2.5)], [])


def test_inferred_size_below_lower_bound(tmp_path):
    c = write(tmp_path, "d.csv", "y\n")
    raises(
        ["N = 0 (inferred from y in", "d.csv", "below the declared lower bound 1 of N"],
        load_data,
        [DataSpec("N", "int", [], lower=1), vec("y")],
        [c],
    )


def test_lower_bound_csv(tmp_path):
    rows = "".join(f"{v}\n" for v in [5] * 16 + [-3, 4])
    p = write(tmp_path, "data.csv", "kid_score\n" + rows)
    raises(
        [
            'data.csv: row 17, column "kid_score": value -3 is below the declared lower bound '
            "0 of kid_score"
        ],
        load_data,
        [N(), vec("kid_score", lower=0.0)],
        [p],
    )


def test_upper_bound_array_and_set(tmp_path):
    p = wjson(tmp_path, "d.json", {"p": [0.1, 0.9, 1.2]})
    raises(
        ["d.json: p[3]: value 1.2 is above the declared upper bound 1 of p"],
        load_data,
        [vec("p", 3, upper=np.array([1.0, 1.0, 1.0]))],
        [p],
    )
    raises(
        ["--set s=-2", "below the declared lower bound 0 of s"],
        load_data,
        [DataSpec("s", "real", [], lower=0.0)],
        [],
        {"s": "-2"},
    )


# ---------------------------------------------------------------------------------------------
# JSON errors


def test_malformed_json(tmp_path):
    p = write(tmp_path, "d.json", '{\n  "N": 3,\n  "y": [1, 2,\n}')
    raises(["d.json: line 4, column 1", "malformed JSON"], load_data, [N()], [p])


def test_json_not_object(tmp_path):
    p = write(tmp_path, "d.json", "[1, 2]")
    raises(["d.json", "object"], load_data, [N()], [p])


def test_json_duplicate_key(tmp_path):
    p = write(tmp_path, "d.json", '{"N": 1, "N": 2}')
    raises(["d.json", '"N"', "twice"], load_data, [N()], [p])


def test_json_ragged(tmp_path):
    p = wjson(tmp_path, "d.json", {"a": [[1, 2], [3]]})
    raises(
        ["d.json", "a is a ragged nested list", "a[2]", "a[1]"],
        load_data,
        [DataSpec("a", "real", [2, 2])],
        [p],
    )
    p = wjson(tmp_path, "e.json", {"a": [[1, 2], 3]})
    raises(
        ["e.json", "ragged", "a[2] is a number"], load_data, [DataSpec("a", "real", [2, 2])], [p]
    )


@pytest.mark.parametrize(
    "value,expect",
    [
        ([1, "abc"], "y[2]: the string 'abc' is not a number"),
        ([1, True], "y[2]: true is not a number"),
        ([1, None], "y[2]: null is not a number"),
        ([1, {"a": 1}], "y[2]: an object is not a number"),
    ],
)
def test_json_bad_elements(tmp_path, value, expect):
    p = wjson(tmp_path, "d.json", {"y": value})
    raises(["d.json: " + expect], load_data, [vec("y", 2)], [p])


def test_json_int_not_integral(tmp_path):
    p = wjson(tmp_path, "d.json", {"k": [[1, 2], [3, 4.5]]})
    raises(
        ["d.json: k[2, 2]: 4.5 for int variable 'k' is not an integer"],
        load_data,
        [DataSpec("k", "int", [2, 2])],
        [p],
    )


# ---------------------------------------------------------------------------------------------
# --set errors


def test_set_unknown_name():
    raises(["--set M=3", "no variable 'M'", "N"], load_data, [N()], [], {"M": "3"})


def test_set_non_scalar():
    raises(["--set y=3", "y", "not a scalar"], load_data, [N(), vec("y")], [], {"y": "3"})


def test_set_not_a_number():
    raises(["--set N=ten", "'ten' is not a number"], load_data, [N()], [], {"N": "ten"})
    raises(["--set N=", "missing value"], load_data, [N()], [], {"N": ""})
    raises(
        ["--set N=2.5", "2.5 for int variable 'N' is not an integer"],
        load_data,
        [N()],
        [],
        {"N": "2.5"},
    )


# ---------------------------------------------------------------------------------------------
# robustness: arbitrary input is either loaded or rejected with a DataError

ROBUST_SPECS = [
    N(),
    vec("y"),
    DataSpec("X", "real", ["N", 2]),
    DataSpec("k", "int", ["N"], lower=0),
]

cells = st.one_of(
    st.integers(-5, 5).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", " ", "NA", "abc", "1.5", "2e3", '"3"', '"', "1,2", "nan", "-inf"]),
    st.text(max_size=6),
)
headers = st.lists(
    st.sampled_from(["y", "X.1", "X.2", "X[2]", "k", "N", "", "z", "y"]), min_size=1, max_size=5
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(header=headers, rows=st.lists(st.lists(cells, max_size=6), max_size=6))
def test_random_csv_loads_or_raises_data_error(tmp_path, header, rows):
    text = ",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows)
    p = write(tmp_path, "r.csv", text)
    try:
        out = load_data(ROBUST_SPECS, [p])
    except DataError as e:
        assert str(e)
    else:
        n = int(out["N"])
        assert out["y"].shape == (n,) and out["X"].shape == (n, 2) and out["k"].dtype == np.int64


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.one_of(st.binary(max_size=80), st.text(max_size=80)))
def test_random_bytes_load_or_raise_data_error(tmp_path, data):
    for name in ("r.csv", "r.json"):
        p = write(tmp_path, name, data)
        try:
            load_data(ROBUST_SPECS, [p])
        except DataError as e:
            assert str(e)


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(),
        st.sampled_from(["inf", "NaN", "x"]),
    ),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=8,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(obj=st.dictionaries(st.sampled_from(["N", "y", "X", "k"]), json_values))
def test_random_json_loads_or_raises_data_error(tmp_path, obj):
    p = write(tmp_path, "r.json", json.dumps(obj))
    try:
        load_data(ROBUST_SPECS, [p])
    except DataError as e:
        assert str(e)


def outcome(specs: list[DataSpec], path: str) -> object:
    try:
        return {k: v.tolist() for k, v in load_data(specs, [path]).items()}
    except DataError as e:
        return str(e)


plain_cells = cells.filter(lambda c: '"' not in c and "\r" not in c and "\n" not in c)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(header=headers, rows=st.lists(st.lists(plain_cells, max_size=6), max_size=6))
def test_fast_and_csv_module_paths_agree(tmp_path, header, rows):
    """Quote-free files take a fast path; quoting one header cell forces the csv module."""
    body = "".join(",".join(r) + "\n" for r in rows)
    a = write(tmp_path, "a.csv", ",".join(header) + "\n" + body)
    b = write(tmp_path, "b.csv", ",".join([f'"{header[0]}"', *header[1:]]) + "\n" + body)
    got_a, got_b = outcome(ROBUST_SPECS, a), outcome(ROBUST_SPECS, b)
    if isinstance(got_a, str):
        got_a = got_a.replace("a.csv", "b.csv")
    assert got_a == got_b


def test_old_mac_line_endings_and_quoted_ragged_rows(tmp_path):
    p = write(tmp_path, "d.csv", "y\r1\r2\r")
    np.testing.assert_array_equal(load_data([N(), vec("y")], [p])["y"], [1, 2])
    p = write(tmp_path, "e.csv", '"a","b"\n1,2\n"3"\n')
    raises(["e.csv", "row 2 has 1 field, the header has 2"], load_data, [vec("a", 2)], [p])
