"""Limits that hold and the user-error contract (issue 32): nested loops counted before they run,
a vectorised batch sized before it is allocated, `while (1)` stopped in seconds, files that never
end refused by stat, a model of 10^5 statements refused at once; every user error exit 2 (CLI)
and ppl.PplError (API); a Ctrl-C never lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ppl
import ppl.limits
from ppl.limits import LIMITS, interrupts_noted, note_interrupt
from tests.cli.test_cli import run_main

ROOT = Path(__file__).resolve().parent.parent.parent
PARAM = "parameters { real mu; }\nmodel { mu ~ normal(0, 1); }\n"


def _model(tmp_path, text, name="m.model") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _user_error(argv, *expected, seconds=20.0) -> str:
    start = time.perf_counter()
    rc, _, err = run_main(argv)
    assert rc == 2, err
    assert time.perf_counter() - start < seconds, err
    assert "internal error" not in err and "Traceback" not in err
    for text in expected:
        assert text in err, err
    return err


# ---- limits that hold ------------------------------------------------------------------------


def test_nested_loops_are_counted_before_any_runs(tmp_path):
    """The audit's loop: only the outer range was counted; the vectorised path reached 7.1 GB
    under --max-memory 0.5 and ran 9 10^8 iterations past a limit of 10^7."""
    text = "transformed data {\n  real s = 0;\n"
    text += "  for (i in 1:30000) for (j in 1:30000) s += i * j;\n}\n"
    model = _model(tmp_path, text + PARAM)
    _user_error(["fit", model, "--max-memory", "0.5"], "m.model:3:3:", "900,000,000 iterations",
                "--max-loop-iterations", seconds=10)  # fmt: skip


def test_nested_loop_bounds_from_data_are_counted_too(tmp_path):
    text = "data { int N; }\ntransformed data {\n  real s = 0;\n  for (i in 1:N) {\n"
    text += "    for (j in 1:N) { for (k in 1:10) s += 1; }\n  }\n}\n"
    model = _model(tmp_path, text + PARAM)
    _user_error(["check", model, "--set", "N=2000"], "m.model:4:3:", "40,000,000 iterations")


def test_a_vectorised_batch_over_the_memory_budget_runs_one_index_at_a_time(monkeypatch):
    """The batch of a vectorised loop nest (rows times the rows around it) is sized before it is
    allocated: over the budget, the loop runs sequentially, with the same result."""
    n = 600
    code = f"transformed data {{ real s = 0; for (i in 1:{n}) for (j in 1:{n}) s += i * j; }}\n"
    model = ppl.Model(code + PARAM)
    expected = (n * (n + 1) / 2) ** 2
    assert float(model.compile().data["s"]) == expected
    monkeypatch.setattr(LIMITS, "max_bytes", 8 * n * 10)  # n rows fit, n * n do not
    assert float(model.compile().data["s"]) == expected


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("transformed data {\n  real s = 0;\n  while (1) s += 1;\n}\n" + PARAM, 3),
        (PARAM + "generated quantities {\n  real s = 0;\n  while (1) s += 1;\n}\n", 5),
        ("transformed data {\n  real s = 0;\n  for (i in 1:9000000) s = s / 2;\n}\n" + PARAM, 3),
    ],
)
def test_an_endless_loop_is_stopped_by_the_time_budget(tmp_path, monkeypatch, text, line):
    """`while (1)` ran 44 to 101 s before the count of 10^7 stopped it: the loop budget holds in
    seconds too (--max-loop-iterations / 2 10^6; here 0.5 s for 10^7)."""
    monkeypatch.setattr(ppl.limits, "ITERATIONS_PER_SECOND", 2 * 10**7)
    monkeypatch.setattr(ppl.limits, "MIN_LOOP_SECONDS", 0.1)
    model = _model(tmp_path, text)
    err = _user_error(["fit", model, "--iter", "20", "--draws", "10", "--quiet"],
                      f"m.model:{line}:3:", "time budget of 0.5 s", seconds=15)  # fmt: skip
    assert "--max-loop-iterations" in err


def test_the_time_budget_is_five_seconds_by_default():
    assert ppl.limits.loop_seconds() == 5.0


def test_a_model_of_100000_statements_is_refused_before_parsing(tmp_path):
    """It took a minute and 700 MB to parse; the limit is counted on the text (comments apart)."""
    body = "  s += 1;\n" * 100_000
    model = _model(tmp_path, f"parameters {{ real mu; }}\nmodel {{\n  real s = 0;\n{body}}}\n")
    _user_error(["check", model], "m.model: the model has 100,002 statements",
                "over the limit of 20,000", seconds=10)  # fmt: skip
    commented = "// ;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;\n" * 1000
    rc, _, err = run_main(["check", _model(tmp_path, commented + PARAM, "c.model")])
    assert rc == 0, err


def test_resume_from_a_device_is_refused_unread(tmp_path):
    """`--resume /dev/zero` read 10.9 GB before the 29-byte header was checked."""
    model = _model(tmp_path, PARAM)
    start = time.perf_counter()
    argv = ["fit", model, "--resume", "/dev/zero", "--quiet"]
    _user_error(argv, "/dev/zero", "not a regular file")
    assert time.perf_counter() - start < 10
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"x" * 100)
    _user_error(["fit", model, "--resume", str(junk), "--quiet"], "not a ppl checkpoint")


def test_a_fifo_or_device_data_file_is_refused_without_blocking(tmp_path):
    """A FIFO blocked forever; /dev/zero was read to 8.4 GB RSS before the refusal."""
    model = _model(tmp_path, "data { real x; }\n" + PARAM)
    fifo = tmp_path / "data.json"
    os.mkfifo(fifo)
    _user_error(["check", model, str(fifo)], "data.json: is a pipe (FIFO), not a regular file",
                seconds=10)  # fmt: skip
    zero = tmp_path / "zero.csv"
    os.symlink("/dev/zero", zero)
    _user_error(["check", model, str(zero)], "zero.csv: is a device", seconds=10)


# ---- contracts: user errors ------------------------------------------------------------------


def test_cholesky_factor_cov_with_fewer_rows_than_columns_is_a_located_error(tmp_path):
    """The fuzzer's 15 internal errors: Stan requires M >= N."""
    literal = _model(tmp_path, "parameters { cholesky_factor_cov[2, 3] L; }\nmodel { }\n")
    _user_error(["check", literal], "m.model:1:34: cholesky_factor_cov[M, N] needs M >= N")
    sized = _model(tmp_path, "data { int M; }\nparameters { cholesky_factor_cov[M, 3] L; }\n"
                   "model { }\n", "d.model")  # fmt: skip
    _user_error(["fit", sized, "--set", "M=2"], "d.model:2:34:", "got M = 2 and N = 3")
    with pytest.raises(ppl.PplError, match="needs M >= N"):
        ppl.Model("parameters { cholesky_factor_cov[2, 3] L; } model { }")


