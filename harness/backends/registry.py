"""Every cluster backend by name. A new backend is one module (a `Backend`, see
harness.backends.backend) and one line here; `--backend`'s choices come from this table."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kipcheck.harness.backends import containers_backend, external_backend, native_backend, ssh_backend
from kipcheck.harness.backends.backend import Backend
from kipcheck.harness.errors import HarnessError

if TYPE_CHECKING:
    from kipcheck.harness.run import RunOptions

BACKENDS: dict[str, Backend] = {b.name: b for b in (
    native_backend.BACKEND,
    external_backend.BACKEND,
    containers_backend.BACKEND,
    ssh_backend.BACKEND,
)}
DEFAULT = native_backend.BACKEND.name


def names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def get(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise HarnessError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}") from None


def prepare(options: RunOptions) -> tuple[Backend, RunOptions]:
    """The run's backend and its options checked and completed (Backend.prepare), with what
    only the whole table knows: which backends roll upgrades."""
    backend = get(options.backend)
    if (options.upgrade_from or options.upgrade_to) and not backend.capabilities.upgrades:
        rolling = " or the ".join(b.name for b in BACKENDS.values() if b.capabilities.upgrades)
        raise HarnessError(f"--upgrade-from/--upgrade-to run the {rolling} backend, not {backend.name}")
    return backend, backend.prepare(options)
