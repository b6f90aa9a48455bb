"""The `ppl` command and `python -m ppl`: a Ctrl-C handler first, then the CLI's imports.

Nothing but the interpreter's own `_signal` is imported before the handler is in place, so a
Ctrl-C while ppl.cli, numpy and scipy load (0.3 s, more under load) is noted and ends the command
with exit 130, no traceback. What runs before this module cannot be covered: the interpreter's
start, `site` (with an editable install, setuptools' import hook, which imports pathlib and
urllib) and the package's small __init__ (docs/robustness.md has the times).
"""

import sys

try:  # the interpreter's own module, already loaded: `signal` would import more first
    import _signal as signal
except ImportError:  # pragma: no cover - not CPython
    import signal

_NOTED: list[int] = []


def _note(signum, frame) -> None:
    _NOTED.append(signum)


if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _note)  # this module runs in the main thread, at start


def main() -> int:
    """The command: hands the noted Ctrl-Cs to ppl.cli, whose main() turns one into exit 130."""
    try:
        from ppl import cli

        if signal.getsignal(signal.SIGINT) is _note:  # cli's handler from here on, then the
            signal.signal(signal.SIGINT, cli._early_interrupt)  # notes so far (none lost between)
        cli._EARLY_INTERRUPT.extend(_NOTED)
        return cli.main()
    except KeyboardInterrupt:  # after cli.main() gave Python's handler back, the work done
        return 130


if __name__ == "__main__":
    sys.exit(main())