def test_a_csv_column_index_past_stans_int_range_is_no_overflow(tmp_path):
    """X.99999999999999999999 was an OverflowError (exit 1)."""
    model = _model(tmp_path, "data { int N; int K; matrix[N, K] X; }\n" + PARAM)
    csv = tmp_path / "x.csv"
    csv.write_text("X.1,X.99999999999999999999\n1,2\n")
    rc, _, err = run_main(["check", model, str(csv)])
    assert rc in (0, 2) and "internal error" not in err, err


def test_an_unreadable_dask_partition_is_a_data_error_naming_the_files():
    """A binary file's UnicodeDecodeError came back from the workers with no message:
    `str(e).splitlines()[0]` was an IndexError in ppl/distributed/partitions.py."""
    from ppl.distributed.partitions import gather

    class Client:
        def gather(self, futures):
            raise UnicodeDecodeError("utf-8", b"", 0, 1, "")  # str() of it is one line

    class Silent(Client):
        def gather(self, futures):
            raise ValueError("")

    for client in (Client(), Silent()):
        with pytest.raises(ppl.PplError, match=r"a\.csv \(or another of the 2 files\)"):
            gather(client, [], ["a.csv", "b.csv"])


def test_the_api_raises_ppl_errors_for_deep_nesting_and_memory(tmp_path, monkeypatch):
    deep = "parameters { real mu; } model { " + "{" * 3000 + "}" * 3000 + " mu ~ normal(0, 1); }"
    with pytest.raises(ppl.PplError, match="deep.stan: the model is nested too deeply"):
        ppl.Model(deep, "deep.stan")
    path = tmp_path / "deep.model"
    path.write_text(deep)
    with pytest.raises(ppl.PplError, match="deep.model: the model is nested too deeply"):
        ppl.Model.from_file(path)
    model = ppl.Model(PARAM)

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(ppl.api, "run_fit", no_memory)
    with pytest.raises(ppl.PplError, match="out of memory"):
        model.fit()


