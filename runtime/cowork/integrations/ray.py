"""Rollouts placed on a Ray cluster: one actor per Docker host runs episodes in its own sandbox pool.

The driver (the trainer, or ``cowork rollout --ray ADDRESS``) keeps everything a local
:class:`~cowork.rollouts.runner.RolloutRunner` keeps: the schedule, the rewards, the output folder
(``results.jsonl`` is written by the driver alone, so resume works as it does locally) and
the bundles. What moves to the cluster is where sandboxes run: every alive Ray node that
advertises the custom resource ``cowork`` (``ray start --resources '{"cowork": 8}'``) gets
one long-lived :class:`_NodeWorker` actor, pinned to it, owning that host's Docker engine
and a :class:`~cowork.sandbox.pool.SandboxPool` of ``cowork`` slots.

Per episode the driver sends (spec, seed, policy) and gets back the trajectory, the grade
and the evidence as Python objects (pickled through Ray's object store: a few hundred kB),
and writes the bundle itself; no shared storage is needed.

Where the model runs is unchanged. ``policy_at="node"`` ships the policy factory to the
node (the scripted agents, and endpoint clients: an OpenAI-compatible URL or a vLLM server
the nodes can reach). ``policy_at="driver"`` keeps each episode's policy object on the
driver (an in-process engine on the trainer's GPUs): the node's episode loop asks for each
assistant turn through a small broker actor, which the driver serves from its event loop.

A node whose actor dies (the host went away, the process was killed) has its in-flight
episodes run again on another node; each such loss is one entry of the sample's
``infra_failures``. A result that arrives late from an actor already given up on is dropped,
so every (task, sample) is written once.

Needs the ``ray`` extra: ``pip install 'cowork-runtime[ray]'``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import io
import itertools
import logging
import os
import socket
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..agents.tokens import seed_sample
from ..errors import ClusterUnavailable, CoworkError, PolicyError, require_extra
from ..rollouts.runner import RolloutRunner, RolloutSample, reward_for
from ..spec.loader import LoadedSpec, load_spec

log = logging.getLogger(__name__)

#: The custom resource that marks a Ray node as a Docker host for cowork; its amount is the
#: node's sandbox slots (episodes in flight there at once).
RESOURCE = "cowork"
#: Seconds a node actor may take to start and answer its first call.
ACTOR_START_S = 120.0
#: Seconds the address check before ``ray.init`` waits for the head to accept a connection
#: (``ray.init`` itself retries an address where nothing listens for minutes).
PREFLIGHT_S = 5.0
#: Lets Ray keep a loopback address (ray_constants.ENABLE_RAY_CLUSTER; read when ray is imported).
KEEP_LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0"


def _ray() -> Any:
    return require_extra("ray", "ray", "rollouts on a Ray cluster need the ray extra",
                         "the same Ray version on the driver and on every node")


# --------------------------------------------------------------------------- address preflight
def _host_port(address: str) -> tuple[str, int] | None:
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    return (host, int(port)) if sep and host and port.isdigit() else None


def ray_target(address: str) -> str | None:
    """The ``host:port`` that ``ray.init(address)`` connects to: Ray's own reading of the
    address (``auto`` looked up; a loopback host replaced by this machine's address unless
    $RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER is 0), or None when ``auto`` finds no cluster."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # a private helper: a Ray without it is taken at its word
        return None if address == "auto" else address
    try:
        return canonicalize_bootstrap_address(address)
    except ValueError:  # not host:port ($RAY_ADDRESS=ray://... under auto): left to ray.init
        return address


