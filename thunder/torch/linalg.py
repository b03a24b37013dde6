"""Linear algebra in the torch language: ``matmul`` (and ``@``), ``mm``, ``bmm``, ``mv``,
``linear``, ``addmm``, ``baddbmm`` and ``einsum``.

PyTorch's matrix products do not promote types: operands must share a dtype. The
decompositions reduce every rank combination to ``prims.matmul`` over equal-rank,
equal-batch operands (1-D operands get a unit dim that is squeezed away afterwards).

Layer: language. Imports: core, torch.base, torch.elementwise.
"""

from __future__ import annotations

import math
import operator
import string

import torch

from thunder.core import prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims import linalg as linalg_prims
from thunder.core.prims.base import conj, is_differentiable
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import grad_rules
from thunder.torch.base import broadcast_shapes, expand_to, register_reflected, torchsymbol
from thunder.torch.conversions import contiguous
from thunder.torch.elementwise import add, mul

__all__ = ["matmul", "mm", "bmm", "mv", "linear", "addmm", "baddbmm", "einsum"]


def _shape(s) -> str:
    return str(tuple(s))


def _check_operands(op: str, names: tuple[str, ...], *tensors) -> None:
    for t, n in zip(tensors, names):
        if not isinstance(t, TensorProxy):
            raise ThunderTypeError(f"{op}: expected {n} to be a tensor, but got {type(t).__name__} {t!r}")
    first = tensors[0]
    for t, n in zip(tensors[1:], names[1:]):
        if t.dtype != first.dtype:
            raise ThunderTypeError(
                f"{op}: {names[0]} has dtype {first.dtype} and {n} has dtype {t.dtype}; matrix products do not "
                f"promote types (expected both to have the same dtype): convert one, e.g. {n}.to({first.dtype})"
            )
        if t.device != first.device:
            raise ThunderValueError(
                f"{op}: {names[0]} is on {first.device} and {n} is on {t.device}; move them to one device"
            )
    if first.dtype is torch.bool:
        raise ThunderTypeError(
            f"{op}: matrix products are not implemented for bool tensors; convert them to a numeric dtype"
        )


def _check_inner(op: str, a: TensorProxy, b: TensorProxy, names=("a", "b")) -> None:
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if ka != kb:
        raise ThunderValueError(
            f"{op}: {names[0]} has shape {_shape(a.shape)} and {names[1]} has shape {_shape(b.shape)}: "
            f"inner dimensions {ka} and {kb} differ"
        )


def _reshape(a: TensorProxy, shape) -> TensorProxy:
    shape = tuple(shape)
    return a if a.shape == shape else prims.reshape(a, shape)


def _matmul(a: TensorProxy, b: TensorProxy) -> TensorProxy:
    """``torch.matmul`` semantics over validated operands of rank >= 1."""
    if a.ndim > 2 and b.ndim == 2:
        # As torch folds it: the rows of all batches times one matrix, whose gradient is then one
        # product too (a batched product with the matrix broadcast has a batch of them to sum).
        rows = prims.matmul(_reshape(a, (math.prod(a.shape[:-1]), a.shape[-1])), b)
        return _reshape(rows, (*a.shape[:-1], b.shape[-1]))
    a2 = _reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = _reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    batch = broadcast_shapes("ltorch.matmul", a2.shape[:-2], b2.shape[:-2])
    a2 = expand_to(a2, (*batch, *a2.shape[-2:]))
    b2 = expand_to(b2, (*batch, *b2.shape[-2:]))
    out = prims.matmul(a2, b2)
    squeeze = []
    if a.ndim == 1:
        squeeze.append(out.ndim - 2)
    if b.ndim == 1:
        squeeze.append(out.ndim - 1)
    return prims.squeeze(out, tuple(squeeze)) if squeeze else out


@torchsymbol(torch.matmul, method_name=("matmul", "__matmul__"))
def matmul(input, other):
    """``torch.matmul`` / ``@``: dot, matrix-vector, matrix and batched products with batch broadcasting."""
    op = "ltorch.matmul"
    _check_operands(op, ("a", "b"), input, other)
    if input.ndim == 0 or other.ndim == 0:
        raise ThunderValueError(
            f"{op}: both arguments to matmul need to be at least 1D, but they are {input.ndim}D and {other.ndim}D; "
            "use torch.mul (*) to multiply by a scalar"
        )
    _check_inner(op, input, other)
    if input.ndim > 2 and other.ndim > 2:
        broadcast_shapes(op, input.shape[:-2], other.shape[:-2])
    return _matmul(input, other)


