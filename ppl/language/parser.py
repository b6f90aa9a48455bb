"""Model text -> AST, with syntax errors that point at the offending character."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import lark
from lark import Lark, Transformer, v_args

from ppl.errors import ModelSyntaxError
from ppl.language import ast
from ppl.language.includes import SourceMap, expand, has_directive
from ppl.language.types import SPEC_KIND
from ppl.limits import LIMITS, read_limited
from ppl.safefiles import private_dir, read_trusted, write_atomic

_GRAMMAR_FILE = "stan.lark"

# Readable names for the terminals Lark reports in "expected ..." lists.
_TERMINAL_NAMES = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "$END": "end of file",
}


_TYPE_WORDS = set(SPEC_KIND) | {"array"}  # the keywords that start a declaration
_CLOSERS = {";", "}", ")", "]", ",", ">"}


def _grammar_text() -> str:
    # the source tree's grammar first: an editable install elsewhere maps ppl.grammars to its
    # own checkout, which must not shadow the grammar next to this file
    local = Path(__file__).resolve().parents[2] / "grammars" / _GRAMMAR_FILE
    if local.is_file():
        return local.read_text()
    return resources.files("ppl.grammars").joinpath(_GRAMMAR_FILE).read_text()


_LARK_OPTIONS = {"parser": "lalr", "propagate_positions": True, "maybe_placeholders": True}


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    """The LALR parser of the grammar; its tables (0.25 s to build) come from a cache file."""
    grammar = _grammar_text()
    path = _cache_path(grammar)
    if path is not None:
        try:
            return _load(path)
        except Exception:  # missing, untrusted, unreadable, truncated or from another Lark
            pass
    parser = Lark(grammar, **_LARK_OPTIONS)
    if path is not None:
        _save(parser, path)
    return parser


def _cache_path(grammar: str) -> Path | None:
    """Where the parser built from `grammar` is cached: in $XDG_CACHE_HOME/ppl (default
    ~/.cache/ppl), under a name keyed by the grammar's text, the options and the versions of Lark
    and Python, so that an edited grammar or another Lark gets a parser of its own. None when no
    cache directory can be named; PPL_NO_CACHE set (non-empty) turns the cache off."""
    if os.environ.get("PPL_NO_CACHE"):
        return None
    root = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(root):  # unset, empty or relative: the spec says to ignore it
        try:
            root = os.path.join(Path.home(), ".cache")
        except (RuntimeError, KeyError, OSError):
            return None
    key = "\n".join([grammar, repr(sorted(_LARK_OPTIONS.items())), lark.__version__, sys.version])
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
    return Path(root) / "ppl" / f"grammar-{digest}.json"


# The cache is JSON, which cannot run code when read (a pickle can): Lark's own serialisation
# (plain dicts, lists, tuples, strings, numbers; objects rebuilt only from Lark's classes) with
# tuples and dicts of non-string keys tagged. It is read only from a file and directory of the
# user's that no one else can write, so another user cannot choose the parser either.
_FORMAT = "ppl-parser/1"


def _encode(value):
    if isinstance(value, tuple):
        return {"t": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and set(value) not in ({"t"}, {"d"}):
            return {k: _encode(v) for k, v in value.items()}
        return {"d": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot cache a {type(value).__name__}")


def _decode(obj: dict):
    if len(obj) == 1:
        if "t" in obj:
            return tuple(obj["t"])
        if "d" in obj:
            return {k: v for k, v in obj["d"]}
    return obj


def _load(path: Path) -> Lark:
    blob = json.loads(read_trusted(path), object_hook=_decode)
    if blob.get("format") != _FORMAT or blob["data"]["options"].get("parser") != "lalr":
        raise ValueError("not a parser cache of this version")
    return Lark._load_from_dict(blob["data"], blob["memo"])


def _save(parser: Lark, path: Path) -> None:
    """Write the parser's tables to `path` atomically (a rename), or silently not at all."""
    try:
        data, memo = parser.memo_serialize([lark.lexer.TerminalDef, lark.grammar.Rule])
        text = json.dumps(_encode({"format": _FORMAT, "data": data, "memo": memo}),
                          separators=(",", ":"))  # fmt: skip
        private_dir(path.parent)
        write_atomic(path, text.encode("utf-8"), mode=0o600)
    except Exception:  # read-only home, full disk, a directory others can write: no cache
        pass


def _pos(meta) -> ast.Pos:
    return ast.Pos(getattr(meta, "line", 0), getattr(meta, "column", 0))


