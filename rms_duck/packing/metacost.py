"""What the metadata line costs while packing, kept up to date as conflict pairs come and go.

Packing reserves the metadata line at its widest numbers, listing every conflict pair of the
packed records: one pair label each ("c12", the widest label meanwhile) in formats that
label pairs, the pair's two ids in the others. Rendering and counting that whole line for
each new pair made a pack quadratic in its pairs (8,000 pairs: 12.9 s in the reader format,
72 s in auditable; now 0.33 and 0.45 s).

For the built-in metadata lines and the cl100k_base and o200k_base patterns, the line costs
a constant plus one term per listed item, so each item is tokenized once, alone:

    cost(line listing x1 .. xk) = base + count(unit(x1)) + ... + count(unit(xk))   (k >= 1)
    base = cost(line listing x) - count(unit(x)), for any one item x

unit(x) is the text one more item adds to the list (formats/metadata.py: " c12" in the
reader's line, '","c12' or '"],["a","b' in a JSON list), so the line is a head, the units
with the first one's connector left out, and a tail. That sum holds when the pre-tokenizer
cuts the line into the pieces it cuts the head, each unit and the tail into alone, which it
does when every label or id an item shows starts and ends with an ASCII letter or digit:
- no piece of either pattern holds a letter or digit and then a quote, space or line break,
  so the piece holding an item's last character ends there, as at the end of the unit alone;
- the next piece starts at the connector: '","' or '"],["' is one run of punctuation, as no
  letter follows its first character, and that run stops at the next item's first letter or
  digit; " c" (a space joined to the letters after it) starts where the space does;
- nothing else in either pattern looks across those edges, and BPE never merges two pieces.
Any other item, any other encoding, an audit's counter and a format with a metadata line of
its own render and count the whole line, as before. tests/test_fast_paths.py compares both
ways over random pools and ids.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from ..formats import Format
from ..formats.base import BaseFormat
from ..formats.legacy import ReaderV3Format, ReaderV5Format
from ..formats.metadata import json_list_unit, word_list_unit
from ..formats.reader import ReaderFormat
from ..tokens.counter import LineCounter

Pair = tuple[str, str]

# The built-in metadata line methods, and what one more item adds to each one's list.
_UNITS: dict[Callable[..., str], Callable[..., str]] = {
    BaseFormat.metadata_line: json_list_unit,  # auditable, compact, reader@1, compact@1/@5
    ReaderV3Format.metadata_line: json_list_unit,  # reader@2, reader@3
    ReaderFormat.metadata_line: word_list_unit,
    ReaderV5Format.metadata_line: word_list_unit,
}

# tests/test_fast_paths.py turns this off to check the per-item sum changes no byte.
_BY_UNITS = True


class MetadataCost:
    """The conflict pairs the packing-time metadata line lists, and what that line costs.

    `render` writes the line listing some pairs; `unit` gives the text one more pair adds
    to it, or None where the per-item sum is not proven (the line is then counted whole).
    """

    def __init__(self, render: Callable[[Collection[Pair]], str], counter: LineCounter,
                 unit: Callable[[Pair], str | None] | None) -> None:
        self._render = render
        self._line_cost = counter.line_cost
        self._count = counter.count
        self._unit = unit
        self.pairs: dict[Pair, int] = {}  # each listed pair -> the packed records naming it
        self._unit_costs: dict[Pair, int | None] = {}
        self._text_costs: dict[str, int] = {}
        self._units = 0  # count(unit) summed over the listed pairs that have one
        self._unpriced = 0  # listed pairs without one
        self._base: int | None = None
        self._empty: int | None = None

    def cost(self, more: Iterable[Pair] = ()) -> int:
        """Tokens of the line listing the packed pairs and `more`."""
        listed = self.pairs
        fresh = [pair for pair in more if pair not in listed]
        if not listed and not fresh:
            if self._empty is None:
                self._empty = self._line_cost(self._render(()))
            return self._empty
        units, unpriced = self._units, self._unpriced
        for pair in fresh:
            cost = self._unit_cost(pair)
            if cost is None:
                unpriced += 1
            else:
                units += cost
        if unpriced or self._base is None:
            return self._line_cost(self._render([*listed, *fresh]))
        return self._base + units

    def add(self, pairs: Iterable[Pair]) -> None:
        """One more packed record names each of `pairs`."""
        listed = self.pairs
        for pair in pairs:
            named = listed.get(pair, 0)
            listed[pair] = named + 1
            if not named:
                self._tally(pair, 1)

    def remove(self, pairs: Iterable[Pair]) -> None:
        """A packed record naming each of `pairs` was taken out."""
        listed = self.pairs
        for pair in pairs:
            named = listed[pair] - 1
            if named:
                listed[pair] = named
            else:
                del listed[pair]
                self._tally(pair, -1)

    def clear(self) -> None:
        self.pairs.clear()
        self._units = self._unpriced = 0

    def _tally(self, pair: Pair, sign: int) -> None:
        cost = self._unit_cost(pair)
        if cost is None:
            self._unpriced += sign
        else:
            self._units += sign * cost

    def _unit_cost(self, pair: Pair) -> int | None:
        costs = self._unit_costs
        if pair in costs:
            return costs[pair]
        text = None if self._unit is None else self._unit(pair)
        cost = None if text is None else self._text_costs.get(text)
        if text is not None and cost is None:
            cost = self._text_costs[text] = self._count(text)  # every label's is the same
        if cost is not None and self._base is None:
            self._base = self._line_cost(self._render((pair,))) - cost
        costs[pair] = cost
        return cost


def metadata_cost(fmt: Format, counter: LineCounter, *, budget: int, available: int,
                  excluded_count: int, widest_label: str) -> MetadataCost:
    """One pack's MetadataCost: its line with the widest numbers and pair labels, which the
    final line can only match or undercut."""
    labelled = fmt.labels_conflicts

    def render(pairs: Collection[Pair]) -> str:
        shown: list[object] = (
            [widest_label] * len(pairs) if labelled else [list(pair) for pair in sorted(pairs)])
        return fmt.metadata_line(tokens_used=max(available, 0), budget=budget,
                                 conflicts=shown, excluded_count=excluded_count)

    extend = _units_of(fmt) if _BY_UNITS and counter.pattern_proven else None
    if extend is None:
        return MetadataCost(render, counter, None)

    def unit(pair: Pair) -> str | None:
        item: str | Pair = widest_label if labelled else pair
        return extend(item) if _plain_edges(item) else None

    return MetadataCost(render, counter, unit)


def _units_of(fmt: Format) -> Callable[..., str] | None:
    """How one more item extends fmt's metadata line: None unless that line is a built-in
    one (a subclass or an instance that writes its own is counted whole)."""
    if "metadata_line" in getattr(fmt, "__dict__", ()):
        return None
    return _UNITS.get(getattr(type(fmt), "metadata_line", None))  # type: ignore[arg-type]


def _plain_edges(item: str | Sequence[str]) -> bool:
    """Every label or id the item shows starts and ends with an ASCII letter or digit."""
    texts = (item,) if isinstance(item, str) else item
    return all(text and _plain(text[0]) and _plain(text[-1]) for text in texts)


def _plain(char: str) -> bool:
    return char.isascii() and char.isalnum()
