"""Files of the command line: events read into Spark as they come, results written beside them.

Reading: CSV (with or without a header, any delimiter), JSON lines or Parquet; the time column
becomes what the engine accepts (a timestamp, or numbers of seconds) inside Spark, and a value
that does not convert stops the run with a message naming it, raised by the same job that reads
it (`raise_error`), never a silent null or a misread unit.

Writing follows Spark's save modes without ever deleting what gpu-hamlet did not write: results go
to a hidden folder beside the output and are moved into place at the end, with a marker file
that lists what they wrote; `overwrite` replaces only a folder holding that marker and nothing
it does not list.
"""

from __future__ import annotations

import functools
import json
import logging
import operator
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpu_hamlet.errors import GpuHamletError

MARKER = "_GPU_HAMLET"  # written last into every result folder; lists what the run wrote
FORMATS = {
    ".csv": "csv",
    ".txt": "csv",
    ".dat": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
#: The longest file name, in bytes, of the common file systems (ext4, XFS, APFS, NTFS).
NAME_MAX = 255
#: Times read as seconds beyond this (the year 5138) are surely in a finer unit.
MAX_SECONDS = 1e11
#: A marker for messages raised inside Spark jobs (`raise_error`), found again in the exception.
RAISED = "gpu-hamlet input error: "
#: Timestamps in CSV and JSON results: to the microsecond, as Spark holds them.
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
#: ... and timestamps without a time zone (TIMESTAMP_NTZ), which Spark writes by their own option.
TIMESTAMP_NTZ_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"
UNIT_FUNCTIONS = {"s": "timestamp_seconds", "ms": "timestamp_millis", "us": "timestamp_micros"}

log = logging.getLogger("gpu_hamlet")


class UsageError(GpuHamletError):
    """Options or files the command line cannot use: a missing file, an output folder it must
    not touch, contradicting flags."""


def input_format(path: str, given: str | None) -> str:
    """The events' format: `given`, else from the name of the file (or of the first data file
    of a folder). Checks that a local path exists, before Spark starts."""
    local = "://" not in path
    p = Path(path)
    if local and not p.exists():
        raise UsageError(f"events path '{path}' does not exist")
    if local and not os.access(p, os.R_OK):
        raise UsageError(f"events path '{path}' is not readable")
    named = _named(path)  # (a folder's files are listed once)
    if local:
        _hadoop_names(p)
    if local and p.is_dir() and named == p:  # (Spark: "Unable to infer schema")
        raise UsageError(f"events folder '{path}' holds no data files (Spark skips names that "
                         f"start with '_' or '.')")  # fmt: skip
    if local and given in ("csv", "json") and named.is_file():
        with open(named, "rb") as fh:
            if fh.read(4) == b"PAR1":  # (its bytes read as text filled the message)
                raise UsageError(f"'{named}' is a Parquet file: give --in-format parquet")
    if given:
        return given
    fmt = FORMATS.get(named.suffix.lower())
    if fmt is None:
        raise UsageError(
            f"cannot tell the format of '{path}' from its name: "
            f"give --in-format csv, json or parquet"
        )
    return fmt


def _hadoop_names(p: Path) -> None:
    """Refuse a local file, or a folder's data file, whose path Hadoop cannot read: a ':' in a
    name is a URI scheme to it, and it failed deep in Spark, naming no reason."""
    files = [p, *(f for f in p.rglob("*") if not f.name.startswith(("_", ".")))]  # (a file: p)
    named = next((f for f in files if ":" in str(f.absolute())), None)
    if named is not None:
        raise UsageError(
            f"events path '{named}' has a ':' in it, which Spark's file system reads as a "
            f"URI scheme and cannot read: rename or move it"
        )


def spark_path(path: str) -> str:
    """A local events path as Spark must be given it to read that path: its glob characters
    escaped. Spark expands them (Hadoop's globs), so 'data[1].csv' read 'data1.csv' without a
    word, where the path checked before Spark starts is the literal one (`input_format`).
    A URI (s3a://, hdfs://) is left as given: its globs are the user's to use."""
    return path if "://" in path else re.sub(r"([\\*?\[\]{}])", r"\\\1", path)


def _named(path: str) -> Path:
    """The file whose name tells how to read the events: `path`, or a folder's first data file."""
    p = Path(path)
    if "://" not in path and p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith(("_", ".")))
        return files[0] if files else p
    return p


