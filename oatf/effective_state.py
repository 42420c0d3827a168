"""State inheritance across phases (SDK spec §5.10 `compute_effective_state`; format spec §5.2
`phase.state`)."""

from __future__ import annotations

from collections.abc import Sequence

from .model import Phase, Value


def compute_effective_state(phases: Sequence[Phase], phase_index: int) -> Value:
    """SDK spec §5.10 `compute_effective_state`: the state in force at `phases[phase_index]`: the `state`
    of the nearest phase at or before it that defines one (a defined state replaces, never merges), or
    None when none does. Raises `IndexError` for an index outside the list.

    The state is returned as the document holds it, not copied: model values are read-only, so phases
    that inherit a state share it."""
    if not 0 <= phase_index < len(phases):
        raise IndexError(f"phase index {phase_index} out of range for {len(phases)} phases")
    for index in range(phase_index, -1, -1):
        state = phases[index].state
        if state is not None:
            return state
    return None
