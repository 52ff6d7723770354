"""Measure Ray rollouts on this machine: episodes/s on one logical node against two, the local
runner at the same slots, and the per-episode time Ray adds (docs/scale-out.md quotes it).

    python scripts/ray_scaleout_bench.py --repeats 3 --group-size 8 --slots 2

Every configuration runs the oracle on fix-csv-report and organize-downloads (G samples each)
after one warm-up rollout; the figures are medians over the repeats. The logical nodes share
this machine's cores and Docker engine, so the ratio says what Ray's placement costs or
gains on one host, not what a second host would add.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = [ROOT / "specs" / "fix-csv-report", ROOT / "specs" / "organize-downloads"]


async def _ray_rates(nodes: int, slots: int, group_size: int, repeats: int) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from cowork.integrations.ray import Agent, RayRolloutRunner

    small = {"num_cpus": 1, "resources": {"cowork": slots}, "object_store_memory": 80 * 1024 ** 2}
    cluster = Cluster(initialize_head=True, head_node_args={**small, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(**small)
    ray.init(address=cluster.address, log_to_driver=False)
    rates, timings = [], []
    try:
        async with RayRolloutRunner(None) as runner:
            await runner.rollout(SPECS, Agent("oracle"), group_size=group_size)  # warm: pools, images, imports
            for _ in range(repeats):
                runner.timings.clear()
                res = await runner.rollout(SPECS, Agent("oracle"), group_size=group_size)
                rates.append(res.episodes_per_s)
                timings += runner.timings
    finally:
        ray.shutdown()
        cluster.shutdown()
    added = [t["call_s"] - t["node_s"] for t in timings]
    return {"episodes_per_s": statistics.median(rates), "runs": rates,
            "ray_added_s": statistics.median(added), "node_s": statistics.median(t["node_s"] for t in timings),
            "share": statistics.median(a / t["node_s"] for a, t in zip(added, timings))}


async def _local_rate(slots: int, group_size: int, repeats: int) -> dict:
    from cowork.integrations.ray import Agent
    from cowork.rollouts.runner import RolloutRunner

    rates = []
    async with RolloutRunner(concurrency=slots) as runner:
        await runner.rollout(SPECS, Agent("oracle"), group_size=group_size)
        for _ in range(repeats):
            rates.append((await runner.rollout(SPECS, Agent("oracle"), group_size=group_size)).episodes_per_s)
    return {"episodes_per_s": statistics.median(rates), "runs": rates}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--slots", type=int, default=2, help="sandboxes per logical node (and of the local runner)")
    args = ap.parse_args()
    t0 = time.monotonic()
    out = {"local": asyncio.run(_local_rate(args.slots, args.group_size, args.repeats))}
    for n in (1, 2):
        out[f"ray_{n}_node"] = asyncio.run(_ray_rates(n, args.slots, args.group_size, args.repeats))
    out["ratio_2_to_1"] = out["ray_2_node"]["episodes_per_s"] / out["ray_1_node"]["episodes_per_s"]
    out["wall_s"] = time.monotonic() - t0
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