def default_delimiter(path: str) -> str:
    """The CSV delimiter when none is given: a tab for `.tsv` events (tab-separated values; a
    comma split none of their lines), else a comma."""
    return "\t" if _named(path).suffix.lower() == ".tsv" else ","


def read_events(
    spark: Any,
    path: str,
    fmt: str,
    *,
    columns: list[str] | None = None,
    delimiter: str = ",",
    time_col: str = "time",
    type_col: str = "type",
    time_format: str | None = None,
    time_unit: str | None = None,
    numbers: Iterable[str] = (),
) -> Any:
    """The events as a Spark DataFrame whose time column the engine accepts.

    CSV is read as text (named by `columns` when the file has no header line) and each column
    becomes bigint, decimal(38, 0), double or timestamp when all its values are, decided by one
    job (`_typed`): unlike Spark's inferSchema this counts the fields of every row, not the
    first one's. The type column of CSV and JSON is text whatever it holds: event types named
    1, 2, 3 are names, not numbers. A CSV file of no rows has bigint times, the columns of
    `numbers` (those the workload adds or compares with numbers) bigint, the others text: no
    values, no types to tell, and its results are empty."""
    source = spark_path(path)  # (what Spark reads; messages name `path`)
    if fmt == "csv":
        from pyspark.sql.types import StringType, StructField, StructType

        # Quotes inside a quoted field are doubled (RFC 4180, as `run` writes CSV): Spark's
        # default escape, a backslash, read a header `"""s"""` as that text, not `"s"`.
        firsts, spanning = _lines(spark, source)
        # A field that spans lines (a quoted newline, as `run` writes one) needs Spark's
        # multiLine, which reads each file whole in one task: only then.
        reader = spark.read.options(
            sep=delimiter, header=columns is None, escape='"', multiLine=spanning
        )
        names = columns if columns is not None else _header(spark, reader, path, delimiter, firsts)
        # One column more than the names: a row of more fields fills it, and stops the run
        # (Spark would drop its last fields silently). A row of fewer fields has nulls in the
        # last ones, as the sensors' rows of 5 or 6 fields need (README, Command line).
        schema = StructType([StructField(c, StringType()) for c in [*names, EXTRA]])
        text = {type_col, time_col} if time_format else {type_col}  # (the time: by its pattern)
        df = _typed(reader.schema(schema).csv(source), path, names, text, {time_col, *numbers})
    else:
        try:
            df = getattr(spark.read, fmt)(source)
        except Exception as exc:
            if "PARQUET_TYPE_ILLEGAL" in str(exc) and "NANOS" in str(exc):
                raise _nanoseconds(path) from None
            raise
        if fmt == "json" and not df.columns:
            raise UsageError(f"{path} holds no JSON lines: no events, no columns")
        if fmt == "json":
            df = _json_text_columns(spark, df, path, time_col, type_col)
    if fmt == "json" and "_corrupt_record" in df.columns:  # lines that are no JSON object
        from pyspark.sql import functions as F

        if df.columns == ["_corrupt_record"]:  # (none is: Spark refuses to query such a frame)
            lines = spark.read.text(source).select(F.col("value").alias("_corrupt_record"))
            bad = lines.where(F.trim("_corrupt_record") != "").limit(1).collect()
        else:
            bad = df.where(F.col("_corrupt_record").isNotNull()).limit(1).collect()
        if bad:
            line = bad[0]["_corrupt_record"]
            raise UsageError(
                f"{path}: a line is not a JSON object: {line[:200]!r} (JSON lines are read: one "
                f"object per line, as a .jsonl file holds them, not a JSON array)"
            )
        df = df.drop("_corrupt_record")
    if time_col not in df.columns:
        return df  # trend_aggregate names the missing column and lists those present
    return df.withColumn(time_col, _time(df, path, time_col, time_format, time_unit))


def _lines(spark: Any, path: str) -> tuple[dict[str, str], bool]:
    """Per file of CSV `path` its first line with a character above a space, which Spark takes
    as its header line; and whether a line holds an odd number of quotes, opening a quoted
    field that goes on in the next line. One job over the lines of the files."""
    from pyspark.sql import functions as F

    value = F.col("value")
    header = (F.col("_metadata.file_block_start") == 0) & value.rlike(r"[^\x00-\x20]")
    quotes = F.length(value) - F.length(F.regexp_replace(value, '"', ""))
    rows = (
        spark.read.text(path)
        .select(
            F.col("_metadata.file_path").alias("file"),
            F.when(header, F.monotonically_increasing_id()).alias("at"),  # (in order in a split)
            value,
            (quotes % 2).alias("odd"),
        )
        .groupBy("file")
        .agg(F.min_by("value", "at"), F.max("odd"))
        .collect()
    )
    return {file: line for file, line, _ in rows if line is not None}, any(r[2] for r in rows)


