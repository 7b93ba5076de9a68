"""The RFC section 6 metadata line, which states the token count of the context it is in.

`tokens_used` is part of the text it counts. solve_tokens_used() finds the N for which a
context whose metadata says N really has N tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..escape import json_compact


def metadata_line(*, tokens_used: int, budget: int, conflicts: Sequence[object],
                  excluded_count: int) -> str:
    """The full line: every RFC key; conflicts as id pairs (or labels, as given)."""
    if not conflicts and type(tokens_used) is int and type(budget) is int \
            and type(excluded_count) is int:
        # The common case written directly: json_compact(body) gives these bytes (the
        # solver renders this line a few times per bundle).
        return _NO_CONFLICTS % (tokens_used, budget, excluded_count)
    body = {
        "tokens_used": tokens_used,
        "context_budget": budget,
        "conflicts": [list(c) if isinstance(c, (list, tuple)) else c for c in conflicts],
        "excluded_count": excluded_count,
    }
    return "[metadata] " + json_compact(body)


_NO_CONFLICTS = ('[metadata] {"tokens_used":%d,"context_budget":%d,"conflicts":[],'
                 '"excluded_count":%d}')
_SHORT_NO_CONFLICTS = ('[metadata] {"tokens_used":%d,"context_budget":%d,'
                       '"excluded_count":%d}')


def short_metadata_line(*, tokens_used: int, budget: int, conflicts: Sequence[object],
                        excluded_count: int) -> str:
    """What a model reading the context needs: the counts, and conflict pair labels only
    when there are any (node ids stay in the bundle and the receipt)."""
    if not conflicts and type(tokens_used) is int and type(budget) is int \
            and type(excluded_count) is int:
        return _SHORT_NO_CONFLICTS % (tokens_used, budget, excluded_count)
    body: dict[str, object] = {
        "tokens_used": tokens_used,
        "context_budget": budget,
        "excluded_count": excluded_count,
    }
    if conflicts:
        body["conflicts"] = list(conflicts)
    return "[metadata] " + json_compact(body)


def reader_metadata_line(*, tokens_used: int, budget: int, conflicts: Sequence[object],
                         excluded_count: int) -> str:
    """The reader's line, a heading in words a model reads at a glance (13 tokens where the
    JSON line took 20): '# metadata 923/1024 tokens, 416 excluded, conflicts c1 c2'. The
    counts are RFC section 6's tokens_used, context_budget and excluded_count; the conflict
    pair labels appear only when there are any."""
    return (f"# metadata {tokens_used}/{budget} tokens, {excluded_count} excluded"
            + _conflict_labels(conflicts))


def reader_v5_metadata_line(*, tokens_used: int, budget: int, conflicts: Sequence[object],
                            excluded_count: int) -> str:
    """The reader's line of receipt version 5: '[metadata] 923/1024 tokens used, 416
    excluded, conflicts c1 c2'."""
    return (f"[metadata] {tokens_used}/{budget} tokens used, {excluded_count} excluded"
            + _conflict_labels(conflicts))


def _conflict_labels(conflicts: Sequence[object]) -> str:
    """', conflicts c1 c2' when there are conflict pair labels, else nothing."""
    return ", conflicts " + " ".join(map(str, conflicts)) if conflicts else ""


def word_list_unit(label: str) -> str:
    """The text one more conflict label adds to the reader's line: ' c12'."""
    return " " + label


def json_list_unit(item: str | Sequence[str]) -> str:
    """The text one more conflict item adds to a JSON line's list, cut inside the quotes
    around the comma: '","c12' after a label, '"],["a","b' after an id pair (the previous
    item's closing quote and bracket, the comma, then this item without its own)."""
    rendered = json_compact(item if isinstance(item, str) else list(item))
    close = '"' if isinstance(item, str) else '"]'
    return close + "," + rendered[: -len(close)]


def solve_tokens_used(rest: int, meta_cost: Callable[[int], int]) -> int | None:
    """Smallest fixed point N = rest + meta_cost(N), searched near the first guess; None
    when there is none nearby (possible with a small vocabulary that splits numbers
    unevenly: the caller then packs one record less, which changes `rest`)."""
    guess = rest + meta_cost(rest)
    for _ in range(8):
        total = rest + meta_cost(guess)
        if total == guess:
            return guess
        guess = total
    # Digit-count boundaries can make the iteration oscillate; scan the narrow band instead.
    low = rest + 1
    for n in range(low, low + 4 * meta_cost(rest) + 16):
        if rest + meta_cost(n) == n:
            return n
    return None
