"""The shape of pack_context()'s result, defined once: the Arrow type and the row live in the
core (packing/arrowtype.py, shared with pack_batches); the SQL type is spelled from it here."""

from __future__ import annotations

import pyarrow as pa

from ..packing.arrowtype import bundle_arrow_type, bundle_row

_SQL_NAMES = {pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.float64(): "DOUBLE",
              pa.bool_(): "BOOLEAN"}


def sql_type(arrow_type: pa.DataType) -> str:
    """The DuckDB spelling of an Arrow type built from strings, ints, doubles, lists, structs."""
    if pa.types.is_struct(arrow_type):
        fields = (arrow_type.field(i) for i in range(arrow_type.num_fields))
        return "STRUCT(" + ", ".join(f"{f.name} {sql_type(f.type)}" for f in fields) + ")"
    if pa.types.is_list(arrow_type):
        return sql_type(arrow_type.value_type) + "[]"
    return _SQL_NAMES[arrow_type]


BUNDLE_ARROW_TYPE = bundle_arrow_type()
BUNDLE_SQL_TYPE = sql_type(BUNDLE_ARROW_TYPE)

__all__ = ["BUNDLE_ARROW_TYPE", "BUNDLE_SQL_TYPE", "bundle_row", "sql_type"]