def _header(
    spark: Any, reader: Any, path: str, delimiter: str, firsts: dict[str, str]
) -> list[str]:
    """The names of the header line of CSV `path`, the same in each of its files (whose first
    lines are `firsts`) and none twice: Spark reads every file by position with the names of
    one (its enforceSchema), so a file of the columns in another order, or of one more, was
    read into the wrong columns without a word, and it renames a name given twice."""
    names = reader.csv(spark_path(path)).columns
    if not names:
        raise UsageError(f"{path} is empty: no header line, no rows")
    fields = {line: _fields(spark, line, delimiter) for line in set(firsts.values())}
    headers = sorted((_local(file), fields[line]) for file, line in firsts.items())
    for file, header in headers:
        twice = sorted({n for n in header if header.count(n) > 1})
        if twice:  # (Spark numbers them apart: `t,x,x` are columns t, x1 and x2)
            raise UsageError(
                f"{file}: its header line names {_listed(twice)} twice: rename one of them"
            )
    (first, mine), *others = headers
    for other, theirs in others:
        if theirs != mine:
            raise UsageError(
                f"{path}: the CSV files' header lines differ: {first} has {_listed(mine)}, "
                f"{other} has {_listed(theirs)} ({_difference(mine, theirs)}); Spark reads "
                f"every file by position with one file's names: give the files the same "
                f"columns in the same order"
            )
    return list(names)


def _fields(spark: Any, line: str, delimiter: str) -> list[str]:
    """The fields of the CSV `line` as Spark parses them (an empty one as '')."""
    text = spark.sparkContext.parallelize([line.removeprefix("\ufeff")])  # (a UTF-8 BOM)
    row = spark.read.options(sep=delimiter, escape='"').csv(text).first()
    return ["" if v is None else v for v in row]


def _difference(mine: list[str], theirs: list[str]) -> str:
    """How the names `theirs` of a header line differ from `mine`, in a few words."""
    more = [n for n in theirs if n not in mine]
    fewer = [n for n in mine if n not in theirs]
    if more or fewer:
        return "; ".join(
            f"{what} {_listed(ns)}"
            for what, ns in (("the second has", more), ("the second lacks", fewer))
            if ns
        )
    i = next(i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b)
    return (
        f"the same names in another order: column {i + 1} is {mine[i]!r} in the first, "
        f"{theirs[i]!r} in the second"
    )


def _listed(names: Iterable[str]) -> str:
    """Column names for a message, each quoted: spaces around a name show."""
    return ", ".join(repr(n) for n in names)


