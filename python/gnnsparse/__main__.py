"""`python -m gnnsparse` / `gnnsparse`: the command line (bench, info)."""
import sys


def main(argv=None) -> int:
    from .bench.cli import main as _main

    return _main(argv)


if __name__ == "__main__":
    sys.exit(main())