def _tok_pos(tok) -> ast.Pos:
    return ast.Pos(tok.line, tok.column)


_BINOPS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "intdiv": "%/%",
    "mod": "%",
    "elt_mul": ".*",
    "elt_div": "./",
    "pow": "^",
    "elt_pow": ".^",
    "eq": "==",
    "ne": "!=",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "and_op": "&&",
    "or_op": "||",
}


TOO_DEEP = (
    "the model is nested too deeply to compile (blocks, else-if chains or ?: hundreds "
    "of levels deep)"
)
#: The largest int literal, as in Stan (32-bit ints).
MAX_INT = 2**31 - 1


@v_args(meta=True)
class _Builder(Transformer):
    """Turns Lark's parse tree into `ppl.language.ast` nodes."""

    def __init__(self, filename: str, source: str):
        super().__init__()
        self.filename = filename
        self.source = source

    # ---- program and blocks
    def start(self, meta, blocks):
        prog = ast.Program(self.filename, self.source)
        hyper: list = []
        for name, body in blocks:
            if name == "hyperparameters":
                hyper = body  # parameters with a point estimate instead of a q: checked, laid
                continue  # out and constrained as parameters, first in the layout
            setattr(prog, name, body)
        prog.parameters = hyper + prog.parameters
        return prog

    def functions_block(self, meta, c):
        return "functions", list(c)

    def fun_def(self, meta, c):
        return_type, name, *rest = c
        body = rest[-1]
        args = [a for a in rest[:-1] if a is not None]
        return ast.FunctionDef(_tok_pos(name), str(name), return_type, args, body)

    def fun_block(self, meta, c):
        return ast.Block(_pos(meta), list(c))

    def fun_forward(self, meta, c):
        return None

    def fun_arg(self, meta, c):
        data_q, type_text, name = c
        return ast.FunArg(str(name), type_text, data_q is not None)

    def fun_void(self, meta, c):
        return "void"

    def fun_array(self, meta, c):
        commas = "".join(str(x) for x in c[:-1] if x is not None)
        return f"array[{commas}] {c[-1]}"

    def fun_plain(self, meta, c):
        return c[0]

    def fun_old_array(self, meta, c):
        commas = "".join(str(x) for x in c[1:] if x is not None)
        return f"array[{commas}] {c[0]}"

    def fun_base(self, meta, c):
        return str(c[0])

    def data_block(self, meta, c):
        return "data", list(c)

    def tdata_block(self, meta, c):
        return "transformed_data", list(c)

    def hparams_block(self, meta, c):
        decls = list(c)
        for d in decls:
            d.hyper = True
        return "hyperparameters", decls

    def params_block(self, meta, c):
        return "parameters", list(c)

    def tparams_block(self, meta, c):
        return "transformed_parameters", list(c)

    def model_block(self, meta, c):
        return "model", list(c)

    def gq_block(self, meta, c):
        return "generated_quantities", list(c)

    # ---- declarations
    def var_decl(self, meta, c):
        array_prefix, spec, name, old_dims, init = c
        if array_prefix is not None:
            spec.array_sizes = array_prefix
        if old_dims is not None:
            spec.array_sizes = spec.array_sizes + old_dims
        return ast.Decl(_tok_pos(name), str(name), spec, init)

    def array_prefix(self, meta, c):
        return c[0]

    def old_dims(self, meta, c):
        return c[0]

    def expr_list(self, meta, c):
        return list(c)

    def _typed(self, kind, bounds, sizes):
        return ast.TypeSpec(kind, [s for s in sizes if s is not None], [], bounds or {})

    def int_type(self, meta, c):
        return self._typed("int", c[1], [])

    def real_type(self, meta, c):
        return self._typed("real", c[1], [])

    def vector_type(self, meta, c):
        return self._typed("vector", c[1], [c[2]])

    def row_vector_type(self, meta, c):
        return self._typed("row_vector", c[1], [c[2]])

    def matrix_type(self, meta, c):
        return self._typed("matrix", c[1], [c[2], c[3]])

    def constrained_vec(self, meta, c):
        return str(c[0])

    def constrained_mat(self, meta, c):
        return str(c[0])

    def constrained_vector_type(self, meta, c):
        return self._typed(str(c[0]), None, [c[1]])

    def constrained_matrix_type(self, meta, c):
        return self._typed(str(c[0]), None, c[1:])

    def bounds(self, meta, c):
        return dict(c)

    def bound(self, meta, c):
        return str(c[0]), c[1]

    # ---- statements
    def assign(self, meta, c):
        return ast.Assign(_pos(meta), c[0], "=", c[1])

    def plus_assign(self, meta, c):
        return ast.Assign(_pos(meta), c[0], "+=", c[1])

    def compound_assign(self, meta, c):
        return ast.Assign(_pos(meta), c[0], str(c[1]), c[2])

    def tilde(self, meta, c):
        lhs, dist, args, trunc = c
        return ast.Tilde(_pos(meta), lhs, str(dist), args or [], trunc)

    def truncation(self, meta, c):
        return c[0], c[1]

    def target_inc(self, meta, c):
        return ast.TargetInc(_pos(meta), c[0])

    def for_range(self, meta, c):
        return ast.For(_pos(meta), str(c[0]), c[1], c[2], c[3])

    def for_each(self, meta, c):
        return ast.ForEach(_pos(meta), str(c[0]), c[1], c[2])

    def while_stmt(self, meta, c):
        return ast.While(_pos(meta), c[0], c[1])

    def if_stmt(self, meta, c):
        return ast.If(_pos(meta), c[0], c[1], c[2])

    def block(self, meta, c):
        return ast.Block(_pos(meta), list(c))

    def print_stmt(self, meta, c):
        return ast.Print(_pos(meta), c[0])

    def reject_stmt(self, meta, c):
        return ast.Reject(_pos(meta), c[0])

    def print_args(self, meta, c):
        return [ast.Str(_tok_pos(a), str(a)[1:-1]) if isinstance(a, lark.Token) else a for a in c]

    def return_stmt(self, meta, c):
        return ast.Return(_pos(meta), c[0])

    def profile_stmt(self, meta, c):
        return ast.Block(_pos(meta), list(c[1:]))  # a profile block is a plain block here

    def break_stmt(self, meta, c):
        return ast.Break(_pos(meta))

    def continue_stmt(self, meta, c):
        return ast.Continue(_pos(meta))

    def call_stmt(self, meta, c):
        call = ast.Call(_tok_pos(c[0]), str(c[0]), c[1] or [])
        return ast.CallStmt(_pos(meta), call)

    def empty_stmt(self, meta, c):
        return ast.Block(_pos(meta), [])

    # ---- expressions
    def number(self, meta, c):
        text = str(c[0])
        pos = _tok_pos(c[0])
        if any(ch in text for ch in ".eE"):
            return ast.Num(pos, float(text))
        digits = text.lstrip("0")
        if len(digits) > 10 or int(digits or "0") > MAX_INT:  # no int() of 10^5 digits
            shown = text if len(text) <= 20 else f"{text[:10]}...({len(text)} digits)"
            raise ModelSyntaxError(format_location(
                self.filename, self.source, pos.line, pos.col,
                f"integer literal {shown} is over Stan's int range (2^31 - 1); write it as a "
                "real (e.g. 3e9)",
            ))  # fmt: skip
        return ast.Num(pos, int(text))

    def name(self, meta, c):
        return ast.Var(_tok_pos(c[0]), str(c[0]))

    def call(self, meta, c):
        return ast.Call(_tok_pos(c[0]), str(c[0]), c[1] or [])

    def cond_call(self, meta, c):
        return ast.Call(_tok_pos(c[0]), str(c[0]), [c[1]] + (c[2] or []), conditional=True)

    def ternary(self, meta, c):
        return ast.Ternary(_pos(meta), c[0], c[1], c[2])

    def neg(self, meta, c):
        if isinstance(c[0], ast.Num):
            return ast.Num(_pos(meta), -c[0].value)
        return ast.UnOp(_pos(meta), "neg", c[0])

    def not_op(self, meta, c):
        return ast.UnOp(_pos(meta), "not", c[0])

    def transpose(self, meta, c):
        return ast.UnOp(_pos(meta), "transpose", c[0])

    def index(self, meta, c):
        return ast.Index(_pos(meta), c[0], c[1])

    def indexes(self, meta, c):
        return list(c)

    def idx_single(self, meta, c):
        return ast.IndexItem("single", c[0])

    def idx_range(self, meta, c):
        return ast.IndexItem("range", c[0], c[1])

    def idx_from(self, meta, c):
        return ast.IndexItem("from", c[0])

    def idx_to(self, meta, c):
        return ast.IndexItem("to", None, c[0])

    def idx_all(self, meta, c):
        return ast.IndexItem("all")

    def array_expr(self, meta, c):
        return ast.ArrayExpr(_pos(meta), c[0])

    def row_vector_expr(self, meta, c):
        return ast.RowVectorExpr(_pos(meta), c[0])


