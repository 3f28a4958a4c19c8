"""Inclusive prefix sums of device arrays, the scan under run numbering on the device (timestamp
groups and bursts, gpu_hamlet/kernels/burst_ids.py).

Each block scans its elements in shared memory (Hillis-Steele: log2(block) steps); the block
totals are scanned the same way, recursively, and added back. Integer sums, so the order of the
additions does not matter.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, int64

#: Elements per block (a power of two).
SCAN_BLOCK = 256


@functools.cache
def _kernels(block: int):
    @cuda.jit
    def block_scan(x, out, totals):
        buf = cuda.shared.array(block, int64)
        tid = cuda.threadIdx.x
        i = cuda.blockIdx.x * block + tid
        buf[tid] = x[i] if i < x.shape[0] else 0
        cuda.syncthreads()
        d = 1
        while d < block:
            v = buf[tid - d] if tid >= d else 0
            cuda.syncthreads()
            buf[tid] += v
            cuda.syncthreads()
            d *= 2
        if i < x.shape[0]:
            out[i] = buf[tid]
        if tid == block - 1:
            totals[cuda.blockIdx.x] = buf[tid]

    @cuda.jit
    def add_block_offsets(out, scanned_totals):
        i = cuda.grid(1)
        b = i // block
        if i < out.shape[0] and b > 0:
            out[i] += scanned_totals[b - 1]

    return block_scan, add_block_offsets


def inclusive_scan(x, block: int = SCAN_BLOCK):
    """A new int64 device array: out[i] = x[0] + ... + x[i] (x: a device array of integers or
    booleans)."""
    n = x.shape[0]
    out = cuda.device_array(n, np.int64)
    if n == 0:
        return out
    block = min(block, 1 << max(1, (n - 1).bit_length()))  # no idle threads on short inputs
    nb = (n + block - 1) // block
    totals = cuda.device_array(nb, np.int64)
    block_scan, add_block_offsets = _kernels(block)
    block_scan[nb, block](x, out, totals)
    if nb > 1:
        offsets = inclusive_scan(totals, block)  # before configuring the launch: the simulator
        add_block_offsets[nb, block](out, offsets)  # keeps one configuration per kernel
    return out
