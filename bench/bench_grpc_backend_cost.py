"""How much batching buys as the remote controller's own cost per call grows.

    .venv/bin/python bench/bench_grpc_backend_cost.py [--costs 0,3,6] [--limit-conversations 2]

``bench_grpc.py`` part 2 (``search_batch`` of 64 / 256 questions through the
remote vs a loop of single searches through it and in-process), with the
remote controller replaced by ``costly_controller.CostlyController``: the
local controller's answers after a fixed wait per ``decide`` call, standing in
for a model backend (a GPU classifier pays per batch it runs, whatever its
size). With a cost of 0 it is the loopback measurement of ``bench_grpc.py``;
the sweep shows from which per-call cost batching pays 3x. The wait is an
emulation, not a measured model: read the figures as a sensitivity, not as a
result for any particular backend.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import bench_grpc as bg
from _common import default_data_path, machine
from _common import load as load_average

import jevmem
from jevmem.embed import HashEmbedder
from jevmem.evaluation import load
from jevmem.remote import GrpcController

BENCH = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=default_data_path())
    ap.add_argument(
        "--costs", default="0,3,6", help="milliseconds per decide call, comma-separated"
    )
    ap.add_argument("--limit-conversations", type=int, default=2)
    ap.add_argument("--sizes", default="64,256")
    args = ap.parse_args(argv)
    bg.SIZES = tuple(int(x) for x in args.sizes.split(","))
    convs, _ = load(args.data)
    convs = convs[: args.limit_conversations]
    emb = jevmem.default_embedder(threads=2, warn=False)
    if isinstance(emb, HashEmbedder):
        raise SystemExit("the default embedder (ONNX) is not installed: pip install 'jevmem[onnx]'")
    print(
        f"# bench_grpc_backend_cost: {machine()}; load {load_average()}; {len(convs)} conversations"
    )
    preps = bg.prepare(convs, emb)
    for cost in (float(x) for x in args.costs.split(",")):
        env = {**os.environ, "JEVMEM_BENCH_CALL_COST_MS": str(cost)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "jevmem", "serve-controller", "--port", "0", "--grace", "0",
             "--controller", "costly_controller:CostlyController", "--controller-path", str(BENCH)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )  # fmt: skip
        try:
            address = bg.announced(proc, "serve-controller")
            with (
                GrpcController(
                    address, use_fallback=False, timeout_s=60.0, call_budget_s=120.0
                ) as g,
                GrpcController(
                    address, use_fallback=False, timeout_s=60.0, call_budget_s=120.0, stream=False
                ) as unary,
            ):
                g.wait_ready(30.0)
                unary.wait_ready(30.0)
                pairs = [(p, p.build(None), p.build(g)) for p in preps]
                print(f"\n# remote controller cost per decide call: {cost:g} ms")
                bg.bench_batches(pairs, g, unary)
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"\n# load at end {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
