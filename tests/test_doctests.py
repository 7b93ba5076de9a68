"""The examples in docstrings run, so they cannot drift from the code."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rms_duck


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(rms_duck.__path__, "rms_duck."):
        spec = importlib.util.find_spec(info.name)
        origin = spec.origin if spec else None
        if origin and origin.endswith(".py"):
            with open(origin, encoding="utf-8") as source:
                if ">>>" in source.read():
                    names.append(info.name)
    return names


MODULES = _modules_with_examples()


def test_some_modules_carry_examples():
    assert len(MODULES) >= 5, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
