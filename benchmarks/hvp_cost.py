"""What second derivatives cost: one gradient, one Hessian-vector product, the full Hessian, against
p.

    python benchmarks/hvp_cost.py                 (CPU, then CUDA when there is a GPU)
    python benchmarks/hvp_cost.py --max-p 20000 --hessian-up-to 2500 --threads 2

The model is lesson 07's: a d -> h -> 1 tanh network's mean squared error on n examples, written
as a function of one flat parameter vector theta of p = d h + 2 h + 1 entries, so that its Hessian
is p x p. For each p it prints the fastest time (of several calls) of
    grad      torch.autograd.grad of the loss
    HVP db    a Hessian-vector product by double backward (create_graph=True, then grad of g . v)
    HVP jvp   the same product by forward-over-reverse, torch.func.jvp(torch.func.grad(loss))
    Hessian   torch.func.hessian(loss)(theta), only up to --hessian-up-to (it holds p^2 numbers)
and the ratios: an HVP stays a small constant times a gradient at every p; the full Hessian is p
HVPs, batched by vmap, so it grows with p. CPU timings use --threads threads (default 1: steady
numbers on a shared machine).
"""

import argparse
import os
import platform
import sys

import torch
from torch.func import grad, hessian, jvp

from course_utils.timing import fastest_seconds


def tanh_net_loss(h: int, device: torch.device, n: int = 256, d: int = 16):
    """p and loss(theta) for a d -> h -> 1 tanh network on fixed random data; theta has shape
    (p,)."""
    gen = torch.Generator().manual_seed(h)
    X, Y = torch.randn(n, d, generator=gen).to(device), torch.randn(n, generator=gen).to(device)
    p = d * h + h + h + 1

    def loss(theta: torch.Tensor) -> torch.Tensor:
        W1, b1 = theta[:d * h].view(d, h), theta[d * h:d * h + h]
        w2, b2 = theta[d * h + h:d * h + 2 * h], theta[-1]
        return ((torch.tanh(X @ W1 + b1) @ w2 + b2 - Y) ** 2).mean()

    return p, loss


def fastest_time(fn, device: torch.device) -> float:
    """Lesson 07's timing: the fastest of up to 15 calls after one warm-up, no new call after 1 s
    (course_utils.timing.fastest_seconds)."""
    return fastest_seconds(fn, repeat=15, warmup=1, budget=1.0, device=device)


def sweep(device: torch.device, widths: list[int], hessian_up_to: int) -> list[tuple]:
    """(p, grad s, HVP double-backward s, HVP jvp(grad) s, Hessian s or nan) for each hidden
    width."""
    rows = []
    for h in widths:
        p, loss = tanh_net_loss(h, device)
        theta = (0.3 * torch.randn(p, generator=torch.Generator().manual_seed(0))).to(device)
        v = torch.randn(p, generator=torch.Generator().manual_seed(1)).to(device)

        def one_gradient():
            t = theta.detach().requires_grad_()
            return torch.autograd.grad(loss(t), t)[0]

        def hvp_double_backward():
            t = theta.detach().requires_grad_()
            (g,) = torch.autograd.grad(loss(t), t, create_graph=True)
            return torch.autograd.grad(g @ v, t)[0]

        def hvp_forward_over_reverse():
            return jvp(grad(loss), (theta,), (v,))[1]

        t_grad = fastest_time(one_gradient, device)
        t_hvp = fastest_time(hvp_double_backward, device)
        t_jvp = fastest_time(hvp_forward_over_reverse, device)
        t_hess = (fastest_time(lambda: hessian(loss)(theta), device)
                  if p <= hessian_up_to else float("nan"))
        rows.append((p, t_grad, t_hvp, t_jvp, t_hess))
        print_row(rows[-1])
    return rows


def print_header(device: torch.device) -> None:
    print(f"\n## {device}")
    print(f"{'p':>7} {'grad ms':>9} {'HVP db ms':>10} {'HVP jvp ms':>11} {'Hessian ms':>11} "
          f"{'HVP/grad':>9} {'jvp/grad':>9} {'Hess/grad':>10} {'Hess/(p HVP)':>13}", flush=True)


def print_row(row: tuple) -> None:
    p, tg, th, tj, tH = row
    print(f"{p:>7} {tg * 1e3:>9.3f} {th * 1e3:>10.3f} {tj * 1e3:>11.3f} {tH * 1e3:>11.2f} "
          f"{th / tg:>9.1f} {tj / tg:>9.1f} {tH / tg:>10.0f} {tH / (p * th):>13.2f}", flush=True)


def print_summary(rows: list[tuple]) -> None:
    hvp = [r[2] / r[1] for r in rows]
    fwd = [r[3] / r[1] for r in rows]
    print(f"HVP / gradient over p = {rows[0][0]}..{rows[-1][0]}: "
          f"double backward {min(hvp):.1f}-{max(hvp):.1f}, "
          f"jvp(grad) {min(fwd):.1f}-{max(fwd):.1f}")
    timed = [r for r in rows if r[4] == r[4]]  # nan != nan: the rows where the Hessian was timed
    if len(timed) >= 2:
        (p0, g0, h0, _, H0), (p1, g1, h1, _, H1) = timed[0], timed[-1]
        print(f"Hessian over p = {p0}..{p1}: {H0 / g0:.0f} to {H1 / g1:.0f} gradients, "
              f"{H0 / (p0 * h0):.2f} to {H1 / (p1 * h1):.2f} times p HVPs")


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--max-p", type=int, default=5000,
                        help="largest parameter count (default 5000)")
    parser.add_argument("--hessian-up-to", type=int, default=1200,
                        help="time the full Hessian only up to this p (default 1200)")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads while timing on the CPU (default 1)")
    parser.add_argument("--cpu-only", action="store_true",
                        help="skip CUDA even when a GPU is there")
    args = parser.parse_args()
    if args.max_p < 19 or args.hessian_up_to < 0 or args.threads < 1:
        parser.error("need --max-p >= 19 (the smallest network), --hessian-up-to >= 0 and "
                     "--threads >= 1")

    widths, h = [], 1
    while 18 * h + 1 <= args.max_p:  # p = 16 h + 2 h + 1
        widths.append(h)
        h *= 2
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {gpu}")
    print("# model: 16 -> h -> 1 tanh network, 256 examples, float32; CPU timings with "
          f"{args.threads} thread(s)")

    devices = [torch.device("cpu")]
    if torch.cuda.is_available() and not args.cpu_only:
        devices.append(torch.device("cuda"))
    threads = torch.get_num_threads()
    for device in devices:
        if device.type == "cpu":
            torch.set_num_threads(args.threads)
        try:
            print_header(device)
            print_summary(sweep(device, widths, args.hessian_up_to))
        finally:
            torch.set_num_threads(threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
