"""`python -m gnnsparse` / `gnnsparse`: the command line (bench, info, train)."""
import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:
        from .train.cli import main as _train

        return _train(argv[1:])
    from .bench.cli import main as _main

    return _main(argv)


if __name__ == "__main__":
    sys.exit(main())