def _binop_method(op_name: str, symbol: str):
    def method(self, meta, c):
        return ast.BinOp(_pos(meta), symbol, c[0], c[1])

    method.__name__ = op_name
    return v_args(meta=True)(method)


for _name, _symbol in _BINOPS.items():
    setattr(_Builder, _name, _binop_method(_name, _symbol))


def _describe_expected(expected: set[str]) -> str:
    parser = _lark()
    names = []
    for term in sorted(expected):
        if term in _TERMINAL_NAMES:
            names.append(_TERMINAL_NAMES[term])
            continue
        try:
            pattern = parser.get_terminal(term).pattern
        except KeyError:
            names.append(term)
            continue
        if isinstance(pattern, lark.lexer.PatternStr):
            names.append(f"'{pattern.value}'")
        else:
            names.append(term.lower())
    if sum(n.strip("'") in _TYPE_WORDS for n in names) > 3:  # "a type" instead of 15 keywords
        names = [n for n in names if n.strip("'") not in _TYPE_WORDS] + ["a type"]
    # closing punctuation first: it is the usual fix ("expected ';'") and must survive truncation
    names = sorted(set(names), key=lambda n: (n.strip("'") not in _CLOSERS, n))
    if len(names) > 12:
        names = names[:12] + ["..."]
    return ", ".join(names)


