"""`oatf` console script.

- `oatf validate [--strict] FILE|DIR…`: exit 0 every document valid, 1 some document invalid, 2 some file
  unreadable. `--strict` adds the strict checks (`oatf.strict_errors`: S-001…) as errors.
- `oatf normalize FILE`: the canonical YAML form of a valid document.
- `oatf evaluate [--lenient] --attacks PATH --flows FILE…`: replay recorded traffic against an attack
  library; exit statuses in `EVALUATE_EXIT_STATUSES` (strict loading refuses documents with strict-check
  errors unless `--lenient`).
- `oatf recover DIR --attacks PATH`: conclude the runs a crashed proxy left open, from its journal.
- `oatf export-trace --flows FILE… --out DIR`: each recorded agent session as an Attest v1 trace.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import oatf
from addon.engine_config import SETTINGS

from .diagnostics import Finding, error_findings, parse_findings, validation_findings

EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2
EVALUATE_EXIT_STATUSES = """exit status:
  0  no attack exploited (every run resisted or was not delivered)
  1  some run exploited or partial
  2  errors: any document not loaded (invalid, unreadable, or refused by strict loading), unreadable
     flows, no run produced, or some verdict is `error`
  3  --require-delivered: some attack never reached the agent (no run of it was delivered)"""
DOCUMENT_SUFFIXES = (".yaml", ".yml")


def documents_in(paths: list[str]) -> Iterator[Path]:
    """The files named, and the `.yaml`/`.yml` files under the directories named, sorted."""
    for name in paths:
        path = Path(name)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in DOCUMENT_SUFFIXES and p.is_file())
        else:
            yield path


def check_file(path: Path, strict: bool = False) -> tuple[list[Finding], bool, oatf.Document | None]:
    """Findings for one file (with `strict`, the strict checks' errors too), whether it could be read, and the
    parsed document when it parsed."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [Finding(str(path), "error", "unreadable", "", exc.strerror or str(exc))], False, None
    try:
        document = oatf.parse(data)
    except oatf.OATFParseError as exc:
        return parse_findings(str(path), exc.errors), True, None
    findings = validation_findings(str(path), document, oatf.validate(document))
    if strict:
        findings += error_findings(str(path), list(oatf.strict_errors(document)))
    return findings, True, document


def cmd_validate(args: argparse.Namespace) -> int:
    status = EXIT_OK
    files = list(documents_in(args.paths))
    if not files:
        print("oatf validate: no OATF documents (.yaml, .yml) found", file=sys.stderr)
        return EXIT_UNREADABLE
    records: list[dict[str, object]] = []
    invalid = 0
    for path in files:
        findings, readable, _ = check_file(path, args.strict)
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


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Replay recordings through the decoders and monitor; print the verdict table; write reports."""
    from addon.engine_config import engine_config
    from addon.replay import ReplayError, available_cpus, replay
    from addon.reports import ReportWriter, exit_status, outcome_summary, summary_table, undelivered_attacks

    try:
        config = engine_config({s.name: getattr(args, s.name) for s in SETTINGS})
    except ValueError as exc:
        print(f"oatf evaluate: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    attack_paths = [p for arg in args.attacks for p in arg.split(",") if p]
    try:
        result = replay(attack_paths, args.flows, config, args.jobs or available_cpus())
    except (ImportError, AttributeError) as exc:
        print(f"oatf evaluate: --semantic-evaluator: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    except ReplayError as exc:
        print(f"oatf evaluate: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    for waived in result.waived:
        print(f"warning: loaded anyway (--lenient): {waived}", file=sys.stderr)
    for problem in result.problems:
        print(f"not loaded: {problem}", file=sys.stderr)
    if args.report_dir:
        writer = ReportWriter(args.report_dir)
        for report in result.reports:
            writer.write(report)
        writer.commit()
    if args.format == "json":
        json.dump(result.reports, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(summary_table(result.reports) if result.reports
              else "no run: no recorded traffic matched a loaded attack")
        print(f"{result.flows} flow(s), {result.events} event(s), {len(result.reports)} run(s), "
              f"{result.workers} evaluation process(es)"
              + (f"; reports in {args.report_dir}" if args.report_dir else ""), file=sys.stderr)
    if result.problems:  # a CI gate must not pass without the attacks it was given
        documents = len({problem.path for problem in result.problems})
        print(f"oatf evaluate: {documents} document(s) not loaded ({len(result.problems)} problem(s) above): "
              "their attacks were not evaluated", file=sys.stderr)
    if args.format == "json" and result.reports:
        print(outcome_summary(result.reports), file=sys.stderr)
    undelivered = undelivered_attacks(result.reports, result.attack_ids) if args.require_delivered else []
    for attack_id in undelivered:
        print(f"oatf evaluate: {attack_id}: never delivered (no run saw its payload reach the agent)",
              file=sys.stderr)
    if result.problems:
        return EXIT_UNREADABLE
    if not result.reports:
        return EXIT_UNREADABLE  # a CI gate must not pass on nothing: no loaded attack saw any traffic
    return exit_status(result.reports, undelivered)


def cmd_export_trace(args: argparse.Namespace) -> int:
    """Write each agent session of the recordings as an Attest v1 trace."""
    from addon.attest_traces import TraceCollector, write_traces
    from addon.monitor import SessionKey
    from addon.replay import ReplayError, decode_recordings

    try:
        events, flows = decode_recordings(args.flows)
    except ReplayError as exc:
        print(f"oatf export-trace: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    collector = TraceCollector(SessionKey(args.session_key))
    for event in events:
        collector.observe(event)
    for path in write_traces(collector.traces(), args.out):
        print(path)
    print(f"{flows} flow(s), {len(events)} event(s), {len(collector.sessions)} trace(s)", file=sys.stderr)
    return EXIT_OK


def add_settings(parser: argparse.ArgumentParser) -> None:
    """The engine's settings as flags: the live addon's `oatf_*` options, same names and meaning
    (`addon.engine_config`)."""
    for setting in SETTINGS:
        if setting.kind is bool:
            parser.add_argument(setting.flag, action="store_true", help=setting.help)
        else:
            parser.add_argument(setting.flag, type=setting.kind, default=setting.default, choices=setting.choices,
                                help=f"{setting.help} (default: {setting.default or 'none'})")


def cmd_recover(args: argparse.Namespace) -> int:
    """Conclude and report the runs a proxy that did not stop cleanly left open in its report directory."""
    from addon.engine_config import engine_config
    from addon.journal import JOURNAL_DIR
    from addon.journal import clear as clear_journal
    from addon.monitor import load_library
    from addon.recovery import pending_journal, recover
    from addon.reports import ReportWriter, exit_status, summary_table
    from addon.semantic import load_semantic_evaluator

    if not pending_journal(args.report_dir):
        print(f"oatf recover: no journal in {args.report_dir}: nothing to recover", file=sys.stderr)
        return EXIT_OK
    try:
        config = engine_config({s.name: getattr(args, s.name) for s in SETTINGS})
        semantic = load_semantic_evaluator(config.semantic_evaluator)
    except (ValueError, ImportError, AttributeError) as exc:
        print(f"oatf recover: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    library = load_library([p for arg in args.attacks for p in arg.split(",") if p], config.lenient)
    for problem in library.problems:
        print(f"not loaded: {problem}", file=sys.stderr)
    if library.problems:
        print("oatf recover: the journal is kept; fix the documents and run again", file=sys.stderr)
        return EXIT_UNREADABLE
    reports = recover(args.report_dir, list(library.attacks), config.monitor, semantic)
    writer = ReportWriter(args.report_dir)
    for report in reports:
        writer.write(report)
    writer.commit()
    clear_journal(Path(args.report_dir) / JOURNAL_DIR)
    print(summary_table(reports) if reports else "every run had been reported: nothing left open")
    print(f"{len(reports)} run(s) recovered into {args.report_dir}", file=sys.stderr)
    return exit_status(reports)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oatf", description="Open Agent Threat Format tools")
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser("validate", help="check documents against every OATF rule (V-001…V-049, W-001…)")
    validate.add_argument("paths", nargs="+", metavar="FILE|DIR")
    validate.add_argument("--format", choices=("text", "json"), default="text")
    validate.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    validate.add_argument("--strict", action="store_true",
                          help="also report, as errors, what can never fire in its binding (S-001…S-004: unknown "
                          "surface, event, mode or protocol, target in the JSON-RPC envelope)")
    validate.set_defaults(func=cmd_validate)
    normalize = sub.add_parser("normalize", help="print a valid document's canonical YAML form")
    normalize.add_argument("file")
    normalize.set_defaults(func=cmd_normalize)
    evaluate = sub.add_parser("evaluate", help="replay recorded traffic (.mitm flows or HAR) against attacks",
                              epilog=EVALUATE_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    evaluate.add_argument("--attacks", action="append", required=True, metavar="PATH",
                          help="attack documents: files or directories (repeat or comma-separate)")
    evaluate.add_argument("--flows", nargs="+", required=True, metavar="FILE", help="mitmproxy flow files or HAR")
    evaluate.add_argument("--report-dir", help="write one JSON report per run and verdicts.jsonl here")
    add_settings(evaluate)
    evaluate.add_argument("--format", choices=("text", "json"), default="text")
    evaluate.add_argument("--require-delivered", action="store_true",
                          help="exit 3 when an attack loaded was never delivered to the agent (see exit status)")
    evaluate.add_argument("--jobs", type=_positive, metavar="N",
                          help="processes that evaluate sessions in parallel (default: the CPUs available; "
                          "small recordings use one)")
    evaluate.set_defaults(func=cmd_evaluate)
    recover_ = sub.add_parser("recover", help="conclude the runs a proxy that did not stop cleanly (kill -9, a "
                              "crash) left open, from the journal in its report directory",
                              epilog=EVALUATE_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    recover_.add_argument("report_dir", metavar="DIR", help="the proxy's oatf_report_dir")
    recover_.add_argument("--attacks", action="append", required=True, metavar="PATH",
                          help="the attack documents the proxy evaluated (repeat or comma-separate)")
    add_settings(recover_)
    recover_.set_defaults(func=cmd_recover)
    export = sub.add_parser("export-trace", help="write recorded agent sessions as Attest v1 traces")
    export.add_argument("--flows", nargs="+", required=True, metavar="FILE", help="mitmproxy flow files or HAR")
    export.add_argument("--out", required=True, metavar="DIR", help="one <trace_id>.json per session")
    export.add_argument("--session-key", default="auto",
                        choices=("auto", "mcp_session", "a2a_context", "ag_ui_thread", "connection", "global"))
    export.set_defaults(func=cmd_export_trace)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
