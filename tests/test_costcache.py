"""Persisted line costs: exact keys, refresh, and identical bundles from every cache path."""

from __future__ import annotations

import uuid
from typing import ClassVar

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rms_duck
from rms_duck.duck import linecosts as costcache
from rms_duck.duck.linecosts import (
    encoding_key,
    line_sha256,
    load_line_costs,
    refresh_line_costs,
    store_line_costs,
)
from rms_duck.formats.base import clear_render_memos
from rms_duck.packing.pipeline import pack_candidates
from rms_duck.tokens.counter import LineCounter, clear_line_cache
from tests.thorough import examples

from .conftest import node_id, rows


def _cold() -> None:
    clear_line_cache()
    clear_render_memos()


def test_encoding_key_names_the_encoding_and_digests_it():
    key = encoding_key("cl100k_base")
    name, digest = key.split(":")
    assert name == "cl100k_base" and len(digest) == 16
    assert encoding_key("cl100k_base") == key


def test_store_then_load_round_trips_exact_costs(con, enc):
    lines = ['- "one"', '- "two words"', "[context]"]
    costs = {line: len(enc.encode_ordinary(line + "\n")) for line in lines}
    assert store_line_costs(con, costs) == 3
    assert store_line_costs(con, costs) == 0  # already stored: kept, not duplicated
    assert load_line_costs(con, lines + ['- "never stored"']) == costs


def test_a_changed_byte_or_another_encoding_finds_nothing(con):
    store_line_costs(con, {'- "caf\u00e9"': 5})
    # Same text, different bytes (decomposed e + combining accent): a different key.
    assert load_line_costs(con, ['- "cafe\u0301"']) == {}
    con.execute("INSERT INTO rms_line_costs VALUES (?, ?, ?)",
                ["o200k_base:0000000000000000", line_sha256('- "x"'), 99])
    assert load_line_costs(con, ['- "x"']) == {}


@pytest.mark.slow
def test_refresh_costs_every_node_once_and_primes_the_cache(con, enc):
    con.executemany("INSERT INTO rms_nodes (id, content, speaker) VALUES (?, ?, ?)",
                    [[node_id(i), f"node {i} text", "Ann" if i % 2 else None] for i in range(40)])
    _cold()
    first = refresh_line_costs(con, processes=1)
    # Each node's reader line, and for the 20 with a speaker its line under a speaker line.
    assert (first.lines, first.loaded, first.computed, first.stored) == (60, 0, 60, 60)
    _cold()
    again = refresh_line_costs(con, processes=1)
    assert (again.lines, again.loaded, again.computed, again.stored) == (60, 60, 0, 0)
    stored = dict(con.execute("SELECT line_sha256, n_tokens FROM rms_line_costs").fetchall())
    counter = LineCounter()
    for line, cost in list(counter._cache.items()):
        assert stored[line_sha256(line)] == cost == len(enc.encode_ordinary(line + "\n"))


def test_refresh_covers_every_level_of_the_auditable_format(con):
    con.execute("INSERT INTO rms_nodes (id, content, prose) VALUES (?, 'full text', 'short')",
                [node_id(1)])
    result = refresh_line_costs(con, formats=("reader", "auditable"), processes=1)
    assert result.lines == 2 + 5


class _Spy(LineCounter):
    made: ClassVar[list[LineCounter]] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _Spy.made.append(self)


@pytest.mark.slow
def test_a_new_process_repack_tokenizes_only_the_metadata_and_output_check(con, monkeypatch):
    query = ("SELECT id::VARCHAR AS id, 0.5 AS score, content, speaker FROM rms_nodes "
             "ORDER BY id")
    con.executemany("INSERT INTO rms_nodes (id, content, speaker) VALUES (?, ?, ?)",
                    [[node_id(i), f"memory {i} about the trip", None] for i in range(60)])
    first = rms_duck.pack(con, query, budget=600)
    _cold()  # what a new process starts with
    monkeypatch.setattr(costcache, "LineCounter", _Spy)
    _Spy.made.clear()
    again = rms_duck.pack(con, query, budget=600)
    assert (again.context, again.receipt) == (first.context, first.receipt)
    [counter] = _Spy.made
    # Record lines, header and section labels come from rms_line_costs; only the metadata
    # line (it states the result's own numbers) is tokenized, besides the output check.
    assert counter.misses <= 2


@pytest.mark.slow
def test_a_warm_repack_neither_forecasts_nor_loads(con, monkeypatch):
    """Every line this process costed before: nothing to load, so nothing is forecast."""
    query = "SELECT id::VARCHAR AS id, 0.5 AS score, content FROM rms_nodes ORDER BY id"
    con.executemany("INSERT INTO rms_nodes (id, content) VALUES (?, ?)",
                    [[node_id(i), f"memory {i} about the trip"] for i in range(40)])
    forecasts = []
    real = costcache.likely_lines

    def counted(*args):
        forecasts.append(1)
        return real(*args)

    monkeypatch.setattr(costcache, "likely_lines", counted)
    _cold()
    first = rms_duck.pack(con, query, budget=400)
    assert len(forecasts) == 1  # cold: the first line no cache holds loads the stored costs
    again = rms_duck.pack(con, query, budget=400)
    assert len(forecasts) == 1
    assert (again.context, again.receipt) == (first.context, first.receipt)
    rms_duck.pack(con, query, budget=300)  # a new budget: a new metadata line to cost
    assert len(forecasts) == 2