register_reflected("__rmatmul__", matmul)


def _check_rank(op: str, name: str, t: TensorProxy, rank: int, what: str) -> None:
    if t.ndim != rank:
        raise ThunderValueError(f"{op}: {name} must be {what} ({rank}-D), but got shape {_shape(t.shape)} ({t.ndim}-D)")


@torchsymbol(torch.mm, method_name="mm")
def mm(input, mat2):
    """``torch.mm``: product of two matrices (no broadcasting)."""
    op = "ltorch.mm"
    _check_operands(op, ("input", "mat2"), input, mat2)
    _check_rank(op, "input", input, 2, "a matrix")
    _check_rank(op, "mat2", mat2, 2, "a matrix")
    _check_inner(op, input, mat2, ("input", "mat2"))
    return prims.matmul(input, mat2)


@torchsymbol(torch.bmm, method_name="bmm")
def bmm(input, mat2):
    """``torch.bmm``: batched product of two 3-D tensors with the same batch size (no broadcasting)."""
    op = "ltorch.bmm"
    _check_operands(op, ("input", "mat2"), input, mat2)
    _check_rank(op, "input", input, 3, "a batch of matrices")
    _check_rank(op, "mat2", mat2, 3, "a batch of matrices")
    if input.shape[0] != mat2.shape[0]:
        raise ThunderValueError(
            f"{op}: input and mat2 must have the same number of batches, but got {input.shape[0]} and {mat2.shape[0]} "
            f"(shapes {_shape(input.shape)} and {_shape(mat2.shape)}); use torch.matmul to broadcast"
        )
    _check_inner(op, input, mat2, ("input", "mat2"))
    return prims.matmul(input, mat2)


@torchsymbol(torch.mv, method_name="mv")
def mv(input, vec):
    """``torch.mv``: matrix times vector."""
    op = "ltorch.mv"
    _check_operands(op, ("input", "vec"), input, vec)
    _check_rank(op, "input", input, 2, "a matrix")
    _check_rank(op, "vec", vec, 1, "a vector")
    _check_inner(op, input, vec, ("input", "vec"))
    return _matmul(input, vec)


@torchsymbol(torch.nn.functional.linear, torch._C._nn.linear)
def linear(input, weight, bias=None):
    """``torch.nn.functional.linear``: ``input @ weight.T + bias``; ``prims.linear`` when bias has shape (out,)."""
    op = "ltorch.linear"
    names, tensors = ("input", "weight"), (input, weight)
    if bias is not None:
        names, tensors = (*names, "bias"), (*tensors, bias)
    _check_operands(op, names, *tensors)
    if input.ndim == 0 or weight.ndim not in (1, 2):
        raise ThunderValueError(
            f"{op}: expected input of rank >= 1 and weight of rank 1 or 2, but got shapes {_shape(input.shape)} and "
            f"{_shape(weight.shape)}"
        )
    if input.shape[-1] != weight.shape[-1]:
        raise ThunderValueError(
            f"{op}: input has shape {_shape(input.shape)} and weight has shape {_shape(weight.shape)}: in_features "
            f"{input.shape[-1]} and {weight.shape[-1]} differ (weight is (out_features, in_features))"
        )
    out_features = weight.shape[:1] if weight.ndim == 2 else ()
    if bias is None or bias.shape == out_features:
        return prims.linear(input, weight, bias)
    out = prims.linear(input, weight, None)
    broadcast_shapes(op, out.shape, bias.shape)
    if len(bias.shape) > out.ndim or broadcast_shapes(op, out.shape, bias.shape) != out.shape:
        raise ThunderValueError(
            f"{op}: bias of shape {_shape(bias.shape)} does not broadcast to the output {_shape(out.shape)}"
        )
    return add(out, bias)


