"""Dask: pack_batches() over a Dask DataFrame, one bundle per group, on any cluster.

The rows are sorted by the group key first (ddf.sort_values), which range-partitions them
on the key's first column, so a group never straddles two partitions and the output
comes back in key order; rows whose first key is NULL are packed in one partition of
their own, last, as pack_batches() puts the NULL group last. Each partition then packs
its groups with pack_batches(), on the same code path as DuckDB's pack_context(), so the
bytes do not depend on the engine, the number of partitions or the number of workers.
dask is imported on first use.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from .config import PackingConfig, check_flag, parse_config
from .errors import ConfigError, MissingExtraError
from .tokens.costfile import LineCosts

__all__ = ["pack_groups"]


def pack_groups(ddf: Any, *, by: str | Sequence[str], budget: int,
                config: PackingConfig | dict[str, Any] | str | None = None,
                line_costs: LineCosts | str | os.PathLike[str] | None = None,
                inputs: bool = False) -> Any:
    """A lazy Dask DataFrame with one row per group: the key column(s), then the bundle
    fields of pack_context() (context, tokens_used, ..., receipt), sorted by key.

    Args:
        ddf: a dask.dataframe.DataFrame of candidate rows with the key column(s).
        by, budget, config, inputs: as for rms_duck.pack_batches().
        line_costs: a Parquet file from rms_duck.export_line_costs() that every worker can
            read (shared disk or object store): each worker loads it once and tokenizes
            only the lines it does not hold. A LineCosts object works too, but travels
            inside the task graph.

    Raises:
        MissingExtraError: dask is not installed. ConfigError: a bad frame, key, budget or
        config (at once); candidate errors surface when the result is computed.
    """
    dd, pd = _imports()
    from .packing.batches import _key_names, check_line_cost_source
    from .packing.pipeline import _check_budget

    if not isinstance(ddf, dd.DataFrame):
        raise ConfigError(f"ddf must be a dask DataFrame, got {type(ddf).__name__}; wrap it "
                          "with dd.from_pandas(frame, npartitions=...), or pack it in this "
                          "process with rms_duck.pack_batches()")
    keys = list(_key_names(by))
    budget = _check_budget(budget)
    check_flag("inputs", inputs, "pass inputs=True to add the inputs column store_batches "
               "needs")
    config = parse_config(config)
    # Its kind is checked here; the file is read where it must be reachable, on the workers.
    check_line_cost_source(line_costs)
    missing = [k for k in keys if k not in ddf.columns]
    if missing:
        raise ConfigError(f"group key column {missing[0]!r} is not in the DataFrame (columns: "
                          f"{', '.join(map(str, ddf.columns))}); pass by= one of those")
    for key in keys:
        dtype = ddf._meta[key].dtype
        if isinstance(dtype, pd.CategoricalDtype) and _UNKNOWN in dtype.categories:
            # Each partition has categories of its own, which the bundles' key column
            # cannot take: every key came back NaN.
            raise ConfigError(
                f"group key column {key!r} is categorical with unknown categories; make them "
                f"known first: ddf[{key!r}] = ddf[{key!r}].cat.as_known()")
    meta = _meta(pd, ddf._meta, keys, inputs)
    options = {"keys": keys, "budget": budget, "config": config, "line_costs": line_costs,
               "inputs": inputs, "meta": meta, "key_rows": ddf._meta[keys],
               "context_format": _registered_format(config),
               "encodings": _encoding_registrations()}
    # Dask cannot range-partition an Arrow-backed timestamp or duration key before a
    # map_partitions (its searchsorted raised "value should be a 'Timestamp' ..."), and it
    # range-partitions a key in a zone west of UTC out of order (America/New_York: Jan 1
    # landed in the last partition): such a key is sorted as the NumPy-backed dtype of the
    # same instants, zoned keys in UTC; each partition's bundles get the input's dtype (and
    # zone) back from key_rows.
    sortable = {key: dtype for key in keys
                if (dtype := _sortable_dtype(pd, ddf._meta[key].dtype)) is not None}
    if sortable:
        ddf = ddf.astype(sortable)
    # sort_values range-partitions rows by the first key, but spreads the rows whose first
    # key is NULL over partitions (and cannot range-partition text holding NULLs). Those rows
    # go to one partition of their own, packed last, where pack_batches() groups and sorts
    # them as it would in one process.
    null_first = ddf[keys[0]].isna()
    keyed = ddf[~null_first].sort_values(keys).map_partitions(_pack_partition, **options)
    unkeyed = ddf[null_first].repartition(npartitions=1).map_partitions(_pack_partition,
                                                                         **options)
    return dd.concat([keyed, unkeyed])


# What Dask's meta holds for a categorical whose categories only the partitions know.
_UNKNOWN = "__UNKNOWN_CATEGORIES__"


def _registered_format(config: PackingConfig) -> Any:
    """The format object of a context_format registered in this process with
    register_format(), which travels to the workers with the task; None for a built-in
    one, which every process has, and for a frozen one of LEGACY_FORMATS ('reader@5'),
    which only FORMATS' lookup missed (every worker has the built-in ones too)."""
    from .formats import FORMATS
    from .formats.base import _BUILTIN

    fmt = FORMATS.get(config.context_format)
    return None if fmt is None or type(fmt) in _BUILTIN else fmt


