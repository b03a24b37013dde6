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
there is no opaque backward. Packed sequences are not supported (a clear error).

The modules' forward first calls ``RNNBase._update_flat_weights``, which compares the weakrefs
it keeps of its flat weights with the registered parameters and, when they differ, rebuilds
``self._flat_weights`` (an attribute store). Traced, the parameters are proxies, never the
objects the weakrefs point to, so it would always rebuild, and storing the parameters in a
module attribute makes them leave the computation (the autograd split then falls back to
torch's autograd). It runs natively instead, on the real module: what eager does in the same
forward.

Layer: language. Imports: core, torch.base, torch.elementwise, torch.linalg, torch.shape,
torch.nn_activations, torch.nn_utils.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from thunder.core.errors import ThunderTypeError, ThunderValueError, UnsupportedOpError
from thunder.core.proxies import TensorProxy, pyval
from thunder.torch.base import torch_to_thunder_map, torchsymbol
from thunder.torch.elementwise import add, mul, sigmoid, sub, tanh
from thunder.torch.linalg import linear
from thunder.torch.nn_activations import relu
from thunder.torch.nn_utils import check_float
from thunder.torch.shape import cat, chunk, stack, transpose, unbind

__all__ = ["lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"]


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


def _direction(kind: str, x, h, c, weights: list, has_biases: bool, reverse: bool):
    """One layer, one direction over ``x`` (time, batch, features): (outputs in time order, h, c)."""
    w_ih, w_hh = weights[0], weights[1]
    b_ih, b_hh = (weights[2], weights[3]) if has_biases else (None, None)
    w_hr = weights[4 if has_biases else 2] if len(weights) > (4 if has_biases else 2) else None
    steps = unbind(linear(x, w_ih, b_ih), 0)
    outputs = []
    for x_w in reversed(steps) if reverse else steps:
        if kind == "lstm":
            h, c = _lstm_step(x_w, h, c, w_hh, b_hh, w_hr)
        else:
            h = _STEPS[kind](x_w, h, w_hh, b_hh)
        outputs.append(h)
    if reverse:
        outputs.reverse()
    return stack(outputs, 0), h, c


def _rnn(kind: str, input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    op = f"ltorch.{kind}"
    if isinstance(hx, TensorProxy) == (kind == "lstm") or isinstance(params, TensorProxy):
        raise UnsupportedOpError(
            f"{op}: packed sequences (torch.nn.utils.rnn.PackedSequence) are not supported; pad the batch "
            "(pad_packed_sequence) and pass a tensor instead"
        )
    check_float(op, "input", input)
    if input.ndim != 3:
        raise ThunderValueError(f"{op}: input must have 3 dimensions, got {input.ndim}")
    has_biases, bidirectional, batch_first = (
        bool(pyval(has_biases)),
        bool(pyval(bidirectional)),
        bool(pyval(batch_first)),
    )
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
    h0s = unbind(h0, 0)
    c0s = unbind(c0, 0) if c0 is not None else [None] * len(h0s)
    x = transpose(input, 0, 1) if batch_first else input
    hs, cs = [], []
    for layer in range(num_layers):
        outputs = []
        for d in range(dirs):
            i = layer * dirs + d
            out, h, c = _direction(kind, x, h0s[i], c0s[i], params[i * per : (i + 1) * per], has_biases, d == 1)
            outputs.append(out)
            hs.append(h)
            cs.append(c)
        x = cat(outputs, 2) if dirs == 2 else outputs[0]
        if dropout > 0 and train and layer < num_layers - 1:
            from thunder.torch.nn import dropout as _dropout  # nn.py imports this module

            x = _dropout(x, dropout, True)
    output = transpose(x, 0, 1) if batch_first else x
    if kind == "lstm":
        return output, stack(hs, 0), stack(cs, 0)
    return output, stack(hs, 0)


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
