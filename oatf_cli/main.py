"""`oatf` console script: `oatf validate FILE|DIR…` and `oatf normalize FILE`.

Exit status: 0 every document valid, 1 some document invalid, 2 some file unreadable (or no file found).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import oatf

from .diagnostics import Finding, parse_findings, validation_findings

EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2
DOCUMENT_SUFFIXES = (".yaml", ".yml")


def documents_in(paths: list[str]) -> Iterator[Path]:
    """The files named, and the `.yaml`/`.yml` files under the directories named, sorted."""
    for name in paths:
        path = Path(name)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in DOCUMENT_SUFFIXES and p.is_file())
        else:
            yield path


def check_file(path: Path) -> tuple[list[Finding], bool, oatf.Document | None]:
    """Findings for one file, whether it could be read, and the parsed document when it parsed."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [Finding(str(path), "error", "unreadable", "", exc.strerror or str(exc))], False, None
    try:
        document = oatf.parse(data)
    except oatf.OATFParseError as exc:
        return parse_findings(str(path), exc.errors), True, None
    return validation_findings(str(path), document, oatf.validate(document)), True, document


def cmd_validate(args: argparse.Namespace) -> int:
    status = EXIT_OK
    files = list(documents_in(args.paths))
    if not files:
        print("oatf validate: no OATF documents (.yaml, .yml) found", file=sys.stderr)
        return EXIT_UNREADABLE
    records: list[dict[str, object]] = []
    invalid = 0
    for path in files:
        findings, readable, _ = check_file(path)
        if not readable:
            status = EXIT_UNREADABLE
        elif any(f.severity == "error" for f in findings):
            invalid += 1
            status = max(status, EXIT_INVALID)
        if args.format == "json":
            records.append({"file": str(path), "valid": readable and not any(f.severity == "error" for f in findings),
                            "diagnostics": [f.record() for f in findings]})
        else:
            for finding in findings:
                print(finding.text(), file=sys.stdout)
    if args.format == "json":
        json.dump(records, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not args.quiet:
        print(f"{len(files)} document(s) checked, {invalid} invalid", file=sys.stderr)
    return status


def cmd_normalize(args: argparse.Namespace) -> int:
    """Print the canonical (normalized, fully explicit) YAML form of one valid document."""
    findings, readable, document = check_file(Path(args.file))
    for finding in findings:
        print(finding.text(), file=sys.stderr)
    if not readable:
        return EXIT_UNREADABLE
    if document is None or any(f.severity == "error" for f in findings):
        return EXIT_INVALID
    sys.stdout.write(oatf.serialize(document))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oatf", description="Open Agent Threat Format tools")
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser("validate", help="check documents against every OATF rule (V-001…V-049, W-001…)")
    validate.add_argument("paths", nargs="+", metavar="FILE|DIR")
    validate.add_argument("--format", choices=("text", "json"), default="text")
    validate.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    validate.set_defaults(func=cmd_validate)
    normalize = sub.add_parser("normalize", help="print a valid document's canonical YAML form")
    normalize.add_argument("file")
    normalize.set_defaults(func=cmd_normalize)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
