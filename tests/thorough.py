"""How many examples a property test tries: a third of its full count in the default run,
the full count in the slow step, which runs every property test again with
RMS_THOROUGH_PROPERTIES=1 (.ci/run does; README says how)."""

from __future__ import annotations

import os

from hypothesis import settings

THOROUGH = os.environ.get("RMS_THOROUGH_PROPERTIES") == "1"


def examples(full: int) -> int:
    return full if THOROUGH else max(full // 3, 10)


# Properties that name no count of their own take hypothesis' usual 100, scaled alike.
settings.register_profile("rms_duck", max_examples=examples(100))
settings.load_profile("rms_duck")
