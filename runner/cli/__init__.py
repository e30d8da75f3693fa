"""Command-line front end: one module per subcommand, each with `add_parser` and `run`.

Exit codes (docs/product.md §6): 0 success, 2 bad usage or bad input (one line on stderr, no
traceback), 1 anything else; 141 (128 + SIGPIPE, what a shell reports for a command the signal
ends) without a word when the reader of stdout goes away (`inspect --json F | head -c 10`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn, Protocol, cast

from runner.cli import (
    bench,
    client_worker,
    demo,
    inspect,
    mock_server,
    replay,
    service,
    simulate,
    sweep,
    verify,
)
from runner.errors import BadInput, RunnerError

__all__ = ["main"]

# 128 + SIGPIPE: the exit status of a command whose reader closed the pipe.
EXIT_BROKEN_PIPE = 141

# Subcommand modules, in the order --help lists them. Imported plainly: each keeps its own
# heavy dependencies (the mock's server stack, benchmarks) inside the handler that needs them.
_COMMANDS = (
    simulate,
    replay,
    sweep,
    verify,
    service,
    mock_server,
    inspect,
    bench,
    demo,
    client_worker,
)


class _Command(Protocol):
    def add_parser(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    ) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 2 with one line, not argparse's usage dump plus message."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m runner",
        description="aiperf-web engine: replay agentic LLM workloads, simulate, benchmark.",
    )
    subparsers = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser),
    )
    subparsers.required = True
    for command in _COMMANDS:
        cast(_Command, command).add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.handler(args))
        # Flush inside the try: a reader that left early must be met here, not by the
        # interpreter's flush at exit, which prints "Exception ignored ... BrokenPipeError".
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except BadInput as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except RunnerError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


def _discard_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered for the gone reader is dropped
    instead of failing again when Python flushes stdout at exit (the recipe of the Python
    docs' signal module notes on SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file descriptor (redirected in process)
        pass