def test_the_first_miss_loads_once_and_the_loaded_cost_serves_it(enc):
    counter = LineCounter(record=True, shared=False)  # a cache of its own to fill here
    calls = []

    def load(c):
        calls.append(1)
        c.prime([("- \"stored\"", 4)])

    counter.load_on_first_miss(load)
    counter._cache["- \"cached\""] = 5
    assert counter.line_cost("- \"cached\"") == 5 and calls == []
    assert counter.line_cost("- \"stored\"") == 4 and calls == [1]
    assert counter.consulted == {"- \"stored\""}
    assert counter.line_cost("- \"new\"") == len(enc.encode_ordinary('- "new"\n'))
    assert calls == [1] and counter.misses == 1


def test_the_forecast_renders_conflicting_lines_as_the_packer_prices_them():
    from rms_duck.packing.forecast import likely_lines

    rows = rms_duck.candidates.to_candidates([
        {"id": "a", "score": 0.9, "content": "It costs 5 EUR.", "contradicts": ["b"]},
        {"id": "b", "score": 0.8, "content": "It costs 7 EUR."}])
    config = rms_duck.PackingConfig()
    counter = LineCounter(record=True, shared=False)
    pack_candidates(rows, budget=400, config=config, counter=counter)
    priced = set(counter.take_fresh())
    assert set(likely_lines(rows, config, 400)) <= priced  # '- [conflict c2] "..."' both


def test_a_wrong_persisted_cost_cannot_break_the_budget(con, enc):
    """The cache is trusted for selection only; the whole output is always recounted."""
    candidates = rows(30)
    config = {"context_format": "reader"}
    _cold()
    counter = LineCounter(record=True)
    honest = pack_candidates(candidates, budget=300, config=config, counter=counter)
    costcache.store_line_costs(con, {line: 1 for line in counter.take_fresh()})
    _cold()
    lying = costcache.primed_counter(con, rms_duck.candidates.to_candidates(candidates),
                                     rms_duck.PackingConfig(**config), 300)
    bundle = pack_candidates(candidates, budget=300, config=config, counter=lying)
    assert bundle.tokens_used == len(enc.encode_ordinary(bundle.context)) <= 200
    assert honest.tokens_used == len(enc.encode_ordinary(honest.context))


_WORDS = st.sampled_from(["alpha", "beta", "2024", "<|endoftext|>", "caf\u00e9", "\u2028", "x" * 30,
                          "\u3000", "!!", "Mon 3 June 2024", "Alice:"])
_ROW = st.fixed_dictionaries(
    {"content": st.lists(_WORDS, max_size=25).map(" ".join),
     "score": st.floats(0, 1)},
    optional={"speaker": st.sampled_from(["Alice", "Bob"]),
              "paths": st.sampled_from([["VECTOR"], ["VECTOR", "LEXICAL"]]),
              "type": st.sampled_from(["fact", "task", "note"]),
              "namespace_id": st.sampled_from(["w", "h"])})


@pytest.fixture(scope="module")
def shared_con():
    con = rms_duck.connect()
    yield con
    con.close()


@pytest.mark.slow
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.lists(_ROW, min_size=1, max_size=25), budget=st.integers(120, 900),
       fmt=st.sampled_from(["reader", "auditable", "compact"]))
def test_uncached_cached_and_persisted_paths_give_identical_bundles(enc, shared_con, raw, budget,
                                                                    fmt):
    keys = ("id", "content", "score", "speaker", "paths", "type", "namespace_id")
    candidates = [{key: row.get(key) for key in keys} | {"id": str(uuid.UUID(int=i + 1))}
                  for i, row in enumerate(raw)]
    config = {"context_format": fmt}
    table = pa.Table.from_pylist(candidates)
    _cold()
    uncached = pack_candidates(candidates, budget=budget, config=config)
    cached = pack_candidates(candidates, budget=budget, config=config)
    stored = rms_duck.pack(shared_con, table, budget=budget, config=config)  # persists costs
    _cold()
    persisted = rms_duck.pack(shared_con, table, budget=budget, config=config, store=False)
    for bundle in (cached, stored, persisted):
        assert (bundle.context, bundle.receipt) == (uncached.context, uncached.receipt)
    assert uncached.tokens_used == len(enc.encode_ordinary(uncached.context))
    assert uncached.tokens_used <= budget - 100 or uncached.tokens_used == 0
