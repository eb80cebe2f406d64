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

    parser = argparse.ArgumentParser(prog="jaxplat", description="Cost model of LLM inference on any chip and cluster.")
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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    try:
        return args.func(args) or 0
    except (SpecError, ValueError) as e:
        print(f"jaxplat: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # e.g. --out names a file, a folder without write permission
        where = f"{e.filename}: " if e.filename else ""
        print(f"jaxplat: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # search.run closes its progress bar first, so this starts a line of its own.
        print("jaxplat: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
