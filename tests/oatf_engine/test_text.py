"""`oatf_engine.text.printable`: whatever the traffic holds, what reaches a log line or a terminal is printable and
bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from oatf_engine.text import ELLIPSIS, printable


@given(text=st.text(), limit=st.integers(min_value=1, max_value=500))
def test_printable_output_is_printable_and_bounded(text: str, limit: int) -> None:
    shown = printable(text, limit)
    assert shown.isprintable()  # no control, format or separator character: no ESC, CR, LF, U+2028, ...
    assert len(shown) <= limit
    if len(text) <= limit and text.isprintable():
        assert shown == text


@given(text=st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("\x1b\r\n\u2028\x00")))
def test_printable_escapes_are_readable_and_never_split(text: str) -> None:
    shown = printable(text, 10_000)
    assert shown == "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def test_printable_examples() -> None:
    assert printable("\x1b[31m\r\nFAKE LOG LINE\u2028x") == "\\x1b[31m\\r\\nFAKE LOG LINE\\u2028x"
    assert printable("a" * 50, 10) == "a" * 9 + ELLIPSIS
    assert printable("abcdefgh\x1b", 10) == "abcdefgh" + ELLIPSIS  # "\x1b" would not fit whole
    assert printable(42) == "42"
