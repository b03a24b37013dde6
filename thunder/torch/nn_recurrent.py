"""Recurrent layers: ``torch.lstm``, ``torch.gru``, ``torch.rnn_tanh``, ``torch.rnn_relu`` (what
``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` call with their flat weights) and the cells
``torch.lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell`` (``nn.LSTMCell``, ...).

Note [Recurrent layers]
Each is a symbol whose torch implementation is eager's fused op and whose decomposition is
the recurrence written with torch-language symbols, the way ATen's CPU implementation runs
it (``aten/src/ATen/native/RNN.cpp``): per layer and direction, the input projection of all
time steps at once (``linear(x, w_ih, b_ih)``), then one cell per step on the hidden state; a
reverse direction walks the steps backwards and its outputs are put back in time order and
concatenated after the forward direction's; between layers (not after the last) training
with ``dropout > 0`` applies ``F.dropout`` to the layer's output, which on CPU draws what
eager draws (elsewhere eager's fused kernel draws its own masks: refused with a clear error). The gradient is the decomposition's (linear, sigmoid, tanh, ... have rules), so
there is no opaque backward.

Packed sequences (``torch.lstm(data, batch_sizes, hx, params, ...)``, what the modules call with a
``PackedSequence``) read ``batch_sizes`` from the data where the call is traced (a checked
data-dependent outcome: other lengths trace again) and run the symbols ``lstm_packed``, ...,
whose decomposition is ATen's packed layer: step ``t`` takes the next ``batch_sizes[t]`` rows of
the data; forwards the batch shrinks as sequences end (each keeps the state of its last step),
backwards it grows, the rows of the sequences that start joining with their initial state.
``nn.utils.rnn``'s packing and padding inside the function (``pack_padded_sequence``, ``pad_packed_sequence``,
``pack_sequence``, ``pad_sequence``) are ATen's, written with torch-language symbols, the lengths read the same way.

The modules' forward first calls ``RNNBase._update_flat_weights``, which compares the weakrefs
it keeps of its flat weights with the registered parameters and, when they differ, rebuilds
``self._flat_weights`` (an attribute store). Traced, the parameters are proxies, never the
objects the weakrefs point to, so it would always rebuild, and storing the parameters in a
module attribute makes them leave the computation (the autograd split then falls back to
torch's autograd). It runs natively instead, on the real module: what eager does in the same
forward.

Layer: language. Imports: core, torch.base, torch.elementwise, torch.factories, torch.linalg, torch.shape,
torch.nn_activations, torch.nn_utils.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from thunder.core.errors import ThunderTypeError, ThunderValueError, UnsupportedOpError
from thunder.core.proxies import TensorProxy, pyval
from thunder.torch.base import torch_to_thunder_map, torchsymbol
from thunder.torch.elementwise import add, mul, sigmoid, sub, tanh
from thunder.torch.factories import full
from thunder.torch.factories import tensor as ltorch_tensor
from thunder.torch.linalg import linear
from thunder.torch.nn_activations import relu
from thunder.torch.nn_utils import check_float
from thunder.torch.shape import cat, chunk, narrow, split, stack, transpose, unbind

__all__ = [
    "lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_packed", "gru_packed", "rnn_tanh_packed", "rnn_relu_packed",
    "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
]  # fmt: skip


def _update_flat_weights(module: nn.RNNBase) -> None:
    """``RNNBase._update_flat_weights`` run natively (Note [Recurrent layers])."""
    nn.RNNBase._update_flat_weights(module)


torch_to_thunder_map[nn.RNNBase._update_flat_weights] = _update_flat_weights


# ----------------------------------------------------------------------------------------
# cells: ``x_w`` is the input's projection ``linear(x, w_ih, b_ih)``
# ----------------------------------------------------------------------------------------


def _lstm_step(x_w, h, c, w_hh, b_hh, w_hr):
    i, f, g, o = chunk(add(linear(h, w_hh, b_hh), x_w), 4, 1)
    c = add(mul(sigmoid(f), c), mul(sigmoid(i), tanh(g)))
    h = mul(sigmoid(o), tanh(c))
    return (h if w_hr is None else linear(h, w_hr)), c


def _gru_step(x_w, h, w_hh, b_hh):
    x_r, x_z, x_n = chunk(x_w, 3, 1)
    h_r, h_z, h_n = chunk(linear(h, w_hh, b_hh), 3, 1)
    r = sigmoid(add(h_r, x_r))
    z = sigmoid(add(h_z, x_z))
    n = tanh(add(x_n, mul(h_n, r)))
    return add(mul(sub(h, n), z), n)


def _simple_step(activation):
    def step(x_w, h, w_hh, b_hh):
        return activation(add(linear(h, w_hh, b_hh), x_w))

    return step


_STEPS = {"lstm": _lstm_step, "gru": _gru_step, "rnn_tanh": _simple_step(tanh), "rnn_relu": _simple_step(relu)}


# ----------------------------------------------------------------------------------------
# the full layers
# ----------------------------------------------------------------------------------------


def _layer_weights(weights: list, has_biases: bool):
    """(w_ih, w_hh, b_ih, b_hh, w_hr) of one layer and direction (None where absent)."""
    b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
    n = 4 if has_biases else 2
    return weights[0], weights[1], b_ih, b_hh, weights[n] if len(weights) > n else None


def _cell(kind: str, w_hh, b_hh, w_hr):
    """One step on the state ``[h]`` (``[h, c]`` for lstm), given the step's input projection."""

    def step(x_w, state: list) -> list:
        if kind == "lstm":
            return list(_lstm_step(x_w, state[0], state[1], w_hh, b_hh, w_hr))
        return [_STEPS[kind](x_w, state[0], w_hh, b_hh)]

    return step


