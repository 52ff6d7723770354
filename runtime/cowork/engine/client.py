"""Docker access: one shared client and a bounded thread pool for its blocking calls."""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

import docker
import docker.errors

from ..errors import DockerUnavailable

T = TypeVar("T")

_lock = threading.Lock()
_client: docker.DockerClient | None = None
_pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="docker")


def get_client() -> docker.DockerClient:
    """The process-wide Docker client, checked with a ping on first use.

    Raises:
        DockerUnavailable: when no daemon answers, with how to start one.
    """
    global _client
    with _lock:
        if _client is None:
            try:
                client = docker.from_env(timeout=120, max_pool_size=64)
                client.ping()
            except (docker.errors.DockerException, OSError) as exc:
                raise DockerUnavailable(
                    f"no Docker daemon answers ({exc}); start one (as root: "
                    "`apt-get install -y docker.io && dockerd &`, or `bash scripts/setup.sh`) "
                    "or set DOCKER_HOST"
                ) from exc
            _client = client
        return _client


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking Docker call in the bounded pool, off the event loop."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool, functools.partial(fn, *args, **kwargs))


def docker_available() -> bool:
    """True when a daemon answers a ping."""
    try:
        get_client()
        return True
    except DockerUnavailable:
        return False
