"""Subcommands of the `jaxplat` command, one module each."""
