"""The streams and query workloads of the experiments (HAMLET section 6.1), from gpu_hamlet.datagen.

Ridesharing (the paper's own generator): trips are Kleene bursts of Travel events of one driver;
queries look for them per driver (`[driver]`) and district, like the paper's q1-q3. Stock: bursts
are runs of one ticker, and queries are Kleene patterns over GOOG with volume predicates, like the
authors' stock workloads; times are exact (float seconds) so that runs of one ticker are bursts.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_hamlet.datagen import diverse_workload, kleene_sharing_workload, ridesharing, stock_stream

RIDESHARING_OTHERS = (
    "Request",
    "Pickup",
    "Accept",
    "Arrive",
    "Dropoff",
    "Payment",
    "Rating",
    "Cancel",
)
STOCK_TICKERS = ("AAPL", "AMZN", "GOOG", "MSFT")
STOCK_KLEENE = "GOOG"


def rides(n_events: int, events_per_minute: float, *, seed: int = 1, **options) -> pa.Table:
    """Ridesharing events; `options` go to datagen.ridesharing (burstiness 0.5 unless given)."""
    options.setdefault("burstiness", 0.5)
    return ridesharing(n_events, seed=seed, events_per_minute=events_per_minute, **options)


def rides_kleene_sharing(n_queries: int) -> str:
    """Kleene-sharing over Travel+: same window (10 min), grouping (district, per driver),
    predicates and aggregates (COUNT(*), AVG(Travel.speed)), different patterns."""
    return kleene_sharing_workload(
        n_queries,
        "Travel",
        RIDESHARING_OTHERS,
        returns="district, COUNT(*), AVG(Travel.speed)",
        where=["[driver]"],
        groupby="district",
        within="10 min",
    )


def rides_diverse(n_queries: int) -> str:
    """Diverse over Travel+ and LocationUpdate+: windows of 5-20 min, groupings (none, district,
    request type), speed and price filters, per driver."""
    return diverse_workload(
        n_queries,
        ["Travel", "LocationUpdate"],
        RIDESHARING_OTHERS,
        "speed",
        kleene_filters=("", "{E}.speed > 20", "{E}.speed > 40"),
        other_filters=("", "{X}.price > 20"),
        groupby=("", "district", "request_type"),
        where=["[driver]"],
    )


def stocks(n_events: int, events_per_minute: float, *, seed: int = 1) -> pa.Table:
    """Four tickers in runs of mean length 8, exact float times."""
    return stock_stream(
        n_events,
        seed=seed,
        tickers=STOCK_TICKERS,
        mean_burst=8.0,
        events_per_minute=events_per_minute,
        whole_seconds=False,
    )


def stock_diverse(n_queries: int) -> str:
    """Diverse over GOOG+ with volume predicates (four thresholds) and price filters elsewhere."""
    others = [t for t in STOCK_TICKERS if t != STOCK_KLEENE]
    return diverse_workload(
        n_queries,
        [STOCK_KLEENE],
        others,
        "price",
        kleene_filters=("", "{E}.volume > 200", "{E}.volume > 500", "{E}.volume > 1000"),
        other_filters=("", "{X}.price > 100"),
    )
