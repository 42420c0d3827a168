"""The sans-I/O monitor (see `monitor.Monitor`): no mitmproxy, no threads, no files."""

from .library import Library, LoadedAttack, LoadProblem, load_library
from .monitor import Held, IndicatorMatched, Monitor, Output, PhaseChanged, RunConcluded
from .options import ActorBinding, MonitorOptions, SessionKey

__all__ = [
    "ActorBinding", "Held", "IndicatorMatched", "Library", "LoadProblem", "LoadedAttack", "Monitor", "MonitorOptions",
    "Output", "PhaseChanged", "RunConcluded", "SessionKey", "load_library",
]
