"""`oatf` console script.

- `oatf validate [--strict] FILE|DIR…`: exit 0 every document valid, 1 some document invalid, 2 some file
  unreadable. `--strict` adds the strict checks (`oatf.strict_errors`: S-001…) as errors.
- `oatf normalize FILE`: the canonical YAML form of a valid document.
- `oatf evaluate [--lenient] --attacks PATH --flows FILE…`: replay recorded traffic against an attack
  library; exit statuses in `EVALUATE_EXIT_STATUSES` (strict loading refuses documents with strict-check
  errors unless `--lenient`).
- `oatf recover DIR --attacks PATH`: conclude the runs a crashed proxy left open, from its journal.
- `oatf export-trace --flows FILE… --out DIR`: each recorded agent session as an Attest v1 trace.
- `oatf tap [--attacks PATH…] [--report-dir DIR] [--record FILE] -- COMMAND…`: run an MCP stdio server,
  relaying and evaluating its traffic (`oatf_cli.tap`); exits as the server did.
- `oatf monitor [--listen PATH] [--attacks PATH…]`: one judge for several taps (`oatf_cli.judge`).
- `oatf serve DOC… [--host H] [--port N] [--report-dir DIR] [--agent [ACTOR=]URL…] [--stdio] [--stateless]`: play the
  documents' attackers against an agent and judge what was served (`oatf_serve`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import oatf
from oatf_engine.engine_config import SETTINGS, EngineConfig
from oatf_engine.progress import UPDATE_EVERY, Progress

from . import diagnostics
from .diagnostics import CheckedFile, Finding, error_findings, parse_findings, validation_findings

if TYPE_CHECKING:
    from oatf_engine.replay import ReplayResult

EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2
EVALUATE_EXIT_STATUSES = """exit status:
  0  no attack exploited (every run resisted or was not delivered), or none that --fail-on,
     --severity-threshold and --min-tier count
  1  some run exploited or partial (with --fail-on: exploited, or down to the least bad outcome named;
     with --severity-threshold: of an attack at or above that severity, or without one; with --min-tier:
     whose verdict's max tier reaches it, or whose matched indicators declare no tier)
  2  errors: any document not loaded (invalid, unreadable, or refused by strict loading), unreadable
     flows, traffic not inspected (over --wire-max-body, not content-decodable, nested too deep) or that the
     wire decoder failed on (a bug), no run produced, or some verdict is `error` (whatever the thresholds)
  3  --require-delivered or --fail-on not-delivered: some attack (at or above --severity-threshold) never
     reached the agent (no run of it was delivered)
Matched values are redacted in every output (AKIA…XY (20 chars)) unless --show-secrets."""
VALIDATE_EXIT_STATUSES = """exit status:
  0  every document valid (warnings allowed)
  1  some document invalid (with --strict: or with a strict-check error)
  2  some file could not be read, or no document (.yaml, .yml) was found"""
NORMALIZE_EXIT_STATUSES = """exit status:
  0  the canonical form printed
  1  the document is invalid (its findings on stderr)
  2  the file could not be read"""
RECOVER_EXIT_STATUSES = """exit status:
  0  nothing to recover, or no recovered run exploited
  1  some recovered run exploited or partial
  2  errors: a document not loaded (the journal is kept), the semantic evaluator not loaded, journaled traffic
     not inspected or that the wire decoder failed on (a bug), or some verdict is `error`"""
EXPORT_EXIT_STATUSES = """exit status:
  0  the traces written (their paths on stdout)
  2  a recording could not be read"""
TAP_EXIT_STATUSES = """exit status:
  the server's: its exit status, or the signal that ended it (the tap ends by the same signal)
  2    the tap could not start (the semantic evaluator, the record file or the report directory)
  126  COMMAND is not executable
  127  COMMAND was not found"""
MONITOR_EXIT_STATUSES = """exit status:
  0  stopped by SIGINT or SIGTERM, every open run concluded and reported
  2  could not start (the semantic evaluator, the report directory, or the socket)"""
SERVE_EXIT_STATUSES = """exit status (once stopped, as oatf recover's):
  0  no run exploited
  1  some run exploited or partial
  2  could not start (a document or option unusable, a port taken), or some verdict is `error`"""
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
    """Findings for one file (with `strict`, the strict checks' errors too), each with its source line,
    whether it could be read, and the parsed document when it parsed."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [Finding(str(path), "error", "unreadable", "", exc.strerror or str(exc))], False, None
    text = data.decode("utf-8", "replace")
    try:
        document = oatf.parse(data)
    except oatf.OATFParseError as exc:
        return diagnostics.with_source(parse_findings(str(path), exc.errors), text), True, None
    findings = validation_findings(str(path), document, oatf.validate(document))
    if strict:
        findings += error_findings(str(path), list(oatf.strict_errors(document)))
    return diagnostics.with_source(findings, text), True, document


VALIDATE_FORMATS = ("text", "json", "github", "sarif")


def cmd_validate(args: argparse.Namespace) -> int:
    status = EXIT_OK
    files = list(documents_in(args.paths))
    if not files:
        print("oatf validate: no OATF documents (.yaml, .yml) found", file=sys.stderr)
        return EXIT_UNREADABLE
    checked: list[CheckedFile] = []
    for path in files:
        findings, readable, _ = check_file(path, args.strict)
        checked.append(CheckedFile(str(path), readable, findings))
        if not readable:
            status = EXIT_UNREADABLE
        elif not checked[-1].valid:
            status = max(status, EXIT_INVALID)
    every = [finding for file in checked for finding in file.findings]
    if args.format == "json":
        sys.stdout.write(diagnostics.to_json(checked))
    elif args.format == "github":
        sys.stdout.write(diagnostics.to_github(every))
    elif args.format == "sarif":
        sys.stdout.write(diagnostics.to_sarif(every, [file.file for file in checked], package_version()))
    else:
        sys.stdout.write(diagnostics.to_text(every))
    if not args.quiet and args.format in ("text", "github"):
        print(diagnostics.summary_line(checked), file=sys.stderr)
    return status


def cmd_normalize(args: argparse.Namespace) -> int:
    """Print the canonical (normalized, fully explicit) YAML form of one valid document."""
    findings, readable, document = check_file(Path(args.file))
    sys.stderr.write(diagnostics.to_text(findings))
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


def _engine_config(args: argparse.Namespace, program: str) -> EngineConfig | None:
    """The engine settings of `args` (every `SETTINGS` flag, as the addon's `oatf_*` options); None, said on
    stderr as `oatf PROGRAM: …`, when one is invalid."""
    from oatf_engine.engine_config import engine_config

    try:
        return engine_config({s.name: getattr(args, s.name) for s in SETTINGS})
    except ValueError as exc:
        print(f"oatf {program}: {exc}", file=sys.stderr)
        return None


def _paths(values: list[str] | None) -> list[str]:
    """Paths given as repeated arguments, each possibly a comma-separated list."""
    return [p for arg in values or [] for p in arg.split(",") if p]


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Replay recordings through the decoders and monitor; print the verdict table (or another format); write
    reports and CI files; exit as `EVALUATE_EXIT_STATUSES` says."""
    from addon.recordings import ReplayError, replay
    from oatf_cli.progress import shown as progress_shown
    from oatf_engine.replay import WorkerFailed, available_cpus
    from oatf_engine.reports import (
        DEFAULT_FAIL_ON,
        exit_status,
        outcome_summary,
        severity_at_least,
        undelivered_attacks,
    )

    config = _engine_config(args, "evaluate")
    if config is None:
        return EXIT_UNREADABLE
    attack_paths = _paths(args.attacks)
    with progress_shown("oatf evaluate", args.progress, sys.stderr) as progress:
        try:
            result = replay(attack_paths, args.flows, config, args.jobs or available_cpus(), progress)
        except (ImportError, AttributeError) as exc:
            print(f"oatf evaluate: --semantic-evaluator: {exc}", file=sys.stderr)
            return EXIT_UNREADABLE
        except (ReplayError, WorkerFailed) as exc:
            print(f"oatf evaluate: {exc}", file=sys.stderr)
            return EXIT_UNREADABLE
        reports = _kept_reports(result.reports, args.report_dir, args.show_secrets, progress)
    for waived in result.waived:
        print(f"warning: loaded anyway (--lenient): {waived}", file=sys.stderr)
    for problem in result.problems:
        print(f"not loaded: {problem}", file=sys.stderr)
    outputs = _evaluate_outputs(args, reports, result)
    sys.stdout.write(outputs[args.format])
    for fmt in FILE_FORMATS:
        path = getattr(args, fmt)
        if path:
            Path(path).write_text(outputs[fmt], encoding="utf-8")
    if not args.quiet:
        print(f"{result.flows} flow(s), {result.events} event(s), {len(reports)} run(s), "
              f"{result.workers} evaluation process(es)"
              + (f"; reports in {args.report_dir}" if args.report_dir else ""), file=sys.stderr)
    if result.problems:  # a CI gate must not pass without the attacks it was given
        documents = len({problem.path for problem in result.problems})
        print(f"oatf evaluate: {documents} document(s) not loaded ({len(result.problems)} problem(s) above): "
              "their attacks were not evaluated", file=sys.stderr)
    unread = result.unread.problems()  # a CI gate must not pass on traffic it did not read through
    for sentence in unread:
        print(f"oatf evaluate: {sentence}", file=sys.stderr)
    if args.format != "text" and reports:
        print(outcome_summary(reports), file=sys.stderr)
    fail_on = set(args.fail_on or DEFAULT_FAIL_ON) | ({"not-delivered"} if args.require_delivered else set())
    undelivered = [key for key in undelivered_attacks(reports, result.attack_ids)
                   if severity_at_least(_severity_level(result.attacks.get(key)), args.severity_threshold)
                   ] if "not-delivered" in fail_on else []
    for attack_id in undelivered:
        print(f"oatf evaluate: {attack_id}: never delivered (no run saw its payload reach the agent)",
              file=sys.stderr)
    if result.problems or unread:
        return EXIT_UNREADABLE
    if not reports:
        return EXIT_UNREADABLE  # a CI gate must not pass on nothing: no loaded attack saw any traffic
    return exit_status(reports, undelivered, fail_on, args.severity_threshold, args.min_tier)


def _kept_reports(reports: list[dict], report_dir: str | None, show_secrets: bool,
                  progress: Progress | None) -> list[dict]:
    """`reports` redacted (`redact_report`) unless `show_secrets`, and written to `report_dir` when given;
    `progress`: the stage `writing reports` (or `redacting evidence`), in reports."""
    from oatf_engine.reports import ReportWriter, redact_report

    if show_secrets and not report_dir:
        return reports
    writer = ReportWriter(report_dir, show_secrets=True) if report_dir else None  # redacted here, unless asked
    if progress is not None:
        progress.start("writing reports" if writer else "redacting evidence", len(reports), "reports")
    kept = []
    for count, report in enumerate(reports):
        if progress is not None and count % UPDATE_EVERY == 0:
            progress.update(count)
        kept.append(report if show_secrets else redact_report(report))
        if writer is not None:
            writer.write(kept[-1])
    if writer is not None:
        writer.commit()
    if progress is not None:
        progress.update(len(kept))
        progress.finish(f"wrote {len(kept):,} report(s) to {report_dir}" if writer else
                        f"redacted {len(kept):,} report(s)")
    return kept


FILE_FORMATS = ("json", "sarif", "junit", "html")
"""The formats `oatf evaluate` also writes to files (`--json FILE`, `--sarif FILE`, …), beside stdout's."""


def _severity_level(attack: oatf.Attack | None) -> str | None:
    return str(attack.severity.level) if attack and attack.severity and attack.severity.level else None


def _evaluate_outputs(args: argparse.Namespace, reports: list[dict], result: ReplayResult) -> dict[str, str]:
    """Each output format `args` asks for (stdout's and the files'), by format name, rendered lazily."""
    from . import html_report, outputs

    renderers = {
        "text": lambda: outputs.to_text(reports, args.quiet, args.verbose),
        "json": lambda: outputs.to_json(reports),
        "sarif": lambda: outputs.to_sarif(reports, result.attacks, result.flow_files, args.flows, package_version()),
        "junit": lambda: outputs.to_junit(reports),
        "html": lambda: html_report.to_html(reports, result.attacks),
    }
    wanted = {args.format, *(fmt for fmt in FILE_FORMATS if getattr(args, fmt))}
    return {fmt: renderers[fmt]() for fmt in wanted}


def package_version() -> str:
    """The installed `oatf-watch` package's version."""
    try:
        return importlib.metadata.version("oatf-watch")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def cmd_export_trace(args: argparse.Namespace) -> int:
    """Write each agent session of the recordings as an Attest v1 trace."""
    from addon.recordings import ReplayError, decode_recordings
    from oatf_cli.progress import shown as progress_shown
    from oatf_engine.attest_traces import TraceCollector, write_traces
    from oatf_engine.monitor import SessionKey

    try:
        with progress_shown("oatf export-trace", args.progress, sys.stderr) as progress:
            events, flows = decode_recordings(args.flows, progress=progress)
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
    (`oatf_engine.engine_config`)."""
    for setting in SETTINGS:
        if setting.kind is bool:
            parser.add_argument(setting.flag, action="store_true", help=setting.help)
        else:
            parser.add_argument(setting.flag, type=setting.kind, default=setting.default, choices=setting.choices,
                                help=f"{setting.help} (default: {setting.default or 'none'})")


def add_progress_argument(parser: argparse.ArgumentParser, stages: str) -> None:
    """`--progress`/`--no-progress` (`oatf_cli.progress.shown`), its help naming the command's `stages`."""
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction,
                        help=f"progress on stderr, stage by stage ({stages}: done of total, rate, time left) "
                        "and the time each took: a bar on a terminal (the default there; --no-progress: none), "
                        "occasional lines elsewhere (only with --progress)")


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """A live front door's attacks, report directory and engine settings (`tap`, `monitor`)."""
    parser.add_argument("--attacks", action="append", metavar="PATH",
                        help="attack documents: files or directories (repeat or comma-separate)")
    parser.add_argument("--report-dir", default="oatf-reports",
                        help="write one JSON report per run and verdicts.jsonl here (default: oatf-reports)")
    add_settings(parser)


def cmd_recover(args: argparse.Namespace) -> int:
    """Conclude and report the runs a proxy that did not stop cleanly left open in its report directory."""
    from oatf_cli.progress import shown as progress_shown
    from oatf_engine.journal import take_lock
    from oatf_engine.monitor import load_library
    from oatf_engine.recovery import conclude_pending, pending_journal
    from oatf_engine.reports import exit_status, summary_table
    from oatf_engine.semantic import load_semantic_evaluator
    from oatf_engine.wire import Unread

    if not pending_journal(args.report_dir):
        print(f"oatf recover: no journal in {args.report_dir}: nothing to recover", file=sys.stderr)
        return EXIT_OK
    config = _engine_config(args, "recover")
    if config is None:
        return EXIT_UNREADABLE
    try:
        semantic = load_semantic_evaluator(config.semantic_evaluator)
    except (ImportError, AttributeError) as exc:
        print(f"oatf recover: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    with progress_shown("oatf recover", args.progress, sys.stderr) as progress:
        library = load_library(_paths(args.attacks), config.lenient, progress)
        for problem in library.problems:
            print(f"not loaded: {problem}", file=sys.stderr)
        if library.problems:
            print("oatf recover: the journal is kept; fix the documents and run again", file=sys.stderr)
            return EXIT_UNREADABLE
        try:
            held = take_lock(args.report_dir)
        except OSError as exc:
            print(f"oatf recover: {exc}", file=sys.stderr)
            return EXIT_UNREADABLE
        if held is None:
            print(f"oatf recover: another process journals in {args.report_dir} (a proxy, tap or monitor runs "
                  f"there): its runs are not left open; it reports them itself when it stops", file=sys.stderr)
            return EXIT_UNREADABLE
        unread = Unread()
        with held:
            reports = conclude_pending(args.report_dir, list(library.attacks), config.monitor, semantic, progress,
                                       config.decoder, unread)
    print(summary_table(reports) if reports else "every run had been reported: nothing left open")
    print(f"{len(reports)} run(s) recovered into {args.report_dir}", file=sys.stderr)
    missed = unread.problems()  # as `oatf evaluate`: a gate must not pass on traffic not read through
    for sentence in missed:
        print(f"oatf recover: {sentence}", file=sys.stderr)
    if missed:
        return EXIT_UNREADABLE
    return exit_status(reports)


def cmd_tap(args: argparse.Namespace) -> int:
    """Relay an MCP stdio server's traffic (`oatf_cli.tap`), evaluating it; exit as the server did."""
    from oatf_cli.tap import TapOptions, exit_like, run_tap

    config = _engine_config(args, "tap")
    if config is None:
        return EXIT_UNREADABLE
    attack_paths = _paths(args.attacks)
    options = TapOptions(args.command, attack_paths, args.report_dir, config, args.record, args.verbose,
                         args.agent, args.monitor)
    return exit_like(run_tap(options))


def cmd_monitor(args: argparse.Namespace) -> int:
    """The shared monitor that `oatf tap --monitor PATH` feeds (`oatf_cli.judge.serve_monitor`)."""
    from oatf_cli.judge import serve_monitor
    from oatf_engine.feed import SOCKET_NAME

    config = _engine_config(args, "monitor")
    if config is None:
        return EXIT_UNREADABLE
    attack_paths = _paths(args.attacks)
    listen = args.listen or str(Path(args.report_dir) / SOCKET_NAME)
    return serve_monitor(listen, attack_paths, args.report_dir, config, args.verbose)


def cmd_serve(args: argparse.Namespace) -> int:
    """Play the documents' attackers and judge what was served (`oatf_serve.serve`)."""
    from oatf_serve.agents import AgentError, parse_agents
    from oatf_serve.serve import EXIT_USAGE, ServeOptions, run_serve

    config = _engine_config(args, "serve")
    if config is None:
        return EXIT_UNREADABLE
    try:
        agents = parse_agents(args.agent)
    except AgentError as exc:
        print(f"oatf serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    documents = _paths(args.documents)
    return run_serve(ServeOptions(documents, config, args.host, args.port, args.report_dir, args.verbose, agents,
                                  args.stdio, args.stateless))


def build_parser() -> argparse.ArgumentParser:
    from oatf_engine.reports import FAIL_ON, SEVERITY_LEVELS

    parser = argparse.ArgumentParser(prog="oatf", description="Open Agent Threat Format tools",
                                     epilog="Each command's --help lists its exit statuses.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser("validate", help="check documents against every OATF rule (V-001…V-049, W-001…)",
                              epilog=VALIDATE_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    validate.add_argument("paths", nargs="+", metavar="FILE|DIR")
    validate.add_argument("--format", choices=VALIDATE_FORMATS, default="text",
                          help="text: file:line:col: RULE path: message and the source line with a caret; json: "
                          "one document: a summary (counts) and each file with its diagnostics (file, line, "
                          "column, severity, rule, path, message); github: GitHub Actions annotations "
                          "(::error file=…,line=…,col=…,title=RULE::…); sarif: SARIF 2.1.0 for code scanning")
    validate.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    validate.add_argument("--strict", action="store_true",
                          help="also report, as errors, what can never fire in its binding (S-001…S-004: unknown "
                          "surface, event, mode or protocol, target in the JSON-RPC envelope)")
    validate.set_defaults(func=cmd_validate)
    normalize = sub.add_parser("normalize", help="print a valid document's canonical YAML form",
                               epilog=NORMALIZE_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    normalize.add_argument("file")
    normalize.set_defaults(func=cmd_normalize)
    evaluate = sub.add_parser("evaluate", help="replay recorded traffic (.mitm flows or HAR) against attacks",
                              epilog=EVALUATE_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    evaluate.add_argument("--attacks", action="append", required=True, metavar="PATH",
                          help="attack documents: files or directories (repeat or comma-separate)")
    evaluate.add_argument("--flows", nargs="+", required=True, metavar="FILE", help="mitmproxy flow files or HAR")
    evaluate.add_argument("--report-dir", help="write one JSON report per run and verdicts.jsonl here")
    add_settings(evaluate)
    evaluate.add_argument("--format", choices=("text", *FILE_FORMATS), default="text",
                          help="what stdout shows (default: text, the table)")
    for fmt, what in (("sarif", "SARIF 2.1.0 (code scanning: one result per exploited or partial run)"),
                      ("junit", "JUnit XML (one testsuite per attack, one testcase per run)"),
                      ("html", "one self-contained HTML page"), ("json", "the reports as a JSON array")):
        evaluate.add_argument(f"--{fmt}", metavar="FILE", help=f"also write {what} to FILE")
    evaluate.add_argument("--fail-on", action="append", choices=FAIL_ON, metavar="OUTCOME",
                          help="a threshold (repeatable): runs whose outcome is the one named or worse fail the run, "
                          "in the order exploited, partial, inconclusive (delivered but cut short, or traffic of its "
                          "session not inspected: nothing shows the agent resisted) (exit 1); no flag passes an "
                          "exploited run; default: partial; "
                          "not-delivered adds: an attack never delivered fails it (exit 3; as --require-delivered)")
    evaluate.add_argument("--severity-threshold", choices=SEVERITY_LEVELS[1:],
                          help="only attacks of this severity or above fail the run")
    evaluate.add_argument("--min-tier", choices=[t.value for t in oatf.Tier],
                          help="only runs whose verdict reaches this indicator tier fail "
                          "(ingested < local_action < boundary_breach)")
    evaluate.add_argument("--require-delivered", action="store_true",
                          help="exit 3 when an attack loaded was never delivered to the agent (see exit status)")
    evaluate.add_argument("--show-secrets", action="store_true",
                          help="show matched values whole in every output (default: AKIA…XY (20 chars))")
    verbosity = evaluate.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true",
                           help="text: no table, only the summary line; no statistics on stderr")
    verbosity.add_argument("-v", "--verbose", action="store_true", help="text: each run's evidence under the table")
    add_progress_argument(evaluate, "attacks loaded, bytes read, flows decoded, events evaluated, reports written")
    evaluate.add_argument("--jobs", type=_positive, metavar="N",
                          help="processes that evaluate sessions in parallel (default: the CPUs available; "
                          "small recordings use one)")
    evaluate.set_defaults(func=cmd_evaluate)
    recover_ = sub.add_parser("recover", help="conclude the runs a proxy that did not stop cleanly (kill -9, a "
                              "crash) left open, from the journal in its report directory",
                              epilog=RECOVER_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    recover_.add_argument("report_dir", metavar="DIR", help="the proxy's oatf_report_dir")
    recover_.add_argument("--attacks", action="append", required=True, metavar="PATH",
                          help="the attack documents the proxy evaluated (repeat or comma-separate)")
    add_settings(recover_)
    add_progress_argument(recover_, "attacks loaded, journal replayed, reports written")
    recover_.set_defaults(func=cmd_recover)
    tap = sub.add_parser("tap", help="run an MCP stdio server (COMMAND) relaying the agent's traffic to it and "
                         "evaluating that traffic; exits with the server's status",
                         usage="oatf tap [--attacks PATH] [options] -- COMMAND [ARGS...]",
                         epilog=TAP_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_live_arguments(tap)
    tap.add_argument("--record", metavar="FILE",
                     help="write the observed messages here as NDJSON (replayable by oatf evaluate --flows); "
                          "{pid} in FILE is replaced by the tap's process id (a capture per session)")
    tap.add_argument("--agent", default="127.0.0.1", metavar="NAME",
                     help="the agent the server serves, whose other traffic its exchanges join in episodes: a name "
                          "of oatf_agents, or a host (default: the local host, 127.0.0.1)")
    tap.add_argument("--monitor", metavar="PATH",
                     help="send the events to the shared monitor listening at PATH (the proxy's oatf_listen, or "
                          "oatf monitor --listen) instead of judging alone; judges alone when it cannot")
    tap.add_argument("-v", "--verbose", action="store_true", help="diagnostics and reports written, on stderr")
    tap.add_argument("command", nargs="+", metavar="COMMAND", help="the server's command line, after --")
    tap.set_defaults(func=cmd_tap)
    monitor = sub.add_parser("monitor", help="one judge for several taps (oatf tap --monitor PATH): judge the "
                             "events they send to a Unix socket, until SIGINT/SIGTERM",
                             epilog=MONITOR_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    monitor.add_argument("--listen", metavar="PATH", help="the socket (default: monitor.sock in --report-dir)")
    add_live_arguments(monitor)
    monitor.add_argument("-v", "--verbose", action="store_true", help="connections and reports written, on stderr")
    monitor.set_defaults(func=cmd_monitor)
    serve = sub.add_parser("serve", help="play the documents' attackers (mcp_server and a2a_server actors, and "
                           "client actors with --agent) against an agent and judge what was served; one port "
                           "per document; stop with Ctrl-C (or, when every document drives the agent, when done)",
                           epilog=SERVE_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("documents", nargs="+", metavar="DOC", help="attack documents: files or directories")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=0,
                       help="port of the first document, the next ones on the ports after it (default: free ports)")
    serve.add_argument("--report-dir", default="oatf-reports",
                       help="write one JSON report per run and verdicts.jsonl here (default: oatf-reports)")
    add_settings(serve)
    serve.add_argument("--agent", metavar="[ACTOR=]URL", action="append",
                       help="the agent's endpoint the client actors drive: its AG-UI endpoint for ag_ui_client "
                            "actors, its MCP server (Streamable HTTP) for mcp_client actors, its A2A base URL for "
                            "a2a_client actors; repeat it as ACTOR=URL for the actor named ACTOR, or for every "
                            "actor of the client mode ACTOR (e.g. ag_ui_client=URL), when they need different ones"),
    serve.add_argument("--stdio", action="store_true",
                       help="serve the one document's mcp_server actor on stdin/stdout (MCP's stdio transport), as "
                            "a desktop agent starts a local server; notes go to stderr")
    serve.add_argument("--stateless", action="store_true",
                       help="serve MCP Streamable HTTP without sessions (no Mcp-Session-Id): each agent's phases "
                            "follow its episode (its host, until --idle-gap without a request)")
    serve.add_argument("-v", "--verbose", action="store_true", help="phase changes, diagnostics and reports written")
    serve.set_defaults(func=cmd_serve)
    export = sub.add_parser("export-trace", help="write recorded agent sessions as Attest v1 traces",
                            epilog=EXPORT_EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    export.add_argument("--flows", nargs="+", required=True, metavar="FILE", help="mitmproxy flow files or HAR")
    export.add_argument("--out", required=True, metavar="DIR", help="one <trace_id>.json per session")
    export.add_argument("--session-key", default="auto",
                        choices=("auto", "mcp_session", "a2a_context", "ag_ui_thread", "connection", "global"))
    add_progress_argument(export, "bytes read, flows decoded")
    export.set_defaults(func=cmd_export_trace)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