def _scaled_sum(op, input, product, beta, alpha):
    """``beta * input + alpha * product``; ``input`` is ignored when beta is 0 (NaN included), as in PyTorch."""
    if not product.dtype.is_floating_point and not product.dtype.is_complex:
        # eager truncates float scalars toward zero for integer tensors (beta=0.2 drops input)
        beta, alpha = (int(v) if isinstance(v, float) else v for v in (pyval(beta), pyval(alpha)))
    broadcast_shapes(op, product.shape, input.shape)
    if broadcast_shapes(op, product.shape, input.shape) != product.shape:
        raise ThunderValueError(
            f"{op}: input of shape {_shape(input.shape)} does not broadcast to the product's shape {_shape(product.shape)}"
        )
    if pyval(alpha) != 1:
        product = mul(product, alpha)
    if pyval(beta) == 0:
        return product
    scaled = input if pyval(beta) == 1 else mul(input, beta)
    return add(scaled, product)


@torchsymbol(torch.addmm, method_name="addmm")
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``torch.addmm``: ``beta * input + alpha * (mat1 @ mat2)``."""
    op = "ltorch.addmm"
    _check_operands(op, ("input", "mat1", "mat2"), input, mat1, mat2)
    _check_rank(op, "mat1", mat1, 2, "a matrix")
    _check_rank(op, "mat2", mat2, 2, "a matrix")
    _check_inner(op, mat1, mat2, ("mat1", "mat2"))
    return _scaled_sum(op, input, prims.matmul(mat1, mat2), beta, alpha)


@torchsymbol(torch.baddbmm, method_name="baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``torch.baddbmm``: ``beta * input + alpha * bmm(batch1, batch2)``."""
    op = "ltorch.baddbmm"
    _check_operands(op, ("input", "batch1", "batch2"), input, batch1, batch2)
    _check_rank(op, "batch1", batch1, 3, "a batch of matrices")
    _check_rank(op, "batch2", batch2, 3, "a batch of matrices")
    if batch1.shape[0] != batch2.shape[0]:
        raise ThunderValueError(
            f"{op}: batch1 and batch2 must have the same number of batches, but got {batch1.shape[0]} and {batch2.shape[0]}"
        )
    _check_inner(op, batch1, batch2, ("batch1", "batch2"))
    return _scaled_sum(op, input, prims.matmul(batch1, batch2), beta, alpha)


# ----------------------------------------------------------------------------------------
# einsum
# ----------------------------------------------------------------------------------------
# Note [einsum decomposition]
# einsum decomposes (instead of binding a prim that carries the equation) so that fusion
# executors and grad rules see only matmuls, reshapes and sums, which they already handle:
#   1. repeated labels within one operand (a diagonal, "ii->i") become a permute, a reshape
#      and a strided slice;
#   2. labels no later term needs are summed out as early as possible;
#   3. operands are contracted left to right, each pair as one batched ``prims.matmul``
#      over (shared kept labels, own labels, contracted labels);
#   4. the result is permuted into the output order.
# Contracting left to right is not the optimal order for three or more operands (opt_einsum),
# but it is correct; the torch executor runs ``torch.einsum`` itself when it claims the call.


def _reduction_sum(a: TensorProxy, dims: tuple[int, ...]) -> TensorProxy:
    """Sum over ``dims`` in ``a``'s dtype (float32 accumulation for bf16/f16, rounded once)."""
    low = a.dtype in (torch.bfloat16, torch.float16)
    out = prims.sum(prims.convert_element_type(a, torch.float32) if low else a, tuple(dims))
    return prims.convert_element_type(out, a.dtype) if low else out


def _parse_term(op: str, term: str, i: int, t: TensorProxy, ellipsis_labels: list) -> list:
    labels = []
    rest = term
    has_ellipsis = "..." in term
    if term.count("...") > 1:
        raise ThunderValueError(f"{op}: more than one ellipsis in the subscripts of operand {i}: {term!r}")
    for ch in term.replace("...", ""):
        if ch not in string.ascii_letters:
            raise ThunderValueError(
                f"{op}: invalid subscript {ch!r} given in the equation for operand {i}: subscripts must be in [a-zA-Z]"
            )
    nletters = len(rest.replace("...", ""))
    if has_ellipsis:
        if nletters > t.ndim:
            raise ThunderValueError(
                f"{op}: the number of subscripts in the equation ({nletters}) is more than the number of dimensions "
                f"({t.ndim}) for operand {i}"
            )
        n_ell = t.ndim - nletters
        before, after = term.split("...")
        labels = list(before) + ellipsis_labels[len(ellipsis_labels) - n_ell :] + list(after)
    else:
        if nletters != t.ndim:
            raise ThunderValueError(
                f"{op}: the number of subscripts in the equation ({nletters}) does not match the number of dimensions "
                f"({t.ndim}) for operand {i} and no ellipsis was given"
            )
        labels = list(term)
    return labels