def _local(uri: str) -> str:
    """A file Spark names by its URI, as a path when it is on this machine."""
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _json_text_columns(spark: Any, df: Any, path: str, time_col: str, type_col: str) -> Any:
    """JSON lines `df` read again, at most once, with some columns as text, as written: the
    type column where Spark found numbers there (`1`, `2.50`: event types are names, as the
    workload spells them `1`), and each double column but the time's that holds an infinity,
    with a warning naming the value: Spark's reader makes a number beyond a double's range
    (`1e400`) and Java's `Infinity` infinite, which MIN and MAX then returned (CSV columns:
    `_fits`). One job counts the infinities."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    from gpu_hamlet.spark.job import sql_name

    types = {f.name: f.dataType for f in df.schema}
    text = (
        {type_col} if type_col in types and not isinstance(types[type_col], StringType) else set()
    )
    doubles = [
        c for c, t in types.items() if isinstance(t, DoubleType) and c not in (time_col, type_col)
    ]
    inf = float("inf")
    infinite: set[str] = set()
    if doubles:
        row = df.agg(*[F.count_if(F.col(sql_name(c)).isin(inf, -inf)) for c in doubles]).first()
        infinite = {c for c, n in zip(doubles, row) if n}
    if not text | infinite:
        return df
    schema = StructType(
        [
            StructField(f.name, StringType(), True) if f.name in text | infinite else f
            for f in df.schema
        ]
    )
    df = spark.read.schema(schema).json(spark_path(path))
    for c in sorted(infinite):
        col = F.col(sql_name(c))
        ((value,),) = (
            df.where(col.try_cast("double").isin(inf, -inf)).select(col).limit(1).collect()
        )
        log.warning(
            "%s: column '%s' is read as text: its value %r is beyond the range of a double "
            "(about 1.8e308) or no finite number, which would make it infinite; to compute "
            "with it, write it within that range",
            path, c, value,
        )  # fmt: skip
    return df


def _nanoseconds(path: str) -> UsageError:
    """The error for Parquet timestamps in nanoseconds (Spark's PARQUET_TYPE_ILLEGAL, naming
    neither file nor column): the file and its columns of timestamp[ns], and what to do."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    where, names = path, ""
    p = Path(path)
    if "://" not in path and p.exists():
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
        for f in files:
            if f.name.startswith(("_", ".")) and f != p:
                continue
            try:
                schema = pq.read_schema(f)
            except (OSError, pa.ArrowException):
                continue
            cols = [x.name for x in schema if pa.types.is_timestamp(x.type) and x.type.unit == "ns"]
            if cols:
                where = str(f)
                names = f" (column {', '.join(repr(c) for c in cols)})"
                break
    return UsageError(
        f"{where}: its timestamps{names} are in nanoseconds (Parquet TIMESTAMP(NANOS), pandas' "
        f"default), which Spark does not read: write them as microseconds, e.g. "
        f"pyarrow.parquet.write_table(table, path, coerce_timestamps='us') or pandas' "
        f"df.to_parquet(path, coerce_timestamps='us') (both refuse to drop nanoseconds); or set "
        f"Spark's spark.sql.legacy.parquet.nanosAsLong=true (spark-submit --conf), which reads "
        f"them as numbers of nanoseconds: then --time-unit ns for the time column"
    )


#: The column past a CSV file's last one (`read_events`): only a row of too many fields fills it.
EXTRA = "_gpu_hamlet_extra_field"
#: Text that is an integer as Spark casts it (spaces around, a sign, leading zeros).
INTEGER = r"^\s*[+-]?[0-9]+\s*$"
#: Text that is a number as written in decimal, with an exponent or not. Spark's cast to double
#: reads more (Java's suffixes `1d` and `2f`, `NaN`, `Infinity`, `inf`), which made text
#: such as IDs numbers: `1d` and `1.0` one GROUPBY group.
DECIMAL = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
#: Text that is an ISO 8601 date-time to the second or microsecond, `T` or a space between
#: date and time, with a UTC offset or none. Spark's cast to timestamp reads more (`2021-01`,
#: `2021-1-5`, a date alone, a seventh digit of a fraction dropped), which changed text.
DATE_TIME = (
    r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
    r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)?\s*$"
)
#: Integers up to this magnitude are exact as doubles (2**53).
DOUBLE_EXACT = 2**53


def _fits(c: str) -> dict[str, Any]:
    """Per kind `_typed` reads a CSV column as: whether the text column `c` holds a value as it
    is written, without loss, as a Spark condition. A value must look like one of the kind
    (INTEGER, DECIMAL, DATE_TIME) and cast to it: the cast alone takes text for numbers."""
    from pyspark.sql import functions as F

    from gpu_hamlet.spark.job import sql_name

    col = F.col(sql_name(c))
    long, dec, dbl = col.try_cast("bigint"), col.try_cast("decimal(38,0)"), col.try_cast("double")
    integer = col.rlike(INTEGER)
    return {
        "bigint": long.isNotNull(),
        # integers beyond int64, exactly (as a double they kept their first 16 digits only)
        "decimal(38,0)": long.isNotNull() | (integer & dec.isNotNull()),
        # finite (1e400 cast to Infinity), and an integer only if a double holds it exactly
        # (beyond 2**53 most are rounded)
        "double": dbl.isNotNull()
        & col.rlike(DECIMAL)
        & (F.abs(dbl) <= F.lit(sys.float_info.max))
        & (
            long.between(-DOUBLE_EXACT, DOUBLE_EXACT)
            | ~integer
            | (dbl.try_cast("decimal(38,0)") == dec)
        ),
        # (a time of day alone, 'T3' or '12:30', casts to a timestamp of today: event types
        # T1, T2, ... were read as times)
        "timestamp": col.rlike(DATE_TIME) & col.try_cast("timestamp").isNotNull(),
    }