#: the source maps of the models read with #include, by (filename, expanded text): every error
#: located in a model's text is located through its map, in the file the line came from
_SOURCE_MAPS: dict[tuple[str, str], SourceMap] = {}


def format_location(filename: str, source: str, line: int, col: int, message: str) -> str:
    """`file:line:col: message`, the source line and a caret under the column (for a line that
    came from an included file: that file's name and line, and the #includes that brought it)."""
    smap = _SOURCE_MAPS.get((filename, source))
    chain: list[str] = []
    if smap is not None:
        filename, line, text, chain = smap.locate(line)
    else:
        lines = source.splitlines()
        text = lines[line - 1] if 0 < line <= len(lines) else ""
    caret = " " * (max(col, 1) - 1) + "^"
    where = "".join(f"\n    included from {c}" for c in chain)
    return f"{filename}:{line}:{col}: {message}\n    {text}\n    {caret}{where}"


def locate(filename: str, source: str, line: int) -> str:
    """`file:line` of `line` of a model's text (through its source map, if it has one)."""
    smap = _SOURCE_MAPS.get((filename, source))
    if smap is None:
        return f"{filename}:{line}"
    file, at, _, _ = smap.locate(line)
    return f"{file}:{at}"


# Stan constructs ppl does not parse, recognised in the statement where the parser stopped, so
# that the error names the feature instead of an unexpected token.
_UNSUPPORTED = [
    (re.compile(r"\btuple\s*\("), "tuples are not supported"),
    (
        re.compile(r"\bcomplex(_vector|_row_vector|_matrix)?\b"),
        "complex numbers are not supported",
    ),
    (
        re.compile(r"(?<![A-Za-z0-9_.])(\d+(?:\.\d*)?|\.\d+)([eE][-+]?\d+)?i\b"),
        "complex numbers (imaginary literals such as 2i) are not supported",
    ),
    (
        re.compile(r"(\b[A-Za-z_][A-Za-z0-9_]*|[)\]])\.\d"),
        "tuples are not supported (x.1 indexes a tuple)",
    ),
    (re.compile(r"\\"), "the left-division operator '\\' is not supported; use mdivide_left"),
    (re.compile(r"\btarget\s*\(\s*\)"), "target() is not supported"),
    (re.compile(r"\bjacobian\s*\+="), "`jacobian +=` is not supported"),
]


def _statement_before(source: str, line: int, col: int) -> str:
    """The text of the statement the parser stopped in, up to and including the error line."""
    lines = source.splitlines()
    offset = sum(len(x) + 1 for x in lines[: max(line - 1, 0)]) + max(col - 1, 0)
    end = source.find("\n", offset)
    end = len(source) if end < 0 else end
    start = max(source.rfind(c, 0, offset) for c in ";{}") + 1
    return source[start:end]


#: a string (kept) or a comment (blanked): hints and counts read code only
_STRING_OR_COMMENT = re.compile(r'"[^"\n]*"|//[^\n]*|#[^\n]*|/\*.*?(?:\*/|\Z)', re.S)


