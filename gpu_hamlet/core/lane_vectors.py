"""The 'modps' ring's lane arithmetic as whole vectors on the CPU (docs/architecture.md section 2).

A 'modps' element is a tuple of residues, one per prime (gpu_hamlet/core/rings.py `ModPs`). Lane
by lane, its sum and product are `lane_add` and `lane_mul`; compiled that way, each lane is scalar
code, because numba leaves LLVM's SLP vectorizer off (it miscompiled code for numba's users), and
that vectorizer is what would pack independent lanes into SIMD registers. The intrinsics that
`lanes_intrinsic` makes (rings.py `lanes_add`, `lanes_mul`) emit the same operations on LLVM
vectors instead, which LLVM's code generator lowers to the widest SIMD registers the host has
(scalar code where it has none): the same integer and IEEE operations per lane, hence the same
bits. On other targets (CUDA, whose threads are the parallelism) they compile the lane function
lane by lane.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir
from numba import types
from numba.core.cpu import CPUContext
from numba.extending import intrinsic

_I64 = ir.IntType(64)
_F64 = ir.DoubleType()
_LANE = types.int64(types.int64, types.int64, types.int64)


def _vector(builder: ir.IRBuilder, tup: ir.Value, n: int) -> ir.Value:
    vec = ir.Constant(ir.VectorType(_I64, n), ir.Undefined)
    for q in range(n):
        vec = builder.insert_element(vec, builder.extract_value(tup, q), ir.Constant(_I64, q))
    return vec


def _tuple(builder: ir.IRBuilder, vec: ir.Value, ty: ir.Type, n: int) -> ir.Value:
    tup = ir.Constant(ty, ir.Undefined)
    for q in range(n):
        tup = builder.insert_value(tup, builder.extract_element(vec, ir.Constant(_I64, q)), q)
    return tup


def _splat(ty: ir.VectorType, value: ir.Constant) -> ir.Constant:
    return ir.Constant(ty, [value] * ty.count)


def vector_add(builder: ir.IRBuilder, a: ir.Value, b: ir.Value, p: ir.Value) -> ir.Value:
    """`lane_add` on vectors."""
    s = builder.add(a, b)
    return builder.select(builder.icmp_signed(">=", s, p), builder.sub(s, p), s)


def vector_mul(builder: ir.IRBuilder, a: ir.Value, b: ir.Value, p: ir.Value) -> ir.Value:
    """`lane_mul` on vectors: the quotient from float64, then corrected."""
    vf = ir.VectorType(_F64, a.type.count)
    fa, fb, fp = (builder.sitofp(x, vf) for x in (a, b, p))
    inv = builder.fdiv(_splat(vf, ir.Constant(_F64, 1.0)), fp)
    q = builder.fptosi(builder.fmul(builder.fmul(fa, fb), inv), a.type)
    r = builder.sub(builder.mul(a, b), builder.mul(q, p))
    r = builder.select(builder.icmp_signed("<", r, _splat(a.type, ir.Constant(_I64, 0))),
                       builder.add(r, p), r)  # fmt: skip
    return builder.select(builder.icmp_signed(">=", r, p), builder.sub(r, p), r)


def lanes_intrinsic(vector_op: Callable, lane_fn: Callable) -> Callable:
    """An intrinsic (a, b, ps) -> a tuple like a whose lane q is lane_fn(a[q], b[q], ps[q]):
    `vector_op` on LLVM vectors on the CPU, `lane_fn` per lane elsewhere."""

    def typer(typingctx, a, b, ps):
        ok = all(
            isinstance(t, types.UniTuple) and t.dtype == types.int64 and t.count == a.count
            for t in (a, b, ps)
        ) if isinstance(a, types.UniTuple) else False  # fmt: skip
        if not ok:
            return None

        def codegen(context, builder, sig, args):
            n = sig.return_type.count
            ty = context.get_value_type(sig.return_type)
            if isinstance(context, CPUContext):
                vecs = [_vector(builder, x, n) for x in args]
                return _tuple(builder, vector_op(builder, *vecs), ty, n)
            out = ir.Constant(ty, ir.Undefined)
            for q in range(n):
                each = [builder.extract_value(x, q) for x in args]
                out = builder.insert_value(
                    out, context.compile_internal(builder, lane_fn, _LANE, each), q
                )
            return out

        return a(a, b, ps), codegen

    return intrinsic(typer)
