"""New weights into a running vLLM: the files they travel as, the shared-memory check, and a
vLLM server's own weight-update endpoints (the vllm-server backend).

**The server's endpoints** (checked against vLLM 0.34.0: ``vllm/entrypoints/rl/online/api_router.py``,
``serve/dev/rpc/api_router.py``, ``serve/dev/cache/api_router.py``). A server started with
``VLLM_SERVER_DEV_MODE=1`` serves, at its root (not under ``/v1``):

=====================================  ================================================
``POST /pause?mode=wait``              finish the requests in flight, hold new ones (503), clear the caches
``POST /resume``                       serve again
``GET /is_paused``                     ``{"is_paused": bool}``
``POST /collective_rpc``               ``{"method", "args": [str], "timeout"}`` on every worker: ``{"results": [...]}``
``POST /reset_prefix_cache``           ``{"success": bool}``
``POST /update_weight_version``        ``{"new_version": str}``; ``GET /weight_info`` reads it back
``POST /init_weight_transfer_engine``  vLLM's weight-transfer engines (``--weight-transfer-config``:
``POST /start_weight_update``          NCCL or CUDA IPC from a trainer on a GPU): the control plane,
``POST /update_weights``               driven by vLLM's own trainer-side engine through
``POST /finish_weight_update``         :class:`WeightTransferControl`
=====================================  ================================================

:class:`ServerWeights` updates a server in one of two ways. With a vLLM trainer engine
(``transfer=`` an object with ``send_weights()``, e.g. vLLM's ``NCCLTrainerWeightTransferEngine``
made with a :class:`WeightTransferControl` as its client), the tensors go GPU to GPU through
vLLM's own ``/start_weight_update``, ``/update_weights`` and ``/finish_weight_update``.
Without one, the tensors are written as safetensors files to a folder the server can read
and loaded by cowork's worker extension through ``/collective_rpc`` (start the server with
``--worker-extension-cls cowork.agents.vllm_engine.WeightLoaderExtension``). Either way the
server is paused first (``/pause?mode=wait``: no request runs while the weights change),
its prefix cache is dropped, its ``weight_version`` is set, and it resumes.

**Shared memory.** The files go to ``/dev/shm`` where it has room, since workers then read
them at memory speed. Docker gives a container 64 MiB of ``/dev/shm`` unless told
otherwise, far less than one chunk of a model's weights: a write there would fail part-way
(``ENOSPC``), or an ``mmap`` of it would die with ``SIGBUS``. So the free space is checked
before anything is written (:func:`transfer_folder`): the in-process engine then falls back
to a folder on disk with a warning, and the server path, whose folder the server must see,
fails at once with what to set (``docker run --shm-size=...`` or ``--ipc=host``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..errors import PolicyError

log = logging.getLogger(__name__)

#: Where weight files go when it has room.
SHM = "/dev/shm"
#: The worker extension's method that loads one safetensors file (see cowork.agents.vllm_engine).
LOAD_METHOD = "cowork_load_weights_file"
#: Its method that says the extension is there (a probe that loads nothing).
PROBE_METHOD = "cowork_weight_loader_ready"
#: Room kept free in shared memory beside a chunk (other users of /dev/shm: NCCL, vLLM's own).
SHM_MARGIN = 16 << 20


def free_bytes(path: str) -> int:
    """Bytes an unprivileged writer may still write under ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit in ("B", "KiB", "MiB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def shm_advice(need: int, free: int) -> str:
    """What to set so that ``need`` bytes fit in ``/dev/shm`` (which has ``free``)."""
    gib = max(1, -(-(need + SHM_MARGIN) * 2 // (1 << 30)))  # twice the chunk, whole GiB
    return (f"{SHM} has {_size(free)} free and one weight chunk needs {_size(need)} (Docker's default /dev/shm "
            f"is 64 MiB): start the container with --shm-size={gib}g or --ipc=host (Kubernetes: an emptyDir "
            f"volume with medium: Memory on /dev/shm), or lower chunk_bytes")


def transfer_folder(need: int, *, folder: str | None = None, fallback: bool = True) -> str | None:
    """The folder weight files of up to ``need`` bytes each are written to, checked for room.

    Args:
        need: Bytes of the largest file.
        folder: A folder chosen by the caller (checked for room; never replaced).
        fallback: When ``/dev/shm`` is missing or too small, return None (a temporary folder
            on disk) with a warning; else raise.

    Raises:
        PolicyError: ``folder`` lacks room or is not writable; or ``/dev/shm`` is too small
            and ``fallback`` is off. The message says what to set.
    """
    if folder is not None:
        if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            raise PolicyError(f"the weight transfer folder {folder!r} is not a writable folder")
        free = free_bytes(folder)
        if free < need:
            raise PolicyError(f"the weight transfer folder {folder!r} has {_size(free)} free and one weight chunk "
                              f"needs {_size(need)}" + (f"; {shm_advice(need, free)}" if folder == SHM else ""))
        return folder
    usable = os.path.isdir(SHM) and os.access(SHM, os.W_OK)
    free = free_bytes(SHM) if usable else 0
    if usable and free >= need + SHM_MARGIN:
        return SHM
    if not fallback:
        raise PolicyError(shm_advice(need, free) if usable else
                          f"there is no writable {SHM} here; pass transfer_folder= a folder the vLLM server reads")
    if usable:
        log.warning("weight files go to a folder on disk, slower than shared memory: %s", shm_advice(need, free))
    return None


def chunks(items: list[tuple[str, Any]], limit: int) -> list[list[tuple[str, Any]]]:
    """``(name, tensor)`` pairs split into runs of at most ``limit`` bytes (a larger tensor alone)."""
    out: list[list[tuple[str, Any]]] = [[]]
    size = 0
    for name, tensor in items:
        n = tensor.numel() * tensor.element_size()
        if out[-1] and size + n > limit:
            out.append([])
            size = 0
        out[-1].append((name, tensor))
        size += n
    return out


def chunk_bytes(chunk: list[tuple[str, Any]]) -> int:
    """Bytes of a chunk's tensors."""
    return sum(t.numel() * t.element_size() for _, t in chunk)


def save_chunk(chunk: list[tuple[str, Any]], path: str) -> None:
    """Write one chunk as a safetensors file (on the CPU; tied weights stored once each)."""
    from safetensors.torch import save_file

    tensors, storages = {}, set()
    for name, tensor in chunk:
        t = tensor.detach().to("cpu").contiguous()
        ptr = t.untyped_storage().data_ptr()
        if ptr in storages:  # tied weights share storage; safetensors stores each storage once
            t = t.clone()
            ptr = t.untyped_storage().data_ptr()
        storages.add(ptr)
        tensors[name] = t
    save_file(tensors, path)


def weight_items(weights: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """A state dict or ``(name, tensor)`` pairs as a list of pairs.

    Raises:
        ValueError: when there is nothing to load.
    """
    items = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
    if not items:
        raise ValueError("load_weights got no tensors")
    return items


# ---------------------------------------------------------------------------- the server's endpoints
def server_root(base_url: str) -> str:
    """The server's root URL (its dev endpoints are there, not under ``/v1``)."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


class WeightSender(Protocol):
    """A trainer-side weight transfer engine of vLLM's (``send_weights()`` drives
    ``/start_weight_update``, ``/update_weights``, ``/finish_weight_update`` through its client)."""

    def send_weights(self) -> None:
        """Push the trainer's weights to the server's workers, one full update round."""


class ServerWeights:
    """A vLLM server's weight updates, through its own endpoints.

    Args:
        base_url: The server's OpenAI root or its root (``http://host:8000/v1`` or ``http://host:8000``).
        api_key: Bearer key (the server's ``--api-key``; empty for none).
        timeout: Seconds per request (a load of a large model takes a while).
        transfer_folder: Where weight files go; the server's workers must read the same path
            (default: ``/dev/shm``, checked for room, which a server on the same host, or in a
            container sharing it with ``--ipc=host``, sees).
    """

    def __init__(self, base_url: str, *, api_key: str = "", timeout: float = 600.0,
                 transfer_folder: str | None = None):
        self.root = server_root(base_url)
        self.api_key = api_key
        self.timeout = timeout
        self.transfer_folder = transfer_folder

    # ------------------------------------------------------------------ HTTP
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
                    params: dict[str, str] | None = None) -> tuple[int, Any]:
        """One request; the status and the decoded answer (its text when not JSON).

        A client per call: weight updates are rare, and a pause or a load may outlast any
        pooled connection's keep-alive.

        Raises:
            PolicyError: the server cannot be reached.
        """
        import httpx2

        try:
            async with httpx2.AsyncClient(timeout=self.timeout) as http:
                resp = await http.request(method, f"{self.root}{path}", json=body, params=params,
                                          headers=self._headers())
        except httpx2.HTTPError as exc:
            raise PolicyError(f"{method} {self.root}{path} failed: {type(exc).__name__}: {exc}") from exc
        try:
            data = resp.json() if resp.content else None
        except ValueError:
            data = None
        return resp.status_code, data if data is not None else resp.text[:300]

    async def _ok(self, method: str, path: str, body: dict[str, Any] | None = None,
                  params: dict[str, str] | None = None) -> Any:
        status, data = await self._call(method, path, body, params)
        if status == 404:
            raise PolicyError(f"{self.root} has no {path} endpoint: start vLLM (>= 0.11) with VLLM_SERVER_DEV_MODE=1 "
                              "for its weight-update endpoints")
        if status != 200:
            raise PolicyError(f"{method} {self.root}{path} answered HTTP {status}: {data}")
        return data

    # ------------------------------------------------------------------ probing
    async def probe(self) -> dict[str, bool]:
        """Which of the weight-update paths the running server offers.

        Returns:
            ``pause`` (``/pause``, ``/resume``, ``/is_paused``), ``weight_version``
            (``/weight_info``), ``collective_rpc`` (the endpoint) and ``cowork_loader``
            (cowork's worker extension answers through it).

        Raises:
            PolicyError: the server cannot be reached.
        """
        found = {"pause": False, "weight_version": False, "collective_rpc": False, "cowork_loader": False}
        status, data = await self._call("GET", "/is_paused")
        found["pause"] = status == 200 and isinstance(data, dict) and "is_paused" in data
        status, data = await self._call("GET", "/weight_info")
        found["weight_version"] = status == 200 and isinstance(data, dict) and "weight_version" in data
        status, data = await self._call("POST", "/collective_rpc", {"method": PROBE_METHOD})
        found["collective_rpc"] = status != 404
        results = data.get("results") if status == 200 and isinstance(data, dict) else None
        found["cowork_loader"] = isinstance(results, list) and bool(results) and \
            all(str(r).lower() == "true" for r in results)
        return found

    async def weight_version(self) -> str | None:
        """The server's ``weight_version`` (``/weight_info``); None when it has none.

        Raises:
            PolicyError: the server has no ``/weight_info`` (not in dev mode) or fails.
        """
        data = await self._ok("GET", "/weight_info")
        version = data.get("weight_version") if isinstance(data, dict) else None
        return None if version is None else str(version)

    async def pause(self) -> None:
        """Let the requests in flight finish, hold new ones, and clear the caches.

        ``mode=wait`` for vLLM >= 0.14; ``wait_for_inflight_requests`` for the releases before,
        which ignore ``mode`` (a newer one ignores the older name).

        Raises:
            PolicyError: the server has no ``/pause`` (not in dev mode) or fails.
        """
        await self._ok("POST", "/pause", params={"mode": "wait", "wait_for_inflight_requests": "true",
                                                 "clear_cache": "true"})

    async def resume(self) -> None:
        """Serve again after :meth:`pause`.

        Raises:
            PolicyError: the server fails.
        """
        await self._ok("POST", "/resume")

    async def reset_prefix_cache(self, attempts: int = 5) -> None:
        """Drop the prefix cache (its blocks hold keys and values of the old weights).

        Raises:
            PolicyError: the server keeps refusing (it refuses while requests hold blocks).
        """
        for attempt in range(attempts):
            data = await self._ok("POST", "/reset_prefix_cache")
            if not isinstance(data, dict) or data.get("success", True) is not False:
                return
            await asyncio.sleep(0.05 * 2 ** attempt)
        raise PolicyError(f"{self.root} refused to reset its prefix cache after a weight update")

    async def set_version(self, version: int | str) -> bool:
        """Set the server's ``weight_version`` (``/weight_info`` reads it back); False when the
        server has no ``/update_weight_version`` (a release before it): the client's own count
        is what trajectories record, so the update stands.

        Raises:
            PolicyError: the server fails.
        """
        status, data = await self._call("POST", "/update_weight_version", {"new_version": str(version)})
        if status == 404:
            log.warning("%s has no /update_weight_version: its /weight_info will not show version %s", self.root,
                        version)
            return False
        if status != 200:
            raise PolicyError(f"POST {self.root}/update_weight_version answered HTTP {status}: {data}")
        return True

    # ------------------------------------------------------------------ updates
    async def update(self, weights: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None, *,
                     version: int | str, transfer: WeightSender | None = None, chunk_bytes_limit: int = 1 << 30) -> None:
        """Pause the server, load new weights, set its version, resume it (whatever failed).

        Args:
            weights: A state dict or ``(name, tensor)`` pairs, sent as files through
                ``/collective_rpc`` (checkpoint names, as the model's transformers class has them).
            version: The server's ``weight_version`` afterwards.
            transfer: Instead of ``weights``: vLLM's trainer-side transfer engine (NCCL, IPC),
                whose ``send_weights()`` runs in a thread.
            chunk_bytes_limit: Most bytes per file.

        Raises:
            ValueError: neither or both of ``weights`` and ``transfer``, or no tensors.
            PolicyError: an endpoint is missing (the message says how to start the server) or
                fails; the shared memory is too small (the message says what to set).
        """
        if (weights is None) == (transfer is None):
            raise ValueError("pass weights= (files through /collective_rpc) or transfer= (vLLM's transfer engine)")
        items = weight_items(weights) if weights is not None else []
        parts = chunks(items, chunk_bytes_limit) if items else []
        folder = None
        if parts:  # checked before the server is paused: a failure leaves it serving
            folder = transfer_folder(max(chunk_bytes(p) for p in parts), folder=self.transfer_folder, fallback=False)
        await self.pause()
        try:
            if transfer is not None:
                await asyncio.to_thread(transfer.send_weights)
            else:
                await self._load_files(parts, folder)
            await self.reset_prefix_cache()
            await self.set_version(version)
        finally:
            await self.resume()
        log.info("%s: weights version %s loaded", self.root, version)

    async def _load_files(self, parts: list[list[tuple[str, Any]]], folder: str | None) -> None:
        where = tempfile.mkdtemp(prefix="cowork-weights-", dir=folder)
        try:
            for n, chunk in enumerate(parts):
                path = os.path.join(where, f"chunk-{n}.safetensors")
                await asyncio.to_thread(save_chunk, chunk, path)
                status, data = await self._call("POST", "/collective_rpc",
                                                {"method": LOAD_METHOD, "args": [path], "timeout": self.timeout})
                if status == 404:
                    raise PolicyError(f"{self.root} has no /collective_rpc: start vLLM with VLLM_SERVER_DEV_MODE=1 "
                                      "to load weights into it")
                if status != 200:
                    raise PolicyError(f"{self.root}: the workers failed to load {path}: HTTP {status}: {data}; was "
                                      "the server started with --worker-extension-cls "
                                      "cowork.agents.vllm_engine.WeightLoaderExtension, and does it see this path?")
                results = data.get("results") if isinstance(data, dict) else None
                wrong = [r for r in results or [] if str(r) != str(len(chunk))]
                if not results or wrong:
                    raise PolicyError(f"{self.root}: the workers loaded {results} tensors of the {len(chunk)} in {path}")
                os.unlink(path)
        finally:
            shutil.rmtree(where, ignore_errors=True)


class WeightTransferControl:
    """vLLM's weight-sync client protocol (``VLLMWeightSyncClient``) over a server's HTTP routes,
    for vLLM's trainer-side transfer engines: they call these synchronously, from the trainer.

    Args:
        base_url: The server's OpenAI root or its root.
        api_key: Bearer key.
        timeout: Seconds per request.
    """

    def __init__(self, base_url: str, *, api_key: str = "", timeout: float = 600.0):
        self.root = server_root(base_url)
        self.api_key = api_key
        self.timeout = timeout

    def _post(self, path: str, body: dict[str, Any] | None = None) -> None:
        import httpx2

        try:
            resp = httpx2.post(f"{self.root}{path}", json=body, timeout=self.timeout,
                               headers={"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})
        except httpx2.HTTPError as exc:
            raise PolicyError(f"POST {self.root}{path} failed: {type(exc).__name__}: {exc}") from exc
        if resp.status_code == 404:
            raise PolicyError(f"{self.root} has no {path}: start vLLM with VLLM_SERVER_DEV_MODE=1 and "
                              "--weight-transfer-config (e.g. '{\"backend\": \"nccl\"}')")
        if resp.status_code != 200:
            raise PolicyError(f"POST {self.root}{path} answered HTTP {resp.status_code}: {resp.text[:300]}")

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        """``/init_weight_transfer_engine``: the workers join the trainer's transfer group."""
        self._post("/init_weight_transfer_engine", {"init_info": init_info})

    def start_weight_update(self) -> None:
        """``/start_weight_update``."""
        self._post("/start_weight_update")

    def update_weights(self, update_info: Any) -> None:
        """``/update_weights``: the workers receive one round (names, dtypes, shapes)."""
        self._post("/update_weights", {"update_info": update_info})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        """``/finish_weight_update``."""
        self._post("/finish_weight_update", {"weight_version": weight_version} if weight_version is not None else None)

    def shutdown_weight_transfer_engine(self) -> None:
        """``/shutdown_weight_transfer_engine``."""
        self._post("/shutdown_weight_transfer_engine")


__all__ = ["LOAD_METHOD", "PROBE_METHOD", "SHM", "ServerWeights", "WeightSender", "WeightTransferControl",
           "chunks", "free_bytes", "save_chunk", "server_root", "shm_advice", "transfer_folder", "weight_items"]