def _typed(df: Any, path: str, names: list[str], text: set[str], numeric: set[str]) -> Any:
    """`df` (all strings: the columns `names`, then EXTRA) with each column but those of `text`
    cast to the first of bigint, decimal(38, 0), double and timestamp that holds every one of
    its values as written (one job counts them): integers beyond int64 are decimals, never
    doubles that would round them, and a double column's integers are exact doubles. A column
    without values is text, or bigint if in `numeric` (the time column, and those a workload
    reads as numbers: a file of no rows gives empty results). A UsageError names a row that
    fills EXTRA (more fields than the columns), and a warning a value that keeps a column of
    numbers text (the errors about that column later could not name it)."""
    from pyspark.sql import functions as F

    from gpu_hamlet.spark.job import sql_name

    kinds = ("bigint", "decimal(38,0)", "double", "timestamp")
    fits = {c: _fits(c) for c in names}
    # (columns of `text` stay text: nothing to count)
    counts = [F.lit(0) if c in text else F.count_if(fits[c][k]) for c in names for k in kinds]
    row = df.agg(*[F.count(F.col(sql_name(c))) for c in [*names, EXTRA]], *counts).first()
    n = len(names) + 1
    if row[n - 1]:
        (long,) = df.where(F.col(EXTRA).isNotNull()).limit(1).collect()
        fields = ", ".join(repr(v) for v in long if v is not None)
        fields = fields if len(fields) <= 300 else fields[:300] + " ..."
        raise UsageError(
            f"{path}: {row[n - 1]} row(s) have more fields than the {len(names)} columns "
            f"({_listed(names)}), e.g. the row {fields}, ...; name every column (--columns) or "
            f"check the delimiter"
        )
    casts = []
    for i, c in enumerate(names):
        if c in text:
            casts.append(F.col(sql_name(c)))
            continue
        held = [k for j, k in enumerate(kinds) if row[n + i * len(kinds) + j] == row[i]]
        kind = held[0] if held and row[i] else "string"
        if not row[i] and c in numeric:
            kind = "bigint"
        doubles = row[n + i * len(kinds) + 2]  # (values a double holds exactly)
        if kind == "string" and doubles:  # a number column but for some values: say which
            other = df.where(~F.coalesce(fits[c]["double"], F.lit(False)))
            (bad,) = (
                other.where(F.col(sql_name(c)).isNotNull()).select(sql_name(c)).limit(1).collect()
            )
            if re.fullmatch(INTEGER, bad[0]):  # (a number, but a double would round it)
                log.warning(
                    "%s: column '%s' is read as text: its values are numbers, but not all "
                    "integers of at most 38 digits (read as decimal(38, 0)), and as a double "
                    "%r would lose digits; to compute with it, write the column as decimals "
                    "to Parquet",
                    path, c, bad[0],
                )  # fmt: skip
            elif re.fullmatch(DECIMAL, bad[0]):  # (a number beyond the doubles)
                log.warning(
                    "%s: column '%s' is read as text: its values are numbers, but %r is "
                    "beyond the range of a double (about 1.8e308), which would make it "
                    "infinite; to compute with it, write it within that range",
                    path, c, bad[0],
                )  # fmt: skip
            else:
                log.warning(
                    "%s: column '%s' is read as text: %d of its %d values are numbers, the "
                    "others not, e.g. %r",
                    path, c, doubles, row[i], bad[0],
                )  # fmt: skip
        casts.append(
            F.col(sql_name(c)).cast(kind).alias(c) if kind != "string" else F.col(sql_name(c))
        )
    return df.select(*casts)


def check_time_flags(time_format: str | None, time_unit: str | None) -> None:
    """The two ways of reading times exclude each other (the commands ask before Spark starts)."""
    if time_format and time_unit:
        raise UsageError("give --time-format (times as text) or --time-unit (numbers), not both")


