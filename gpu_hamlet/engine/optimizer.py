"""HAMLET's dynamic sharing optimizer (paper section 4): benefit model and query-set choice.

For each burst of a shared Kleene type, the queries of a sharable set fall into *classes*: queries
that match exactly the same events of the burst. The largest class introduces no new snapshot; each
other class needs a snapshot of its own (HAMLET Def. 9, event-level snapshots due to predicates).
Theorem 4.1 says queries that introduce no snapshot are always worth sharing with, and Theorem 4.2
that every other query's choice can be made on its own, so the plan is found by one decision per
class (linear in the number of classes) instead of a search over 2^k query subsets.

The benefit is weighed with `EngineCostModel`, this engine's measured costs, rather than the
paper's Equation 7, whose n^2 terms (a scan of the predecessors) this engine does not have.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EngineCostModel:
    """This engine's cost of one burst for one class of queries, in seconds (per backend).

    A query's kernel pays `base_s` per event plus `event_s` per event and state channel; `k` is the
    class's queries and `width` their channels added up. Not shared, each query runs the burst's b
    events: b * (k * base_s + width * event_s). Shared, the coefficients are computed once (b *
    coef_s per weighted channel, plus the count), each query applies one macro event (which costs
    `macro` events), and the class pays fixed bookkeeping (class_s). The paper's n^2 terms do not
    apply here: there is no predecessor scan (docs/architecture.md section 2).
    """

    base_s: float
    event_s: float
    coef_s: float
    class_s: float
    macro: float
    #: Fixed costs of sharing in a call, whatever the bursts: analysing a set (`set_s`, plus
    #: `set_row_s` per sorted row of its partitioning and `set_run_s` per run of its Kleene
    #: type: burst ids, extents, the collapsed stream), and each query reading it rather than
    #: its own events, per kernel run it makes (`query_s`: its group's stream, and per run its
    #: coefficients and macro rows). Small calls and sets whose queries prune most bursts away
    #: notice them (`sharing.may_pay`).
    set_s: float = 0.0
    query_s: float = 0.0
    set_row_s: float = 0.0
    set_run_s: float = 0.0
    #: A filter group that shares some of its bursts and runs others unshared reads a stream of
    #: its own (the set's rows with those bursts expanded back), made at this cost per row of
    #: the set (`SharedBursts._group_stream`).
    stream_row_s: float = 0.0
    #: GLORIA's shared stages (stage_sharing.py), in seconds of the per-run model
    #: (`SharedStages.saved_per_run`): per query and row a Q-set reads on the shared path (its
    #: stream with each shared run one slot, `SharedStages.compressed`), and per event of its
    #: stream to cut it into runs (paid once the Q-set is built, whether or not it shares). A
    #: Q-set is built only when its runs could save both, and shares no run unless they save the
    #: first. `stage_block_s`: per query, shared run and window copy beyond the block row's
    #: multiply-adds (scaling its inputs to one exponent and fixing its outputs,
    #: `xf_block_terms`), and `stage_fma_s` per multiply-add of a block row, which the
    #: host's SIMD units run several at a time (HAMLET's `event_s` per event and channel
    #: overstated them about 4x at ten types). Fitted together, with no cost below zero, by
    #: `python benchmarks/calibrate_stages.py` (the gate open, `MIN_GAIN`, against
    #: sharing="hamlet").
    stage_row_s: float = 0.0
    stage_stream_s: float = 0.0
    stage_block_s: float = 0.0
    stage_fma_s: float = 0.0

    def per_event(self, k, width):
        return k * self.base_s + width * self.event_s

    def shared(self, b, k, width, channels):
        return (
            b * self.coef_s * (channels + 1) + self.macro * self.per_event(k, width) + self.class_s
        )

    def nonshared(self, b, k, width):
        return b * self.per_event(k, width)

    def benefit(self, b, k, width, channels):
        return self.nonshared(b, k, width) - self.shared(b, k, width, channels)

    def fixed(self, rows: int, kleene_runs: int, runs: int) -> float:
        """The fixed costs of sharing a set in a call: analysing its `rows` sorted rows and
        `kleene_runs` runs of its Kleene type, and its queries' `runs` (kernel runs) reading
        it."""
        return (
            self.set_s + rows * self.set_row_s + kleene_runs * self.set_run_s + runs * self.query_s
        )


#: Calibrated on the CPU backend with `python benchmarks/calibrate_costs.py` (2-core x86-64
#: development machine, 400,000 events; the mean of four runs at 5ed9401, after XFloat sums lost
#: their branches and made unshared events 2-4x cheaper, benchmarks/results/
#: calibrate_cpu_5ed9401.txt; BENCHMARKS.md has what each refit changed). class_s from three
#: runs at c010526, after a filter group's queries read one stream of the set's slots
#: (calibrate_cpu_c010526.txt): 29 events' base_s there against 42 before, so 7.2e-07 here.
#: set_s and query_s (per kernel run of a query): the mean of three runs of the same script's
#: `fixed_costs` after fusion (engine/fusion.py: queries of one shape that read a set run their
#: steps once, so a query's reading of it fell from 5.2e-05 to 2.9e-05;
#: calibrate_cpu_fusion.txt; 9.3e-04 and 5.2e-05 after d3230b8, calibrate_cpu_d3230b8.txt).
#: set_row_s and set_run_s (a set's analysis per sorted row and per Kleene run): the mean of
#: three runs of its `analysis_cost` at 57958a1 (calibrate_cpu_57958a1.txt). stream_row_s (a
#: filter group's own stream, per row of the set): its `stream_cost`, 2.16e-08 to 2.19e-08 in
#: four runs of 1e29b9b's code (calibrate_cpu_1e29b9b.txt holds the whole output of one of
#: them). The stage constants: the
#: mean of three runs of `calibrate_stages.py` after block rows counted once per window copy
#: and their multiply-adds at stage_fma_s (gloria/calibrate_stages_cpu_copies.txt: alpha
#: 1.87-1.98; stage_fma_s 2.5e-09 to 5.1e-09, where HAMLET's event_s, 9.7e-09, stood for it
#: before). Before, gloria/calibrate_stages_cpu_kept.txt (the gate weighing the queries'
#: pruning and channels, streams of type runs among the cases: alpha 1.26-1.3) and
#: gloria/calibrate_stages_cpu_block.txt (the rows' cost fitted at 0: the gate shared one-type
#: pools at 1.2-3.8x the best fixed mode). Without stage_block_s, Q-sets shared runs that cost
#: more shared (bench_gloria.py, bursty SEQ over a body of 10 types: 1.26-1.44x the best fixed
#: mode).
CPU_COSTS = EngineCostModel(
    base_s=2.5e-08,
    event_s=9.7e-09,
    coef_s=7.7e-09,
    class_s=7.2e-07,
    macro=1.04,
    set_s=6.5e-04,
    query_s=2.9e-05,
    set_row_s=1.5e-08,
    set_run_s=6.0e-08,
    stream_row_s=2.2e-08,
    stage_row_s=1.6e-08,
    stage_stream_s=1.1e-08,
    stage_block_s=6.3e-08,
    stage_fma_s=4.2e-09,
)

#: Calibrated on the GPU backend with `python benchmarks/calibrate_costs.py --backend gpu` on an
#: NVIDIA H200 (16-core host, numba-cuda 0.30.4; 400,000 events; one run at 0700dca,
#: benchmarks/results/gpu/2026-11-26_h200/call1/calibrate_gpu.txt; the H100's, of older code in
#: 2026-11-26_h100/call2/, had base_s, class_s and set_s within 1.3x of these, event_s, coef_s
#: and query_s 2-3.5x apart). A row costs what the kernel figures say
#: (0.98x end to end), the coefficients (one thread per burst) are about 3x cheaper than on the
#: CPU, and the fixed costs of sharing are the device's: analysing a set launches its kernels
#: and moves its arrays, 14.5 ms a set against the CPU's 0.9 ms, so `may_pay` leaves small sets
#: alone. The stage constants: one run of `calibrate_stages.py --backend gpu` on an H200 after
#: the stage model weighed the queries' pruning and channels (a06ffc1's tree, 35 cases,
#: benchmarks/results/gpu/2026-11-27_h200b/call1/calibrate_stages_gpu.txt, alpha 1.43; before,
#: 2026-11-26_h200/call4 fitted 8.6e-08, 1.3e-07 and 0 with the old model), these constants in
#: the model. Since block rows count once per window copy and their multiply-adds at
#: `stage_fma_s` (not refitted on a device: converted so that its cases' windows, two a pane,
#: weigh a block row as that fit did: stage_fma_s is event_s / 2 and stage_block_s
#: (2.8e-07 - base_s) / 2).
GPU_COSTS = EngineCostModel(
    base_s=5.82e-08,
    event_s=8.03e-10,
    coef_s=2.73e-09,
    class_s=1.16e-06,
    macro=1.03,
    set_s=1.45e-02,
    query_s=5.00e-05,
    set_row_s=3.41e-08,
    set_run_s=1.69e-07,
    stream_row_s=4.81e-08,
    stage_row_s=7.0e-08,
    stage_stream_s=2.0e-07,
    stage_block_s=1.11e-07,
    stage_fma_s=4.0e-10,
)

#: The cost model of each backend, by its `name`: one optimizer above both.
COST_MODELS: dict[str, EngineCostModel] = {"cpu": CPU_COSTS, "gpu": GPU_COSTS}


@dataclass(frozen=True)
class WindowCostModel:
    """This engine's cost of a partition's bursts of a Kleene type whose E -> E NEXT conditions
    a set shares (gpu_hamlet/engine/window_sharing.py), in seconds.

    Alone, every query runs its trees over the E events of the windows its pruning keeps:
    `rows` (those events times the query's window copies and channels, summed over the
    queries) * levels steps of `tree_s`. Shared, the basis passes rank and run `basis` rows
    once per distinct channel set (`basis_width` channels in all) at `basis_s` per row, level
    and channel, and each query (per window copy and channel) handles a window macro row per
    burst at `macro_s` and resolves its `pairs` (snapshot, burst) pairs at `pair_s`. HAMLET's
    Definition 12 in this engine's terms: no predecessor scan, one snapshot per burst.
    """

    tree_s: float
    basis_s: float
    macro_s: float
    pair_s: float

    def shared(self, basis, levels, basis_width, bursts, pairs, query_width):
        return basis * levels * basis_width * self.basis_s + query_width * (
            bursts * self.macro_s + pairs * self.pair_s
        )

    def nonshared(self, rows, levels):
        return rows * levels * self.tree_s


#: Fitted on the CPU backend to `python benchmarks/bench_next_sharing.py --events 100000`
#: (benchmarks/results/next_sharing/cpu_fit.txt, 2-core x86-64 development machine): `tree_s`
#: from the none columns, `basis_s` from static with 5 queries, `macro_s` and `pair_s` from
#: static's growth with the queries. BENCHMARKS.md has the decisions it gives.
CPU_WINDOW_COSTS = WindowCostModel(tree_s=3.0e-08, basis_s=9.0e-08, macro_s=3.8e-07, pair_s=1.0e-08)

#: UNCALIBRATED for the GPU backend (no device run yet): the CPU's constants, whose ratios are
#: all the decision reads.
WINDOW_COSTS: dict[str, WindowCostModel] = {"cpu": CPU_WINDOW_COSTS, "gpu": CPU_WINDOW_COSTS}


def choose_shared(
    mode: str,
    b: np.ndarray,
    k: np.ndarray,
    width: np.ndarray,
    channels: np.ndarray,
    model: EngineCostModel,
) -> np.ndarray:
    """Which (burst, class) pairs run shared, vectorised over all of them.

    `b`: matched events of the class in the burst; `k`: its queries; `width`: their state
    channels; `channels`:
    distinct weighted channels it needs. static shares every burst; dynamic shares where the
    benefit is positive, one decision per class (by Theorems 4.1 and 4.2 this is the optimal query
    set: classes cost independently); none shares nothing.
    """
    if mode == "static":
        return b > 0
    if mode == "none":
        return np.zeros(b.shape, bool)
    return (b > 0) & (model.benefit(b, k, width, channels) > 0)
