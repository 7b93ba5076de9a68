"""Building frozen, slotted records fast: fill an unfrozen twin, then switch its class.

A frozen dataclass sets each field through object.__setattr__, about four times the cost of
a plain store. The hot paths that make a record per candidate (Candidates, priced views,
excluded records) instead fill a new object of a twin class with the same slot layout and
no frozen __setattr__, then assign __class__. CPython allows that assignment only between
classes of one layout and raises TypeError otherwise, so a changed layout fails loudly.
"""

from __future__ import annotations

from collections.abc import Iterable

new = object.__new__


def unfrozen_twin(cls: type, fields: Iterable[str] | None = None) -> type:
    """A class with `cls`'s slots and no frozen __setattr__. With `fields` (the ones the
    caller sets), refuse at import time a class whose fields differ, so that no record is
    ever built with a slot left unset."""
    slots = cls.__slots__  # type: ignore[attr-defined]
    if fields is not None and set(fields) != set(slots):
        raise RuntimeError(f"{cls.__name__}'s fields changed ({', '.join(sorted(slots))}): "
                           "update the code that builds it to set them all")
    return type(f"_Unfrozen{cls.__name__}", (), {"__slots__": slots})
