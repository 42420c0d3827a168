"""`oatf` console script: `oatf normalize FILE`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import oatf

EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2


def _read(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        print(f"{path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return None


def cmd_normalize(args: argparse.Namespace) -> int:
    """Print the canonical (normalized, fully explicit) YAML form of one document."""
    data = _read(args.file)
    if data is None:
        return EXIT_UNREADABLE
    try:
        document = oatf.parse(data)
    except oatf.OATFParseError as exc:
        for error in exc.errors:
            where = f"{error.line}:{error.column}:" if error.line else ""
            print(f"{args.file}:{where} {error.kind.value} {error.path or ''}: {error.message}", file=sys.stderr)
        return EXIT_INVALID
    sys.stdout.write(oatf.serialize(document))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oatf", description="Open Agent Threat Format tools")
    sub = parser.add_subparsers(dest="command", required=True)
    normalize = sub.add_parser("normalize", help="print a document's canonical YAML form")
    normalize.add_argument("file")
    normalize.set_defaults(func=cmd_normalize)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
