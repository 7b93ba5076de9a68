"""Packing behaviour that receipts of earlier versions recorded, for their replay only.

Receipt version 4 fixed three things. A conflicting record's line is priced with the pair
labels it prints ('[conflict c1]'); version 3 priced it without them, so assembly could
overshoot and drop a record that a smaller budget had kept. A record folded into one that
assembly then drops is BUDGET_EXHAUSTED, not FOLDED. And with adjacent session packing, a
section is put in date order before each session window is gathered (version 3 left the
whole section in packing order, restating dates the layout had not priced). A receipt of
version 3 or earlier
still replays to its exact bytes: repack() runs it inside packing_of(version), and new packs
never do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# The first receipt version packed with the fixes above.
FIXED_CONFLICTS_VERSION = 4
_VERSION3 = ContextVar("rms_duck_version3_packing", default=False)


def version3() -> bool:
    """True while a receipt of version 3 or earlier is being replayed."""
    return _VERSION3.get()


@contextmanager
def packing_of(receipt_version: int | None) -> Iterator[None]:
    """Pack as receipts of `receipt_version` were packed (None: as new packs are)."""
    token = _VERSION3.set(receipt_version is not None
                          and receipt_version < FIXED_CONFLICTS_VERSION)
    try:
        yield
    finally:
        _VERSION3.reset(token)