def without_comments(source: str) -> str:
    """The source with its comments blanked (newlines kept, so lines and columns stay)."""

    def blank(m: re.Match) -> str:
        text = m.group(0)
        return text if text.startswith('"') else re.sub(r"[^\n]", " ", text)

    return _STRING_OR_COMMENT.sub(blank, source)


def _unsupported_feature(source: str, line: int, col: int) -> str | None:
    # a comment such as `// columns X.1, X.2` is no tuple: the hints read code only
    text = _statement_before(without_comments(source), line, col)
    text = re.sub(r'"[^"\n]*"', '""', text)  # not inside strings
    for pattern, message in _UNSUPPORTED:
        if pattern.search(text):
            return message
    return None


def _syntax_error(filename: str, source: str, line: int, col: int, msg: str) -> ModelSyntaxError:
    feature = _unsupported_feature(source, line, col)
    if feature is not None:
        msg = f"{feature} ({msg})"
    return ModelSyntaxError(format_location(filename, source, line, col, msg))


def _check_statement_count(filename: str, source: str) -> None:
    """Refuse a model of more statements than LIMITS.max_statements before parsing it (a model
    of 10^5 statements took a minute and 700 MB to parse; Stan's largest are a few hundred)."""
    if source.count(";") <= LIMITS.max_statements:
        return
    n = without_comments(source).count(";")
    if n > LIMITS.max_statements:
        raise ModelSyntaxError(
            f"{filename}: the model has {n:,} statements, over the limit of "
            f"{LIMITS.max_statements:,}; write repeated statements as a loop"
        )


def parse(
    source: str, filename: str = "<model>", include_paths: Sequence[str] | None = None
) -> ast.Program:
    """Parse model text; raises ModelSyntaxError with file:line:col, the line and a caret.
    `#include` lines are replaced by the files they name (ppl.language.includes), searched next
    to `filename`, then in `include_paths` (None: the CLI's --include-paths)."""
    source = source.removeprefix("\ufeff")  # a UTF-8 byte order mark, as CSV and JSON allow
    if has_directive(source):
        source, smap = expand(source, filename, include_paths)
        if len(_SOURCE_MAPS) >= 64:
            _SOURCE_MAPS.pop(next(iter(_SOURCE_MAPS)))
        _SOURCE_MAPS[(filename, source)] = smap
    _check_statement_count(filename, source)
    try:
        tree = _lark().parse(source)
    except lark.exceptions.UnexpectedCharacters as e:
        char = source[e.pos_in_stream] if e.pos_in_stream < len(source) else "end of file"
        msg = f"syntax error: unexpected character {char!r}"
        if e.allowed:
            msg += f"; expected {_describe_expected(set(e.allowed))}"
        raise _syntax_error(filename, source, e.line, e.column, msg) from None
    except lark.exceptions.UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            lines = source.splitlines() or [""]
            line, col, what = len(lines), len(lines[-1]) + 1, "end of file"
        else:
            line, col, what = tok.line, tok.column, repr(str(tok))
        msg = f"syntax error: unexpected {what}; expected {_describe_expected(set(e.expected))}"
        if "model" in what and tok.type != "$END":
            msg += " (blocks must come in Stan's order and 'model' is required)"
        raise _syntax_error(filename, source, line, col, msg) from None
    except lark.exceptions.UnexpectedEOF as e:
        lines = source.splitlines() or [""]
        msg = (
            f"syntax error: unexpected end of file; expected {_describe_expected(set(e.expected))}"
        )
        raise ModelSyntaxError(
            format_location(filename, source, len(lines), len(lines[-1]) + 1, msg)
        ) from None
    try:
        return _Builder(filename, source).transform(tree)
    except lark.exceptions.VisitError as e:
        if isinstance(e.orig_exc, ModelSyntaxError):
            raise e.orig_exc from None
        if isinstance(e.orig_exc, RecursionError):
            raise ModelSyntaxError(f"{filename}: {TOO_DEEP}") from None
        raise


def parse_file(path: str, include_paths: Sequence[str] | None = None) -> ast.Program:
    """Read and parse a `.model` or `.stan` file."""
    try:
        source = read_limited(path, LIMITS.max_model_bytes, "model file").decode("utf-8")
    except FileNotFoundError:
        raise ModelSyntaxError(f"{path}: model file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ModelSyntaxError(f"{path}: cannot read the model file ({e})") from None
    return parse(source, path, include_paths)
