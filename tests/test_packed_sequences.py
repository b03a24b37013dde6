"""``nn.utils.rnn``'s packing and padding inside a jitted function (Note [Recurrent layers] in
thunder.torch.nn_recurrent), against eager: values, strides, gradients of the input and of every parameter,
eager's errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.nn.utils import rnn

import thunder


class _Packed(nn.Module):
    def __init__(self, cell: type, batch_first: bool, enforce_sorted: bool, total_length: int | None) -> None:
        super().__init__()
        self.rnn = cell(4, 6, num_layers=2, batch_first=batch_first, bidirectional=True)
        self.batch_first, self.enforce_sorted, self.total_length = batch_first, enforce_sorted, total_length

    def forward(self, x, lengths):
        packed = rnn.pack_padded_sequence(x, lengths, batch_first=self.batch_first, enforce_sorted=self.enforce_sorted)
        out, hidden = self.rnn(packed)
        out, out_lengths = rnn.pad_packed_sequence(out, batch_first=self.batch_first, total_length=self.total_length)
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden
        return out, hidden, out_lengths


@pytest.mark.parametrize(
    "cell, batch_first, enforce_sorted, total_length, lengths",
    [
        (nn.GRU, True, False, None, [[5, 2, 3], [5, 2, 3], [4, 4, 1]]),
        (nn.LSTM, True, True, None, [[5, 3, 2], [4, 2, 2]]),
        (nn.RNN, False, False, 7, [[5, 2, 3], [3, 3, 3]]),
    ],
)
def test_a_recurrent_model_on_sequences_it_packs_itself(cell, batch_first, enforce_sorted, total_length, lengths):
    torch.manual_seed(0)
    eager = _Packed(cell, batch_first, enforce_sorted, total_length)
    copy = _Packed(cell, batch_first, enforce_sorted, total_length)
    copy.load_state_dict(eager.state_dict())
    jitted = thunder.jit(copy)
    for i, lens in enumerate(lengths):
        torch.manual_seed(i)
        x = torch.randn((3, 5, 4) if batch_first else (5, 3, 4), requires_grad=True)
        x2 = x.detach().clone().requires_grad_(True)
        expected, got = eager(x, torch.tensor(lens)), jitted(x2, torch.tensor(lens))
        for e, g in zip(expected, got):
            assert (g.shape, g.dtype, g.stride()) == (e.shape, e.dtype, e.stride())
        torch.testing.assert_close(got, expected)
        (expected[0].sum() + expected[1].sum()).backward()
        (got[0].sum() + got[1].sum()).backward()
        torch.testing.assert_close(x2.grad, x.grad)
        for (name, p), q in zip(eager.named_parameters(), copy.parameters()):
            torch.testing.assert_close(q.grad, p.grad, msg=name)
    assert thunder.cache_misses(jitted) == len({tuple(lens) for lens in lengths})  # the lengths are values it reads


def test_pad_pack_unpack_of_a_list_of_sequences():
    def f(a, b, c):
        right = rnn.pad_sequence([a, b, c], batch_first=True, padding_value=-1.0)
        left = rnn.pad_sequence([a, b, c], padding_side="left")
        packed = rnn.pack_sequence([a, b, c], enforce_sorted=False)
        lengths = torch.tensor([a.shape[0], b.shape[0], c.shape[0]])
        return right, left, packed.data, packed.batch_sizes, rnn.unpack_sequence(packed), rnn.unpad_sequence(right, lengths, batch_first=True)

    args = [torch.randn(n, 3, requires_grad=True) for n in (2, 5, 3)]
    expected, got = f(*args), thunder.jit(f)(*args)
    torch.testing.assert_close(list(got), list(expected))
    assert [t.stride() for t in got[:4]] == [t.stride() for t in expected[:4]]


@pytest.mark.parametrize(
    "lengths, message",
    [
        ([5, 0, 3], "must be sorted in decreasing order"),
        ([5, 3, 0], "has to be greater than 0"),
        ([5, 3], "to be equal to batch_size"),
    ],
)
def test_bad_lengths_are_eager_s_errors(lengths, message):
    def f(x, lengths):
        return rnn.pack_padded_sequence(x, lengths, batch_first=True).data

    x = torch.randn(3, 5, 2)
    with pytest.raises(RuntimeError, match=message):
        f(x, torch.tensor(lengths))
    with pytest.raises(RuntimeError, match=message):
        thunder.jit(f)(x, torch.tensor(lengths))
