"""`--cache-dir DIR --no-cache`: the persistent XLA compilation cache that
`sweep`, `codesign` and `requirements` share (search.enable_compilation_cache), so that a
rerun reads its compiled programs back instead of compiling them again."""


def add_cache_arguments(p, what: str):
    """`what`: what a rerun spares, for the help (e.g. "a rerun or resume skips the compile")."""
    p.add_argument("--cache-dir", help=f"persistent XLA compilation cache, so {what} "
                                       "(default $JAXPLAT_CACHE_DIR, else ~/.cache/jaxplat/xla)")
    p.add_argument("--no-cache", action="store_true", help="no persistent compilation cache")


def use_cache(args, min_compile_s: float = 1.0) -> None:
    """Turn the cache on unless --no-cache (before the first compile), for
    the programs that took at least `min_compile_s` seconds to compile."""
    if not args.no_cache:
        from jaxplat.search import enable_compilation_cache
        enable_compilation_cache(args.cache_dir, min_compile_s)