def _permute(a: TensorProxy, perm) -> TensorProxy:
    perm = tuple(perm)
    return a if perm == tuple(range(a.ndim)) else prims.transpose(a, perm)


def _take_diagonal(a: TensorProxy, labels: list) -> tuple[TensorProxy, list]:
    """Collapses every repeated label of one operand into its diagonal (step 1 of the note)."""
    while True:
        seen = {}
        pair = None
        for d, lab in enumerate(labels):
            if lab in seen:
                pair = (seen[lab], d)
                break
            seen[lab] = d
        if pair is None:
            return a, labels
        d0, d1 = pair
        n = a.shape[d0]
        if a.shape[d1] != n:
            raise ThunderValueError(
                f"ltorch.einsum: subscript {labels[d0]!r} is repeated for an operand but the sizes don't match, "
                f"{n} != {a.shape[d1]}"
            )
        keep = [d for d in range(a.ndim) if d not in pair]
        a = _permute(a, (*keep, d0, d1))
        a = prims.reshape(a, (*(a.shape[: len(keep)]), n * n))
        batch = a.shape[:-1]
        a = prims.slice_prim(a, (0,) * a.ndim, (*batch, n * n), (*(1,) * len(batch), n + 1))
        labels = [labels[d] for d in keep] + [labels[d0]]


def _sum_labels(a: TensorProxy, labels: list, drop: set) -> tuple[TensorProxy, list]:
    dims = tuple(d for d, lab in enumerate(labels) if lab in drop)
    if not dims:
        return a, labels
    return _reduction_sum(a, dims), [lab for lab in labels if lab not in drop]


