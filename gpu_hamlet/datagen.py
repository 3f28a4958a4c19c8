"""Event stream generators and loaders for tests and benchmarks (BENCHMARKS.md).

Every generator is deterministic for a seed (one `numpy.random.Generator` per call), fully
vectorised (no Python loop per event: ten million events take a few seconds) and returns a
`pyarrow.Table` whose rows are in non-decreasing time order.

Generators:
- `ridesharing`: the HAMLET paper's ridesharing stream (section 6.1): 20 event types, driver,
  rider, district, request type, duration, price and speed, with rate and burstiness controls.
- `kleene_stream`: short runs of non-Kleene types between bursts of one Kleene type, for
  `SEQ(A, B+, C)`-style benchmarks.
- `stock_stream`: bursty ticks of a few tickers with random-walk prices.

Loaders (real and reference data):
- `load_nasdaq`: Metastock rows `Ticker,YYYYMMDDhhmm,Open,Peak,Low,Close,Volume`.
- `load_hamlet_stream`: the HAMLET authors' `ts,type,value` streams.
- `load_hamlet_workload`: their comma patterns (`3,8,2+`) as workload text of our query language.

Workloads (HAMLET section 6.1), as query text:
- `kleene_sharing_workload`: different patterns around one shared Kleene type, all else equal.
- `diverse_workload`: Kleene patterns of length 1 to 3 with varied windows, aggregates,
  groupings and predicates.

Bursts are built as *segments*: a stream is a sequence of segments, each either one event or a
run of events of one type (a Kleene burst); segment attributes (type, and for ridesharing the
driver, rider, district and request type of one trip) are drawn once per segment and repeated
over its events with `numpy.repeat`.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

__all__ = [
    "RIDESHARING_TYPES",
    "RIDESHARING_TYPE_WEIGHTS",
    "RIDESHARING_BURST_TYPES",
    "REQUEST_TYPES",
    "ridesharing_mean_burst",
    "ridesharing",
    "kleene_stream",
    "stock_stream",
    "load_nasdaq",
    "load_hamlet_stream",
    "load_hamlet_workload",
    "kleene_sharing_workload",
    "diverse_workload",
    "mean_run_length",
]

# --------------------------------------------------------------------------------------------
# Ridesharing vocabulary
# --------------------------------------------------------------------------------------------

#: Relative frequencies of the 20 ridesharing event types outside bursts (Travel most frequent).
RIDESHARING_TYPE_WEIGHTS: dict[str, float] = {
    "Request": 0.08,
    "Pickup": 0.06,
    "Travel": 0.25,
    "Dropoff": 0.06,
    "Cancel": 0.03,
    "Accept": 0.06,
    "Arrive": 0.05,
    "Wait": 0.05,
    "Payment": 0.05,
    "Rating": 0.04,
    "Tip": 0.02,
    "Reroute": 0.03,
    "TrafficJam": 0.02,
    "LocationUpdate": 0.12,
    "DriverOnline": 0.02,
    "DriverOffline": 0.02,
    "SurgeStart": 0.01,
    "SurgeEnd": 0.01,
    "Refund": 0.01,
    "Complaint": 0.01,
}

#: The 20 event types of the ridesharing stream, in code order.
RIDESHARING_TYPES: tuple[str, ...] = tuple(RIDESHARING_TYPE_WEIGHTS)

#: Types of the Kleene bursts (runs of one type) and how often each one makes a burst.
RIDESHARING_BURST_TYPES: dict[str, float] = {"Travel": 0.8, "LocationUpdate": 0.2}

#: Request types and their frequencies; the fare multiplier of each.
REQUEST_TYPES: tuple[str, ...] = ("pool", "single", "premium")
_REQUEST_WEIGHTS = np.array([0.3, 0.6, 0.1])
_REQUEST_FARE = np.array([0.7, 1.0, 1.8])

# Per type: mean duration (s), mean and spread of speed (km/h; 0 = stationary event).
_DURATION_MEAN = {
    "Request": 5.0,
    "Pickup": 40.0,
    "Travel": 30.0,
    "Dropoff": 30.0,
    "Cancel": 3.0,
    "Accept": 8.0,
    "Arrive": 20.0,
    "Wait": 120.0,
    "Payment": 4.0,
    "Rating": 10.0,
    "Tip": 5.0,
    "Reroute": 15.0,
    "TrafficJam": 180.0,
    "LocationUpdate": 5.0,
    "DriverOnline": 2.0,
    "DriverOffline": 2.0,
    "SurgeStart": 600.0,
    "SurgeEnd": 1.0,
    "Refund": 60.0,
    "Complaint": 300.0,
}
_SPEED = {  # (mean, sd)
    "Travel": (32.0, 12.0),
    "Reroute": (25.0, 10.0),
    "LocationUpdate": (20.0, 15.0),
    "TrafficJam": (6.0, 4.0),
    "Pickup": (3.0, 2.0),
    "Dropoff": (3.0, 2.0),
    "Arrive": (8.0, 5.0),
}

# Rows per chunk of the generated string columns (keeps string offsets far below 2 GiB).
_STRING_CHUNK = 1 << 24


def ridesharing_mean_burst(burstiness: float) -> float:
    """Mean length of a ridesharing Kleene burst for a burstiness in [0, 1]: 2 + 48 * burstiness."""
    return 2.0 + 48.0 * float(burstiness)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _check_n(n_events: int) -> int:
    n = int(n_events)
    if n != n_events or n < 0:
        raise ValueError(f"n_events must be a non-negative integer, got {n_events!r}")
    return n


def _strings(names: Sequence[str], codes: np.ndarray) -> pa.ChunkedArray:
    """The string column `names[codes]`, built in C++ (chunked for very long streams)."""
    dictionary = pa.array(list(names), type=pa.string())
    chunks = [
        pc.take(dictionary, pa.array(codes[i : i + _STRING_CHUNK]))
        for i in range(0, len(codes), _STRING_CHUNK)
    ]
    return pa.chunked_array(chunks, type=pa.string())


def _cdf(weights: Sequence[float] | np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    cdf = np.cumsum(w / w.sum())
    cdf[-1] = 1.0
    return cdf


def _draw(rng: np.random.Generator, cdf: np.ndarray, size: int) -> np.ndarray:
    """Categorical draws (int16 codes) with the given cumulative distribution."""
    return np.searchsorted(cdf, rng.random(size), side="right").astype(np.int16)


def _poisson_offsets(rng: np.random.Generator, mean_gap: float, n: int) -> np.ndarray:
    """Arrival offsets (float64, first one 0, non-decreasing) with exponential gaps of mean
    `mean_gap`."""
    t = rng.standard_exponential(n)
    if n:
        t[0] = 0.0
    np.cumsum(t, out=t)
    t *= mean_gap
    return t


def _trim_segments(lengths: np.ndarray, n: int) -> np.ndarray:
    """The shortest prefix of `lengths` covering n events, its last length cut to make exactly n."""
    if n == 0:
        return lengths[:0]
    cs = np.cumsum(lengths)
    nseg = int(np.searchsorted(cs, n, side="left")) + 1
    out = lengths[:nseg].copy()
    out[-1] -= cs[nseg - 1] - n
    return out


# --------------------------------------------------------------------------------------------
# Ridesharing
# --------------------------------------------------------------------------------------------


def ridesharing(
    n_events: int,
    *,
    seed: int = 0,
    events_per_minute: float = 1000.0,
    burstiness: float = 0.5,
    n_districts: int = 10,
    n_drivers: int = 1000,
    n_riders: int = 5000,
    start: str = "2026-01-01",
) -> pa.Table:
    """The HAMLET paper's ridesharing stream (section 6.1).

    Columns: `type` (string, one of `RIDESHARING_TYPES`), `time` (timestamp[us], non-decreasing,
    Poisson arrivals at `events_per_minute` on average from `start`), `driver`, `rider`,
    `district` (int64 ids from 0), `request_type` (string, one of `REQUEST_TYPES`), `duration`
    (float64 s), `price` (float64), `speed` (float64 km/h, 0 for stationary event types).

    `burstiness` in [0, 1] is the expected fraction of events that come in Kleene bursts: runs of
    one type (`RIDESHARING_BURST_TYPES`, mostly Travel) of length 2 + Geometric, mean
    `ridesharing_mean_burst(burstiness)` = 2 + 48 * burstiness. A burst is one trip: its events
    share driver, rider, district and request type. The other events are single events with types
    drawn from `RIDESHARING_TYPE_WEIGHTS` and independent attributes.
    """
    n = _check_n(n_events)
    b = float(burstiness)
    if not 0.0 <= b <= 1.0:
        raise ValueError(f"burstiness must be in [0, 1], got {burstiness!r}")
    if not events_per_minute > 0:
        raise ValueError(f"events_per_minute must be positive, got {events_per_minute!r}")
    for name, value in (
        ("n_districts", n_districts),
        ("n_drivers", n_drivers),
        ("n_riders", n_riders),
    ):
        if int(value) < 1:
            raise ValueError(f"{name} must be at least 1, got {value!r}")
    rng = np.random.default_rng(seed)

    # Segments: a burst with probability q, else a single event. With mean burst length L the
    # expected fraction of events in bursts is q L / (q L + 1 - q) = b.
    mean_len = ridesharing_mean_burst(b)
    q = b / (mean_len * (1.0 - b) + b) if b > 0 else 0.0
    per_segment = q * mean_len + (1.0 - q)
    p_geom = 1.0 / (mean_len - 1.0)
    single_cdf = _cdf(list(RIDESHARING_TYPE_WEIGHTS.values()))
    burst_names = list(RIDESHARING_BURST_TYPES)
    burst_codes = np.array([RIDESHARING_TYPES.index(t) for t in burst_names], dtype=np.int16)
    burst_cdf = _cdf(list(RIDESHARING_BURST_TYPES.values()))

    parts_len: list[np.ndarray] = []
    parts_code: list[np.ndarray] = []
    total = 0
    while total < n:
        k = int((n - total) / per_segment * 1.02) + 64
        is_burst = rng.random(k) < q
        lengths = np.where(is_burst, 1 + rng.geometric(p_geom, k), 1).astype(np.int64)
        codes = np.where(
            is_burst, burst_codes[_draw(rng, burst_cdf, k)], _draw(rng, single_cdf, k)
        ).astype(np.int16)
        parts_len.append(lengths)
        parts_code.append(codes)
        total += int(lengths.sum())
    seg_len = _trim_segments(np.concatenate(parts_len) if parts_len else np.zeros(0, np.int64), n)
    nseg = len(seg_len)
    seg_code = (np.concatenate(parts_code) if parts_code else np.zeros(0, np.int16))[:nseg]

    # Per-segment (per-trip) attributes, repeated over the segment's events.
    seg_driver = rng.integers(0, n_drivers, nseg, dtype=np.int64)
    seg_rider = rng.integers(0, n_riders, nseg, dtype=np.int64)
    seg_district = rng.integers(0, n_districts, nseg, dtype=np.int64)
    seg_request = _draw(rng, _cdf(_REQUEST_WEIGHTS), nseg)
    code = np.repeat(seg_code, seg_len)
    driver = np.repeat(seg_driver, seg_len)
    rider = np.repeat(seg_rider, seg_len)
    district = np.repeat(seg_district, seg_len)
    request = np.repeat(seg_request, seg_len)

    # Per-event attributes (in-place arithmetic: fewer 80 MB temporaries).
    time_us = _poisson_offsets(rng, 60e6 / float(events_per_minute), n)
    np.rint(time_us, out=time_us)
    time_us = time_us.astype(np.int64)
    time_us += np.datetime64(start, "us").astype(np.int64)

    dur_mean = np.array([_DURATION_MEAN[t] for t in RIDESHARING_TYPES])
    duration = rng.standard_exponential(n)
    duration *= dur_mean[code]
    np.round(duration, 1, out=duration)
    price = rng.gamma(2.0, 9.0, n)
    price *= _REQUEST_FARE[request]
    price += 2.5
    np.round(price, 2, out=price)
    speed_mean = np.array([_SPEED.get(t, (0.0, 0.0))[0] for t in RIDESHARING_TYPES])
    speed_sd = np.array([_SPEED.get(t, (0.0, 0.0))[1] for t in RIDESHARING_TYPES])
    speed = rng.standard_normal(n)
    speed *= speed_sd[code]
    speed += speed_mean[code]
    np.clip(speed, 0.0, 130.0, out=speed)
    np.round(speed, 1, out=speed)

    return pa.table(
        {
            "type": _strings(RIDESHARING_TYPES, code),
            "time": pa.array(time_us.view("datetime64[us]"), type=pa.timestamp("us")),
            "driver": pa.array(driver, type=pa.int64()),
            "rider": pa.array(rider, type=pa.int64()),
            "district": pa.array(district, type=pa.int64()),
            "request_type": _strings(REQUEST_TYPES, request),
            "duration": pa.array(duration, type=pa.float64()),
            "price": pa.array(price, type=pa.float64()),
            "speed": pa.array(speed, type=pa.float64()),
        }
    )


# --------------------------------------------------------------------------------------------
# Kleene stream
# --------------------------------------------------------------------------------------------


def kleene_stream(
    n_events: int,
    *,
    seed: int = 0,
    types: Sequence[str] = ("A", "B", "C"),
    kleene_type: str = "B",
    mean_burst: float = 20.0,
    time_step_s: float = 1.0,
    n_groups: int = 1,
    duplicate_time_fraction: float = 0.0,
    mean_other_run: float = 2.0,
) -> pa.Table:
    """Cycles of a short run of non-Kleene events and a burst of `kleene_type`.

    Each cycle is a run of Geometric(mean `mean_other_run`) >= 1 events whose types are drawn
    uniformly from the other `types`, then a burst of Geometric(mean `mean_burst`) >= 1 events of
    `kleene_type`; all events of one cycle share the group `g` (uniform in [0, n_groups)).
    With `types == (kleene_type,)` the stream is one type only.

    Columns: `type` (string), `time` (int64 seconds: floor(k * time_step_s) where k counts the
    events before this one that advance the clock; each event after the first shares the time of
    its predecessor with probability `duplicate_time_fraction`), `g` (int64), `x` (int64 in
    [0, 10)), `y` (float64 in [0, 100)).
    """
    n = _check_n(n_events)
    types = tuple(types)
    if kleene_type not in types:
        raise ValueError(f"kleene_type {kleene_type!r} is not one of types {types!r}")
    if len(set(types)) != len(types):
        raise ValueError(f"types must be distinct, got {types!r}")
    if not mean_burst >= 1.0:
        raise ValueError(f"mean_burst must be at least 1, got {mean_burst!r}")
    if not mean_other_run >= 1.0:
        raise ValueError(f"mean_other_run must be at least 1, got {mean_other_run!r}")
    if not time_step_s > 0:
        raise ValueError(f"time_step_s must be positive, got {time_step_s!r}")
    if int(n_groups) < 1:
        raise ValueError(f"n_groups must be at least 1, got {n_groups!r}")
    d = float(duplicate_time_fraction)
    if not 0.0 <= d < 1.0:
        raise ValueError(
            f"duplicate_time_fraction must be in [0, 1), got {duplicate_time_fraction!r}"
        )
    rng = np.random.default_rng(seed)

    k_code = types.index(kleene_type)
    others = np.array([i for i in range(len(types)) if i != k_code], dtype=np.int16)
    has_others = len(others) > 0
    per_cycle = mean_burst + (mean_other_run if has_others else 0.0)

    parts: list[np.ndarray] = []
    total = 0
    while total < n:
        c = int((n - total) / per_cycle * 1.05) + 16
        bursts = rng.geometric(1.0 / mean_burst, c).astype(np.int64)
        if has_others:
            runs = rng.geometric(1.0 / mean_other_run, c).astype(np.int64)
            lengths = np.column_stack([runs, bursts]).ravel()
        else:
            lengths = np.column_stack([np.zeros(c, np.int64), bursts]).ravel()
        parts.append(lengths)
        total += int(lengths.sum())
    seg_len = _trim_segments(np.concatenate(parts) if parts else np.zeros(0, np.int64), n)
    nseg = len(seg_len)

    seg_idx = np.repeat(np.arange(nseg, dtype=np.int64), seg_len)
    is_kleene = (seg_idx & 1).astype(bool)
    if has_others:
        other_codes = others[rng.integers(0, len(others), n)]
        code = np.where(is_kleene, np.int16(k_code), other_codes).astype(np.int16)
    else:
        code = np.full(n, k_code, dtype=np.int16)
    cycle_group = rng.integers(0, int(n_groups), (nseg + 1) // 2, dtype=np.int64)
    g = cycle_group[seg_idx >> 1]

    advance = (rng.random(n) >= d).astype(np.int64)
    if n:
        advance[0] = 0
    ticks = np.cumsum(advance)
    time = np.floor(ticks * float(time_step_s)).astype(np.int64)
    x = rng.integers(0, 10, n, dtype=np.int64)
    y = rng.random(n) * 100.0

    return pa.table(
        {
            "type": _strings(types, code),
            "time": pa.array(time, type=pa.int64()),
            "g": pa.array(g, type=pa.int64()),
            "x": pa.array(x, type=pa.int64()),
            "y": pa.array(y, type=pa.float64()),
        }
    )


# --------------------------------------------------------------------------------------------
# Stock stream
# --------------------------------------------------------------------------------------------


def stock_stream(
    n_events: int,
    *,
    seed: int = 0,
    tickers: Sequence[str] = ("AAPL", "AMZN", "GOOG", "MSFT"),
    mean_burst: float = 5.0,
    events_per_minute: float = 4500.0,
    start_time: int = 0,
    volatility: float = 0.001,
    whole_seconds: bool = True,
) -> pa.Table:
    """Bursty stock ticks: runs of one ticker of Geometric(mean `mean_burst`) >= 1 ticks.

    Columns: `type` (string, the ticker), `time` (seconds from `start_time`, Poisson arrivals at
    `events_per_minute` on average), `price` (float64, a geometric random walk per ticker with
    per-tick log-return sd `volatility`, in cents), `volume` (int64 >= 1, log-normal).

    `whole_seconds=True` (the default) gives int64 whole seconds, like real tick data: at
    thousands of ticks per minute many ticks share a second, and since equal timestamps never
    follow each other in a trend, a run of one ticker is then rarely a Kleene burst. False keeps
    the exact arrival times as float64 seconds (distinct): every run of one ticker is a burst, the
    setting of the paper's stock experiments (Fig. 12 and 13: bursts of 120 events on average).
    """
    n = _check_n(n_events)
    tickers = tuple(tickers)
    if not tickers or len(set(tickers)) != len(tickers):
        raise ValueError(f"tickers must be distinct and non-empty, got {tickers!r}")
    if not mean_burst >= 1.0:
        raise ValueError(f"mean_burst must be at least 1, got {mean_burst!r}")
    if not events_per_minute > 0:
        raise ValueError(f"events_per_minute must be positive, got {events_per_minute!r}")
    rng = np.random.default_rng(seed)
    nt = len(tickers)

    parts_len: list[np.ndarray] = []
    total = 0
    while total < n:
        c = int((n - total) / mean_burst * 1.05) + 16
        lengths = rng.geometric(1.0 / mean_burst, c).astype(np.int64)
        parts_len.append(lengths)
        total += int(lengths.sum())
    seg_len = _trim_segments(np.concatenate(parts_len) if parts_len else np.zeros(0, np.int64), n)
    nseg = len(seg_len)
    seg_code = rng.integers(0, nt, nseg).astype(np.int16)
    code = np.repeat(seg_code, seg_len)

    offsets = _poisson_offsets(rng, 60.0 / float(events_per_minute), n)
    if whole_seconds:
        time = np.floor(offsets).astype(np.int64)
        time += int(start_time)
    else:
        time = offsets + float(start_time)

    # Per-ticker cumulative log-returns: cumsum in ticker-sorted order minus each ticker's offset.
    start_price = np.round(rng.uniform(20.0, 500.0, nt), 2)
    returns = rng.standard_normal(n) * float(volatility)
    if n:
        returns[np.unique(code, return_index=True)[1]] = (
            0.0  # first tick of a ticker: its start price
        )
    order = np.argsort(code, kind="stable")
    cs = np.cumsum(returns[order])
    sorted_code = code[order]
    first = (
        np.flatnonzero(np.r_[True, sorted_code[1:] != sorted_code[:-1]])
        if n
        else np.zeros(0, np.int64)
    )
    base = np.r_[0.0, cs][first]  # cumsum before each ticker's first tick
    counts = np.diff(np.r_[first, n])
    cum = np.empty(n)
    cum[order] = cs - np.repeat(base, counts)
    price = np.round(start_price[code] * np.exp(cum), 2)
    volume = np.maximum(1, np.rint(rng.lognormal(6.0, 1.2, n))).astype(np.int64)

    return pa.table(
        {
            "type": _strings(tickers, code),
            "time": pa.array(time, type=pa.int64() if whole_seconds else pa.float64()),
            "price": pa.array(price, type=pa.float64()),
            "volume": pa.array(volume, type=pa.int64()),
        }
    )


# --------------------------------------------------------------------------------------------
# Loaders
# --------------------------------------------------------------------------------------------


def _read_csv(path: str | os.PathLike, names: list[str], types: dict[str, pa.DataType]) -> pa.Table:
    return pacsv.read_csv(
        os.fspath(path),
        read_options=pacsv.ReadOptions(column_names=names, autogenerate_column_names=False),
        parse_options=pacsv.ParseOptions(delimiter=","),
        convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=False),
    )


def load_nasdaq(path: str | os.PathLike) -> pa.Table:
    """Metastock 7 rows `Ticker,YYYYMMDDhhmm,Open,Peak,Low,Close,Volume` (no header).

    Columns: `type` (string, the ticker), `time` (timestamp[s]), `open`, `peak`, `low`, `close`
    (float64), `volume` (int64), in file order.
    """
    names = ["type", "stamp", "open", "peak", "low", "close", "volume"]
    types = {
        "type": pa.string(),
        "stamp": pa.string(),
        "open": pa.float64(),
        "peak": pa.float64(),
        "low": pa.float64(),
        "close": pa.float64(),
        "volume": pa.int64(),
    }
    raw = _read_csv(path, names, types)
    time = pc.strptime(raw["stamp"], format="%Y%m%d%H%M", unit="s")
    return pa.table(
        {
            "type": raw["type"],
            "time": time.cast(pa.timestamp("s")),
            "open": raw["open"],
            "peak": raw["peak"],
            "low": raw["low"],
            "close": raw["close"],
            "volume": raw["volume"],
        }
    )


def load_hamlet_stream(path: str | os.PathLike) -> pa.Table:
    """The HAMLET authors' `ts,type,value` stream (no header).

    Columns: `type` (string, `"T" + type`, e.g. `T2`), `time` (int64, the ts), `value` (int64).
    """
    raw = _read_csv(
        path, ["ts", "type", "value"], {"ts": pa.int64(), "type": pa.string(), "value": pa.int64()}
    )
    return pa.table(
        {
            "type": pc.binary_join_element_wise("T", pc.utf8_trim_whitespace(raw["type"]), ""),
            "time": raw["ts"],
            "value": raw["value"],
        }
    )


_WORKLOAD_ITEM = re.compile(r"^(\d+|[A-Za-z_][A-Za-z0-9_]*)(\+?)$")


def load_hamlet_workload(path: str | os.PathLike, *, within: str = "100000 s") -> str:
    """The HAMLET authors' workload file (one comma pattern per line, `2+` = Kleene plus) as text.

    `3,8,2+` becomes `q1: RETURN COUNT(*) PATTERN SEQ(T3, T8, T2+) WITHIN 100000 s;` (integer
    types get a `T` prefix; identifiers are kept). One query per line, named q1..qN in file
    order, each ending with `;`; blank lines are skipped. `within` is inserted as written.
    """
    with open(os.fspath(path), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    out: list[str] = []
    for lineno, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        elems = []
        for item in line.split(","):
            m = _WORKLOAD_ITEM.match(item.strip())
            if m is None:
                raise ValueError(f"{os.fspath(path)}, line {lineno}: bad pattern element {item!r}")
            name, plus = m.groups()
            elems.append(("T" + name if name.isdigit() else name) + plus)
        out.append(
            f"q{len(out) + 1}: RETURN COUNT(*) PATTERN SEQ({', '.join(elems)}) WITHIN {within};"
        )
    return "\n".join(out) + ("\n" if out else "")


# --------------------------------------------------------------------------------------------
# Workloads (HAMLET section 6.1)
# --------------------------------------------------------------------------------------------


def _where(conditions: Sequence[str]) -> str:
    conds = [c for c in conditions if c]
    return f" WHERE {' AND '.join(conds)}" if conds else ""


def kleene_sharing_workload(
    n_queries: int,
    kleene: str,
    others: Sequence[str],
    *,
    returns: str = "COUNT(*)",
    where: Sequence[str] = (),
    per_query_where: Sequence[str] = (),
    groupby: str = "",
    within: str = "1 min",
    prefix: str = "k",
) -> str:
    """HAMLET 6.1's Kleene-sharing workload: queries with different patterns around one shared
    `kleene`+ and the same window, grouping, predicates and aggregates.

    Query i (named `{prefix}{i}`) takes the i-th pattern of: SEQ(X, E+, Y) for every ordered pair
    of distinct `others`, then SEQ(X, E+), SEQ(E+, Y), SEQ(X, Y, E+), SEQ(E+, X, Y); so with o
    others there are o(3o - 1) distinct patterns. Every query returns `returns`, has the WHERE
    conditions `where` (e.g. an equivalence `[driver]`), `GROUPBY groupby` when given, and
    `WITHIN within`. `per_query_where`, cycled over the queries, adds a condition per query (to
    break sharing on purpose). Queries are separated by `;` and a newline.
    """
    pairs = list(itertools.permutations(others, 2))
    shapes = (
        [f"SEQ({x}, {kleene}+, {y})" for x, y in pairs]
        + [f"SEQ({x}, {kleene}+)" for x in others]
        + [f"SEQ({kleene}+, {y})" for y in others]
        + [f"SEQ({x}, {y}, {kleene}+)" for x, y in pairs]
        + [f"SEQ({kleene}+, {x}, {y})" for x, y in pairs]
    )
    if not 0 <= n_queries <= len(shapes):
        raise ValueError(
            f"n_queries must be in [0, {len(shapes)}] for {len(others)} other types, "
            f"got {n_queries!r}"
        )
    group = f" GROUPBY {groupby}" if groupby else ""
    out = []
    for i in range(n_queries):
        extra = [per_query_where[i % len(per_query_where)]] if per_query_where else []
        out.append(
            f"{prefix}{i}: RETURN {returns} PATTERN {shapes[i]}"
            f"{_where([*where, *extra])}{group} WITHIN {within}"
        )
    return ";\n".join(out)


def diverse_workload(
    n_queries: int,
    kleene: Sequence[str],
    others: Sequence[str],
    attribute: str,
    *,
    kleene_filters: Sequence[str] = ("",),
    other_filters: Sequence[str] = ("",),
    groupby: Sequence[str] = ("",),
    where: Sequence[str] = (),
    windows_min: Sequence[int] = (5, 10, 15, 20),
    seed: int = 0,
    prefix: str = "d",
) -> str:
    """HAMLET 6.1's diverse workload: sharable Kleene patterns of length 1 to 3, windows of 5 to
    20 minutes, different aggregates, groupings and predicates.

    Query i (named `{prefix}{i}`, drawn with `numpy.random.default_rng(seed)`): Kleene type
    E = kleene[i % len(kleene)]; pattern E+, SEQ(X, E+), or one of SEQ(X, E+, Y), SEQ(X, Y, E+)
    for lengths 1, 2, 3 in turn (X, Y distinct `others`); a tumbling window of one of
    `windows_min` minutes; COUNT(*) and, in turn, COUNT(E), SUM, AVG, MIN or MAX of
    E.`attribute`; one `groupby` entry (attribute list, "" for none; the attributes are also
    returned); one of `kleene_filters` on E and one of `other_filters` on X (templates with `{E}`
    and `{X}`; "" for none), and the conditions `where` that every query has. Queries with the
    same Kleene type and grouping form one sharable set; their different filters on E make
    event-level snapshots (HAMLET Def. 9).
    """
    if n_queries < 0:
        raise ValueError(f"n_queries must be non-negative, got {n_queries!r}")
    if len(others) < 2:
        raise ValueError(f"diverse_workload needs at least two other types, got {others!r}")
    rng = np.random.default_rng(seed)
    aggs = ["COUNT({E})", "SUM({E}.{a})", "AVG({E}.{a})", "MIN({E}.{a})", "MAX({E}.{a})"]
    out = []
    for i in range(n_queries):
        e = kleene[i % len(kleene)]
        x, y = (str(t) for t in rng.choice(list(others), 2, replace=False))
        length = 1 + i % 3
        if length == 1:
            pattern = f"{e}+"
        elif length == 2:
            pattern = f"SEQ({x}, {e}+)"
        else:
            pattern = f"SEQ({x}, {e}+, {y})" if rng.random() < 0.5 else f"SEQ({x}, {y}, {e}+)"
        group = str(groupby[int(rng.integers(len(groupby)))])
        kf = kleene_filters[int(rng.integers(len(kleene_filters)))].format(E=e)
        of = other_filters[int(rng.integers(len(other_filters)))].format(X=x) if length > 1 else ""
        window = windows_min[int(rng.integers(len(windows_min)))]
        agg = aggs[i % len(aggs)].format(E=e, a=attribute)
        returns = ", ".join(filter(None, [group, "COUNT(*)", agg]))
        out.append(
            f"{prefix}{i}: RETURN {returns} PATTERN {pattern}{_where([*where, kf, of])}"
            f"{f' GROUPBY {group}' if group else ''} WITHIN {window} min"
        )
    return ";\n".join(out)


# --------------------------------------------------------------------------------------------
# Stream statistics
# --------------------------------------------------------------------------------------------


def mean_run_length(types: pa.Array | pa.ChunkedArray | Sequence[str], type_name: str) -> float:
    """Mean length of the maximal runs of consecutive `type_name` events (0.0 if none)."""
    if not isinstance(types, (pa.Array, pa.ChunkedArray)):
        types = pa.array(list(types), type=pa.string())
    mask = np.asarray(
        pc.equal(types, type_name).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool
    )
    if not mask.any():
        return 0.0
    starts = np.count_nonzero(mask[1:] & ~mask[:-1]) + int(mask[0])
    return float(mask.sum()) / starts
