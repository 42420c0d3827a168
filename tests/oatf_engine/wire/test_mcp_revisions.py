"""`oatf_engine.wire.mcp.result_for`: a result answered in place of a server (the proxy's inject mode) carries
what the request's revision requires — `resultType` on the stateless revision 2026-07-28, whose clients (mcp 2,
fastmcp 4, pydantic-ai) refuse a result without it; nothing added for the handshake revisions."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from oatf_engine.wire.mcp import HANDSHAKE_REVISIONS, result_for

RESULT = {"content": [{"type": "text", "text": "5"}]}


def test_the_stateless_revision_gets_result_type() -> None:
    assert result_for(RESULT, "2026-07-28") == {**RESULT, "resultType": "complete"}
    assert RESULT == {"content": [{"type": "text", "text": "5"}]}  # the state's answer is not altered


def test_handshake_revisions_and_no_header_get_the_result_as_it_is() -> None:
    for version in (*sorted(HANDSHAKE_REVISIONS), None):
        assert result_for(RESULT, version) == RESULT


def test_a_result_type_given_is_kept() -> None:
    assert result_for({**RESULT, "resultType": "input_required"}, "2026-07-28")["resultType"] == "input_required"


@given(result=st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=8), max_size=5),
       version=st.none() | st.sampled_from(sorted(HANDSHAKE_REVISIONS)) | st.text(max_size=12))
def test_every_member_of_the_result_is_kept(result: dict[str, Any], version: str | None) -> None:
    answered = result_for(result, version)
    assert {k: v for k, v in answered.items() if k != "resultType" or "resultType" in result} == result
    stateless = version is not None and version not in HANDSHAKE_REVISIONS
    assert ("resultType" in answered) == (stateless or "resultType" in result)
