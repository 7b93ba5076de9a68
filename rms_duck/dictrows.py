"""Plain dict rows checked by code written for their key set.

to_candidate() reads a row field by field through a general check per field. Most rows a
caller passes repeat one shape (the same keys, values already final: a canonical id, a float
score in [0, 1], a known type name, a UTC datetime). For such a shape this module writes one
function that reads just those keys, tests each value with the same fast-path condition
to_candidate() uses to keep it as it is, and sets the Candidate's slots directly. A value
it does not take as it stands (anything to normalise or reject) makes it return None, and
the caller hands the row to to_candidate(), which gives the usual Candidate or the usual
error naming the row, the field, the value and the fix. So both paths accept the same rows
and build equal Candidates (tests/test_dict_rows.py proves it over random rows).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .candidates import _CANONICAL_UUID, _ENUM_VALUES, _SLOTS, INT32_MAX, INT32_MIN, builder_env
from .records import CONDITION_STATES, Candidate

Builder = Callable[[dict[str, Any]], Candidate | None]

# A call meeting more new shapes than this checks its other new shapes row by row: writing a
# function costs about as much as checking a hundred rows the general way.
NEW_SHAPES_PER_CALL = 8
MAX_SHAPES = 256

# The test that keeps a value as it is, and the value kept, per field; `v` is the value.
# Each mirrors the fast path of the matching check in candidates.py.
_ID_OK = ("type(v) is str and (v in canonical_ids or canonical(v) or "
          "(len(v) != 36 and v[:1].strip() != '' and v[-1:].strip() != ''))")
_UNIT_OK = "type(v) is float and 0.0 <= v <= 1.0"
_KEEP: dict[str, tuple[str, str]] = {
    "id": (_ID_OK, "v"),
    "score": (_UNIT_OK, "v"),
    "content": ("type(v) is str", "v"),
    **{name: (f"type(v) is str and v in members_{name}", f"members_{name}[v]")
       for name in _ENUM_VALUES},
    **{name: ("type(v) is datetime and v.tzinfo is UTC", "v")
       for name in ("event_time", "valid_from", "valid_to")},
    "namespace_id": ("type(v) is str", "v"),
    "session_id": ("type(v) is str", "v"),
    "condition_state": ("type(v) is str and v in condition_states", "v"),
    "evidence_ids": ("(type(v) is list or type(v) is tuple) and not v", "()"),
    "contradicts": ("(type(v) is list or type(v) is tuple) and not v", "()"),
    "salience": (_UNIT_OK, "v"),
    "confidence": (_UNIT_OK, "v"),
    "paths": ("(type(v) is list or type(v) is tuple) and all_text(v)", "tuple(v)"),
    "path_count": ("type(v) is int and 0 <= v <= int32_max", "v"),
    "pinned": ("type(v) is bool", "v"),
    "superseded_by": (_ID_OK, "v"),
    "speaker": ("type(v) is str", "v.strip() or None"),
    "prose": ("type(v) is str", "v"),
    "session_position": ("type(v) is int and int32_min <= v <= int32_max", "v"),
    "token_cost_estimate": ("type(v) is int and int32_min <= v <= int32_max", "v"),
    # structured_value is parsed and re-dumped: always the general way.
}
_REQUIRED = ("id", "score", "content")
# Ids proven canonical (lower-case hyphenated UUIDs), remembered: an agent packs the same
# nodes again and again, and a set lookup costs a tenth of the pattern match (0.3 of a
# builder's 2.3 µs a row). Emptied when full, so it stays small however many ids pass.
_CANONICAL_IDS: set[str] = set()
_CANONICAL_IDS_LIMIT = 65_536


def _canonical(value: str) -> bool:
    """Whether `value` (a str) is a canonical UUID; remembered when it is."""
    if _CANONICAL_UUID.fullmatch(value) is None:
        return False
    if len(_CANONICAL_IDS) >= _CANONICAL_IDS_LIMIT:
        _CANONICAL_IDS.clear()
    _CANONICAL_IDS.add(value)
    return True


_builders: dict[tuple[Any, ...], Builder] = {}


class ShapeReader:
    """Reads one call's rows, each as it arrives: a caller's generator may yield the same
    dict again and again, changed in between, so no row is read ahead of its turn."""

    __slots__ = ("new_shapes", "last_keys", "last_build", "last_size")

    def __init__(self) -> None:
        self.new_shapes = 0
        # The previous row's keys and builder: rows mostly repeat one shape, and comparing
        # two tuples of the same key objects costs less than hashing one.
        self.last_keys: tuple[Any, ...] = ()
        self.last_build: Builder = _no_builder
        # Its number of keys when every key is a Candidate field, id, score and content
        # among them; else -1. See candidate().
        self.last_size = -1

    def candidate(self, row: dict[Any, Any]) -> Candidate | None:
        """The row's Candidate when its values are all final, else None (check it the
        general way)."""
        if len(row) == self.last_size:
            # The last shape's builder reads each of its keys (all fields) by name, so a
            # row of as many keys holding them all has that very key set, and one lacking
            # any raises KeyError and is looked at below like any other row. Spelling the
            # keys out costs more than the row's checks save.
            try:
                return self.last_build(row)
            except KeyError:
                pass
        keys = tuple(row)
        build = self.last_build if keys == self.last_keys else _builders.get(keys)
        if build is None:
            if self.new_shapes >= NEW_SHAPES_PER_CALL:
                return None
            self.new_shapes += 1
            if len(_builders) >= MAX_SHAPES:
                _builders.clear()
            build = _builders[keys] = _write_builder(keys)
        if keys != self.last_keys:
            self.last_keys, self.last_build = keys, build
            self.last_size = len(keys) if _fields_only(keys) else -1
        try:
            return build(row)
        except KeyError:  # the row lost a key while it was read: the general checks decide
            return None


def _no_builder(row: dict[Any, Any]) -> Candidate | None:
    return None


_FIELDS = frozenset(name for name, _ in _SLOTS)


def _fields_only(keys: tuple[Any, ...]) -> bool:
    """Every key is a Candidate field name (a str), and the required ones are there."""
    return (all(type(key) is str and key in _FIELDS for key in keys)
            and all(name in keys for name in _REQUIRED))


def _all_text(values: Any) -> bool:
    for value in values:
        if type(value) is not str:
            return False
    return True


def _write_builder(keys: tuple[Any, ...]) -> Builder:
    """One function for rows with exactly these keys (in this order; other keys ignored)."""
    env: dict[str, Any] = {
        **builder_env(), "canonical": _canonical, "canonical_ids": _CANONICAL_IDS,
        "datetime": datetime, "UTC": UTC, "condition_states": frozenset(CONDITION_STATES),
        "all_text": _all_text, "int32_min": INT32_MIN, "int32_max": INT32_MAX,
        **{f"members_{name}": members for name, members in _ENUM_VALUES.items()},
    }
    given = set(keys)
    if any(name not in given for name in _REQUIRED):
        return lambda row: None  # to_candidate() names the missing field
    body = ["def build(row):", "    obj = new(Unfrozen)"]
    for i, (name, _) in enumerate(_SLOTS):
        if name not in given:
            body.append(f"    obj.{name} = default{i}")
            continue
        if name not in _KEEP:
            body += [f"    if row[{name!r}] is not None:", "        return None",
                     f"    obj.{name} = default{i}"]
            continue
        ok, kept = _KEEP[name]
        body.append(f"    v = row[{name!r}]")
        if name not in _REQUIRED:
            body += ["    if v is None:", f"        obj.{name} = default{i}", f"    elif {ok}:"]
        else:
            body.append(f"    if {ok}:")
        body += [f"        obj.{name} = {kept}", "    else:", "        return None"]
    body += ["    obj.__class__ = Candidate", "    return obj"]
    # Named by the fields it reads: repr() of a caller's other keys may be huge, or raise.
    known = [name for name, _ in _SLOTS if name in given]
    exec(compile("\n".join(body), f"<dict row builder {known}>", "exec"), env)  # noqa: S102
    return env["build"]  # type: ignore[no-any-return]
