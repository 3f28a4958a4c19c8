"""Device memory of the GPU backend (issue 22, item 4): what one call holds on the device, the
largest input that fits, and what happens beyond it.

    python benchmarks/gpu_memory.py [--events 2000000 6000000] [--budget-mb 256] [--leave-mb N]
        [--json OUT]

1. Peak: `aggregate` on the GPU over each size (--queries Kleene queries of bench_engine.py, float,
   sharing "none"), while a thread reads the device's used memory through NVML every millisecond;
   the rise over the level before the call is what the call held at its peak. Each launch is
   chunked to --budget-mb (GPU_HAMLET_DEVICE_BYTES, docs/architecture.md section 5), so the rest
   grows with the event columns held for the call: two sizes fit it as fixed bytes plus bytes
   per event, and that line gives the largest input that fits in the device's free memory.
2. Beyond: the device is filled by this process until only --leave-mb MiB are free (as another
   task's memory would fill it; by default half of what the larger size held at its peak: with
   room for its event columns, as on the H100 and H200 runs of 2026-11-26, every launch fitted
   and the error was never reached). The larger size then runs with a launch budget above what
   is left, and must fail within seconds with a GpuHamletError naming GPU_HAMLET_DEVICE_BYTES
   (never a hang, never a silent fall back to the CPU); then with a budget an eighth of what is
   left, and must return the CPU backend's table or fail the same way.
Needs a CUDA device and NVML's Python binding (nvidia-ml-py, `pynvml`), as the GPU machines have.
Run it with NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0 (benchmarks/gpu_steps.sh does): numba
otherwise defers frees, and NVML counts what is freed but not yet released in the peaks.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time

from bench_engine import TYPES, kleene_queries

import gpu_hamlet
from gpu_hamlet.devices import cuda_visible
from gpu_hamlet.errors import GpuHamletError

MB = 1 << 20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--events", type=int, nargs=2, default=[2_000_000, 6_000_000])
    ap.add_argument("--budget-mb", type=int, default=256, help="the launch budget of the peaks")
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--leave-mb", type=int, default=None)
    ap.add_argument("--json", default=None)
    return ap.parse_args(argv)


class UsedMemory:
    """The device's used bytes, read by NVML on a thread of its own while a call runs."""

    def __init__(self) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.peak = 0
        self._stop = threading.Event()

    def name(self) -> str:
        name = self._nvml.nvmlDeviceGetName(self._handle)
        return name.decode() if isinstance(name, bytes) else str(name)

    def now(self) -> int:
        return int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.now())
            time.sleep(0.001)

    def during(self, fn):
        """fn()'s result and the rise of used memory over the level before it, at its peak."""
        base = self.now()
        self.peak, self._stop = base, threading.Event()
        poller = threading.Thread(target=self._poll, daemon=True)
        poller.start()
        try:
            out = fn()
        finally:
            self._stop.set()
            poller.join()
        return out, self.peak - base


def device_memory() -> tuple[int, int]:
    """(free, total) bytes of the current device, as the driver reports them."""
    from numba import cuda

    free, total = cuda.current_context().get_memory_info()
    return int(free), int(total)


def release() -> None:
    """Frees what numba holds for arrays no longer referenced (it defers deallocations)."""
    from numba import cuda

    gc.collect()
    pending = getattr(cuda.current_context(), "deallocations", None)  # None in the simulator
    if pending is not None:
        pending.clear()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not cuda_visible():
        print("gpu_memory: needs a CUDA device", file=sys.stderr)
        return 2
    import numpy as np
    from numba import cuda

    from gpu_hamlet.datagen import kleene_stream
    from gpu_hamlet.kernels.backend import GpuBackend

    text = kleene_queries(args.queries)

    def stream(n: int):
        return kleene_stream(
            n, seed=7, types=TYPES, mean_burst=20.0, n_groups=8, duplicate_time_fraction=0.1
        )

    def run(events, backend):
        return gpu_hamlet.aggregate(events, text, backend=backend, sharing="none", numeric="float")

    used = UsedMemory()
    free, total = device_memory()
    print(f"device: {used.name()}, {total / MB:,.0f} MiB, {free / MB:,.0f} free")
    run(stream(20_000), GpuBackend())  # compile first
    report: dict = {"queries": args.queries, "total_bytes": total, "sizes": []}
    for n in args.events:
        events = stream(n)
        release()
        t0 = time.perf_counter()
        capped = GpuBackend(max_device_bytes=args.budget_mb * MB)
        _, peak = used.during(lambda ev=events, be=capped: run(ev, be))
        dt = time.perf_counter() - t0
        report["sizes"].append({"events": n, "peak_bytes": peak, "seconds": dt})
        print(f"{n:>12,} events: peak {peak / MB:10,.1f} MiB above the level before, {dt:.2f} s")
    (n1, p1), (n2, p2) = ((s["events"], s["peak_bytes"]) for s in report["sizes"])
    per_event = (p2 - p1) / (n2 - n1)
    fixed = p1 - per_event * n1
    release()
    free, _ = device_memory()
    largest = int((free - fixed) / per_event) if per_event > 0 else None
    report.update(per_event_bytes=per_event, fixed_bytes=fixed, free_bytes=free, largest=largest)
    print(
        f"fit: {fixed / MB:,.1f} MiB + {per_event:.1f} bytes per event; {free / MB:,.0f} MiB free:"
        f" largest input that fits about {largest:,} events"
        if largest
        else f"fit: {fixed / MB:,.1f} MiB, no growth with the input"
    )

    events = stream(n2)
    expected = run(events, "cpu")
    release()
    free, _ = device_memory()
    # Half of what the call held at its peak, unless --leave-mb says.
    leave = args.leave_mb * MB if args.leave_mb else p2 // 2
    ballast = cuda.device_array(max(free - leave, 0), np.uint8)
    free, _ = device_memory()
    print(f"device filled: {free / MB:,.0f} MiB left")
    for budget in (4 * free, free // 8):
        t0 = time.perf_counter()
        try:
            got = run(events, GpuBackend(max_device_bytes=int(budget)))
            same = got.keys() == expected.keys() and all(got[q].equals(expected[q]) for q in got)
            outcome = "equal to the CPU" if same else "DIFFERS from the CPU"
        except GpuHamletError as exc:
            outcome = f"GpuHamletError: {exc}"
        except Exception as exc:  # noqa: BLE001 - what escapes the engine's own error is a finding
            outcome = f"NOT the engine's error: {type(exc).__name__}: {exc}"
        dt = time.perf_counter() - t0
        report.setdefault("beyond", []).append(
            {"budget_bytes": int(budget), "left_bytes": free, "seconds": dt, "outcome": outcome}
        )
        print(
            f"budget {budget / MB:,.0f} MiB with {free / MB:,.0f} MiB left, {dt:.2f} s: {outcome}"
        )
        release()
    del ballast
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
