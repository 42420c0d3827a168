"""`testing.processes.tracebacks`: the e2e tests' check that a process wrote no traceback drops CPython 3.12.1's own
at a stop, and only that one."""

from __future__ import annotations

from testing.processes import tracebacks

CPYTHON_AT_STOP = """[19:29:42.447] oatf reports in /tmp/reports
Exception in callback StreamReaderProtocol.connection_made.<locals>.callback(<Task cancelled>) at streams.py:248
Traceback (most recent call last):
  File "/usr/lib/python3.12/asyncio/events.py", line 84, in _run
    self._context.run(self._callback, *self._args)
  File "/usr/lib/python3.12/asyncio/streams.py", line 249, in callback
    exc = task.exception()
  File "/usr/lib/python3.12/asyncio/tasks.py", line 550, in _wait
    await waiter
asyncio.exceptions.CancelledError
"""
OURS = """[19:29:40.001] oatf: hook failed
Traceback (most recent call last):
  File "/work/addon/oatf_addon.py", line 10, in response
    raise ValueError("a bug")
ValueError: a bug
[19:29:40.002] next line
"""


def test_only_cpythons_own_traceback_at_a_stop_is_dropped() -> None:
    assert tracebacks(CPYTHON_AT_STOP) == []
    assert tracebacks("no traceback here") == []
    [ours] = tracebacks(OURS + CPYTHON_AT_STOP)
    assert ours.endswith("ValueError: a bug")
    # A CancelledError of the project's code, not asyncio's stream callback, counts.
    assert len(tracebacks(CPYTHON_AT_STOP.replace("streams.py", "oatf_addon.py"))) == 1
    # Anything written after it but a log record keeps it counted (it is not known to be CPython's alone).
    assert len(tracebacks(CPYTHON_AT_STOP + "ValueError: more\n")) == 1
