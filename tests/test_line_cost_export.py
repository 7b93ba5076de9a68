"""export_line_costs() writes beside the target and moves the file into place: a write that
fails part-way leaves no partial file, and an earlier export at the target as it was.

The failure is real: the process may write files no larger than a few KiB (RLIMIT_FSIZE),
so the Parquet writer's write fails with EFBIG ("File too large") once the partial file
reaches that size, as it would on a full disk. Python ignores SIGXFSZ, so the write
returns the error instead of the signal ending the process.
"""

from __future__ import annotations

import errno
import os

import pytest

import rms_duck
from rms_duck.errors import ConfigError
from rms_duck.tokens.costfile import LineCosts, encoding_key

resource = pytest.importorskip("resource")

LIMIT = 16 * 1024  # bytes a file may grow to while the export fails


def _store_costs(con, first: int, count: int) -> None:
    # Distinct digests do not compress: the export of 4,000 is far larger than LIMIT.
    con.execute("INSERT INTO rms_line_costs SELECT ?, sha256(i::VARCHAR), 7 "
                "FROM range(?, ?) t(i)", [encoding_key("o200k_base"), first, first + count])


def test_an_export_failing_part_way_leaves_no_partial_file_and_the_old_one_as_it_was(
        con, tmp_path):
    target = tmp_path / "costs.parquet"
    _store_costs(con, 0, 10)
    assert rms_duck.export_line_costs(con, str(target)) == 10
    before = target.read_bytes()
    _store_costs(con, 10, 4000)

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, hard))
    try:
        with pytest.raises(ConfigError, match=r"cannot write line costs to .*costs\.parquet") \
                as raised:
            rms_duck.export_line_costs(con, str(target))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))

    # It failed writing, not opening: the partial file had been created and written to.
    cause = raised.value.__cause__
    assert isinstance(cause, OSError) and (cause.errno == errno.EFBIG
                                           or "File too large" in str(cause)), cause
    assert sorted(os.listdir(tmp_path)) == ["costs.parquet"]  # no *.partial left
    assert target.read_bytes() == before
    assert len(LineCosts.read(target)) == 10
    # Without the limit the same export succeeds, and is larger than the limit allowed.
    assert rms_duck.export_line_costs(con, str(target)) == 4010
    assert target.stat().st_size > LIMIT and sorted(os.listdir(tmp_path)) == ["costs.parquet"]


@pytest.mark.parametrize(("costs", "fix"), [
    # LineCosts("line_costs.parquet") failed in dict(): "dictionary update sequence element
    # #0 has length 1; 2 is required".
    ("line_costs.parquet", "for a file written by export_line_costs() use "
                           "rms_duck.LineCosts.read('line_costs.parquet')"),
    ([("a", 1)], "pass a dict such as {line_sha256(line): n_tokens}, or "
                 "rms_duck.LineCosts.read(path) for a file"),
])
def test_line_costs_given_a_path_says_to_read_it(costs, fix):
    with pytest.raises(ConfigError) as raised:
        LineCosts(costs)
    assert str(raised.value) == (f"LineCosts costs must be a mapping of line sha256 to tokens, "
                                 f"got {type(costs).__name__} {costs!r}; {fix}")
