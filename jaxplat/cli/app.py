"""The `jaxplat` command. Each subcommand lives in `jaxplat.cli.<name>`
and exposes `register(subparsers)`; the parser's `func(args)` runs it."""

import argparse
import importlib
import os
import sys

from jaxplat.specs import SpecError

COMMANDS = ("estimate", "train", "sweep", "codesign", "requirements", "report", "calibrate")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or of `only` (one name of COMMANDS:
    a call imports just that command's modules)."""
    from jaxplat import __version__

    parser = argparse.ArgumentParser(prog="jaxplat",
                                     description="Cost model of LLM inference and training on any chip and cluster.")
    parser.add_argument("--version", action="version", version=f"jaxplat {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in (only,) if only in COMMANDS else COMMANDS:
        try:
            module = importlib.import_module(f"jaxplat.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"jaxplat.cli.{name}":
                raise
            continue  # not built yet
        module.register(sub)
    return parser


def _save_traceback() -> str:
    """Write the current exception's traceback to a private temporary file; its path."""
    import tempfile
    import traceback
    fd, path = tempfile.mkstemp(prefix="jaxplat-traceback-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        traceback.print_exc(file=f)
    return path


def main(argv=None) -> int:
    """Run the `jaxplat` command with `argv` (default: sys.argv[1:]); its
    exit status: 0 done, 2 bad input (one line on stderr), 70 an internal
    error (its traceback saved to a file), 130 interrupted."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    try:
        return args.func(args) or 0
    except SpecError as e:  # bad input: one line naming the file, flag or key
        print(f"jaxplat: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # e.g. --out names a file, a folder without write permission
        where = f"{e.filename}: " if e.filename else ""
        print(f"jaxplat: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001  not bad input but a bug: keep its traceback
        if os.environ.get("JAXPLAT_TRACEBACK"):
            raise
        path = _save_traceback()
        print(f"jaxplat: internal error: {type(e).__name__}: {e} (a bug, not your input: traceback in {path}; "
              "JAXPLAT_TRACEBACK=1 prints it)", file=sys.stderr)
        return 70
    except KeyboardInterrupt:
        # search.run closes its progress bar first, so this starts a line of its own.
        print("jaxplat: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
