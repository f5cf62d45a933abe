"""Train a small MLP block whose norm and activation are tilecraft kernels, next to the same block
in plain PyTorch: the loss curves match (see docs/models.md).

``python -m examples.train_mlp [--steps 50] [--device cuda] [--compile]``

The block is ``x + down(swiglu(gate(h), up(h)))`` with ``h = rms_norm(x) * w``: rms_norm forward
and backward, swiglu forward and backward are tilecraft kernels (``register_backward`` pairs them),
the linear layers are torch. Both blocks start from the same weights and see the same data.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from examples.rms_norm import EPS, rms_norm_fwd
from examples.swiglu import swiglu


class Block(torch.nn.Module):
    """A pre-norm SwiGLU MLP block; ``tilecraft=True`` runs its norm and activation as kernels."""

    def __init__(self, dim: int, hidden: int, tilecraft: bool):
        super().__init__()
        self.tilecraft = tilecraft
        self.norm = torch.nn.Parameter(torch.ones(dim))
        self.gate = torch.nn.Linear(dim, hidden, bias=False)
        self.up = torch.nn.Linear(dim, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tilecraft:
            h = rms_norm_fwd(x, self.norm, EPS)[0]
            act = swiglu(self.gate(h), self.up(h))
        else:
            h = F.rms_norm(x, x.shape[-1:], self.norm, EPS)
            act = F.silu(self.gate(h)) * self.up(h)
        return x + self.down(act)


def train(
    tilecraft: bool,
    steps: int = 50,
    dim: int = 64,
    hidden: int = 128,
    batch: int = 32,
    device: str = "cpu",
    compile_backend: str | None = None,
    seed: int = 0,
) -> tuple[list[float], float]:
    """Losses per step and the median step time in ms (fitting a fixed random linear map)."""
    torch.manual_seed(seed)
    model = Block(dim, hidden, tilecraft).to(device)
    teacher = torch.randn(dim, dim, generator=torch.Generator().manual_seed(seed + 1)) / dim**0.5
    teacher = teacher.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    forward: Any = (
        model if compile_backend is None else torch.compile(model, backend=compile_backend)
    )
    gen = torch.Generator().manual_seed(seed + 2)
    x = torch.randn(batch, dim, generator=gen).to(device)  # one batch: full-batch descent
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        loss = F.mse_loss(forward(x), x @ teacher)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
        losses.append(loss.item())
    times = sorted(times[min(3, steps - 1) :])  # the first steps compile
    return losses, times[len(times) // 2]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--compile", action="store_true", help="torch.compile both blocks")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    backend = ("inductor" if args.device == "cuda" else "aot_eager") if args.compile else None
    shape = {"dim": args.dim, "hidden": args.hidden, "batch": args.batch}
    ours, our_ms = train(True, args.steps, device=args.device, compile_backend=backend, **shape)
    ref, ref_ms = train(False, args.steps, device=args.device, compile_backend=backend, **shape)
    for step in range(0, args.steps, max(1, args.steps // 10)):
        print(f"step {step:4d}  tilecraft {ours[step]:.6f}  torch {ref[step]:.6f}")
    print(f"final loss: tilecraft {ours[-1]:.6f}, torch {ref[-1]:.6f}")
    print(f"median step time: tilecraft {our_ms:.2f} ms, torch {ref_ms:.2f} ms (compile={backend})")


if __name__ == "__main__":
    main()
