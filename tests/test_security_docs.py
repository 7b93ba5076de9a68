"""docs/security.md stays true: the codes, limits and options it names exist."""

from __future__ import annotations

import argparse
from pathlib import Path

from rms_duck.audit.verify import CHECK_PROBLEMS
from rms_duck.cli import audit as audit_cli
from rms_duck.duck.query import MAX_QUERY_CHARS
from rms_duck.duck.shipped import shipped_statements
from rms_duck.tokens.counter import CACHE_BYTES

DOC = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text(encoding="utf-8")


def test_every_stored_object_and_head_code_is_documented():
    codes = list(CHECK_PROBLEMS)
    assert len(codes) == 6
    assert [c for c in codes if f"`{c}`" not in DOC] == []


def test_the_documented_limits_are_the_real_ones():
    assert f"{MAX_QUERY_CHARS:,} characters" in DOC
    assert f"{CACHE_BYTES // 2**20} MiB" in DOC
    assert "2,147,483,647" in DOC


def test_the_documented_audit_options_exist():
    parser = argparse.ArgumentParser()
    audit_cli.add_arguments(parser)
    options = {o for action in parser._actions for o in action.option_strings}
    for option in ("--export-heads", "--heads", "--line-costs", "--replay"):
        assert option in options and f"{option}" in DOC


def test_the_documented_schema_objects_are_shipped():
    shipped = shipped_statements()
    assert "rms_chain_heads" in shipped and "rms_receipt_problems" in shipped
    assert "rms_line_costs_by_line" in DOC
