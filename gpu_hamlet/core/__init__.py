"""The core layer: the number systems (rings) trend state lives in, exact and float numerics, and
the per-event and per-burst recursions written once for the CPU (numba.njit) and the GPU
(numba.cuda device functions). Both backends import it; it imports no other layer
(docs/architecture.md)."""

from gpu_hamlet.core import lane_vectors as lane_vectors  # registers the CPU's SIMD lanes
