"""The LALR tables are built once and cached in $XDG_CACHE_HOME/ppl, keyed by the grammar."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from lark import Lark

from ppl.errors import ModelSyntaxError
from ppl.language import parser

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "models").rglob("*.model"))
BAD = [
    "parameters { real mu }\nmodel { }",
    "data { int N; }\nparameters { real mu; }\nmodel { mu ~ normal(0, 1) }",
    "model { x ~ normal(0, 1); ",
    "parameters { real mu; }\nmodel { mu ~ normal(0 1); }",
    "parameters { real mu; }\nmodel { mu ~ normal(0, 1); } @",
]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PPL_NO_CACHE", raising=False)
    parser._lark.cache_clear()
    yield tmp_path / "cache" / "ppl"
    parser._lark.cache_clear()


def _plain(node):
    """An AST as nested tuples, positions included (its nodes compare by identity)."""
    if dataclasses.is_dataclass(node):
        fields = dataclasses.fields(node)
        return (type(node).__name__, *((f.name, _plain(getattr(node, f.name))) for f in fields))
    if isinstance(node, list | tuple):
        return tuple(_plain(x) for x in node)
    if isinstance(node, dict):
        return tuple(sorted((k, _plain(v)) for k, v in node.items()))
    return node


def _no_building(monkeypatch):
    """Lark's constructor (which builds the tables) fails; loading the cache still works."""

    class NoBuild(Lark):
        def __init__(self, *args, **kwargs):
            raise AssertionError("the parser was built, not loaded from the cache")

    monkeypatch.setattr(parser, "Lark", NoBuild)


def _messages(sources):
    out = []
    for source in sources:
        with pytest.raises(ModelSyntaxError) as e:
            parser.parse(source, "m.model")
        out.append(str(e.value))
    return out


def test_built_once_then_loaded(cache, monkeypatch):
    assert MODELS
    fresh = [_plain(parser.parse(p.read_text(), str(p))) for p in MODELS]
    fresh_errors = _messages(BAD)
    files = list(cache.glob("grammar-*.json"))
    assert len(files) == 1 and files[0].stat().st_size > 0
    assert not list(cache.glob(".*.tmp"))

    parser._lark.cache_clear()
    _no_building(monkeypatch)
    cached = [_plain(parser.parse(p.read_text(), str(p))) for p in MODELS]
    assert cached == fresh  # the same ASTs, positions included
    assert _messages(BAD) == fresh_errors  # and the same syntax errors


def test_an_edited_grammar_gets_its_own_tables(cache, monkeypatch):
    parser._lark()
    first = set(cache.glob("grammar-*.json"))
    parser._lark.cache_clear()
    text = parser._grammar_text()
    monkeypatch.setattr(parser, "_grammar_text", lambda: text + "\n// edited\n")
    parser._lark()
    second = set(cache.glob("grammar-*.json"))
    assert len(second) == 2 and first < second


def test_a_damaged_cache_file_is_rebuilt(cache):
    parser._lark()
    (path,) = cache.glob("grammar-*.json")
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    parser._lark.cache_clear()
    assert parser.parse("parameters { real mu; }\nmodel { mu ~ normal(0, 1); }").parameters
    assert path.stat().st_size > len(good) // 2  # written anew, whole
    parser._load(path)


def test_no_writable_cache_directory(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    parser._lark.cache_clear()
    try:
        assert parser.parse("parameters { real mu; }\nmodel { mu ~ normal(0, 1); }").parameters
    finally:
        parser._lark.cache_clear()


def test_relative_xdg_cache_home_is_ignored_and_the_cache_can_be_off(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    path = parser._cache_path("grammar")
    assert path.parent == tmp_path / "home" / ".cache" / "ppl"
    monkeypatch.setenv("PPL_NO_CACHE", "1")
    assert parser._cache_path("grammar") is None
    assert parser._cache_path("grammar") is None
    monkeypatch.delenv("PPL_NO_CACHE")
    assert parser._cache_path("other grammar") != path


# -- issue 32: the cache cannot run code, and another user cannot choose what is loaded


def test_the_cache_is_json_and_a_planted_pickle_is_never_unpickled(cache, tmp_path):
    """The cache file is plain JSON; a pickle planted under its name (here one that would
    create a file when unpickled) is not a cache: the parser is rebuilt, nothing runs."""
    import json
    import pickle

    parser._lark()
    (path,) = cache.glob("grammar-*.json")
    assert json.loads(path.read_text())["format"] == parser._FORMAT
    assert path.stat().st_mode & 0o777 == 0o600 and cache.stat().st_mode & 0o777 == 0o700
    ran = tmp_path / "ran"

    class Boom:
        def __reduce__(self):
            return (open, (str(ran), "w"))

    path.write_bytes(pickle.dumps({"data": Boom(), "memo": {}}))
    parser._lark.cache_clear()
    assert parser.parse("parameters { real mu; }\nmodel { mu ~ normal(0, 1); }").parameters
    assert not ran.exists()
    parser._load(path)  # rewritten as JSON


def _owned_by_nobody(path):
    import os

    os.chown(path, 65534, 65534)


@pytest.mark.parametrize("what", ["file", "dir", "mode"])
def test_a_cache_another_user_could_write_is_not_loaded(cache, monkeypatch, what):
    """A cache file of another owner, in a directory of another owner, or writable by others,
    is not read (the tables are built anew, and not written into the untrusted directory)."""
    import os

    parser._lark()
    (path,) = cache.glob("grammar-*.json")
    if what == "mode":
        os.chmod(path, 0o666)
    else:
        if os.getuid() != 0:
            pytest.skip("changing a file's owner needs root")
        _owned_by_nobody(path if what == "file" else cache)
    from ppl.safefiles import read_trusted

    with pytest.raises(PermissionError):
        read_trusted(path)
    parser._lark.cache_clear()
    built = []
    real = parser.Lark

    class Counting(real):
        def __init__(self, *a, **k):
            built.append(1)
            super().__init__(*a, **k)

    monkeypatch.setattr(parser, "Lark", Counting)
    assert parser.parse("parameters { real mu; }\nmodel { mu ~ normal(0, 1); }").parameters
    assert built == [1]  # rebuilt, the untrusted file not loaded