@pytest.mark.parametrize(
    "decl",
    [
        "simplex[3] s = [1, 1, 1]';",
        "ordered[3] s = [3, 2, 1]';",
        "cov_matrix[2] s = [[1, 2], [2, 1]];",
        "corr_matrix[2] s = [[1, 5], [5, 1]];",
        "array[2] positive_ordered[2] s = {[1, 2]', [2, 1]'};",
    ],
)
def test_constrained_transformed_data_is_checked(tmp_path, decl):
    model = _model(tmp_path, f"transformed data {{\n  {decl}\n}}\n" + PARAM)
    _user_error(["fit", model, "--quiet"], "m.model:2:", "transformed data 's", "is not a valid")


def test_constrained_transformed_data_that_holds_fits(tmp_path):
    decl = "simplex[3] s = [0.2, 0.3, 0.5]'; cov_matrix[2] c = [[2, 1], [1, 2]];"
    model = _model(tmp_path, f"transformed data {{ {decl} }}\n" + PARAM)
    rc, _, err = run_main(["fit", model, "--quiet"])
    assert rc == 0, err


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("to_int(1e30)", "1e+30 is outside Stan's int range"),
        ("2147483647 + 1", "2147483647 + 1 = 2147483648 is outside Stan's int range"),
        ("-2147483647 - 2", "is outside Stan's int range"),
        ("65536 * 65536", "is outside Stan's int range"),
    ],
)
def test_stans_int_range_is_enforced(tmp_path, expr, message):
    model = _model(tmp_path, f"transformed data {{ int k = {expr}; }}\n" + PARAM)
    _user_error(["fit", model, "--quiet"], "m.model:1:", message)


def test_int_arithmetic_inside_the_range_is_exact(tmp_path):
    model = ppl.Model("transformed data { int k = 2147483646 + 1; int m = to_int(-2147483648.0); }"
                      + PARAM)  # fmt: skip
    data = model.compile().data
    assert int(data["k"]) == 2147483647 and int(data["m"]) == -2147483648


def test_a_utf8_bom_in_a_model_is_accepted(tmp_path):
    path = tmp_path / "bom.model"
    path.write_bytes(b"\xef\xbb\xbf" + PARAM.encode())
    rc, out, err = run_main(["check", str(path)])
    assert rc == 0, err
    assert ppl.Model("\ufeff" + PARAM).checked is not None


@pytest.mark.parametrize("value", ["1_0", "\u0661\u0662", "\uff11", "0x10", "1e", "- 1"])
def test_set_takes_stan_number_literals_only(tmp_path, value):
    model = _model(tmp_path, "data { int N; }\n" + PARAM)
    _user_error(["check", model, "--set", f"N={value}"], "is not a number as Stan writes one")


@pytest.mark.parametrize("value", ["10", "+3", "1e1", "1.0"])
def test_set_numbers_stan_writes_are_read(tmp_path, value):
    model = _model(tmp_path, "data { real x; }\n" + PARAM)
    rc, _, err = run_main(["check", model, "--set", f"x={value}"])
    assert rc == 0, err


def test_hints_come_from_code_not_comments(tmp_path):
    """`// columns X.1, X.2` before a syntax error gave a false "tuples are not supported"."""
    comment = "parameters { real mu; }\n// columns X.1, X.2\nmodel { mu ~ normal(0, 1) }\n"
    err = _user_error(["check", _model(tmp_path, comment)], "m.model:3:")
    assert "tuple" not in err
    block = "parameters { real mu; }\n/* x.1 tuple(\n */ model { mu ~ normal(0, 1) }\n"
    assert "tuple" not in _user_error(["check", _model(tmp_path, block, "b.model")], "b.model:")
    code = "parameters { real mu; }\nmodel { real z = mu.1; }\n"
    _user_error(["check", _model(tmp_path, code, "c.model")], "tuples are not supported")


# ---- contracts: Ctrl-C -----------------------------------------------------------------------


