"""Packing behaviour that receipts of earlier versions recorded, for their replay only.

Receipt version 4 fixed three things. A conflicting record's line is priced with the pair
labels it prints ('[conflict c1]'); version 3 priced it without them, so assembly could
overshoot and drop a record that a smaller budget had kept. A record folded into one that
assembly then drops is BUDGET_EXHAUSTED, not FOLDED. And with adjacent session packing, a
section is put in date order before each session window is gathered (version 3 left the
whole section in packing order, restating dates the layout had not priced).

Receipt version 7 fixed four more. The section 7 ladder downgrades placed pins and tasks
(to their lowest levels, or each to the level that adds the fewest tokens) before it drops
a pin or falls to step 3, and when few pins and tasks overflow it searches every
placement for the one keeping the highest-STR pins; version 6 tried only each one's
cheapest line. A record in a conflict pair never folds into another record. A counterpart
below min_score still marks the conflict. And adjacent session packing gathers only the
windows that fit, where version 6 dropped a record.

Receipt version 9 fixed one more. A reader run is one speaker's records under the same
printed date lines: a midnight record (no time line) and one at 09:30 on a day with no other
time print the same date lines, and version 8 opened a second run for the second record,
restating the speaker with no line between them.

A receipt of an earlier version still replays to its exact bytes: repack() runs it inside
packing_of(version), and new packs never do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# The first receipt versions packed with each group of fixes above.
FIXED_CONFLICTS_VERSION = 4
FIXED_LADDER_VERSION = 7
FIXED_RUNS_VERSION = 9
_REPLAYED = ContextVar[int | None]("rms_duck_replayed_receipt_version", default=None)


def replaying_before(version: int) -> bool:
    """True while a receipt older than `version` is being replayed."""
    replayed = _REPLAYED.get()
    return replayed is not None and replayed < version


def version3() -> bool:
    """True while a receipt of version 3 or earlier is being replayed."""
    return replaying_before(FIXED_CONFLICTS_VERSION)


def version6() -> bool:
    """True while a receipt of version 6 or earlier is being replayed."""
    return replaying_before(FIXED_LADDER_VERSION)


@contextmanager
def packing_of(receipt_version: int | None) -> Iterator[None]:
    """Pack as receipts of `receipt_version` were packed (None: as new packs are)."""
    token = _REPLAYED.set(receipt_version)
    try:
        yield
    finally:
        _REPLAYED.reset(token)
