"""An MCP server over stdio (`rms-duck serve --db PATH`): budgeted memory for agents.

Built on the official `mcp` SDK (the optional extra `rms-duck[mcp]`). Tools: rank_and_pack
(BM25 ranking over rms_nodes), pack_query (a guarded, read-only ranking query), pack_candidates
(rows the agent already has), explain, verify and replay. Every tool call runs under one lock
on one DuckDB connection: DuckDB lets one process write a file, and this is that process.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable
from typing import Annotated, Any

from . import __version__
from .errors import ConfigError, QueryRejectedError, RmsError

INSTRUCTIONS = (
    "Budgeted agent memory. rank_and_pack(question, budget) returns the context to put in "
    "the prompt, counted exactly in tokens; each stored pack has a receipt_id that explain, "
    "verify and replay audit."
)


def _not_a_bool(value: Any) -> Any:
    """JSON true and false are not numbers: validated as int, they passed as 1 and 0, so
    {"budget": true} packed into 1 token and {"k": true} ranked one candidate."""
    if isinstance(value, bool):
        raise ValueError(f"must be a whole number, got {str(value).lower()} (JSON true and "
                         "false are not numbers); send a number such as 50")
    return value


try:  # the MCP SDK validates tool arguments with pydantic, which it requires
    from pydantic import BeforeValidator
except ModuleNotFoundError:  # no SDK: build_server says to install it
    Whole = int
else:
    Whole = Annotated[int, BeforeValidator(_not_a_bool)]  # type: ignore[misc,assignment]


# An agent's ranking query runs under the lock every tool call takes: without a limit, one
# `SELECT sum(i) FROM range(1e12)` held the server for everyone for hours.
QUERY_TIMEOUT = 60.0
MAX_ROWS = 1_000_000


def build_server(db: str, *, read_only: bool = False, query_timeout: float = QUERY_TIMEOUT,
                 max_rows: int = MAX_ROWS) -> Any:
    """The MCPServer for the DuckDB file `db` (created with the rms schema when new).
    pack_query interrupts an agent's query after `query_timeout` seconds or `max_rows` rows
    (a QueryLimitError the agent sees); the agent cannot raise either."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ModuleNotFoundError as exc:
        raise RmsError("rms-duck serve needs the MCP SDK: pip install 'rms-duck[mcp]'") from exc
    import duckdb
    from mcp.server.mcpserver.exceptions import ToolError

    from .audit.explain import explain as explain_receipt
    from .audit.replay import replay as replay_receipt
    from .audit.verify import verify_receipts
    from .duck.api import pack, pack_rows
    from .duck.connection import connect
    from .duck.surrogates import first_surrogate

    con = connect(db, read_only=read_only)
    lock = threading.Lock()
    server = MCPServer("rms-duck", version=__version__, instructions=INSTRUCTIONS)

    def guarded(function: Callable[..., Any]) -> Callable[..., Any]:
        """Run one tool at a time; hand rms_duck's errors (which say what to fix) to the
        agent as tool errors, instead of the SDK's bare "Error executing tool"."""
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                try:
                    return function(*args, **kwargs)
                except RmsError as exc:
                    raise ToolError(f"{type(exc).__name__}: {exc}") from None
                except duckdb.Error as exc:
                    # DuckDB's own message says what went wrong in the agent's SQL or store
                    # (a binder error, a stale index, a missing parameter); pass it on.
                    raise ToolError(f"DuckDB {type(exc).__name__}: {exc}") from None
        return call

    @server.tool()
    @guarded
    def rank_and_pack(question: str, budget: Whole, namespace: str | None = None, k: Whole = 50,
                      config: dict[str, Any] | None = None, store: bool = True,
                      session_id: str | None = None) -> dict[str, Any]:
        """Rank the memory nodes for a question (BM25, trigrams, pins, active tasks) and
        pack the best into `budget` tokens; returns the context and what was left out."""
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigError(f"k must be a whole number of candidates >= 1, got {k!r}; pass "
                              "for example 50")
        for name, value in (("question", question), ("namespace", namespace)):
            found = first_surrogate(value)
            if found is not None:  # else named as params[0] of a query the agent never saw
                raise ConfigError(
                    f"{name} holds a lone surrogate ({found!r}, half of a UTF-16 pair), "
                    "which DuckDB cannot take as text; send the text as valid UTF-8")
        settings = {"query": question, **(config or {})}
        try:
            storing = store and not read_only
            bundle = pack(con, "SELECT * FROM rms_candidates(?, ?, ?)", budget=budget,
                          params=[question, namespace, k], config=settings, store=storing,
                          session_id=session_id if storing else None)
        except duckdb.InvalidInputException as exc:
            stale = re.search(r"the lexical index is out of date \([^)]*\)", str(exc))
            if not (read_only and stale):
                raise
            # DuckDB's fixes (refresh_index(con), stale_ok := true) are for Python and SQL
            # callers; an agent can do neither through this tool.
            raise ToolError(
                f"DuckDB {type(exc).__name__}: rms_candidates: {stale.group(0)}, and this "
                "server is --read-only, so it cannot refresh the index; restart it without "
                "--read-only (rms-duck serve --db PATH) to refresh it, or rank on the index "
                "as it is with pack_query: sql 'SELECT * FROM rms_candidates(?, ?, ?, "
                "stale_ok := true)', params [question, namespace, k]") from None
        return bundle_dict(bundle)

    @server.tool()
    @guarded
    def pack_query(sql: str, budget: Whole, params: list[Any] | None = None,
                   config: dict[str, Any] | None = None, store: bool = True,
                   dialect: str = "duckdb", namespace: str | None = None,
                   session_id: str | None = None) -> dict[str, Any]:
        """Pack the rows of one read-only ranking SELECT (guarded: no writes, files or
        settings) into `budget` tokens. Rows need id, score and content columns."""
        storing = store and not read_only
        try:
            bundle = pack(con, sql, budget=budget, params=params, config=config,
                          store=storing, dialect=dialect,
                          **_labels(storing, namespace, session_id),
                          timeout=query_timeout, max_rows=max_rows)
        except QueryRejectedError as exc:
            if exc.unknown_name is None:
                raise
            # The guard's own advice (register a DataFrame) is for Python callers.
            raise QueryRejectedError(
                f"ranking query rejected: {exc.unknown_name!r} is not a table, view or CTE "
                "of this memory database; read the memory nodes from rms_nodes, rank them "
                "with rms_candidates(question) (for example SELECT * FROM "
                "rms_candidates('when is the release?')), or call rank_and_pack") from None
        return bundle_dict(bundle)

    @server.tool()
    @guarded
    def pack_candidates(candidates: list[dict[str, Any]], budget: Whole,
                        config: dict[str, Any] | None = None, store: bool = True,
                        namespace: str | None = None,
                        session_id: str | None = None) -> dict[str, Any]:
        """Pack candidate records given inline ({"id", "score", "content", ...}) into
        `budget` tokens."""
        storing = store and not read_only
        bundle = pack_rows(con, candidates, budget=budget, config=config, store=storing,
                           **_labels(storing, namespace, session_id))
        return bundle_dict(bundle)

    @server.tool()
    @guarded
    def explain(receipt_id: str) -> dict[str, Any]:
        """Why each candidate of a stored pack was packed or dropped, in context order."""
        rows = explain_receipt(con, receipt_id)
        return {"receipt_id": receipt_id, "candidates": plain(rows)}

    @server.tool()
    @guarded
    def verify() -> dict[str, Any]:
        """Check every stored receipt: digests, the hash chains and the bundle rows."""
        problems = verify_receipts(con)
        return {"ok": not problems, "problems": [str(p) for p in problems]}

    @server.tool()
    @guarded
    def replay(receipt_id: str) -> dict[str, Any]:
        """Re-pack a stored receipt's recorded inputs and compare the bytes."""
        result = replay_receipt(con, receipt_id)
        return {
            "receipt_id": result.receipt_id, "identical": result.identical,
            "recorded_sha256": result.recorded_sha256,
            "replayed_sha256": result.replayed_sha256,
            "same_decisions": result.same_decisions,
            "encoding_changed": result.encoding_changed,
            "differing_fields": list(result.differing_fields),
            "reproduced": result.reproduced,
            "changed_nodes": list(result.changed_nodes),
            "missing_nodes": list(result.missing_nodes),
            "untracked_tables": list(result.untracked_tables),
        }

    return server


def _labels(storing: bool, namespace: str | None, session_id: str | None) -> dict[str, Any]:
    """The chain and session a stored bundle extends; none for a pack that stores nothing
    (store false, or a --read-only server, which rms_duck.pack would refuse them for: an
    agent cannot know the server's mode before it asks)."""
    return {"namespace": namespace, "session_id": session_id} if storing else {}


def bundle_dict(bundle: Any) -> dict[str, Any]:
    """What an agent needs from a bundle; the receipt stays in the database."""
    from .duck.types import bundle_row

    row = bundle_row(bundle)
    row.pop("receipt")
    return {**row, "available": bundle.available, "receipt_id": bundle.receipt_id}


def plain(value: Any) -> Any:
    """JSON-ready values (UUIDs and timestamps become text)."""
    return json.loads(json.dumps(value, default=str))


def serve(db: str, *, read_only: bool = False) -> None:
    """Serve over stdio until the client closes the pipe."""
    build_server(db, read_only=read_only).run("stdio")