def _time(df: Any, path: str, col: str, time_format: str | None, time_unit: str | None) -> Any:
    """The time column converted in Spark: parsed with `time_format`, or numbers in `time_unit`
    made timestamps, or numbers of seconds checked to be plausible as seconds."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, IntegralType, NumericType, StringType

    from gpu_hamlet.spark.job import sql_name

    dtype = df.schema[col].dataType
    raw = F.col(sql_name(col))
    where = f"{path}: column '{col}'"

    def fail(reason: str) -> Any:
        return F.raise_error(
            F.concat(F.lit(f"{RAISED}{where}: value '"), raw.cast("string"), F.lit(f"' {reason}"))
        )

    check_time_flags(time_format, time_unit)
    if time_format:
        if not isinstance(dtype, (StringType, NumericType)):
            raise UsageError(f"{where} is already {dtype.simpleString()}: drop --time-format")
        parsed = F.try_to_timestamp(raw.cast("string"), F.lit(time_format))
        return F.when(
            raw.isNotNull() & parsed.isNull(), fail(f"does not match --time-format '{time_format}'")
        ).otherwise(parsed)
    if not isinstance(dtype, NumericType):
        if time_unit:
            raise UsageError(
                f"{where} is {dtype.simpleString()}, not numbers: --time-unit "
                f"is for numeric times (use --time-format for text)"
            )
        if isinstance(dtype, StringType):
            raise _text_times(df, where, col)
        return raw  # a timestamp, or a type trend_aggregate names as unsupported
    if isinstance(dtype, DecimalType) and dtype.scale == 0:  # (integers beyond int64: `_typed`)
        big = df.where(F.abs(raw) > 2**63 - 1).select(raw.cast("string")).limit(1).collect()
        if big:  # (no unit reads them: seconds after the year 5138, micro or nanoseconds too)
            raise UsageError(f"{where}: value '{big[0][0]}' is beyond int64, so no time")
    if time_unit == "ns":  # exact: `div` on integers, never through a double
        micros = F.timestamp_micros(F.expr(f"CAST({sql_name(col)} AS BIGINT) div 1000"))
        return F.when(
            raw % 1000 != 0, fail("has nanoseconds, finer than a Spark timestamp holds")
        ).otherwise(micros)
    if time_unit in ("ms", "us") and not isinstance(dtype, IntegralType):
        # timestamp_millis and timestamp_micros take integers only (a double column was Spark's
        # DATATYPE_MISMATCH): whole microseconds, through a decimal (1.1 ms is 1100 us exactly)
        micros = raw.cast("decimal(38, 9)") * (1000 if time_unit == "ms" else 1)
        return F.when(
            micros != F.floor(micros),
            fail("has a fraction of a microsecond, finer than a Spark timestamp holds"),
        ).otherwise(F.timestamp_micros(micros.cast("bigint")))
    if time_unit:
        return getattr(F, UNIT_FUNCTIONS[time_unit])(raw)
    return F.when(
        F.abs(raw) > MAX_SECONDS,
        fail(
            "is after the year 5138 read as seconds: state its unit (--time-unit ms, us or ns) or "
            "its format (--time-format, e.g. yyyyMMddHHmm)"
        ),
    ).otherwise(raw)


#: Patterns `_text_times` suggests for --time-format, the first that reads the column's value.
TIME_PATTERNS = (
    "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]XXX",
    "yyyy-MM-dd'T'HH:mm:ss[.SSSSSS]",
    "yyyy-MM-dd HH:mm:ss[.SSSSSS]XXX",
    "yyyy-MM-dd HH:mm:ss[.SSSSSS]",
)


def _text_times(df: Any, where: str, col: str) -> UsageError:
    """The error for a time column of text without --time-format (JSON strings, CSV text not
    all numbers or ISO date-times): one of its values, and a pattern that reads it if one of
    TIME_PATTERNS does. The value is one that is no number or timestamp where there is one
    (the CSV column of '1', '2' and 'abc' is text for 'abc': '1' was named)."""
    from pyspark.sql import functions as F

    from gpu_hamlet.spark.job import sql_name

    known = F.coalesce(functools.reduce(operator.or_, _fits(col).values()), F.lit(False))
    value = (
        df.where(F.col(sql_name(col)).isNotNull())
        .orderBy(known, sql_name(col))  # (False first; then the least, the same every run)
        .select(sql_name(col))
        .limit(1)
        .collect()
    )
    if not value:
        return UsageError(f"{where} holds no times")
    sample = value[0][0]
    parsed = (
        df.sparkSession.range(1)
        .select(*[F.try_to_timestamp(F.lit(sample), F.lit(p)) for p in TIME_PATTERNS])
        .first()
    )
    fit = [p for p, t in zip(TIME_PATTERNS, parsed) if t is not None]
    how = f'e.g. --time-format "{fit[0]}"' if fit else "e.g. --time-format 'MM/dd/yyyy HH:mm:ss'"
    if sample == col:  # (--columns over a file whose first line names its columns)
        return UsageError(
            f"{where} holds its own name {sample!r} as a value: the file's first line names "
            f"its columns, so leave out --columns (they are for files without a header line)"
        )
    return UsageError(
        f"{where} holds text, e.g. {sample!r}, not timestamps or numbers: give the pattern of "
        f"its times ({how}; read in the Spark session's time zone when they name none), or "
        f"--time-unit for numbers"
    )


def null_error(df: Any, path: str, col: str, what: str, count: int, header: bool) -> UsageError:
    """The error for the `count` null values of the time or type column (`what`) of the events
    `df` read from `path`: the file (of a folder) and the row of the first, counted within that
    file (past a CSV `header`), with its fields. Two jobs, run only when the run fails anyway."""
    from urllib.parse import unquote, urlparse

    from pyspark.sql import functions as F

    from gpu_hamlet.spark.job import sql_name

    file, at = "_gpu_hamlet_file", "_gpu_hamlet_id"
    rows = df.select(
        F.input_file_name().alias(file),
        F.monotonically_increasing_id().alias(at),
        *[F.col(sql_name(c)) for c in df.columns],
    )
    nulls = rows.where(F.col(sql_name(col)).isNull())
    first = nulls.orderBy(file, at).limit(1).collect()
    if not first:
        return UsageError(f"{path}: {what} column '{col}' has null values")
    in_file, first_id = first[0][0], first[0][1]
    before = rows.where((F.col(file) == in_file) & (F.col(at) < first_id)).count()
    if Path(path).is_dir() and in_file.startswith("file:"):
        path = unquote(urlparse(in_file).path)
    fields = ", ".join(
        f"{c}: {'null' if v is None else repr(v) if isinstance(v, str) else v}"
        for c, v in zip(df.columns, list(first[0])[2:])
    )
    past = ", not its header line" if header else ""
    return UsageError(
        f"{path}: {what} column '{col}' has {count} null value(s), the first in row {before + 1} "
        f"(counting the file's rows of events{past}): {fields}; every event needs its {what}: "
        f"fill it in or remove the row"
    )


def check_output(out: Path, mode: str) -> None:
    """Refuse an output folder the run must not write into: by default anything but an absent
    or empty folder; with mode 'overwrite', anything but a previous gpu-hamlet result, down to
    the files of its queries' folders."""
    if not out.exists():
        above = next((a for a in out.parents if a.exists()), None)
        if above is not None and not above.is_dir():
            raise UsageError(f"--out '{out}' is inside '{above}', which is a file, not a folder")
        return
    if not out.is_dir():
        raise UsageError(f"--out '{out}' is a file, not a folder")
    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return
    if mode != "overwrite":
        raise UsageError(
            f"--out '{out}' exists and is not empty: choose another folder, or "
            f"--mode overwrite to replace a previous gpu-hamlet result there"
        )
    marker = out / MARKER
    if not marker.is_file():
        raise UsageError(
            f"--out '{out}' is not a gpu-hamlet result (no {MARKER} file): "
            f"--mode overwrite replaces only those; choose another folder"
        )
    try:
        written = json.loads(marker.read_text(encoding="utf-8"))
        queries, files = written["queries"], written["files"]
        if not _strings(queries) or not all(_strings(f) for f in files.values()):
            raise TypeError
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        raise UsageError(
            f"--out '{out}' has a {MARKER} file that is not one gpu-hamlet wrote (no list of "
            f"queries and their files; an earlier gpu-hamlet listed no files): --mode overwrite "
            f"replaces only gpu-hamlet results; remove the folder yourself or choose another"
        ) from None
    ours = set(queries) | {MARKER}
    foreign = [e for e in entries if e not in ours]
    for q in queries:  # the files in its queries' folders too: the folders are replaced whole
        folder = out / q
        if folder.is_dir():
            mine = files.get(q, ())
            foreign += [
                f"{q}/{e}" for e in sorted(p.name for p in folder.iterdir()) if e not in mine
            ]
        elif folder.exists():
            foreign.append(q)
    if foreign:
        raise UsageError(
            f"--out '{out}' holds '{foreign[0]}', which gpu-hamlet did not write: "
            f"remove it or choose another folder"
        )