#: a test run started as a background job of a script inherits SIGINT ignored; ppl then leaves
#: it ignored, as a command must
SIGINT_IGNORED = signal.getsignal(signal.SIGINT) is not signal.default_int_handler
needs_sigint = pytest.mark.skipif(
    SIGINT_IGNORED or threading.current_thread() is not threading.main_thread(),
    reason="SIGINT is ignored or handled by someone else in this test run",
)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@needs_sigint
def test_a_swallowed_ctrl_c_is_raised_at_the_next_evaluation():
    """autograd's `wraps` catches BaseException: a KeyboardInterrupt raised there vanished and
    the fit ran to the end (4 of 170 trials). The noted signal is raised by the next poll."""
    model = ppl.Model(PARAM)
    with pytest.raises(KeyboardInterrupt), interrupts_noted():
        try:  # what autograd's wraps does with the KeyboardInterrupt
            signal.raise_signal(signal.SIGINT)
        except BaseException:  # noqa: BLE001
            pass
        model.fit(iterations=50)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@needs_sigint
def test_a_ctrl_c_noted_and_never_polled_ends_the_run():
    with pytest.raises(KeyboardInterrupt), interrupts_noted():
        note_interrupt()
    note_interrupt()  # outside a run: forgotten, no KeyboardInterrupt in a later run
    assert not ppl.limits._PENDING


@needs_sigint
def test_the_cli_exits_130_on_a_swallowed_ctrl_c(tmp_path, monkeypatch):
    """Without --checkpoint: a Ctrl-C noted during the fit (its exception swallowed) is exit 130."""
    from ppl.runtime.evaluator import Evaluator

    calls = []
    run = Evaluator.run

    def swallowing_run(self, stmts):
        calls.append(1)
        if len(calls) == 30:
            note_interrupt()  # the handler ran; its KeyboardInterrupt was swallowed
        return run(self, stmts)

    monkeypatch.setattr(Evaluator, "run", swallowing_run)
    rc, _, err = run_main(["fit", _model(tmp_path, PARAM), "--quiet"])
    assert rc == 130, err
    assert "interrupted after" in err and "Traceback" not in err


def test_a_ctrl_c_while_the_command_starts_is_exit_130_without_a_traceback(tmp_path):
    """A Ctrl-C in the first 0.1 s printed a traceback from the imports."""
    model = _model(tmp_path, PARAM)
    code = ("import sys; sys.stderr.write('go\\n'); sys.stderr.flush()\n"
            "from ppl.cli import main\n"
            f"sys.exit(main(['check', {model!r}]))\n")  # fmt: skip
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, env=env, cwd=ROOT,
                         preexec_fn=_default_sigint)  # fmt: skip
    assert p.stderr.readline() == b"go\n"
    time.sleep(0.15)
    p.send_signal(signal.SIGINT)  # during `from ppl.cli import main` (half a second)
    err = p.communicate(timeout=60)[1].decode()
    assert p.returncode == 130, err
    assert "Traceback" not in err and "interrupted after" in err


def test_a_ctrl_c_during_a_fit_without_checkpoint_is_exit_130(tmp_path):
    model = str(ROOT / "models/eight_schools/centered.model")
    data = str(ROOT / "models/eight_schools/eight_schools.json")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    code = ("import sys\nsys.stderr.write('go\\n'); sys.stderr.flush()\nfrom ppl.cli import main\n"
            f"sys.exit(main(['fit', {model!r}, {data!r}, '--quiet', '--output', "
            f"{str(tmp_path / 'out')!r}]))\n")  # fmt: skip
    for delay in (0.2, 1.0, 2.5):  # in the imports, or in the fit
        p = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, env=env,
                             stdout=subprocess.DEVNULL, cwd=ROOT,
                             preexec_fn=_default_sigint)  # fmt: skip
        assert p.stderr.readline() == b"go\n"
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        err = p.communicate(timeout=120)[1].decode()
        assert p.returncode == 130, (delay, err)
        assert "Traceback" not in err


def test_the_api_keeps_numpy_warnings_from_the_user():
    """numpy's overflow warnings reached a notebook's user; ppl's own warnings still do."""
    import warnings

    code = "parameters { real<lower=0> s; }\nmodel { target += log(s) * 1e300 * 1e10; }\n"
    model = ppl.Model(code)  # overflows: numpy warned 7 times before the fit failed
    with warnings.catch_warnings(record=True) as caught, pytest.raises(ppl.PplError):
        warnings.simplefilter("always")
        with np.errstate(all="warn"):
            model.fit(iterations=50, seed=3)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], caught
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ppl.api.user_errors(lambda: warnings.warn("unreliable", ppl.errors.PplWarning, 2))()
    assert [w.category for w in caught] == [ppl.errors.PplWarning]