def _direction(kind: str, x, state: list, weights: list, has_biases: bool, reverse: bool):
    """One layer, one direction over ``x`` (time, batch, features): (outputs in time order, final state)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = _layer_weights(weights, has_biases)
    step = _cell(kind, w_hh, b_hh, w_hr)
    steps = unbind(linear(x, w_ih, b_ih), 0)
    outputs = []
    for x_w in reversed(steps) if reverse else steps:
        state = step(x_w, state)
        outputs.append(state[0])
    if reverse:
        outputs.reverse()
    return stack(outputs, 0), state


def _packed_direction(kind: str, x, state: list, weights: list, has_biases: bool, reverse: bool, batch_sizes):
    """One layer, one direction over packed ``x`` (``batch_sizes[t]`` rows at step ``t``), as ATen's
    packed layers: (the outputs, packed alike; the final state, each sequence's after its last step)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = _layer_weights(weights, has_biases)
    step = _cell(kind, w_hh, b_hh, w_hr)
    steps = split(linear(x, w_ih, b_ih), list(batch_sizes), 0)
    outputs = []
    if not reverse:
        ended, last = [], batch_sizes[0]
        for x_w, n in zip(steps, batch_sizes):
            if n < last:  # the last rows' sequences have ended: their state is final
                ended.append([narrow(s, 0, n, last - n) for s in state])
                state = [narrow(s, 0, 0, n) for s in state]
            last = n
            state = step(x_w, state)
            outputs.append(state[0])
        ended.append(state)
        final = [cat([e[i] for e in reversed(ended)], 0) for i in range(len(state))]
    else:
        initial, last = state, batch_sizes[-1]
        state = [narrow(s, 0, 0, last) for s in initial]
        for x_w, n in zip(reversed(steps), reversed(batch_sizes)):
            if n > last:  # the sequences that end here start: their rows join with their initial state
                state = [cat([s, narrow(s0, 0, last, n - last)], 0) for s, s0 in zip(state, initial)]
            last = n
            state = step(x_w, state)
            outputs.append(state[0])
        outputs.reverse()
        final = state
    return cat(outputs, 0), final


def _rnn(kind: str, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
         batch_sizes: tuple[int, ...] | None = None):  # fmt: skip
    """The layers over ``input`` (time, batch, features), or over packed data with ``batch_sizes``."""
    packed = batch_sizes is not None
    op = f"ltorch.{kind}_packed" if packed else f"ltorch.{kind}"
    if not packed and (isinstance(hx, TensorProxy) == (kind == "lstm") or isinstance(params, TensorProxy)):
        raise UnsupportedOpError(
            f"{op}: got a packed sequence's arguments (data, batch_sizes, hx, ...): call torch.{kind} inside "
            f"thunder.jit, which reads batch_sizes, or ltorch.{kind}_packed with batch_sizes as ints"
        )
    check_float(op, "input", input)
    if input.ndim != (2 if packed else 3):
        raise ThunderValueError(f"{op}: input must have {2 if packed else 3} dimensions, got {input.ndim}")
    has_biases, bidirectional = bool(pyval(has_biases)), bool(pyval(bidirectional))
    batch_first = bool(pyval(batch_first)) and not packed
    num_layers, dropout, train = int(pyval(num_layers)), float(pyval(dropout)), bool(pyval(train))
    if dropout > 0 and train and num_layers > 1 and input.device.type != "cpu":
        # eager's cuDNN kernel draws its dropout masks from its own generator state
        raise UnsupportedOpError(
            f"{op}: dropout={dropout} in training on {input.device} is not supported (eager's fused kernel draws the "
            "masks with its own random state, which thunder cannot reproduce); use dropout=0 or run on CPU"
        )
    params = list(params)
    dirs = 2 if bidirectional else 1
    if len(params) % (num_layers * dirs):
        raise ThunderValueError(f"{op}: got {len(params)} weights for {num_layers} layer(s) of {dirs} direction(s)")
    per = len(params) // (num_layers * dirs)
    if per not in ((4, 5) if has_biases else (2, 3)) or (per % 2 and kind != "lstm"):
        raise ThunderValueError(f"{op}: got {len(params)} weights for {num_layers} layer(s) of {dirs} direction(s)")
    h0, c0 = (hx[0], hx[1]) if kind == "lstm" else (hx, None)
    for name, t in (("hx", h0), ("cx", c0)):
        if t is not None and t.dtype != input.dtype:
            raise ThunderTypeError(f"{op}: {name} has dtype {t.dtype}, but input has dtype {input.dtype}")
    if packed and (not batch_sizes or h0.shape[1] != batch_sizes[0]):
        raise ThunderValueError(
            f"{op}: batch_sizes {list(batch_sizes)} must start with hx's batch size {h0.shape[1]}"
        )
    h0s = unbind(h0, 0)
    c0s = unbind(c0, 0) if c0 is not None else None
    x = transpose(input, 0, 1) if batch_first else input
    finals = []
    for layer in range(num_layers):
        outputs = []
        for d in range(dirs):
            i = layer * dirs + d
            state = [h0s[i]] if c0s is None else [h0s[i], c0s[i]]
            weights = params[i * per : (i + 1) * per]
            if packed:
                out, state = _packed_direction(kind, x, state, weights, has_biases, d == 1, batch_sizes)
            else:
                out, state = _direction(kind, x, state, weights, has_biases, d == 1)
            outputs.append(out)
            finals.append(state)
        x = cat(outputs, x.ndim - 1) if dirs == 2 else outputs[0]
        if dropout > 0 and train and layer < num_layers - 1:
            from thunder.torch.nn import dropout as _dropout  # nn.py imports this module

            x = _dropout(x, dropout, True)
    output = transpose(x, 0, 1) if batch_first else x
    return (output, *(stack([f[i] for f in finals], 0) for i in range(len(finals[0]))))


@torchsymbol(torch.lstm)
def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``torch.lstm`` (``nn.LSTM``, ``proj_size`` included): (output, h_n, c_n); see Note [Recurrent layers]."""
    return _rnn("lstm", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


@torchsymbol(torch.gru)
def gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``torch.gru`` (``nn.GRU``): (output, h_n); see Note [Recurrent layers]."""
    return _rnn("gru", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


@torchsymbol(torch.rnn_tanh)
def rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``torch.rnn_tanh`` (``nn.RNN``): (output, h_n); see Note [Recurrent layers]."""
    return _rnn("rnn_tanh", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


@torchsymbol(torch.rnn_relu)
def rnn_relu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``torch.rnn_relu`` (``nn.RNN(nonlinearity="relu")``): (output, h_n); see Note [Recurrent layers]."""
    return _rnn("rnn_relu", input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


def _packed_symbol(kind: str, torch_fn):
    """``ltorch.<kind>_packed(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
    bidirectional)`` with ``batch_sizes`` as ints; its torch implementation is eager's packed call."""

    def impl(input, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional):
        return torch_fn(input, torch.tensor(batch_sizes), hx, params, has_biases, num_layers, dropout, train,
                        bidirectional)  # fmt: skip

    def meta(input, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional):
        sizes = tuple(pyval(n) for n in batch_sizes)
        if not all(isinstance(n, int) for n in sizes):
            raise ThunderTypeError(f"ltorch.{kind}_packed: batch_sizes must be ints, got {batch_sizes!r}")
        return _rnn(kind, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, False, sizes)

    meta.__name__ = f"{kind}_packed"
    meta.__doc__ = f"``torch.{kind}`` on a packed sequence (Note [Recurrent layers])."
    return torchsymbol(id=f"torch.{kind}_packed", torch_impl=impl)(meta)


lstm_packed = _packed_symbol("lstm", torch.lstm)
gru_packed = _packed_symbol("gru", torch.gru)
rnn_tanh_packed = _packed_symbol("rnn_tanh", torch.rnn_tanh)
rnn_relu_packed = _packed_symbol("rnn_relu", torch.rnn_relu)


def _reading_batch_sizes(sym, packed_sym):
    """``torch.<kind>`` in a trace: with a packed sequence's arguments (``batch_sizes`` a tensor, then
    hx), ``packed_sym`` with ``batch_sizes`` read as ints here (a symbol's meta cannot read values)."""

    def call(input, *args, **kwargs):
        if len(args) > 1 and isinstance(args[0], TensorProxy) and (sym is lstm or isinstance(args[1], TensorProxy)):
            return packed_sym(input, tuple(args[0].tolist()), *args[1:], **kwargs)
        return sym(input, *args, **kwargs)

    call.__name__ = call.__qualname__ = sym.name
    call.__doc__ = f"``ltorch.{sym.name}``, or ``ltorch.{packed_sym.name}`` for a packed sequence."
    return call


for _sym, _packed, _fn in ((lstm, lstm_packed, torch.lstm), (gru, gru_packed, torch.gru),
                           (rnn_tanh, rnn_tanh_packed, torch.rnn_tanh), (rnn_relu, rnn_relu_packed, torch.rnn_relu)):  # fmt: skip
    torch_to_thunder_map[_fn] = _reading_batch_sizes(_sym, _packed)


def _pack_padded_sequence(input, lengths, batch_first: bool):
    """``torch._VF._pack_padded_sequence`` (``nn.utils.rnn.pack_padded_sequence``): ``lengths`` read as ints (a checked
    data-dependent outcome, as a packed layer's ``batch_sizes``: other lengths trace again), then ATen's packing:
    the rows of each time step whose sequence still runs, step after step, and how many there are."""
    if not isinstance(lengths, TensorProxy) or lengths.ndim != 1 or lengths.dtype is not torch.int64 or lengths.device.type != "cpu":
        got = f"{lengths.ndim}D {lengths.device.type} {lengths.dtype}" if isinstance(lengths, TensorProxy) else type(lengths).__name__
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got {got} tensor")
    steps = transpose(input, 0, 1) if batch_first else input
    sizes = lengths.tolist()
    if len(sizes) != steps.shape[1]:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(sizes)} (batch_size={steps.shape[1]})"
        )
    if any(a < b for a, b in zip(sizes, sizes[1:])):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
            "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement if you "
            "do not need ONNX exportability."
        )
    if sizes[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0")
    if sizes[0] > steps.shape[0]:  # (eager reads past the input's end)
        raise ValueError(f"pack_padded_sequence: a length is {sizes[0]}, longer than the input's {steps.shape[0]} steps")
    batch_sizes = [sum(n > t for n in sizes) for t in range(sizes[0])]
    data = cat([narrow(steps[t], 0, 0, n) for t, n in enumerate(batch_sizes)], 0)
    return data, ltorch_tensor(batch_sizes, dtype=torch.int64, device="cpu")


def _pad_packed_sequence(data, batch_sizes, batch_first: bool, padding_value, total_length: int):
    """``torch._VF._pad_packed_sequence`` (``nn.utils.rnn.pad_packed_sequence``): ``batch_sizes`` read as ints, then
    ATen's padding: each step's rows, padded to the batch with ``padding_value``, steps stacked (time first, then
    transposed for ``batch_first``, a view as eager's), and each sequence's length."""
    sizes = batch_sizes.tolist()
    steps = len(sizes)
    if total_length > 0:
        if total_length < steps:
            raise RuntimeError(
                f"Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {steps}"
            )
        steps = total_length
    batch, rows, feature = sizes[0], split(data, sizes, 0), tuple(data.shape[1:])
    padded = [r if n == batch else cat([r, full((batch - n, *feature), padding_value, dtype=data.dtype, device=data.device)], 0) for r, n in zip(rows, sizes)]  # fmt: skip
    padded += [full((batch, *feature), padding_value, dtype=data.dtype, device=data.device)] * (steps - len(sizes))
    output = stack(padded, 0)
    lengths = [sum(n > b for n in sizes) for b in range(batch)]
    return (transpose(output, 0, 1) if batch_first else output), ltorch_tensor(lengths, dtype=torch.int64)


def _pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """``torch._C._nn.pad_sequence`` (``nn.utils.rnn.pad_sequence``): each sequence padded to the longest with
    ``padding_value`` (after it, or before it for ``padding_side="left"``), stacked along the batch."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        if tuple(s.shape[1:]) != tuple(sequences[0].shape[1:]):
            raise RuntimeError(f"pad_sequence: sequences of trailing shapes {tuple(sequences[0].shape[1:])} and {tuple(s.shape[1:])}")
        if s.shape[0] < longest:
            pad = full((longest - s.shape[0], *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


torch_to_thunder_map[torch._C._nn.pad_sequence] = _pad_sequence
torch_to_thunder_map[torch._C._VariableFunctions._pack_padded_sequence] = _pack_padded_sequence
torch_to_thunder_map[torch._C._VariableFunctions._pad_packed_sequence] = _pad_packed_sequence


def _check_cell(op: str, input, hidden: list) -> None:
    check_float(op, "input", input)
    if input.ndim != 2:
        raise ThunderValueError(f"{op}: input must be 2-D (batch, input_size), got shape {list(input.shape)}")
    for h in hidden:
        if h.dtype != input.dtype:
            raise ThunderTypeError(f"{op}: the hidden state has dtype {h.dtype}, but input has dtype {input.dtype}")


@torchsymbol(torch.lstm_cell)
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.lstm_cell`` (``nn.LSTMCell``): (h, c) after one step."""
    _check_cell("ltorch.lstm_cell", input, list(hx))
    return _lstm_step(linear(input, w_ih, b_ih), hx[0], hx[1], w_hh, b_hh, None)


@torchsymbol(torch.gru_cell)
def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.gru_cell`` (``nn.GRUCell``): h after one step."""
    _check_cell("ltorch.gru_cell", input, [hx])
    return _gru_step(linear(input, w_ih, b_ih), hx, w_hh, b_hh)


@torchsymbol(torch.rnn_tanh_cell)
def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.rnn_tanh_cell`` (``nn.RNNCell``): h after one step."""
    _check_cell("ltorch.rnn_tanh_cell", input, [hx])
    return _STEPS["rnn_tanh"](linear(input, w_ih, b_ih), hx, w_hh, b_hh)


@torchsymbol(torch.rnn_relu_cell)
def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.rnn_relu_cell`` (``nn.RNNCell(nonlinearity="relu")``): h after one step."""
    _check_cell("ltorch.rnn_relu_cell", input, [hx])
    return _STEPS["rnn_relu"](linear(input, w_ih, b_ih), hx, w_hh, b_hh)
