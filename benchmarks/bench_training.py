"""Training steps (forward + backward) under thunder.jit against eager PyTorch.

Run: ``python benchmarks/bench_training.py [--runs N] [--threads T] [--models mlp,gpt2,...]``.
One process; thunder and eager alternate run by run and the tables give medians and ratios
measured in the same run.

For each model (an MLP, a conv net with BatchNorm in train mode, and tiny GPT-2, Llama and BERT
configs with random weights, batch 4, sequence 32, hidden 64, vocabulary 256; dropout off):

- steady state: the median of ``--runs`` forward + ``loss.backward()`` steps (gradients set to
  None before each), thunder's cached call against eager, in wall-clock time and in CPU time of
  the process (``time.process_time``). With the default single thread the CPU time is the
  wall-clock time less the time the process was preempted: on a loaded machine wall-clock
  samples are bimodal (an uncontended step, or one several times longer), and even eager
  against itself gives medians that differ by 2-3x, while the CPU-time medians stay stable;
- first call: a fresh ``thunder.jit``'s first forward (acquiring the trace, the passes, the
  autograd split, codegen, the run) and its first backward, in ms;
- memory: on CUDA, ``torch.cuda.max_memory_allocated`` over one forward + backward; on CPU
  (where no allocator statistics exist) the bytes of the tensors autograd keeps from the forward
  for the backward, counted with ``torch.autograd.graph.saved_tensors_hooks`` (each saved tensor's
  storage once, by its data pointer) for both eager and thunder (whose autograd function saves
  through the same hooks), with and without the parameters saved by reference (alive anyway),
  next to ``thunder.compile_stats(jm).last_saved_for_backward_bytes``;
- whether thunder's own backward ran (``compile_stats(jm).last_autograd_fallback``).

Then the cached training call of ``a + b`` on two 2x2 tensors that require grad: the call only,
and the call with ``.sum().backward()``, in microseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import thunder

BATCH, SEQ, HIDDEN, VOCAB = 4, 32, 64, 256


def _mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 10)
    )


def _conv_net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(32 * 16 * 16, 10),
    )  # fmt: skip


def _hf(name):
    import transformers

    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=HIDDEN, vocab_size=VOCAB, n_positions=SEQ,
                                      bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                                      attn_pdrop=0.0)  # fmt: skip
        return transformers.GPT2LMHeadModel(cfg)
    if name == "llama":
        cfg = transformers.LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                       hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, vocab_size=VOCAB,
                                       max_position_embeddings=SEQ)  # fmt: skip
        return transformers.LlamaForCausalLM(cfg)
    cfg = transformers.BertConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=HIDDEN,
                                  intermediate_size=2 * HIDDEN, vocab_size=VOCAB, max_position_embeddings=SEQ,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
    return transformers.BertForMaskedLM(cfg)


class Case:
    """A model, its inputs, and how a training step computes the loss."""

    def __init__(self, name: str, device: torch.device):
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(1)
        if name == "mlp":
            model, x, target = _mlp(), torch.randn(64, 256, generator=g), torch.randint(0, 10, (64,), generator=g)
        elif name == "conv_net":
            model, x = _conv_net(), torch.randn(BATCH, 3, 32, 32, generator=g)
            target = torch.randint(0, 10, (BATCH,), generator=g)
        else:
            model, x, target = _hf(name), torch.randint(0, VOCAB, (BATCH, SEQ), generator=g), None
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        self.name = name
        self.model = model.to(device).train()
        self.x = x.to(device)
        self.target = None if target is None else target.to(device)
        self.hf = target is None

    def loss(self, m):
        if self.hf:
            return m(self.x, labels=self.x).loss
        return F.cross_entropy(m(self.x), self.target)

    def step(self, m):
        for p in self.model.parameters():
            p.grad = None
        self.loss(m).backward()


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time_ms(fn, device) -> float:
    return _times_ms(fn, device)[0]


def _times_ms(fn, device) -> tuple[float, float]:
    """Wall-clock and CPU (process) time of one call, in ms."""
    _sync(device)
    start, cpu = time.perf_counter_ns(), time.process_time_ns()
    fn()
    _sync(device)
    return (time.perf_counter_ns() - start) / 1e6, (time.process_time_ns() - cpu) / 1e6


def steady_state_ms(case: Case, jm, runs: int, device) -> tuple[float, float, float, float]:
    """Medians of alternating eager and thunder steps: eager and thunder wall clock, eager and thunder CPU time."""
    for _ in range(3):
        case.step(case.model)
        case.step(jm)
    eager, jit = [], []
    for _ in range(runs):
        eager.append(_times_ms(lambda: case.step(case.model), device))
        jit.append(_times_ms(lambda: case.step(jm), device))
    return (statistics.median(e for e, _ in eager), statistics.median(j for j, _ in jit),
            statistics.median(c for _, c in eager), statistics.median(c for _, c in jit))  # fmt: skip


def first_call_ms(case: Case, device) -> tuple[float, float, object]:
    """The first forward and first backward of a fresh jit; returns them and the jitted model."""
    jm = thunder.jit(case.model)
    for p in case.model.parameters():
        p.grad = None
    holder = []
    forward = _time_ms(lambda: holder.append(case.loss(jm)), device)
    backward = _time_ms(lambda: holder[0].backward(), device)
    return forward, backward, jm


def saved_bytes(case: Case, m) -> tuple[int, int]:
    """Bytes autograd saves for the backward of one forward (each storage once): all, and without parameters."""
    storages: dict[int, int] = {}

    def pack(t):
        if t.layout == torch.strided:
            s = t.untyped_storage()
            storages[s.data_ptr()] = max(storages.get(s.data_ptr(), 0), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = case.loss(m)
    params = {p.untyped_storage().data_ptr() for p in case.model.parameters()}
    loss.backward()
    for p in case.model.parameters():
        p.grad = None
    total = sum(storages.values())
    return total, total - sum(n for ptr, n in storages.items() if ptr in params)


def peak_cuda_bytes(case: Case, m, device) -> int:
    for p in case.model.parameters():
        p.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    case.loss(m).backward()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated(device) - base


def median_call_us(fn, *, batch: int, repeats: int = 21) -> tuple[float, float]:
    """Median time of one call in microseconds, timed in batches: wall clock and CPU (process) time."""
    for _ in range(100):
        fn()
    wall, cpu = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter_ns(), time.process_time_ns()
        for _ in range(batch):
            fn()
        wall.append((time.perf_counter_ns() - start) / batch / 1e3)
        cpu.append((time.process_time_ns() - cpu_start) / batch / 1e3)
    return statistics.median(wall), statistics.median(cpu)


def add(a, b):
    return a + b


def add_rows() -> list[list[str]]:
    a, b = torch.randn(2, 2, requires_grad=True), torch.randn(2, 2, requires_grad=True)
    jadd = thunder.jit(add)
    jadd(a, b)
    assert thunder.compile_stats(jadd).last_autograd_fallback is None

    def call(f):
        return lambda: f(a, b)

    def train(f):
        def step():
            a.grad = b.grad = None
            f(a, b).sum().backward()

        return step

    rows = []
    for label, wrap, batch in (("a + b, call only", call, 2000), ("a + b, call + .sum().backward()", train, 500)):
        eager_us, jit_us = [], []
        for _ in range(3):  # alternating rounds; the median of each's medians
            eager_us.append(median_call_us(wrap(add), batch=batch))
            jit_us.append(median_call_us(wrap(jadd), batch=batch))
        e, j = (statistics.median(w for w, _ in eager_us), statistics.median(w for w, _ in jit_us))
        ec, jc = (statistics.median(c for _, c in eager_us), statistics.median(c for _, c in jit_us))
        rows.append([label, f"{e:.1f}", f"{j:.1f}", f"{j / e:.2f}x", f"{ec:.1f}", f"{jc:.1f}", f"{jc / ec:.2f}x"])
    assert thunder.cache_misses(jadd) == 1
    return rows


def _kib(n) -> str:
    return "-" if n is None else f"{n / 1024:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=31, help="alternating steady-state runs per model")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--models", default="mlp,conv_net,gpt2,llama,bert")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    device = torch.device(opts.device)
    print(f"torch {torch.__version__}, device {device}, {torch.get_num_threads()} thread(s), {opts.runs} runs\n")

    speed, memory = [], []
    for name in opts.models.split(","):
        case = Case(name, device)
        fw_ms, bw_ms, jm = first_call_ms(case, device)
        cs = thunder.compile_stats(jm)
        fallback = cs.last_autograd_fallback
        eager_ms, jit_ms, eager_cpu, jit_cpu = steady_state_ms(case, jm, opts.runs, device)
        assert thunder.cache_misses(jm) == 1, f"{name} recompiled"
        backward = "thunder" if fallback is None else f"torch ({fallback})"
        speed.append([name, f"{eager_ms:.2f}", f"{jit_ms:.2f}", f"{jit_ms / eager_ms:.2f}x", f"{eager_cpu:.2f}",
                      f"{jit_cpu:.2f}", f"{jit_cpu / eager_cpu:.2f}x", f"{fw_ms:.0f}", f"{bw_ms:.1f}",
                      backward])  # fmt: skip
        if device.type == "cuda":
            e, j = peak_cuda_bytes(case, case.model, device), peak_cuda_bytes(case, jm, device)
            memory.append([name, _kib(e), _kib(j), f"{j / e:.2f}x", _kib(cs.last_saved_for_backward_bytes)])
        else:
            (e, e_act), (j, j_act) = saved_bytes(case, case.model), saved_bytes(case, jm)
            memory.append([name, _kib(e), _kib(j), f"{j / e:.2f}x", _kib(e_act), _kib(j_act),
                           f"{j_act / e_act:.2f}x", _kib(cs.last_saved_for_backward_bytes)])  # fmt: skip

    _print_table(["model", "eager ms", "thunder ms", "thunder/eager", "eager CPU ms", "thunder CPU ms",
                  "thunder/eager (CPU)", "first forward ms", "first backward ms", "backward by"], speed)  # fmt: skip
    print()
    if device.type == "cuda":
        header = ["model", "eager peak KiB", "thunder peak KiB", "thunder/eager", "saved_for_backward_bytes KiB"]
    else:
        header = ["model", "eager saved KiB", "thunder saved KiB", "thunder/eager", "eager saved w/o params KiB",
                  "thunder saved w/o params KiB", "thunder/eager", "compile_stats saved KiB"]  # fmt: skip
    _print_table(header, memory)
    print()
    _print_table(["cached training call (2x2, requires_grad)", "eager us", "thunder us", "thunder/eager",
                  "eager CPU us", "thunder CPU us", "thunder/eager (CPU)"], add_rows())  # fmt: skip


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    """A markdown table."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |")


if __name__ == "__main__":
    main()