def _strings(value: Any) -> bool:
    """Whether `value` (read from JSON) is a list of strings."""
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def check_names(names: Iterable[str]) -> None:
    """Refuse a query name that is no plain folder name: each query's dataset is written to
    OUT/<name> (in Spark's overwrite mode), so `../x` or `a/b` would write, and delete, outside
    OUT, and the marker file's name is taken."""
    for name in names:
        if name in ("", ".", "..", MARKER) or any(c in name for c in "/\\\0"):
            raise UsageError(
                f"query name '{name}' cannot be the name of its output folder OUT/<query name>: "
                f"rename the query (no '/' or '\\', and not '.', '..' or {MARKER})"
            )
        if len(name.encode()) > NAME_MAX:  # (Spark failed at the end, naming no reason)
            raise UsageError(
                f"query name '{name[:40]}...' is {len(name.encode())} bytes, longer than the "
                f"{NAME_MAX} a folder name may have, and it names its output folder OUT/<query "
                f"name>: rename the query"
            )


def write_results(
    results: dict[str, Any],
    order: dict[str, tuple[str, ...]],
    out: Path,
    fmt: str,
    mode: str,
    version: str,
) -> dict[str, int]:
    """Write every query's dataset into a hidden folder beside `out`, add the marker, then move
    it into place (over a previous result only as `check_output` allows): a failed run leaves
    `out` as it was. Each dataset is sorted by its query's `order` columns, ascending with
    nulls last as `aggregate` sorts (gpu_hamlet/query/schema.py `in_result_order`), across
    its part files in the order of their names. Returns the rows written per query."""
    from pyspark.sql import functions as F

    from gpu_hamlet.spark.job import sql_name

    # A link to a folder: the folder is replaced, not the link (renamed over, it failed only
    # after the whole run)
    out = out.resolve() if out.is_symlink() else out.absolute()
    check_output(out, mode)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    if fmt == "parquet" and results:  # timestamps as Parquet's microseconds in UTC, which
        # readers give back with their unit and zone (Spark's default, INT96, loses both)
        session = next(iter(results.values())).sparkSession
        session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    # mkdtemp's folder is private (0700); `out` gets the permissions any new folder would
    umask = os.umask(0o022)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)

    def write(item: tuple[str, Any]) -> tuple[str, int]:
        name, df = item
        df = df.orderBy(*[F.col(sql_name(c)).asc_nulls_last() for c in order[name]])
        writer = df.write.mode("overwrite")
        if fmt in ("csv", "json"):  # (Spark's default writes milliseconds only)
            writer = writer.options(
                timestampFormat=TIMESTAMP_FORMAT, timestampNTZFormat=TIMESTAMP_NTZ_FORMAT
            )
        if fmt == "json":  # a null as null (Spark's default leaves the field out)
            writer = writer.option("ignoreNullFields", False)
        if fmt == "csv":  # values as they are: Spark's default strips their spaces, and
            # escapes quotes as \" where CSV readers (RFC 4180) expect ""
            writer = writer.options(
                header=True,
                ignoreLeadingWhiteSpace=False,
                ignoreTrailingWhiteSpace=False,
                escape='"',
            )
        getattr(writer, fmt)(str(tmp / name))
        return name, df.count()

    try:
        # Each query's dataset is its own (small) Spark job over the checkpointed engine pass:
        # submitted from threads, they run side by side.
        with ThreadPoolExecutor(max_workers=8) as pool:
            rows = dict(pool.map(write, results.items()))
        files = {name: sorted(p.name for p in (tmp / name).iterdir()) for name in results}
        (tmp / MARKER).write_text(
            json.dumps(
                {
                    "written_by": f"gpu-hamlet {version}",
                    "format": fmt,
                    "queries": list(results),
                    "files": files,  # (what a later --mode overwrite may delete)
                }
            )
        )
        check_output(out, mode)  # again: another process may have written there meanwhile
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return rows


def _move_into_place(tmp: Path, out: Path) -> None:
    """Rename `tmp` to `out`; a previous result there is set aside first and deleted last."""
    if not out.exists() or not any(out.iterdir()):
        os.replace(tmp, out)  # onto an empty folder too
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
    try:
        os.replace(out, old)
    except BaseException:
        old.rmdir()
        raise
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old, out)
        raise
    shutil.rmtree(old)
