"""The `jaxplat` command line: one module per subcommand, each with
`register(subparsers)`. The top layer: may import every package."""

from jaxplat.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
