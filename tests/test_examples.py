"""Every examples/*.py runs and prints a context that fits its budget."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))
EXAMPLES = [path for path in EXAMPLES if path.name != "__init__.py"]


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path):
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "# metadata " in result.stdout or "[metadata] " in result.stdout


def test_naive_timestamps_stay_nominal_and_aware_ones_render_in_utc():
    from datetime import datetime, timedelta, timezone

    import rms_duck

    tokyo = timezone(timedelta(hours=9))
    # Two times on one day, so the reader prints its time lines.
    aware = [{"id": "a", "score": 0.5, "content": "landed",
              "event_time": datetime(2023, 6, 10, 8, 0, tzinfo=tokyo)},
             {"id": "b", "score": 0.4, "content": "boarded",
              "event_time": datetime(2023, 6, 10, 7, 0, tzinfo=tokyo)}]
    utc = [{"id": "a", "score": 0.5, "content": "landed",
            "event_time": datetime(2023, 6, 9, 23, 0, tzinfo=UTC)},
           {"id": "b", "score": 0.4, "content": "boarded",
            "event_time": datetime(2023, 6, 9, 22, 0, tzinfo=UTC)}]
    naive = [{"id": "a", "score": 0.5, "content": "landed",
              "event_time": datetime(2023, 6, 10, 8, 0)},
             {"id": "b", "score": 0.4, "content": "boarded",
              "event_time": datetime(2023, 6, 10, 7, 0)}]
    for fmt in ("reader", "auditable"):
        config = {"context_format": fmt}
        a = rms_duck.pack_candidates(aware, budget=500, config=config)
        b = rms_duck.pack_candidates(utc, budget=500, config=config)
        n = rms_duck.pack_candidates(naive, budget=500, config=config)
        assert a.render() == b.render() and a.tokens_used == b.tokens_used
        if fmt == "reader":
            assert '\n2023\n9 Jun\n22:00 "boarded"\n23:00 "landed"\n' in a.render()
            assert "10 Jun" not in a.render()
            assert '\n2023\n10 Jun\n07:00 "boarded"\n08:00 "landed"\n' in n.render()
        else:
            assert "2023-06-09" in a.render() and "2023-06-10 08:00" not in a.render()
            assert "2023-06-10" in n.render() and "+00:00" not in n.render().split("\n")[2]