def _reach(host: str, port: int, timeout: float) -> str | None:
    """None when ``host:port`` accepts a TCP connection within ``timeout``; else why not."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except TimeoutError:
        return f"no answer in {timeout:g} s"
    except OSError as exc:
        return (exc.strerror or type(exc).__name__).lower()
    return None


def preflight(address: str | None, timeout: float = PREFLIGHT_S) -> None:
    """Check that the Ray cluster at ``address`` accepts a connection where ``ray.init`` will
    connect, before it is called (blocking: up to ``timeout`` per address tried).

    ``None`` and ``local`` start or use a Ray in this process: nothing to check. A ``ray://``
    address (Ray Client) is tried as given. ``auto`` and ``host:port`` are tried where Ray
    connects (:func:`ray_target`), and a loopback address that answers while the address Ray
    rewrites it to does not (a head on this machine reached through a port forwarded or
    published on 127.0.0.1) is said so, with the fix (docs/scale-out.md#the-address-checked-first).

    Raises:
        ClusterUnavailable: nothing accepts the connection, or only at the address as given.
        CoworkError: ``address`` is not a Ray address (bad input).
    """
    if address is None or address == "local":
        return
    client = address.startswith("ray://")
    if address == "auto":
        target = ray_target(address)
        if target is None:
            raise ClusterUnavailable("--ray auto found no Ray cluster ($RAY_ADDRESS is not set and no head was "
                                     "started on this machine); start one (ray start --head --port 6379) or give "
                                     "the head's address (--ray HOST:6379)")
        given = target
    else:
        given = address.removeprefix("ray://")
        if _host_port(given) is None:
            raise CoworkError(f"{address!r} is not a Ray address: give HOST:PORT of the head (ray start --head "
                              f"--port 6379 prints it), ray://HOST:10001 (Ray Client) or auto")
        target = given if client else ray_target(address)
    where, there = _host_port(given), _host_port(target or "")
    if where is None or there is None:  # Ray read `auto` as something else than host:port
        return
    why = _reach(*there, timeout)
    if why is None:
        return
    if target != given and _reach(*where, timeout) is None:
        raise ClusterUnavailable(
            f"the Ray cluster at {address} answers, but Ray connects to {target} instead (it replaces a loopback "
            f"host by this machine's address), where it gets: {why}; the head is reachable here on loopback only (a "
            f"port forwarded or published on {where[0]}): run with {KEEP_LOOPBACK} in the environment, which keeps "
            f"{where[0]}, or give an address the head listens on (a remote cluster: ray://HOST:10001)")
    rewritten = f" (Ray connects to {target})" if target != given else ""
    start = "ray start --head (its Ray Client server listens on 10001)" if client else \
        f"ray start --head --port {where[1]}"
    raise ClusterUnavailable(f"no Ray cluster answers at {address}{rewritten}: {why}; start its head there ({start}) "
                             f"or give the address the head printed (--ray HOST:PORT, ray://HOST:10001 or auto)")


# --------------------------------------------------------------------------- on the node
def _spec_archive(loaded: LoadedSpec) -> tuple[str, bytes]:
    """The task folder as a gzip tar and its digest: a node without the folder unpacks it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(loaded.root, arcname=loaded.root.name)
    data = buf.getvalue()
    return hashlib.sha256(data).hexdigest()[:16], data


def _local_spec(loaded: LoadedSpec, digest: str, archive: bytes) -> LoadedSpec:
    """The spec at its driver path when this host has that folder, else unpacked from the archive
    into ``~/.cache/cowork/ray-specs/<digest>/`` (once per digest)."""
    if loaded.path.is_file():
        return loaded
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cowork" / "ray-specs" / digest
    folder = base / loaded.root.name
    if not (folder / loaded.path.name).is_file():
        tmp = base.with_name(f"{digest}.{os.getpid()}.tmp")
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")  # refuses absolute paths, links out, devices
        base.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # another worker unpacked it first
            os.replace(tmp, base)
    return load_spec(folder / loaded.path.name)


class _DriverPolicy:
    """A policy whose turns are computed on the driver: each ``act`` is a call to the broker."""

    def __init__(self, broker: Any, key: str, name: str):
        self.broker, self.key, self.name = broker, key, name

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        ok, value = await self.broker.request.remote(self.key, "act", (messages, tools))
        if not ok:
            raise PolicyError(value)
        return value

    def reset(self) -> None:
        """An infrastructure retry on the node: the driver's policy starts over too."""
        self.broker.request.remote(self.key, "reset", None)


class _NodeWorker:
    """The actor pinned to one Docker host: its sandbox pool and the episodes placed there."""

    def __init__(self, slots: int, infra_retries: int, judge: Any, turn_progress: bool, user_model: Any,
                 backend: Any):
        self.slots = slots
        self.infra_retries, self.judge, self.turn_progress = infra_retries, judge, turn_progress
        self.user_model, self.backend = user_model, backend
        self.running = 0
        self.pool: Any = None

    async def info(self) -> dict[str, Any]:
        """Where the actor runs: node id, host, pid and the label session of its sandboxes."""
        from ..engine import labels

        ray = _ray()
        return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                "pid": os.getpid(), "session": labels.SESSION_ID, "slots": self.slots}

    async def run(self, spec: tuple[LoadedSpec, str, bytes], seed: int | None, policy: Any, key: str,
                  agent: str, served: bool) -> dict[str, Any]:
        """One episode here: run, export, grade; the sandbox goes back to this node's pool.

        Args:
            spec: The task as put in the object store: the loaded spec, its archive's digest
                and the archive (the task folder, unpacked here when this host lacks it).
            seed: The episode's fault seed (None: the spec's own).
            policy: A factory ``spec -> Policy``, or (``served``) the broker of the driver's policies.
            key: The episode's name at the broker.
            agent: The name of a served policy (the trajectory's agent).
            served: The policy runs on the driver and is asked through the broker.

        Returns:
            ``trajectory``, ``grade``, ``evidence``, ``infra_failures``, ``run_s`` (seconds
            here) and ``free`` (this node's slots left).
        """
        from ..episode import run as episode
        from ..sandbox.pool import SandboxPool

        loaded = await asyncio.to_thread(_local_spec, *spec)
        if self.pool is None:
            self.pool = SandboxPool(max_per_task=self.slots, max_total=self.slots, backend=self.backend)
        p = _DriverPolicy(policy, key, agent) if served else policy(loaded.spec)
        if not served:  # the driver seeds what it serves; a factory here makes a fresh, unseeded one
            seed_sample(p, loaded.spec.id, int(key.rsplit("/", 2)[1]))
        self.running += 1
        t0 = time.monotonic()
        try:
            # Only the options in use are passed, as RolloutRunner does.
            extra: dict[str, Any] = {}
            if self.turn_progress:
                extra["turn_progress"] = True
            if self.user_model is not None:
                extra["user_model"] = self.user_model
            res = await episode.run_task(loaded, p, infra_retries=self.infra_retries, judge=self.judge, pool=self.pool,
                                         seed=seed, **extra)
        finally:
            self.running -= 1
        return {"trajectory": res.trajectory, "grade": res.grade, "evidence": res.evidence,
                "infra_failures": list(res.infra_failures), "run_s": time.monotonic() - t0,
                "free": self.slots - self.running}

    async def free(self) -> int:
        """Slots not running an episode now."""
        return self.slots - self.running

    async def close(self) -> None:
        """Remove this node's sandboxes (before the actor is killed)."""
        if self.pool is not None:
            await self.pool.close()
            self.pool = None


