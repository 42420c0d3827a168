"""`oatf validate` as an author meets it: suggestions for misspelled names, the source line with a caret, one-line
YAML syntax messages, and every `--format` (text, json, github, sarif) on good and bad documents."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import oatf
from oatf.regex import regex_syntax_error
from oatf_cli.diagnostics import Finding, to_github
from oatf_cli.main import main
from testing.paths import ROOT
from tests.oatf_cli.sarif_schema import assert_valid_sarif

GOOD = (ROOT / "attacks" / "OW-001_invoice-tool-credential-harvest.yaml").read_text(encoding="utf-8")


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`oatf validate ARGS` in this process: (exit status, stdout, stderr)."""
    status = main(["validate", *args])
    out, err = capsys.readouterr()
    return status, out, err


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def misspelled(tmp_path: Path) -> Path:
    """OW-001 with `indicators` misspelled `indicatrs` (line 67, column 3)."""
    return write(tmp_path, "bad.yaml", GOOD.replace("\n  indicators:\n", "\n  indicatrs:\n"))


# --- suggestions ------------------------------------------------------------------------------------------------


def test_an_unknown_field_is_reported_as_such_with_the_closest_name(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = validate(capsys, "--format", "json", str(misspelled(tmp_path)))
    assert status == 1
    [finding] = json.loads(out)["files"][0]["diagnostics"]
    assert (finding["rule"], finding["path"], finding["line"], finding["column"]) == (
        "parse/unknown_field", "attack.indicatrs", 67, 3)
    assert finding["message"] == "unknown field 'indicatrs' in attack; did you mean 'indicators'?"


def test_the_sdk_keeps_the_spec_kind_and_adds_the_code() -> None:
    with pytest.raises(oatf.OATFParseError) as failure:
        oatf.parse(GOOD.replace("      pattern:\n        regex:", "      patern:\n        regex:"))
    [error] = failure.value.errors
    assert (error.kind, error.code, error.path) == (oatf.ParseErrorKind.TYPE_MISMATCH, "unknown_field",
                                                   "attack.indicators[0].patern")
    assert error.message.endswith("did you mean 'pattern'?")


def test_an_unknown_field_with_no_close_name_lists_the_allowed_ones() -> None:
    with pytest.raises(oatf.OATFParseError) as failure:
        oatf.parse('oatf: "0.1"\nattack:\n  correlation: {zzz: any}\n')
    assert failure.value.errors[0].message == "unknown field 'zzz' in correlation (allowed: logic)"


@pytest.mark.parametrize(("old", "new", "rule", "suggestion"), [
    ("logic: any", "logic: anyy", "V-005", "did you mean 'any'?"),
    ("level: critical", "level: critcal", "V-005", "did you mean 'critical'?"),
    ("mode: mcp_server", "mode: mcp_sever", "V-034", "did you mean 'mcp_server'?"),
    ("      surface: tools/call\n      direction: request\n      target: arguments.billing_notes",
     "      protocol: mpc\n      surface: tools/call\n      direction: request\n      target: arguments.billing_notes",
     "W-003", "did you mean 'mcp'?"),
    ("surface: tools/call", "surface: tools/cal", "V-018", "did you mean 'tools/call'?"),
    ('oatf: "0.1"\nattack:', 'oatf: "0.1"\natack: {}\nattack:', "V-003", "did you mean 'attack'?"),
    ("regex: \"(aws", "contians: \"(aws", "parse/unknown_field", "did you mean 'contains'?"),
])
def test_misspelled_names_and_enum_values_get_a_suggestion(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           old: str, new: str, rule: str, suggestion: str) -> None:
    assert old in GOOD
    _, out, _ = validate(capsys, "--format", "json", str(write(tmp_path, "typo.yaml", GOOD.replace(old, new, 1))))
    messages = [d["message"] for d in json.loads(out)["files"][0]["diagnostics"] if d["rule"] == rule]
    assert messages and messages[0].endswith(suggestion), messages


def test_a_regex_error_does_not_repeat_the_pattern(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = write(tmp_path, "regex.yaml", GOOD.replace('regex: "(aws_secret', 'regex: "((aws_secret'))
    _, out, _ = validate(capsys, "--format", "json", str(document))
    [finding] = json.loads(out)["files"][0]["diagnostics"]
    assert finding["rule"] == "V-013"
    assert finding["message"].endswith("': missing )") and finding["message"].count("aws_secret") == 1
    assert regex_syntax_error("a(?=b)c") == "invalid perl operator at '(?='"  # a part: quoted once


# --- the source line and the caret ---------------------------------------------------------------------------


def caret_under(out: str, token: str) -> None:
    """The excerpt's caret stands under the first character of `token` in the excerpt's source line."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if re.match(r".+:\d+:\d+: ", line))
    source, caret = lines[header + 1], lines[header + 2]
    assert re.match(r"^ +\d+ \| ", source) and re.match(r"^ +\| +\^$", caret), (source, caret)
    assert caret.index("^") == source.index(token), (source, caret)


def test_text_prints_the_line_and_a_caret_under_the_column(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = misspelled(tmp_path)
    status, out, err = validate(capsys, str(path))
    assert status == 1 and "1 document(s) checked, 1 invalid" in err
    assert out.splitlines()[:3] == [
        f"{path}:67:3: parse/unknown_field attack.indicatrs: unknown field 'indicatrs' in attack; did you mean "
        "'indicators'?",
        "   67 |   indicatrs:",
        "      |   ^"]


def test_control_and_wide_characters_keep_the_caret_in_place(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    tabbed = write(tmp_path, "tab.yaml", 'oatf: "0.1"\nattack: {name: "a\tb\u200b", indicatrs: []}\n')
    _, out, _ = validate(capsys, str(tabbed))
    assert '\\t' in out and "\\u200b" in out and "\t" not in out and "\u200b" not in out
    caret_under(out, "indicatrs")
    wide = write(tmp_path, "wide.yaml", 'oatf: "0.1"\nattack: {name: "日本語", indicatrs: []}\n')
    _, out, _ = validate(capsys, str(wide))
    source, caret = out.splitlines()[1:3]
    assert len(caret) - 1 == source.index("indicatrs") + 3  # three wide characters, two columns each


def test_a_long_line_is_shown_around_the_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = write(tmp_path, "long.yaml", 'oatf: "0.1"\nattack: {name: "' + "x" * 5000 + '", indicatrs: [], '
                     'description: "' + "y" * 5000 + '"}\n')
    _, out, _ = validate(capsys, str(document))
    assert all(len(line) < 200 for line in out.splitlines()[1:3])
    assert out.splitlines()[1].split("| ", 1)[1].startswith("…")
    caret_under(out, "indicatrs")


# --- YAML syntax errors ---------------------------------------------------------------------------------------

YAML_ERRORS = [
    ('oatf: "0.1"\nattack:\n  id: X-001\n   name: bad\n', 4, 8, "unexpected ':'", ":"),
    ('oatf: "0.1"\nattack:\n    id: X-001\n  name: bad\n', 4, 3, "check its indentation", "name"),
    ('oatf: "0.1"\nattack:\n\tid: X-001\n', 3, 1, "a tab character", None),
    ('oatf: "0.1"\nattack:\n  id: "X-001\n', 4, 1, "the quoted string at line 3, column 7 is never closed", None),
    ('oatf: "0.1"\nattack: {id: X, impact: [a, b}\n', 2, 30, "not closed: expected ',' or ']'", "}"),
    ('oatf: "0.1"\nattack:\n  - a\n  b: c\n', 4, 3, "a list and mapping keys are mixed", "b:"),
    ('oatf: "0.1"\nattack\n  id: x\n', 3, 5, "a key without ':' (the key starts at line 2, column 1)", ":"),
    ('oatf: "0.1"\nattack: @me\n', 2, 9, "'@' cannot start a plain value: quote the value", "@"),
    ('oatf: "0.1"\nattack: "\x07"\n', 2, 10, "character U+0007 is not allowed", "\\x07"),
    ('oatf: "0.1"\nattack:\n  id: [\n', 4, 1, "the text ends where a value should be: a […] list or {…} mapping is "
     "never closed", None),
    ('oatf: "0.1"\nattack:\n  impact: [a,, b]\n', 3, 14, "an empty item: ',' where a value should be", ", b"),
    ('oatf: "0.1"\nattack:\n  - - ]\n', 3, 7, "a value should be here, not ']'", "]"),
    ('oatf: "0.1"\nattack:\n  id: "\\d+"\n', 3, 8, "unknown escape '\\d' in a double-quoted string: write '\\\\' "
     "for a backslash (a regex's '\\\\d'), or quote the value with single quotes", "\\"),
]


@pytest.mark.parametrize(("text", "line", "column", "phrase", "token"), YAML_ERRORS)
def test_yaml_syntax_errors_are_one_located_human_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       text: str, line: int, column: int, phrase: str,
                                                       token: str | None) -> None:
    path = write(tmp_path, "syntax.yaml", text)
    status, out, _ = validate(capsys, str(path))
    assert status == 1
    assert out.startswith(f"{path}:{line}:{column}: parse/syntax: invalid YAML: "), out
    header = out.splitlines()[0]
    assert phrase in header and "while " not in header and "<unicode string>" not in header
    if token is not None:
        caret_under(out, token)


# --- the formats ----------------------------------------------------------------------------------------------


@pytest.fixture
def library(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A valid document, one that fails to parse (unknown field) and one that fails validation (V-005, a
    W-003 warning, V-013)."""
    good = write(tmp_path, "good.yaml", GOOD)
    bad = misspelled(tmp_path)
    invalid = write(tmp_path, "invalid.yaml", GOOD.replace("logic: any", "logic: anyy").replace(
        'regex: "(aws', 'regex: "((aws').replace("      surface: tools/call\n      direction: request\n      target: "
                                                "arguments.billing_notes", "      protocol: mpc\n      surface: "
                                                "tools/call\n      direction: request\n      target: "
                                                "arguments.billing_notes"))
    return good, bad, invalid


def test_json_is_one_document_with_a_summary_and_every_file(library: tuple[Path, Path, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.yaml"
    status, out, _ = validate(capsys, "--format", "json", *map(str, library), str(missing))
    assert status == 2, "a file that cannot be read"
    document = json.loads(out)
    assert list(document) == ["summary", "files"]
    files = document["files"]
    assert [(f["file"], f["valid"], f["readable"]) for f in files] == [
        (str(library[0]), True, True), (str(library[1]), False, True), (str(library[2]), False, True),
        (str(missing), False, False)]
    assert files[0]["diagnostics"] == [] and (files[0]["errors"], files[0]["warnings"]) == (0, 0)
    assert {(d["rule"], d["severity"]) for d in files[2]["diagnostics"]} >= {
        ("V-005", "error"), ("V-013", "error"), ("W-003", "warning")}
    assert [d["rule"] for d in files[3]["diagnostics"]] == ["unreadable"]
    for record in files:
        assert record["errors"] == sum(d["severity"] == "error" for d in record["diagnostics"])
        assert record["warnings"] == sum(d["severity"] == "warning" for d in record["diagnostics"])
        for diagnostic in record["diagnostics"]:
            assert list(diagnostic) == ["file", "line", "column", "severity", "rule", "path", "message"]
            assert diagnostic["file"] == record["file"]
    assert document["summary"] == {
        "documents": 4, "valid": 1, "invalid": 2, "unreadable": 1,
        "errors": sum(f["errors"] for f in files), "warnings": sum(f["warnings"] for f in files)}
    assert document["summary"]["warnings"] >= 1 and document["summary"]["errors"] >= 4
    _, _, err = validate(capsys, *map(str, library), str(missing))
    assert "4 document(s) checked, 2 invalid, 1 unreadable" in err, "the text summary gives the same counts"


def test_help_lists_the_formats_and_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "{text,json,github,sarif}" in text
    for status in ("0 every document valid", "1 some document invalid", "2 some file could not be read"):
        assert status in text


GITHUB_COMMAND = re.compile(r"^::(error|warning) file=([^,:]+),line=(\d+),col=(\d+),title=([^,:]+)::(.+)$")


def test_github_annotations(library: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    good, bad, invalid = library
    status, out, _ = validate(capsys, "--format", "github", str(good))
    assert (status, out) == (0, "")
    _, out, _ = validate(capsys, "--format", "github", str(bad), str(invalid))
    _, listed, _ = validate(capsys, "--format", "json", str(bad), str(invalid))
    expected = [d for record in json.loads(listed)["files"] for d in record["diagnostics"]]
    commands = [GITHUB_COMMAND.match(line) for line in out.splitlines()]
    assert all(commands) and len(commands) == len(expected), out
    for command, finding in zip(commands, expected, strict=True):
        assert command is not None
        kind, file, line, column, title, message = command.groups()
        assert (kind, file, int(line), int(column), title) == (
            finding["severity"], finding["file"], finding["line"], finding["column"], finding["rule"].replace(
                ":", "%3A"))
        assert message == f"{finding['path']}: {finding['message']}"


def test_github_escapes_what_would_end_a_property_or_a_command() -> None:
    finding = Finding("dir,1/a:b.yaml", "error", "V-001", "oatf", "100% wrong\nsecond line", 1, 2)
    assert to_github([finding]) == (
        "::error file=dir%2C1/a%3Ab.yaml,line=1,col=2,title=V-001::oatf: 100%25 wrong%0Asecond line\n")
    assert to_github([Finding("f.yaml", "error", "unreadable", "", "No such file")]) == (
        "::error file=f.yaml,title=unreadable::No such file\n")


def test_sarif_has_one_result_per_finding_located_at_its_line(library: tuple[Path, Path, Path],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    good = library[0]
    status, out, _ = validate(capsys, "--format", "sarif", str(good))
    log = json.loads(out)
    assert_valid_sarif(log)
    assert status == 0 and log["runs"][0]["results"] == []
    assert [a["location"]["uri"] for a in log["runs"][0]["artifacts"]] == [good.as_uri()]

    status, out, _ = validate(capsys, "--format", "sarif", *map(str, library))
    log = json.loads(out)
    assert_valid_sarif(log)
    _, listed, _ = validate(capsys, "--format", "json", *map(str, library))
    expected = [d for record in json.loads(listed)["files"] for d in record["diagnostics"]]
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert status == 1 and len(results) == len(expected)
    for result, finding in zip(results, expected, strict=True):
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"] == finding["rule"]
        assert result["level"] == finding["severity"] and result["message"]["text"] == finding["message"]
        [location] = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"] == Path(finding["file"]).as_uri()
        assert (physical["region"]["startLine"], physical["region"]["startColumn"]) == (finding["line"],
                                                                                        finding["column"])
        assert location["logicalLocations"][0]["fullyQualifiedName"] == finding["path"]
    assert results[0]["locations"][0]["physicalLocation"]["region"]["snippet"]["text"] == "  indicatrs:"
    assert next(r for r in rules if r["id"] == "V-005")["properties"]["spec_ref"] == "§11.1.5"
    assert len({r["id"] for r in rules}) == len(rules)


def test_sarif_locates_a_relative_path_with_spaces_as_a_uri_reference(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my docs").mkdir()
    write(tmp_path / "my docs", "typo #1.yaml", GOOD.replace("\n  indicators:\n", "\n  indicatrs:\n"))
    monkeypatch.chdir(tmp_path)
    status, out, _ = validate(capsys, "--format", "sarif", "my docs/typo #1.yaml")
    log = json.loads(out)
    assert_valid_sarif(log)
    [result] = log["runs"][0]["results"]
    assert status == 1 and result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "my%20docs/typo%20%231.yaml")


# --- never a traceback ------------------------------------------------------------------------------------------

YAML_PIECES = st.sampled_from([":", ": ", "- ", "  ", "\t", "\n", '"', "'", "[", "]", "{", "}", ",", "#", "&a", "*a",
                               "!!str ", "<<: ", "|", ">", "? ", "---\n", "...", "%YAML 1.2\n", "\x00", "\x07",
                               "\x1b", "\u2028", "\ufeff", "\ud800", "日本", "x-", "indicatrs", "9" * 5000])


@st.composite
def mutated_documents(draw: st.DrawFn) -> str:
    """A real attack document with a few edits: pieces of YAML syntax inserted, spans deleted, a line's
    indentation changed."""
    text = GOOD
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(["insert", "delete", "indent"]))
        if edit == "insert":
            text = text[:at] + draw(YAML_PIECES) + text[at:]
        elif edit == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        else:
            start = text.rfind("\n", 0, at) + 1
            text = text[:start] + " " * draw(st.integers(0, 5)) + text[start:].lstrip(" ")
    return text


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(mutated_documents(), st.text(max_size=300)), fmt=st.sampled_from(["text", "json", "github",
                                                                                         "sarif"]))
@example(text='oatf: "0.1"\nattack: "\ud800"\n', fmt="text")
@example(text="\ufeff\ufeffa: 1\n", fmt="sarif")
def test_validate_never_raises_on_arbitrary_or_mutated_yaml(capsys: pytest.CaptureFixture[str], text: str,
                                                           fmt: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "fuzzed.yaml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        status = main(["validate", "--format", fmt, str(path)])
    out, _ = capsys.readouterr()
    assert status in (0, 1)
    if fmt in ("json", "sarif"):
        json.loads(out)
    if fmt == "sarif":
        assert_valid_sarif(json.loads(out))
    if fmt == "json":
        assert json.loads(out)["summary"]["invalid"] == status, "the summary agrees with the exit status"
    if fmt == "text" and status == 1:
        assert re.match(r".+:(\d+:\d+:)? ", out)