def _encoding_registrations() -> dict[str, Any] | None:
    """The encoding files registered in this process (register_bpe_file,
    register_tokenizer_file), for the workers to register too; None when there are none."""
    from .tokens.encodings import registrations

    found = registrations()
    return found if any(found.values()) else None


def _register_encodings(snapshot: dict[str, Any]) -> None:
    """On a worker: add the client's encoding registrations to its own (the client's win
    where both name one); each file is still checked against its sha256 when loaded."""
    from .tokens.encodings import apply_registrations, registrations

    here = registrations()
    merged = {kind: {**here[kind], **snapshot[kind]} for kind in here}
    if merged != here:
        apply_registrations(merged)


_REGISTERING = threading.Lock()


def _pack_partition(part: Any, *, keys: list[str], budget: int, config: PackingConfig,
                    line_costs: Any, inputs: bool, key_rows: Any,
                    context_format: Any = None, encodings: Any = None) -> Any:
    """On a worker: one partition's rows in, its groups' bundles out (pandas both ways).

    key_rows: the input frame's empty key columns. Keys take their dtypes, not the
    partition's: Dask's p2p shuffle hands a decimal128[pyarrow] key over as object.
    context_format: the client's registered format, registered here on first use: a
    worker process knows only the built-in ones ("unknown context format 'plain'").
    encodings: the client's registered encoding files ("unknown encoding 'my-tok'")."""
    import pandas as pd
    import pyarrow as pa

    from .formats import FORMATS, register_format
    from .packing.batches import pack_batches

    if context_format is not None and context_format.name not in FORMATS:
        with _REGISTERING:  # a worker may run partitions on several threads
            if context_format.name not in FORMATS:
                register_format(context_format)
    if encodings is not None:
        with _REGISTERING:
            _register_encodings(encodings)

    meta = _meta(pd, key_rows, keys, inputs)
    if len(part) == 0:
        return meta
    table = pa.Table.from_pandas(part, preserve_index=False)
    # processes=1: the cluster already runs a process per core.
    out = pack_batches(table, by=keys, budget=budget, config=config, line_costs=line_costs,
                       inputs=inputs, processes=1)
    frame = out.to_pandas(types_mapper=pd.ArrowDtype)
    for key in keys:
        dtype = meta[key].dtype
        # An Arrow-backed key goes over as Arrow: through NumPy a NaN key became NULL,
        # so the NaN group and the NULL group came back with the same key.
        values = out.column(key).to_pandas(
            types_mapper=pd.ArrowDtype if isinstance(dtype, pd.ArrowDtype) else None)
        # .array, not .values: .values of a tz-aware column is naive UTC datetime64.
        frame[key] = values.astype(dtype).array
    return frame


def _sortable_dtype(pd: Any, dtype: Any) -> Any:
    """The NumPy-backed dtype a key is sorted as: for an Arrow-backed timestamp or duration
    key, the same values (unit kept); for a zoned one, the same instants in UTC. None for
    any other dtype, which is sorted as it is."""
    import numpy as np
    import pyarrow as pa

    if isinstance(dtype, pd.DatetimeTZDtype):
        return None if str(dtype.tz) == "UTC" else pd.DatetimeTZDtype(dtype.unit, "UTC")
    if not isinstance(dtype, pd.ArrowDtype):
        return None
    kind = dtype.pyarrow_dtype
    if pa.types.is_timestamp(kind):
        return pd.DatetimeTZDtype(kind.unit, "UTC") if kind.tz else np.dtype(
            f"datetime64[{kind.unit}]")
    if pa.types.is_duration(kind):
        return np.dtype(f"timedelta64[{kind.unit}]")
    return None


def _meta(pd: Any, rows: Any, keys: list[str], inputs: bool) -> Any:
    """The empty frame Dask needs to know the result's columns and dtypes up front."""
    from .packing.arrowtype import bundle_arrow_type, inputs_field

    fields = list(bundle_arrow_type()) + ([inputs_field()] if inputs else [])
    columns = {key: pd.Series([], dtype=rows[key].dtype) for key in keys}
    columns.update({f.name: pd.Series([], dtype=pd.ArrowDtype(f.type)) for f in fields})
    return pd.DataFrame(columns)


def _imports() -> tuple[Any, Any]:
    try:
        import dask.dataframe as dd
        import pandas as pd
    except ImportError as exc:
        raise MissingExtraError(
            f"rms_duck.dask needs dask[dataframe] and pandas ({exc}); install them with "
            "pip install 'rms-duck[dask]'") from None
    return dd, pd
