"""docs/scale-out.md stays true: its Python blocks run here, in order, on real engines."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import rms_duck
from rms_duck.bench.workload import BULK_PACK_SQL, make_bulk_tables

DOC = (Path(__file__).parent.parent / "docs" / "scale-out.md").read_text(encoding="utf-8")


def block(heading: str) -> str:
    """The first ```python block under `## heading`."""
    start = DOC.index(f"\n## {heading}\n")
    end = DOC.find("\n## ", start + 1)
    found = re.search(r"```python\n(.*?)```", DOC[start:end if end != -1 else None], re.S)
    assert found, f"no python block under {heading!r}"
    return found.group(1)


def candidates(groups: int) -> tuple[pa.Table, list[tuple[int, str]]]:
    """The bench workload's candidates, and DuckDB's GROUP BY contexts for them."""
    con = rms_duck.connect()
    make_bulk_tables(con, bundles=groups, per_bundle=8, nodes=groups, seed=0)
    table = con.sql("SELECT q, id, score, content, event_time, speaker FROM bench_candidates "
                    "WHERE q < ?", params=[groups]).to_arrow_table()
    sql = f"SELECT q, bundle.context FROM ({BULK_PACK_SQL}) ORDER BY q"
    expected = [tuple(row) for row in con.execute(sql, [512, groups]).fetchall()]
    con.close()
    return table, expected


def test_pack_batches_block_runs():
    exec(compile(block("pack_batches"), "scale-out.md", "exec"), {})


def test_decimal_scores_pack_as_their_doubles_on_every_path(tmp_path):
    """The page said to cast DECIMAL scores to DOUBLE; every path takes them as they are."""
    from decimal import Decimal

    import pyarrow.parquet as pq

    doubles = pa.table({"q": [1, 1, 2], "id": ["a", "b", "c"],
                        "score": [0.9, 0.33333333333333333, 0.7],
                        "content": ["Standup moved", "Alice prefers tea", "Release Friday"]})
    decimals = doubles.set_column(2, "score", pa.array(
        [Decimal("0.90"), Decimal("0.33333333333333333"), Decimal("0.70")],
        pa.decimal128(18, 17)))
    expected = rms_duck.pack_batches(doubles, by="q", budget=300, inputs=True)
    assert rms_duck.pack_batches(decimals, by="q", budget=300, inputs=True).equals(expected)
    assert rms_duck.pack_batches(decimals.to_pandas(), by="q", budget=300,
                                 inputs=True).equals(expected)
    with rms_duck.connect(":memory:") as con:
        sql = ("SELECT q, pack_context(list({'id': id, 'score': score, 'content': content}), "
               "300).context FROM t GROUP BY q ORDER BY q")
        con.register("t", decimals)
        assert [c for _, c in con.execute(sql).fetchall()] == \
            expected.column("context").to_pylist()
    pytest.importorskip("dask.dataframe")
    import dask
    import dask.dataframe as dd

    from rms_duck.dask import pack_groups

    pq.write_table(decimals, tmp_path / "part-0.parquet")
    with dask.config.set(scheduler="sync"):
        packed = pack_groups(dd.read_parquet(tmp_path), by="q", budget=300).compute()
    assert packed["context"].tolist() == expected.column("context").to_pylist()


# Slow: it starts a Dask cluster for the page's three blocks (about 10 s).
@pytest.mark.slow
def test_dask_line_cost_and_store_blocks_run_in_order(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    import pyarrow.parquet as pq

    table, _ = candidates(40)
    (tmp_path / "candidates").mkdir()
    pq.write_table(table, tmp_path / "candidates" / "part-0.parquet")
    monkeypatch.chdir(tmp_path)
    scope: dict = {"__name__": "__main__"}  # as in the script the Dask block guards for
    for heading in ("Line costs travel", "Dask", "Back into one store"):
        exec(compile(block(heading), f"scale-out.md: {heading}", "exec"), scope)
    assert scope["stored"].num_rows == 40
    assert len(pq.read_table(tmp_path / "bundles")) == 40
    # What the page says about reading them back into pandas and Dask.
    import dask.dataframe as dd
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "bundles", dtype_backend="pyarrow")) == 40
    assert len(dd.read_parquet(tmp_path / "bundles", dtype_backend="pyarrow").compute()) == 40


@pytest.mark.slow
def test_spark_recipe_gives_the_group_by_bytes():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    table, expected = candidates(60)
    spark = (SparkSession.builder.master("local[2]").appName("rms_duck-test")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "3").getOrCreate())
    try:
        scope = {"candidates_df": spark.createDataFrame(table.to_pandas())}
        exec(compile(block("Spark"), "scale-out.md: Spark", "exec"), scope)
        rows = scope["bundles"].orderBy("q").select("q", "context").collect()
    finally:
        spark.stop()
    assert [(r["q"], r["context"]) for r in rows] == expected


@pytest.mark.slow
def test_ray_recipe_gives_the_group_by_bytes(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    import pyarrow.parquet as pq

    table, expected = candidates(60)
    (tmp_path / "candidates").mkdir()
    pq.write_table(table, tmp_path / "candidates" / "part-0.parquet")
    monkeypatch.chdir(tmp_path)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        scope: dict = {}
        exec(compile(block("Ray"), "scale-out.md: Ray", "exec"), scope)
        rows = sorted((r["q"], r["context"]) for r in scope["bundles"].take_all())
    finally:
        ray.shutdown()
    assert rows == expected
