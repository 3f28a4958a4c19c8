"""GPU kernel throughput against the CPU backend, in one run (issue 5).

    python benchmarks/bench_gpu.py [--events 10000000] [--queries 1 10 50 100] [--repeat 3]
        [--json OUT.json] | tee benchmarks/results/gpu_<device>.txt

For each workload size (1, 10, 50, 100 queries of benchmarks/bench_engine.py's Kleene workload,
sharing="none") and numeric mode (float, exact), the engine runs once on the CPU backend wrapped in
a RecordingBackend, which keeps the exact inputs of every segment_maps call (one per query and
ring; exact mode adds one per prime). Then, best of --repeat:
- GPU: each call's inputs are uploaded first, then only the kernel launches are timed (with a
  device synchronisation): events per second with the data already on the device;
- CPU: the same calls on the CPU backend, on one core (its numba kernels are serial), and on
  all cores: each call cut between its (partition, segment) runs into one piece per core, all
  pieces run by a pool of forked processes that hold them in memory before the clock starts (as
  Spark's partitions and time slices would spread the work).
Each row also gives the calls' rows and (partition, segment) runs: the kernels run one thread per
run. Events per second count input events once per workload (not once per query). End-to-end
`aggregate` wall times (host work and transfers included) are printed for context. nvidia-smi's
lines head the output. Needs a CUDA device; with NUMBA_ENABLE_CUDASIM=1 it runs in numba's
simulator, for a smoke test of the script only (its timings mean nothing).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import subprocess
import sys
from collections.abc import Callable

import numpy as np
from bench_engine import TYPES, kleene_queries
from harness import best_time

import gpu_hamlet
from gpu_hamlet.devices import cuda_visible, simulator_enabled

NO_DEVICE = (
    "bench_gpu: no CUDA device is visible, so there is nothing to measure: GPU figures "
    "need a machine with an NVIDIA GPU and its driver. (NUMBA_ENABLE_CUDASIM=1 runs this "
    "script in numba's simulator, as a smoke test only.)"
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--queries", type=int, nargs="+", default=[1, 10, 50, 100])
    ap.add_argument(
        "--numeric", nargs="+", default=["float", "exact"], choices=["float", "exact", "bigint"]
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--cpu-repeat", type=int, default=None, help="best of how many CPU runs (default --repeat)"
    )
    ap.add_argument(
        "--gpu-only", action="store_true", help="time the GPU alone (the CPU still records inputs)"
    )
    ap.add_argument("--json", default=None)
    return ap.parse_args(argv)


def nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(nvidia-smi not available: {exc})"


def record_segment_calls(events, text: str, numeric: str) -> list[tuple]:
    from cpu_fallback import CpuBackend
    from gpu_hamlet.core.weights import as_array
    from gpu_hamlet.engine.backend import RecordingBackend

    rec = RecordingBackend(CpuBackend())
    gpu_hamlet.aggregate(
        events, text, backend=rec, sharing="none", numeric=numeric, on_overflow="null"
    )
    # Weights built on the host: the GPU timing covers the segment kernel with its inputs on the
    # device, and the CPU pieces slice them (_split).
    return [
        args[:5] + (as_array(args[5]),) + args[6:]
        for step, args in rec.calls
        if step == "segment_maps"
    ]


def gpu_kernel_seconds(calls: list[tuple], repeat: int, budget: int) -> float:
    """Summed best launch times of the kernels of all calls, batched as GpuBackend batches them
    (one launch per shape and memory chunk), inputs already on the device."""
    from numba import cuda

    from gpu_hamlet.kernels.backend import SegmentRuns, shape_groups
    from gpu_hamlet.kernels.launch import chunks

    total = 0.0
    for members in shape_groups(calls):
        runs = SegmentRuns([calls[i] for i in members])
        for r0, r1 in chunks(runs.cost, budget):
            launch = runs.upload(r0, r1)
            cuda.synchronize()

            def once(run: Callable[[], None] = launch.run) -> None:
                run()
                cuda.synchronize()

            total += best_time(once, repeat)
            del launch
    return total


def cpu_kernel_seconds(calls: list[tuple], repeat: int) -> float:
    from cpu_fallback import CpuBackend

    cpu = CpuBackend()
    return sum(best_time(lambda: cpu.segment_maps(*args), repeat) for args in calls)


#: The pieces of the calls that the all-cores pool runs (set before the workers fork).
_PIECES: list[tuple] = []


def _run_piece(i: int) -> None:
    from cpu_fallback import CpuBackend

    CpuBackend().segment_maps(*_PIECES[i])  # the result stays in the worker


def _split(args: tuple, parts: int) -> list[tuple]:
    """A segment_maps call cut into about `parts` calls of equal events, only where a (partition,
    segment) run ends: runs are computed independently, so the pieces are too (Spark's time
    slices cut a large group the same way)."""
    pid, seg = args[1], args[2]
    n = pid.shape[0]
    ends = np.flatnonzero((pid[1:] != pid[:-1]) | (seg[1:] != seg[:-1])) + 1
    cuts = (
        np.unique(
            ends[
                np.minimum(
                    np.searchsorted(ends, np.arange(1, parts) * n / parts),
                    max(ends.shape[0] - 1, 0),
                )
            ]
        )
        if ends.size
        else ends
    )
    bounds = np.r_[0, cuts, n].astype(np.int64)
    out = []
    for e0, e1 in zip(bounds[:-1], bounds[1:]):
        per_event = tuple(np.ascontiguousarray(a[e0:e1]) for a in args[1:5])
        weights = np.ascontiguousarray(args[5][:, e0:e1])
        out.append(
            args[:1]
            + per_event
            + (weights,)
            + args[6:8]
            + (np.ascontiguousarray(args[8][e0:e1]),)
            + args[9:11]
            + (np.ascontiguousarray(args[11][e0:e1]),)
            + args[12:]
        )
    return out


def cpu_all_cores_seconds(calls: list[tuple], repeat: int, workers: int) -> float:
    """Best wall time of the same calls on the CPU backend spread over `workers` processes, as
    Spark's partitions and time slices would spread them: each call is cut between its runs into one
    piece per worker, and one pool runs the pieces of all calls. The pieces are in the workers'
    memory (forked after they are cut) before the clock starts, like the GPU's inputs on the device;
    the workers only ever run the CPU backend."""
    global _PIECES
    _PIECES = [piece for args in calls for piece in _split(args, workers)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.map(_run_piece, range(len(_PIECES)), chunksize=1)  # load the kernels everywhere
        return best_time(lambda: pool.map(_run_piece, range(len(_PIECES)), chunksize=1), repeat)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not (cuda_visible() or simulator_enabled()):
        print(NO_DEVICE, file=sys.stderr)
        return 2
    from gpu_hamlet.datagen import kleene_stream
    from gpu_hamlet.kernels.backend import DEFAULT_DEVICE_BYTES
    from gpu_hamlet.kernels.device_data import arrow_to_device

    print(nvidia_smi())
    if simulator_enabled():
        print("NUMBA_ENABLE_CUDASIM=1: numba's CUDA simulator, timings are meaningless")
    cores = os.cpu_count() or 1
    events = kleene_stream(
        args.events, seed=7, types=TYPES, mean_burst=20.0, n_groups=8, duplicate_time_fraction=0.1
    )
    columns = ["time", "x", "y"]
    up = best_time(lambda: arrow_to_device(events, columns), args.repeat)
    nbytes = sum(events.column(c).nbytes for c in columns)
    print(
        f"machine: {platform.processor() or platform.machine()}, {cores} cores; "
        f"{args.events:,} events; Arrow -> device ({', '.join(columns)}): "
        f"{nbytes / up / 1e9:.2f} GB/s"
    )
    warm = events.slice(0, min(20_000, args.events))
    rows = []
    for n in args.queries:
        text = kleene_queries(n)
        for numeric in args.numeric:
            for backend in ("cpu", "gpu"):  # compile (or load) every kernel first
                gpu_hamlet.aggregate(
                    warm, text, backend=backend, sharing="none", numeric=numeric, on_overflow="null"
                )
            calls = record_segment_calls(events, text, numeric)
            cpu_repeat = args.cpu_repeat or args.repeat
            g = gpu_kernel_seconds(calls, args.repeat, DEFAULT_DEVICE_BYTES)
            nan = float("nan")
            c = nan if args.gpu_only else cpu_kernel_seconds(calls, cpu_repeat)
            c_all = nan if args.gpu_only else cpu_all_cores_seconds(calls, cpu_repeat, cores)
            # The kernels' array inputs, each read once: a floor on the bytes they move.
            read = sum(a.nbytes for call in calls for a in call if isinstance(a, np.ndarray))
            # The kernels' parallelism: one thread per (partition, segment) run of each call.
            nrows = sum(call[1].shape[0] for call in calls)
            nruns = sum(
                int(call[1].size > 0) + int(np.count_nonzero(
                    (call[1][1:] != call[1][:-1]) | (call[2][1:] != call[2][:-1])
                ))
                for call in calls
            )  # fmt: skip
            e2e = {
                be: best_time(
                    lambda: gpu_hamlet.aggregate(
                        events,
                        text,
                        backend=be,
                        sharing="none",
                        numeric=numeric,
                        on_overflow="null",
                    ),
                    1,
                )
                for be in (("gpu",) if args.gpu_only else ("gpu", "cpu"))
            }
            e2e.setdefault("cpu", nan)
            row = {
                "queries": n,
                "numeric": numeric,
                "events": args.events,
                "calls": len(calls),
                "rows": nrows,
                "runs": nruns,
                "gpu_kernel_s": g,
                "cpu_kernel_s": c,
                "gpu_events_per_s": args.events / g,
                "gpu_input_gb_per_s": read / g / 1e9,
                "cpu_events_per_s": args.events / c,
                "speedup": c / g,
                "cpu_all_cores_s": c_all,
                "cpu_all_cores_events_per_s": args.events / c_all,
                "speedup_vs_all_cores": c_all / g,
                "gpu_aggregate_s": e2e["gpu"],
                "cpu_aggregate_s": e2e["cpu"],
            }
            rows.append(row)
            if args.json:  # after each row: a run cut off at its time limit keeps what it measured
                with open(args.json, "w") as fh:
                    json.dump(rows, fh, indent=2)
            print(
                f"{n:>4} queries {numeric:>6}: {nrows:,} rows in {nruns:,} runs;"
                f" GPU {row['gpu_events_per_s'] / 1e6:10.1f} M ev/s"
                f" ({row['gpu_input_gb_per_s']:6.1f} GB/s of inputs)"
                f"  CPU 1 core {row['cpu_events_per_s'] / 1e6:8.2f} M ev/s,"
                f" {cores} cores {row['cpu_all_cores_events_per_s'] / 1e6:8.2f} M ev/s"
                f"  speedup {row['speedup']:7.1f}x"
                f" (vs all cores {row['speedup_vs_all_cores']:6.1f}x)"
                f"  aggregate(): GPU {e2e['gpu']:.2f} s, CPU {e2e['cpu']:.2f} s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