def _sublist_equation(op: str, args: tuple) -> tuple[str, tuple]:
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])``: the equation ``"AB,BC->AC"`` and the operands, as eager reads the
    sublist format (subscripts 0-25 are ``A``-``Z``, 26-51 ``a``-``z``; ``...`` is ``Ellipsis``)."""

    def term(sublist, where: str) -> str:
        if not isinstance(sublist, (list, tuple)):
            raise ThunderTypeError(f"{op}: expected a list of subscripts for {where}, got {type(sublist).__name__}")
        out = []
        for s in sublist:
            if s is Ellipsis:
                out.append("...")
                continue
            s = operator.index(s)
            if not 0 <= s < 52:
                raise ThunderValueError(
                    f"{op}: subscript in subscript list is not within the valid range [0, 52), got {s}"
                )
            out.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
        return "".join(out)

    operands = args[0::2][: len(args) // 2]
    terms = [term(sub, f"operand {i}") for i, sub in enumerate(args[1::2])]
    rhs = f"->{term(args[-1], 'the output')}" if len(args) % 2 else ""
    return ",".join(terms) + rhs, tuple(operands)


@torchsymbol(torch.einsum)
def einsum(equation, *operands):
    """``torch.einsum``: see Note [einsum decomposition] for how it becomes matmuls, reshapes and sums."""
    op = "ltorch.einsum"
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        equation, operands = _sublist_equation(op, (equation, *operands))
    if not operands:
        raise ThunderValueError(f"{op}: must provide at least one operand")
    _check_operands(op, tuple(f"operands[{i}]" for i in range(len(operands))), *operands)
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        which = "more" if len(operands) > len(terms) else "fewer"
        raise ThunderValueError(
            f"{op}: {which} operands were provided than specified in the equation {equation!r} "
            f"({len(operands)} tensors for {len(terms)} subscript groups)"
        )
    n_ell = max((t.ndim - len(term.replace("...", "")) for term, t in zip(terms, operands) if "..." in term), default=0)
    ell = [("...", k) for k in range(max(n_ell, 0))]
    labels = [_parse_term(op, term, i, t, ell) for i, (term, t) in enumerate(zip(terms, operands))]

    if arrow:
        if rhs.count("...") > 1:
            raise ThunderValueError(f"{op}: more than one ellipsis in the output subscripts {rhs!r}")
        before, _, after = rhs.partition("...")
        out_labels = list(before) + (ell if "..." in rhs else []) + list(after)
        for ch in rhs.replace("...", ""):
            if ch not in string.ascii_letters:
                raise ThunderValueError(
                    f"{op}: invalid subscript {ch!r} given in the output: subscripts must be in [a-zA-Z]"
                )
            if not any(ch in labs for labs in labels):
                raise ThunderValueError(
                    f"{op}: output subscript {ch} does not appear in the equation for any input operand"
                )
            if rhs.count(ch) > 1:
                raise ThunderValueError(f"{op}: output subscript {ch} appears more than once in the output")
    else:
        counts: dict = {}
        for labs in labels:
            for lab in labs:
                counts[lab] = counts.get(lab, 0) + 1
        used_ell = [e for e in ell if e in counts]
        out_labels = used_ell + sorted(lab for lab, c in counts.items() if c == 1 and isinstance(lab, str))

    # Sizes: a label has one size; size-1 dims broadcast against it.
    sizes: dict = {}
    for i, (labs, t) in enumerate(zip(labels, operands)):
        for lab, n in zip(labs, t.shape):
            cur = sizes.get(lab, 1)
            if n != 1 and cur != 1 and n != cur:
                shown = "..." if isinstance(lab, tuple) else lab
                raise ThunderValueError(
                    f"{op}: operands do not broadcast: subscript {shown!r} has size {cur} in an earlier operand and "
                    f"{n} in operand {i}"
                )
            sizes[lab] = max(cur, n) if n != 1 else cur

    tensors = []
    for t, labs in zip(operands, labels):
        t, labs = _take_diagonal(t, labs)
        tensors.append((t, labs))

    def needed_after(k: int) -> set:
        need = set(out_labels)
        for _, labs in tensors[k + 1 :]:
            need.update(labs)
        return need

    acc, acc_labels = tensors[0]
    if len(tensors) == 1:
        acc, acc_labels = _sum_labels(acc, acc_labels, set(acc_labels) - set(out_labels))
    for k in range(1, len(tensors)):
        b, b_labels = tensors[k]
        later = needed_after(k)
        acc, acc_labels = _sum_labels(acc, acc_labels, {x for x in acc_labels if x not in b_labels and x not in later})
        b, b_labels = _sum_labels(b, b_labels, {x for x in b_labels if x not in acc_labels and x not in later})
        shared = [x for x in acc_labels if x in b_labels]
        batch = [x for x in shared if x in later]
        contract = [x for x in shared if x not in later]
        a_only = [x for x in acc_labels if x not in b_labels]
        b_only = [x for x in b_labels if x not in acc_labels]
        acc = _permute(acc, [acc_labels.index(x) for x in batch + a_only + contract])
        b = _permute(b, [b_labels.index(x) for x in batch + contract + b_only])
        # Broadcast shared labels of size 1 against the other operand.
        acc = expand_to(acc, [*(sizes[x] for x in batch), *acc.shape[len(batch) : len(batch) + len(a_only)],
                              *(sizes[x] for x in contract)])  # fmt: skip
        b = expand_to(b, [*(sizes[x] for x in batch + contract), *b.shape[len(batch) + len(contract) :]])
        bsz = [sizes[x] for x in batch]
        msz = list(acc.shape[len(batch) : len(batch) + len(a_only)])
        ksz = [sizes[x] for x in contract]
        nsz = list(b.shape[len(batch) + len(contract) :])
        prod = math.prod
        out = prims.matmul(
            prims.reshape(acc, (prod(bsz), prod(msz), prod(ksz))), prims.reshape(b, (prod(bsz), prod(ksz), prod(nsz)))
        )
        acc = prims.reshape(out, (*bsz, *msz, *nsz))
        acc_labels = batch + a_only + b_only
    acc, acc_labels = _sum_labels(acc, acc_labels, set(acc_labels) - set(out_labels))
    acc = _permute(acc, [acc_labels.index(x) for x in out_labels])
    # Output labels that only met size-1 dims keep them; those broadcast above take the full size.
    return acc


@grad_rules.register(linear)
def _linear_vjp(g, out, input, weight, bias=None):
    """The decomposition's gradients (``prims.linear``'s rule, and the bias's broadcast summed away)
    except the input's for a weight matrix: one broadcasting ``matmul(g, weight)`` whatever the
    input's rank, as eager's ``g @ w``, where the prim's rule (prims have no broadcasting matmul)
    transposes the weight and runs a ``linear`` (two calls instead of one in every backward)."""
    out_features = weight.shape[:1] if weight.ndim == 2 else ()
    fused_bias = bias is None or bias.shape == out_features
    ga, gw, gb = linalg_prims._linear_grad(g, out, input, weight, bias if fused_bias else None)
    if weight.ndim == 2 and input.ndim > 2 and ga is not None:
        ga = matmul(g, conj(weight))
    if not fused_bias and is_differentiable(bias):
        lead = g.ndim - bias.ndim
        summed = prims.sum(g, (*range(lead), *(lead + i for i, n in enumerate(bias.shape) if n == 1)))
        gb = prims.reshape(summed, bias.shape)
    return (ga, gw, gb) if bias is not None else (ga, gw)


@torchsymbol(torch._grouped_mm)
def grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None):
    """``torch._grouped_mm``: a matmul per group (``offs``: where each group ends along the grouped
    dim) or per batch entry, as mixture-of-experts layers call it; run by eager's kernel, which also
    checks the layouts it supports. (Its meta kernel only knows the GPU's dtypes, so the shapes are
    worked out here.)"""
    op = "ltorch.grouped_mm"
    a, b = self, mat2
    for name, t in (("mat_a", a), ("mat_b", b)):
        if t.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            raise ThunderValueError(f"{op}: Expected {name} to be Float32, BFloat16 or Float16 matrix, got {t.dtype}")
    if a.dtype != b.dtype:
        raise ThunderValueError(f"{op}: Expected mat_a and mat_b of the same dtype, got {a.dtype} and {b.dtype}")
    if (a.ndim, b.ndim) not in ((2, 2), (2, 3), (3, 2), (3, 3)):
        raise ThunderValueError(f"{op}: mat_a and mat_b must be 2-d or 3-d, got {a.ndim}-d and {b.ndim}-d")
    if (offs is None) != (a.ndim == b.ndim == 3):
        raise ThunderValueError(
            f"{op}: Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d"
        )
    if a.shape[-1] != b.shape[-2]:
        raise ThunderValueError(f"{op}: contraction dimension of mat_a and mat_b must match")
    shape = {
        (2, 2): lambda: (offs.shape[0], a.shape[0], b.shape[1]),
        (2, 3): lambda: (a.shape[0], b.shape[2]),
        (3, 2): lambda: (a.shape[1], b.shape[1]),
        (3, 3): lambda: (a.shape[0], a.shape[1], b.shape[2]),
    }[(a.ndim, b.ndim)]()
    return TensorProxy.like(a, shape=shape, dtype=out_dtype or a.dtype, requires_grad=False)


@grad_rules.register(grouped_mm)
def _grouped_mm_vjp(g, out, a, b, offs=None, bias=None, out_dtype=None):
    """For a 2-d input grouped by rows against a 3-d weight (one per group) and for 3-d by 3-d:
    ``g @ b^T`` and ``a^T @ g``, each a grouped matmul with the same groups (the kernel needs ``g``
    dense: a broadcast cotangent is made contiguous)."""
    if bias is not None or out_dtype is not None or (a.ndim, b.ndim) not in ((2, 3), (3, 3)):
        raise ThunderValueError(
            f"ltorch.grouped_mm: the gradient is implemented for a 2-d or 3-d input against a 3-d weight without "
            f"bias or out_dtype, not {a.ndim}-d by {b.ndim}-d (bias={bias is not None}, out_dtype={out_dtype})"
        )
    g = contiguous(g)
    ga = grouped_mm(g, prims.transpose(b, (0, 2, 1)), offs) if is_differentiable(a) else None
    at = prims.transpose(a, (1, 0) if a.ndim == 2 else (0, 2, 1))
    gb = grouped_mm(at, g, offs) if is_differentiable(b) else None
    return ga, gb, None


__all__ += ["grouped_mm"]
