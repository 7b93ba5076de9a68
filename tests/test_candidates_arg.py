"""rms_candidates_arg, the check every pack_context and rms_store call runs on its list.

Its type check reads what typeof() prints, one text per query, so the optimizer runs it
once while planning: a GROUP BY of thousands of groups checks its list type once, not once
per chunk of groups. Values are checked only where a whole field is FLOAT or DOUBLE, so a
plain list is left with the cast to rms_candidate[] alone.
"""

from __future__ import annotations

import duckdb
import pytest

from rms_duck.duck import udfs

_GROUPS = ("SELECT q, pack_context(list({{'id': id, 'score': score, 'content': content{extra}}}),"
           " 300) AS b FROM (SELECT i % 5000 AS q, 'n' || i AS id, 0.5 AS score, "
           "'note ' || i AS content{column} FROM range(10000) t(i)) GROUP BY q")


@pytest.fixture
def calls(monkeypatch):
    """How often each check ran."""
    counted = {"type": 0, "values": 0}

    def counting(name, function):
        def run(*args):
            counted[name] += 1
            return function(*args)
        return run

    monkeypatch.setattr(udfs, "check_candidate_type",
                        counting("type", udfs.check_candidate_type))
    monkeypatch.setattr(udfs, "check_whole_values", counting("values", udfs.check_whole_values))
    return counted


def test_a_group_by_checks_its_list_type_once_and_no_values(con, calls):
    con.execute("SET threads = 2")
    bundles = con.execute(_GROUPS.format(extra="", column="")).fetchall()
    assert len(bundles) == 5000
    assert calls == {"type": 1, "values": 0}


def test_a_double_whole_field_has_its_values_checked_before_the_cast(con, calls):
    nan_once = ", CASE WHEN i = 7777 THEN 'nan'::DOUBLE ELSE 2.0 END AS path_count"
    sql = _GROUPS.format(extra=", 'path_count': path_count", column=nan_once)
    with pytest.raises(duckdb.InvalidInputException, match="path_count"):
        con.execute(sql).fetchall()  # DuckDB's cast would refuse NaN naming no field
    assert calls["type"] == 1 and calls["values"] >= 1


def test_a_list_lacking_a_field_is_refused_before_any_row_is_packed(con, calls, monkeypatch):
    packed = []
    monkeypatch.setattr(udfs, "pack_lists", lambda *args: packed.append(args))
    sql = _GROUPS.format(extra="", column="").replace("'id': id, ", "")
    with pytest.raises(duckdb.InvalidInputException,
                       match="pack_context: the candidates lack the field 'id'"):
        con.execute(sql).fetchall()
    assert packed == []
