"""The backend interface: the data-parallel steps the engine delegates to CPU or GPU kernels.

The engine (gpu_hamlet/engine/evaluate.py) decides what to compute; a backend only runs the kernels.
Each step takes and returns host NumPy arrays, and `ring` names the number system
(gpu_hamlet/core/rings.py), so both backends give identical results.

A backend may also take many calls of a step at once (`segment_maps_many(calls)` and so on: a
list of argument tuples in, a list of results out). The engine writes each query's computation as
a generator of steps, and `drive` hands the pending calls of all queries to such a backend
together: the GPU backend then launches once per step and shape, not once per query. A backend
with threads may instead start each call as it comes (`submit(step, args)`, a Future): `drive`
then goes on with the other queries while it runs (the CPU backend with several cores). With one
core the CPU backend runs queries one after another, so only one query's arrays are alive at a
time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Protocol

import numpy as np

from gpu_hamlet.core.adjacency import AdjacentRuns
from gpu_hamlet.core.recursions import Blocks
from gpu_hamlet.core.weights import EventWeights
from gpu_hamlet.errors import GpuHamletError

log = logging.getLogger("gpu_hamlet")


class Backend(Protocol):
    """What a backend provides. Arrays are NumPy; `param` is the ring's parameter (the modulus of
    'modp'). Event weights come as an array [channels, events, lanes] or as EventWeights, a
    description by columns and rows (gpu_hamlet/core/weights.py) that each backend builds where it
    keeps the columns."""

    name: str
    #: The GPU ordinal it runs on; None for the CPU, or the current GPU.
    device: int | None

    def segment_maps(
        self,
        ring: str,
        pid: np.ndarray,
        seg: np.ndarray,
        time: np.ndarray,
        pos: np.ndarray,
        weights: np.ndarray | EventWeights,
        mu: np.ndarray,
        k: np.ndarray,
        mseg: np.ndarray,
        template,
        full: bool,
        snap: np.ndarray,
        param: int = 0,
        blocks: Blocks | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (pid, segment) run of sorted events: its map (full) or its result from zero.

        Rows with mseg >= 0 are macro events (shared bursts) with coefficients mu[mseg], k[mseg];
        their snapshots go to `snap`. Rows with mseg <= BLOCK are block macro rows (runs of a
        shared sub-pattern, GLORIA's stages) with their maps in `blocks`
        (gpu_hamlet/core/recursions.py).
        Returns (maps [runs, D, D or 1, lanes], run_pid, run_seg)."""
        ...

    def adjacent_results(
        self,
        ring: str,
        runs: AdjacentRuns,
        weights: np.ndarray | EventWeights,
        mu: np.ndarray,
        k: np.ndarray,
        mseg: np.ndarray,
        template,
        snap: np.ndarray,
        param: int = 0,
        values: bool = False,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Per run (a whole window) its result from zero with predicates between adjacent
        events (gpu_hamlet/core/adjacency.py): ([runs, D, 1, lanes], and with `values` every
        row's values [rows, channels, lanes], else None). Macro rows (mseg >= 0) are shared
        bursts of a type no condition touches, as in `segment_maps`; window macro rows
        (`runs.wburst` >= 0) read their basis responses from k and record their input in `snap`
        [rows, channels, lanes]."""
        ...

    def segments(
        self, pid: np.ndarray, time: np.ndarray, width: int | float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Segmenting events sorted by partition and time: the segment (pane) of every event,
        floor(time / width) in the time column's arithmetic, and the index of the first event of
        every run of equal (pid, segment)."""
        ...

    def burst_ids(
        self, pid: np.ndarray, pane: np.ndarray, time: np.ndarray, is_e: np.ndarray
    ) -> np.ndarray:
        """Burst id of every event of a sharable set's stream (sorted by ascending pid, then
        time), -1 outside bursts: maximal runs of timestamp groups made only of Kleene-type
        events (`is_e`) within one partition and pane, numbered in order from 0."""
        ...

    def burst_coefficients(
        self,
        ring: str,
        seg_id: np.ndarray,
        time: np.ndarray,
        weights: np.ndarray | EventWeights,
        nseg: int,
        param: int = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Graphlet coefficients (MU [segments, 1, lanes], K [segments, channels, lanes]) of
        bursts given as events sorted by segment id."""
        ...

    def compose_windows(
        self,
        ring: str,
        maps: np.ndarray,
        run_pid: np.ndarray,
        run_seg: np.ndarray,
        a: int,
        n: int,
        finals: np.ndarray,
        param: int = 0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Window results [windows, finals, lanes], window pid and index, from segment maps."""
        ...

    def reduce_sorted(
        self, ring: str, values: np.ndarray, starts: np.ndarray, param: int = 0
    ) -> np.ndarray:
        """Ring sums of consecutive runs of values beginning at `starts`."""
        ...


#: A computation that asks the backend for steps: it yields (step name, arguments) and receives
#: the step's result, until it returns its own result.
Steps = Generator[tuple[str, tuple], Any, Any]


def batches(be: Backend) -> bool:
    """Whether `be` runs many calls of a step at once (`<step>_many`), as the GPU backend does
    and the CPU backend with several threads (`batched`): then the engine advances queries
    together and hands their calls over in batches."""
    return bool(getattr(be, "batched", hasattr(be, "segment_maps_many")))


def drive(steps: dict[str, Steps], be: Backend) -> dict[str, Any]:
    """Run step generators to completion. Each round, the pending calls of each step go to the
    backend together (`<step>_many` when it has one), so the number of kernel launches depends on
    the rounds and shapes, not on the number of generators (queries). A backend that starts
    calls as they come (`submit`) is driven by `_drive_started` instead."""
    submit = getattr(be, "submit", None)
    if submit is not None:
        return _drive_started(steps, be, submit)
    results: dict[str, Any] = {}
    pending: dict[str, tuple[str, tuple]] = {}

    def advance(name: str, value: Any) -> None:
        try:
            pending[name] = steps[name].send(value)
        except StopIteration as stop:
            results[name] = stop.value

    for name in steps:
        advance(name, None)
    while pending:
        by_step: dict[str, list[str]] = {}
        for name, (step, _) in pending.items():
            by_step.setdefault(step, []).append(name)
        calls = {name: args for name, (_, args) in pending.items()}
        pending.clear()
        for step, names in by_step.items():
            many = getattr(be, step + "_many", None)
            outs = (
                many([calls[n] for n in names])
                if many is not None
                else [getattr(be, step)(*calls[n]) for n in names]
            )
            for name, out in zip(names, outs):
                advance(name, out)
    return results


def _drive_started(
    steps: dict[str, Steps], be: Backend, submit: Callable[[str, tuple], Future | None]
) -> dict[str, Any]:
    """`drive` for a backend that starts each call as it comes: a generator advances until it
    waits for a started call (calls `submit` declines run at once, here), and each finished call
    advances its generator, so queries' Python runs while other queries' kernels do. Each call is
    the one `drive`'s rounds would make, so the results are the same."""
    results: dict[str, Any] = {}
    started: dict[Future, str] = {}

    def advance(name: str, value: Any) -> None:
        while True:
            try:
                step, args = steps[name].send(value)
            except StopIteration as stop:
                results[name] = stop.value
                return
            future = submit(step, args)
            if future is not None:
                started[future] = name
                return
            value = getattr(be, step)(*args)

    for name in steps:
        advance(name, None)
    while started:
        done, _ = wait(started, return_when=FIRST_COMPLETED)
        for future in done:
            advance(started.pop(future), future.result())
    return results


#: The backends a name chooses (`select_backend`).
BACKEND_NAMES = ("auto", "cpu", "gpu")


def check_backend(name: str | Backend) -> None:
    """A ValueError unless `name` is one of BACKEND_NAMES or a Backend object (one with the
    steps the engine calls: a name and `segments`)."""
    if isinstance(name, str) and name in BACKEND_NAMES:
        return
    if (
        not isinstance(name, (str, type))  # (a class has the steps too, unbound)
        and hasattr(name, "name")
        and hasattr(name, "segments")
    ):
        return
    *most, last = map(repr, BACKEND_NAMES)
    names = f"{', '.join(most)} or {last}"
    if isinstance(name, str):
        raise ValueError(f"backend must be {names}, not {name!r}")
    raise ValueError(f"backend must be {names} (or a Backend object), not {name!r}")


def select_backend(name: str | Backend) -> Backend:
    """The backend for `name`: 'cpu'; 'gpu' (numba.cuda kernels on a visible device, or in numba's
    simulator when NUMBA_ENABLE_CUDASIM=1); 'auto' (the GPU when a device is visible, else the
    CPU; the simulator is never chosen by itself). Logs which one runs. A Backend object is
    used as it is (a configured GpuBackend, or a RecordingBackend)."""
    from cpu_fallback import CpuBackend
    from gpu_hamlet.devices import cuda_visible, simulator_enabled

    check_backend(name)
    if not isinstance(name, str):
        return name
    if name == "cpu":
        return CpuBackend()
    if name == "gpu" and simulator_enabled():
        say_once("backend=gpu runs in numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
        return _gpu()
    # (cuda_visible is asked once per process; simulator_enabled reads numba's configuration
    # anew, 20 us, so it is asked only where a device is there to choose)
    device = cuda_visible()
    visible = device and not simulator_enabled()
    if name == "gpu" and not visible:
        raise GpuHamletError(
            "backend='gpu' needs a CUDA device, and none is visible to this process (no driver, "
            "or CUDA_VISIBLE_DEVICES hides them). Run on a machine with an NVIDIA GPU and its "
            "driver, use backend='cpu' (or 'auto', which falls back to the CPU), or set "
            "NUMBA_ENABLE_CUDASIM=1 to run the GPU kernels in numba's simulator (slow)."
        )
    if visible:
        say_once(f"backend={name} uses the GPU backend")
        return _gpu()
    why = "numba.cuda is the simulator" if device else "no CUDA device is visible"
    say_once(f"backend=auto uses the CPU backend ({why})")
    return CpuBackend()


_said: set[str] = set()


def say_once(choice: str) -> None:
    """Log a backend choice at INFO the first time this process makes it (a Spark task, or a
    demo's warm-up, calls the engine many times)."""
    if choice not in _said:
        _said.add(choice)
        log.info(choice)


def _gpu() -> Backend:
    from gpu_hamlet.devices import choose_device
    from gpu_hamlet.kernels import GpuBackend

    return GpuBackend(device=choose_device())


class RecordingBackend:
    """A backend that runs another and keeps a copy of every call's arguments, so that the exact
    kernel inputs of an engine run can be replayed on another backend (GPU tests, benchmarks).
    Described weights are kept as they are: they hold no array the engine changes later."""

    batched = False  # calls are recorded one by one, so that each can be replayed

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, step: str):
        if step.endswith("_many") or step == "submit":  # recorded call by call, to replay
            raise AttributeError(step)
        run = getattr(self.inner, step)

        def record(*args):
            self.calls.append(
                (step, tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args))
            )
            return run(*args)

        return record
