"""What a record's line is under a built-in format, remembered across packs.

Packing prices the same records pack after pack: each time it built the record's view,
asked the format for the speaker run, rendered the line (a memo lookup), the date lines
and whether the line shows the speaker. For a built-in format all of that follows from
the view alone (as the render memo already relies on, formats/base.py), so one lookup per
record and level answers it. Keyed by every field of the view but the candidate's floats,
as the render memo is (formats/base.py, UNSHOWN_FIELDS): a record that differs in a field
a format can show is priced afresh, and the same node ranked with another score (each
group of a GROUP BY, an agent's next request) is priced once. Bounded in entries and in
the text it keeps alive.
"""

from __future__ import annotations

from typing import NamedTuple

from ..formats.base import RecordView, register_memo


class Priced(NamedTuple):
    view: RecordView  # as priced: the widest ref and labels, speaker_above set for a run
    line: str
    dates: tuple[str, ...]  # the format's date lines for it (layout.dated)
    run: str | None  # the speaker line of its run (layout.speaker_run)
    speaker: bool  # its line or run shows a speaker (Format.shows_speaker)
    key: tuple | None  # its place in print order (layout.run_sort_key), for speaker lines


_MEMO: dict[tuple, Priced] = register_memo({})
_LIMIT = 16_384
# The texts the memo may keep alive (the view's text and the line, about twice the text):
# a pool of huge records must not pin them all for the life of the process.
_CHARS = 8 * 1024 * 1024
_held = [0]
# The dates of a Priced that holds its line only: the balanced ordering reads the line of
# every multi-path record, and most are never tried; the rest is priced when one is.
LINE_ONLY: tuple[str, ...] = ("(line only)",)


def remembered(key: tuple) -> Priced | None:
    try:
        return _MEMO.get(key)
    except TypeError:  # a hand-built Candidate with a list where a tuple belongs
        return None


def remember(key: tuple, priced: Priced) -> None:
    try:
        replaced = _MEMO.pop(key, None)  # a line-only entry, priced in full now
    except TypeError:  # unhashable (see remembered): priced afresh each time instead
        return
    if replaced is not None:
        _held[0] -= len(replaced.view.text) + len(replaced.line)
    if not _MEMO:
        _held[0] = 0  # emptied from outside (clear_render_memos)
    size = len(priced.view.text) + len(priced.line)
    if size > _CHARS // 64:
        return  # pricing it again costs less than keeping it
    if len(_MEMO) >= _LIMIT or _held[0] + size > _CHARS:
        for stale in list(_MEMO)[: max(len(_MEMO) // 4, 1)]:  # the oldest quarter
            old = _MEMO.pop(stale, None)
            if old is not None:
                _held[0] -= len(old.view.text) + len(old.line)
    _MEMO[key] = priced
    _held[0] += size
