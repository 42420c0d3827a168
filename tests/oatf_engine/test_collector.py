"""What a long-lived process keeps is out of the cyclic collector's reach (`oatf_engine.collector`)."""

from __future__ import annotations

import gc

from oatf_engine.monitor import load_library
from testing.paths import ROOT


def test_a_long_lived_library_is_frozen_before_the_collector_resumes() -> None:
    """`load_library(long_lived=True)`: every object it made is in the permanent generation, so no collection
    walks the library again (0.25-0.3 s per full collection at 2,000 documents); reference counting still frees
    it when it is replaced."""
    gc.unfreeze()
    try:
        library = load_library([str(ROOT / "attacks")], cache=None)
        assert gc.get_freeze_count() == 0 and gc.is_tracked(library.attacks[0].plan)  # not asked: left alone
        del library
        library = load_library([str(ROOT / "attacks")], cache=None, long_lived=True)
        assert gc.get_freeze_count() > 0
        assert all(not any(plan is o for o in gc.get_objects()) for plan in [library.attacks[0].plan])
        assert gc.isenabled()
    finally:
        gc.unfreeze()
