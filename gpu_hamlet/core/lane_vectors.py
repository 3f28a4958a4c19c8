"""The lane rings' arithmetic as whole vectors on the CPU (docs/architecture.md section 2).

A 'modps8' or 'modps' element is a tuple of residues, one per prime (gpu_hamlet/core/rings.py
`ModPs`), and
its operations are written lane by lane there (`lane_add`, `lane_mul`). Compiled that way each
lane is scalar code: numba leaves LLVM's SLP vectorizer off (it miscompiled code for numba's
users), and that is the pass that would pack independent lanes into SIMD registers. Here the
sum, product and zero test of `ModPs` elements are overloaded for the CPU target alone, as
intrinsics that emit the same operations on LLVM vectors, which LLVM's code generator lowers to
the widest SIMD registers the host has (scalar code where it has none): the same integer and
IEEE operations per lane, hence the same bits. numba prefers an overload for the CPU target over
the generic ones of rings.py, which the CUDA target (whose threads are the parallelism) keeps
compiling lane by lane. Importing gpu_hamlet.core registers these.

Loads and stores stay lane by lane. As one vector each they made the segment kernel about 2x
slower in most processes (160 against 75 ns a row) and a little faster in a few: NumPy's arrays
start 16 or 32 bytes past a 64-byte line, so such vectors straddle lines, the likely cause.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from gpu_hamlet.core.rings import ModPs, r_add, r_is_zero, r_mul, ring_of

_I64 = ir.IntType(64)
_F64 = ir.DoubleType()


def _vector(builder: ir.IRBuilder, tup: ir.Value, n: int) -> ir.Value:
    vec = ir.Constant(ir.VectorType(_I64, n), ir.Undefined)
    for q in range(n):
        vec = builder.insert_element(vec, builder.extract_value(tup, q), ir.Constant(_I64, q))
    return vec


def _tuple(builder: ir.IRBuilder, vec: ir.Value, ty: ir.Type) -> ir.Value:
    tup = ir.Constant(ty, ir.Undefined)
    for q in range(vec.type.count):
        tup = builder.insert_value(tup, builder.extract_element(vec, ir.Constant(_I64, q)), q)
    return tup


def _splat(ty: ir.VectorType, value: float | int) -> ir.Constant:
    return ir.Constant(ty, [ir.Constant(ty.element, value)] * ty.count)


def _lanes(ty: types.Type, n: int) -> bool:
    return isinstance(ty, types.UniTuple) and ty.dtype == types.int64 and ty.count == n


def _add(builder: ir.IRBuilder, a: ir.Value, b: ir.Value, p: ir.Value) -> ir.Value:
    """`lane_add`: a + b, less p where that reaches p."""
    s = builder.add(a, b)
    return builder.select(builder.icmp_signed(">=", s, p), builder.sub(s, p), s)


def _mul(builder: ir.IRBuilder, a: ir.Value, b: ir.Value, p: ir.Value) -> ir.Value:
    """`lane_mul`: the quotient of a * b by p from float64, then corrected."""
    vf = ir.VectorType(_F64, a.type.count)
    fa, fb, fp = (builder.sitofp(x, vf) for x in (a, b, p))
    q = builder.fptosi(
        builder.fmul(builder.fmul(fa, fb), builder.fdiv(_splat(vf, 1.0), fp)), a.type
    )
    r = builder.sub(builder.mul(a, b), builder.mul(q, p))
    r = builder.select(builder.icmp_signed("<", r, _splat(a.type, 0)), builder.add(r, p), r)
    return builder.select(builder.icmp_signed(">=", r, p), builder.sub(r, p), r)


def _lane_op(op):
    """An intrinsic (a, b, ps) -> a tuple like a: `op` on the vectors of the three tuples."""

    def typer(typingctx, a, b, ps):
        if not (isinstance(a, types.UniTuple) and all(_lanes(t, a.count) for t in (a, b, ps))):
            return None

        def codegen(context, builder, sig, args):
            va, vb, vp = (_vector(builder, x, a.count) for x in args)
            return _tuple(builder, op(builder, va, vb, vp), context.get_value_type(sig.return_type))

        return a(a, b, ps), codegen

    return intrinsic(typer)


lanes_add = _lane_op(_add)
lanes_mul = _lane_op(_mul)


@intrinsic
def lanes_is_zero(typingctx, a):
    """Whether every lane is 0: one OR over the vector."""
    if not (isinstance(a, types.UniTuple) and _lanes(a, a.count)):
        return None

    def codegen(context, builder, sig, args):
        vec = _vector(builder, args[0], a.count)
        fn = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(_I64, [vec.type]),
            f"llvm.vector.reduce.or.v{a.count}i64",
        )
        return builder.icmp_signed("==", builder.call(fn, [vec]), ir.Constant(_I64, 0))

    return types.boolean(a), codegen


@overload(r_add, target="cpu")
def _cpu_add(tag, a, b):
    if ring_of(tag) is ModPs:
        return lambda tag, a, b: lanes_add(a, b, tag.ps)
    return None


@overload(r_mul, target="cpu")
def _cpu_mul(tag, a, b):
    if ring_of(tag) is ModPs:
        return lambda tag, a, b: lanes_mul(a, b, tag.ps)
    return None


@overload(r_is_zero, target="cpu")
def _cpu_is_zero(tag, a):
    if ring_of(tag) is ModPs:
        return lambda tag, a: lanes_is_zero(a)
    return None
