"""Shared fixtures: a fresh registered DuckDB connection, the real default encoding, rows."""

from __future__ import annotations

import uuid

import pytest

import rms_duck
from rms_duck.tokens.encodings import DEFAULT_ENCODING, get_encoding


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite the golden files under tests/golden from current output")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture
def con():
    connection = rms_duck.connect()
    yield connection
    connection.close()


@pytest.fixture(scope="session")
def enc():
    """The encoding packs use when the config names none (o200k_base)."""
    return get_encoding(DEFAULT_ENCODING)


def node_id(i: int) -> str:
    return str(uuid.UUID(int=i))


def rows(n: int, *, text: str = "memory record number {i} about the project", **fields):
    """n simple candidate dicts with ids 0..n-1 and descending scores."""
    return [
        {"id": node_id(i), "score": round(1 - i / (n + 1), 6), "content": text.format(i=i),
         **fields}
        for i in range(n)
    ]