def _reap_session(session: str) -> list[str]:
    """Remove the sandboxes a dead node actor left (its label session), once its process is gone."""
    from ..engine import labels as L
    from ..engine.container import remove_container
    from ..engine.reaper import managed_containers

    removed: list[str] = []
    deadline = time.monotonic() + 30.0
    while True:
        left = [c for c in managed_containers() if (c.labels or {}).get(L.SESSION) == session]
        alive = [c for c in left if L.owner_alive(c.labels or {})]
        for c in left:
            if c not in alive:
                remove_container(c.id, (c.labels or {}).get(L.RUN_DIR))
                removed.append(c.name)
        if not alive or time.monotonic() > deadline:  # ray.kill is asynchronous: wait for the process to go
            return removed
        time.sleep(0.5)


class _Broker:
    """Carries the turns of driver-side policies: nodes ask (``request``), the driver takes the
    asks and answers them. Lives on the driver's node, next to the driver."""

    def __init__(self) -> None:
        self.queue: collections.deque = collections.deque()
        self.waiting: dict[int, asyncio.Future] = {}
        self.ids = itertools.count()
        self.event = asyncio.Event()

    async def request(self, key: str, op: str, payload: Any) -> Any:
        rid = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        if op != "reset":
            self.waiting[rid] = fut
        self.queue.append((rid, key, op, payload))
        self.event.set()
        return await fut if op != "reset" else None

    async def take(self, wait_s: float = 1.0) -> list[tuple[int, str, str, Any]]:
        if not self.queue:
            self.event.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.event.wait(), wait_s)
        out = list(self.queue)
        self.queue.clear()
        return out

    async def answer(self, rid: int, ok: bool, value: Any) -> None:
        fut = self.waiting.pop(rid, None)
        if fut is not None and not fut.done():
            fut.set_result((ok, value))


