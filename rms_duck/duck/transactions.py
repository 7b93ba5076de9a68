"""Whether a connection has a transaction open, asked without disturbing it.

A BEGIN issued inside the caller's open transaction fails and aborts that transaction, and
DuckDB's COMMIT of an aborted transaction then rolls it back without a word: the caller's
uncommitted rows were lost. So code that must BEGIN on the caller's own connection asks
first, and leaves an open transaction to its owner.
"""

from __future__ import annotations

from typing import Any


def transaction_open(con: Any) -> bool:
    """True while `con` is inside a BEGIN it has not ended. Without one, each statement runs
    in a transaction of its own, so two statements read two transaction ids; inside one,
    both read the same. The built-in is named by its catalog: a macro the file stores as
    txid_current would answer in its place, refusing every BEGIN (a constant) or letting
    one abort the caller's transaction."""
    first = con.execute(_TXID).fetchall()
    return con.execute(_TXID).fetchall() == first


_TXID = "SELECT system.main.txid_current()"
