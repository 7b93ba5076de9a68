"""Pool shapes that once made packing super-linear. Each test counts operations, never time."""

from __future__ import annotations

from rms_duck import pack_candidates
from rms_duck.packing import layout

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def _text(i: int, words: int) -> str:
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(words)) + f" {i}."


def test_raising_downgraded_pins_takes_each_out_without_a_pass_over_the_others(monkeypatch):
    """The section 7 ladder puts every pin in at its cheapest level, then takes each out
    and puts it back higher. Taking one out rebuilt the conflict pairs and recounted every
    packed line, so the ladder was quadratic in pins (8,000 pins: 6.0 s, now 0.33 s)."""
    n = 400
    pins = [{"id": f"p{i:04d}", "score": 0.5, "pinned": True, "content": _text(i, 60),
             "prose": f"short {i}"} for i in range(n)]
    visited = [0]
    pairs_of = layout._pairs_of

    def counted(entry):
        visited[0] += 1
        return pairs_of(entry)

    monkeypatch.setattr(layout, "_pairs_of", counted)
    bundle = pack_candidates(pins, budget=12_000, config={"fold_repeated_text": False})
    levels = {r.representation for r in bundle.included}
    assert len(bundle.included) == n and levels == {"full", "prose"}, levels  # raised some
    assert visited[0] <= 10 * n, visited[0]  # a rebuild per pin taken out: 161,754