# --------------------------------------------------------------------------- on the driver
@dataclass(frozen=True)
class Agent:
    """A policy factory that pickles to any node: ``make_policy(kind, spec, **options)`` per episode.

    A factory defined in a test or a script module the nodes cannot import fails there; this one
    only names cowork code. ``Agent("oracle")``, ``Agent("vllm-server", {"model": ..., "base_url": ...})``.
    """

    kind: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The agent's name in ``run.json``: its kind."""
        return self.kind

    def __call__(self, spec: Any) -> Any:
        """A fresh policy of this kind for ``spec`` (see :func:`cowork.agents.make_policy`)."""
        from ..agents import make_policy

        return make_policy(self.kind, spec, **dict(self.options))


@dataclass
class NodeActor:
    """One node's actor as the driver sees it."""

    node_id: str
    handle: Any
    slots: int
    host: str = ""
    session: str = ""
    """The label session of the sandboxes it starts (``cowork.session``)."""
    in_flight: int = 0
    dead: bool = False
    tasks: set = field(default_factory=set)
    """Tasks it ran (warm sandboxes): preferred for their next samples."""


class RayRolloutRunner(RolloutRunner):
    """A :class:`~cowork.rollouts.runner.RolloutRunner` whose episodes run on a Ray cluster's Docker hosts.

    ``rollout()``, its arguments, results, output folder and resume are those of the local
    runner; the concurrency is the sum of the nodes' ``cowork`` slots.

    Args:
        address: The cluster (``ray://`` or ``host:port`` of the head, ``auto``); None uses
            an already initialised Ray (``ray.init`` done by the caller).
        policy_at: ``node`` ships the policy (or factory) to the nodes: scripted agents and
            endpoint clients. ``driver`` keeps the policies in this process and serves each
            turn to the nodes: in-process engines (vllm, hf) or anything that cannot be
            pickled.
        slots_per_node: Episodes at once per node (default: the node's ``cowork`` resource).
        node_retries: Times one episode is run again after the node running it died.
        kwargs: The local runner's ``reward``, ``infra_retries``, ``progress``, ``judge``,
            ``backend``, ``turn_progress``, ``user_model`` and ``out_dir``; the judge and
            user model are pickled to the nodes.

    Raises:
        CoworkError: the ray extra is missing; no alive node advertises ``cowork`` slots;
            a node actor did not start.
        ClusterUnavailable: (from ``rollout``) nothing answers at ``address`` where Ray
            connects (see :func:`preflight`).
    """

    def __init__(self, address: str | None = "auto", *, policy_at: Literal["node", "driver"] = "node",
                 slots_per_node: int | None = None, node_retries: int = 2, **kwargs: Any):
        if policy_at not in ("node", "driver"):
            raise ValueError(f"policy_at must be 'node' or 'driver', got {policy_at!r}")
        if (slots_per_node is not None and slots_per_node < 1) or node_retries < 0:
            raise ValueError(f"need slots_per_node >= 1 and node_retries >= 0, got {slots_per_node}, {node_retries}")
        for name in ("pool", "pool_size", "concurrency"):
            if kwargs.get(name) is not None:
                raise ValueError(f"{name} is not an option of RayRolloutRunner: each node's pool has its `cowork` "
                                 "slots (or slots_per_node)")
        kwargs.pop("concurrency", None)
        super().__init__(**kwargs)
        _ray()
        self.address, self.policy_at = address, policy_at
        self.slots_per_node, self.node_retries = slots_per_node, node_retries
        self.actors: list[NodeActor] = []
        #: Episodes run again because their node died: (task, sample, node id).
        self.reruns: list[tuple[str, int, str]] = []
        #: Per finished episode: ``total_s`` (driver, placement included), ``call_s`` (the remote call
        #: as the driver saw it), ``node_s`` (the same call inside the actor) and ``episode_s``
        #: (the agent's loop); ``call_s - node_s`` is what Ray adds (dispatch, result transfer).
        self.timings: list[dict[str, float]] = []
        self._inited = False
        self._free: asyncio.Condition | None = None
        self._policy_ref: Any = None
        self._spec_refs: dict[str, Any] = {}
        self._broker: Any = None
        self._driver_policies: dict[str, Any] = {}
        self._keys = itertools.count()

    # ------------------------------------------------------------------ cluster
    async def _connect(self) -> None:
        ray = _ray()
        if not ray.is_initialized():
            await asyncio.to_thread(preflight, self.address)
            await asyncio.to_thread(ray.init, address=self.address, logging_level=logging.WARNING,
                                    log_to_driver=False)
            self._inited = True
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        known = {a.node_id for a in self.actors if not a.dead}
        nodes = [n for n in ray.nodes() if n.get("Alive") and (n.get("Resources") or {}).get(RESOURCE, 0) >= 1]
        if not nodes and not known:
            raise CoworkError(f"no alive Ray node offers the {RESOURCE!r} resource; start each Docker host with "
                              f"ray start --address HEAD:6379 --resources '{{\"{RESOURCE}\": 8}}' (8: its sandboxes)")
        worker = ray.remote(_NodeWorker)
        fresh = []
        for n in nodes:
            if n["NodeID"] in known:
                continue
            slots = self.slots_per_node or int(n["Resources"][RESOURCE])
            handle = worker.options(num_cpus=0, max_restarts=0, max_concurrency=slots * 4 + 8,
                                    scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
                slots, self.infra_retries, self.judge, self.turn_progress, self.user_model, self.backend)
            fresh.append(NodeActor(node_id=n["NodeID"], handle=handle, slots=slots))
        for a in fresh:
            try:
                info = await asyncio.wait_for(a.handle.info.remote(), ACTOR_START_S)
            except Exception as exc:  # noqa: BLE001 - a node that cannot host the actor is left out, said why
                log.warning("ray node %s: the cowork actor did not start (%s); leaving the node out", a.node_id, exc)
                with contextlib.suppress(Exception):
                    ray.kill(a.handle)
                continue
            a.host, a.session = info["host"], info["session"]
            self.actors.append(a)
        if not any(not a.dead for a in self.actors):
            raise CoworkError("no cowork actor started on the Ray cluster (see the warnings above)")
        self.concurrency = sum(a.slots for a in self.actors if not a.dead)
        log.info("ray: %d node(s), %d slots", sum(not a.dead for a in self.actors), self.concurrency)

    # ------------------------------------------------------------------ the runner's hooks
    async def rollout(self, tasks: Any, policy: Any, **kwargs: Any) -> Any:  # noqa: D102 - as RolloutRunner's
        from ..rollouts.runner import _load_tasks, _policy_factory

        self._check_loop()
        ray = _ray()
        await self._connect()
        self._free = asyncio.Condition()
        specs = _load_tasks(tasks)
        factory = _policy_factory(policy)
        self._spec_refs = {}
        for ld in specs:
            digest, data = await asyncio.to_thread(_spec_archive, ld)
            self._spec_refs[ld.spec.id] = ray.put((ld, digest, data))
        pump = None
        if self.policy_at == "node":
            try:
                self._policy_ref = ray.put(factory)
            except Exception as exc:  # noqa: BLE001 - pickling errors come in many types
                why = next((ln.strip() for ln in str(exc).splitlines() if "serialization:" in ln),
                           str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                raise CoworkError(f"the policy cannot be sent to the Ray nodes ({why}); pass policy_at='driver' "
                                  "to serve it from this process") from exc
        else:
            self._driver_policies = {}
            if self._broker is None:
                from ray.util.scheduling_strategies import (
                    NodeAffinitySchedulingStrategy,
                )

                here = ray.get_runtime_context().get_node_id()
                self._broker = ray.remote(_Broker).options(
                    num_cpus=0, max_concurrency=10000,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=True)).remote()
            pump = asyncio.ensure_future(self._serve_policies())
        try:
            return await super().rollout(specs, policy, **kwargs)
        finally:
            if pump is not None:
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump

    def _get_pool(self) -> Any:
        return None  # sandboxes live in the nodes' pools

    async def _episode(self, loaded: LoadedSpec, group: int, s: int, base_seed: int | None, policy: Any,
                       pool: Any) -> RolloutSample:
        ray = _ray()
        seed = None if base_seed is None else base_seed + s
        t0 = time.monotonic()
        lost: list[str] = []
        while True:
            actor = await self._place(loaded.spec.id)
            key = f"{loaded.spec.id}/{s}/{next(self._keys)}"
            if self.policy_at == "driver":
                self._driver_policies[key] = policy
                target = self._broker
            else:
                target = self._policy_ref
            actor.in_flight += 1
            actor.tasks.add(loaded.spec.id)
            t_call = time.monotonic()
            try:
                out = await actor.handle.run.remote(self._spec_refs[loaded.spec.id], seed, target, key, policy.name,
                                                    self.policy_at == "driver")
            except ray.exceptions.RayTaskError as exc:
                if "No module named" in str(exc):  # the factory pickled by reference to a module the node lacks
                    raise CoworkError(f"a Ray node cannot unpickle the policy factory ({str(exc).splitlines()[-1]}); "
                                      "pass cowork.integrations.ray.Agent(kind, options), a factory from an "
                                      "installed module, or policy_at='driver'") from exc
                raise
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                await self._lose(actor, exc)
                lost.append(f"ray node {actor.node_id[:12]} ({actor.host}) lost while running the episode: "
                            f"{type(exc).__name__}")
                self.reruns.append((loaded.spec.id, s, actor.node_id))
                if len(lost) > self.node_retries:
                    raise CoworkError(f"{loaded.spec.id} sample {s}: {len(lost)} nodes died running it; "
                                      f"last: {lost[-1]}") from exc
                log.warning("%s sample %d: %s; running it again on another node", loaded.spec.id, s, lost[-1])
                reset = getattr(policy, "reset", None)
                if self.policy_at == "driver" and callable(reset):
                    reset()  # the driver's policy (a script keeps its place) starts the episode over
                continue
            finally:
                actor.in_flight -= 1
                self._driver_policies.pop(key, None)
                cond = self._free
                if cond is not None:  # made by rollout() before any episode starts
                    async with cond:
                        cond.notify_all()
            traj = out["trajectory"]
            if self.policy_at == "driver":
                tokens = getattr(policy, "token_trajectory", None)
                if callable(tokens):  # the model's token ids stayed on the driver with its policy
                    traj.tokens = tokens()
            sample = RolloutSample(task=loaded.spec.id, group=group, sample=s, seed=seed, grade=out["grade"],
                                   trajectory=traj, reward=reward_for(out["grade"], self.reward),
                                   infra_failures=lost + out["infra_failures"], evidence=out["evidence"],
                                   total_s=time.monotonic() - t0, node=actor.node_id)
            # Ray's share: the driver's wall time of the episode less the node's (placement, transfer).
            self.timings.append({"total_s": sample.total_s, "call_s": time.monotonic() - t_call,
                                 "node_s": out["run_s"], "episode_s": traj.duration_s})
            return sample

    async def _place(self, task: str) -> NodeActor:
        """The alive actor with the most free slots (one that ran ``task`` first: its sandboxes are
        warm); waits while every slot is busy."""
        assert self._free is not None
        async with self._free:
            while True:
                live = [a for a in self.actors if not a.dead]
                if not live:
                    raise CoworkError("every cowork node of the Ray cluster died; restart the nodes and run again "
                                      "(the output folder resumes)")
                free = [a for a in live if a.in_flight < a.slots]
                if free:
                    return max(free, key=lambda a: (a.slots - a.in_flight, task in a.tasks))
                await self._free.wait()

    async def _lose(self, actor: NodeActor, exc: BaseException) -> None:
        """Give up on a dead (or unreachable) actor: kill it for sure, remove its sandboxes."""
        if actor.dead:
            return
        actor.dead = True
        ray = _ray()
        log.warning("ray node %s (%s): its cowork actor is gone (%s); its episodes run elsewhere",
                    actor.node_id, actor.host, exc)
        with contextlib.suppress(Exception):
            ray.kill(actor.handle, no_restart=True)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # On the dead actor's host when the node is still up (the host's Docker engine holds the
        # sandboxes); a node that is gone leaves them to that host's own reaper (`cowork gc`).
        reaper = ray.remote(_reap_session).options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(actor.node_id, soft=True))
        try:
            removed = await asyncio.wait_for(reaper.remote(actor.session), 60.0)
            if removed:
                log.info("removed %d sandbox(es) of the dead actor: %s", len(removed), ", ".join(removed))
        except Exception as exc2:  # noqa: BLE001 - cleanup is best effort; `cowork gc` on the host finishes it
            log.warning("could not remove the sandboxes of the dead actor on %s: %s", actor.host, exc2)

    async def _serve_policies(self) -> None:
        """Answer the nodes' turn requests with the driver-side policies, in this event loop."""
        running: set[asyncio.Task] = set()

        async def act(rid: int, key: str, payload: Any) -> None:
            policy = self._driver_policies.get(key)
            try:
                if policy is None:
                    raise PolicyError(f"episode {key} is no longer running on the driver")
                turn = await policy.act(*payload)
                await self._broker.answer.remote(rid, True, turn)
            except Exception as exc:  # noqa: BLE001 - every failure becomes the episode's policy_error
                await self._broker.answer.remote(rid, False, f"{type(exc).__name__}: {exc}")

        try:
            while True:
                for rid, key, op, payload in await self._broker.take.remote():
                    if op == "reset":  # in order, before the episode's next turn
                        reset = getattr(self._driver_policies.get(key), "reset", None)
                        if callable(reset):
                            reset()
                        continue
                    t = asyncio.ensure_future(act(rid, key, payload))
                    running.add(t)
                    t.add_done_callback(running.discard)
        finally:
            for t in running:
                t.cancel()

    async def close(self) -> None:
        """Remove every node's sandboxes, end the actors (and Ray, when this runner started it)."""
        ray = _ray()
        for a in self.actors:
            if a.dead:
                continue
            with contextlib.suppress(Exception):
                await asyncio.wait_for(a.handle.close.remote(), 60.0)
            with contextlib.suppress(Exception):
                ray.kill(a.handle, no_restart=True)
            a.dead = True
        self.actors = []
        if self._broker is not None:
            with contextlib.suppress(Exception):
                ray.kill(self._broker)
            self._broker = None
        if self._inited:
            await asyncio.to_thread(ray.shutdown)
            self._inited = False


__all__ = ["RESOURCE", "Agent", "NodeActor", "RayRolloutRunner", "preflight"]
