"""Shard labels that Spark's hash partitioning sends to chosen tasks, computed without a job.

`df.repartition(n, col)` places a row in partition pmod(Murmur3(col, seed 42), n). Each planned
unit of work (a group, or a time slice of a cut group) gets its own long label, picked so that
this hash sends it to the unit's planned task: one shuffled column then places the rows, orders
the shards (`sortWithinPartitions(label, time)`) and tells the task which shard a row is in,
with no range-partitioning sample and no extra columns.
"""

from __future__ import annotations

import numpy as np

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_SEED = 42  # Spark's HashPartitioning seed


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    k1 = _rotl(k1 * _C1, 15) * _C2
    h1 = _rotl(h1 ^ k1, 13)
    return h1 * np.uint32(5) + np.uint32(0xE6546B64)


def spark_hash_long(values: np.ndarray) -> np.ndarray:
    """Spark's `hash(col)` of int64 values (Murmur3_x86_32.hashLong, seed 42), as int32."""
    v = values.astype(np.int64).view(np.uint64)
    low = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (v >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):
        h = _mix(_mix(np.full(v.shape, _SEED, np.uint32), low), high)
        h ^= np.uint32(8)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h.view(np.int32)


def partition_of(values: np.ndarray, n: int) -> np.ndarray:
    """The partition `repartition(n, col)` gives each int64 value: pmod(hash, n)."""
    return np.mod(spark_hash_long(values).astype(np.int64), n)


def shard_labels(task_of_unit: list[int], tasks: int) -> list[int]:
    """A distinct label per unit whose hash partition is the unit's task."""
    if not task_of_unit:
        return []
    need = np.bincount(np.asarray(task_of_unit, np.int64), minlength=tasks)
    pools: list[np.ndarray] = []
    found = np.zeros(tasks, np.int64)
    start = 0
    while (found < need).any():
        ids = np.arange(start, start + max(4 * int(need.sum()), 1024), dtype=np.int64)
        part = partition_of(ids, tasks)
        pools.append(np.stack([ids, part]))
        found += np.bincount(part, minlength=tasks)
        start += ids.shape[0]
    ids, part = np.concatenate(pools, axis=1)
    by_task = [ids[part == t] for t in range(tasks)]
    used = np.zeros(tasks, np.int64)
    labels = []
    for t in task_of_unit:
        labels.append(int(by_task[t][used[t]]))
        used[t] += 1
    return labels
