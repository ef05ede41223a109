"""What this process registered at run time, as one payload that worker processes install.

A user registers things in their own script -- a tensor intrinsic (``TensorIntrin.register``),
a warp-level operation (``tir.analysis.register_warp_level_op``), an ONNX operator
(``metasched.model.ops.register``) -- and then tunes. The tuner makes and measures candidates in
other processes (local workers, dask workers on other machines), which import tensorir afresh
and know only its built-in registrations. ``capture()`` gathers everything registered beyond
them; a worker calls ``install(registrations)`` before it touches a candidate:

    registrations = capture()            # None when nothing was registered at run time
    ...                                  # in the worker:
    install(registrations)               # RegistrationError (one line) when it cannot

Entries travel with ``cloudpickle``: a desc/impl pair, an ``extra_check`` lambda or an operator
lowering defined in the user's ``__main__`` travels by value; one defined in an importable module
travels by reference, so the worker must be able to import that module -- when it cannot, the
error names the module and the registration that needs it.

A registry takes part by calling ``add_provider(__name__)`` at import and defining, in that
module, ``runtime_registrations() -> list[tuple[str, object]]`` (a label such as "tensor intrinsic
'my_dot'" and the item) and ``install_registration(item)``; it calls ``changed()`` whenever its
contents change, so that ``capture`` makes a new payload only then.
"""

from __future__ import annotations

import hashlib
import importlib
import pickle
import socket
import sys
from dataclasses import dataclass, field

__all__ = ["RegistrationError", "Registrations", "add_provider", "capture", "changed", "install"]


class RegistrationError(RuntimeError):
    """A worker cannot install what this process registered at run time (one line, naming the
    registration and what it lacks)."""


@dataclass(frozen=True)
class Registrations:
    """The run-time registrations of a process: ``entries`` are (provider module, label,
    cloudpickled item); ``digest`` identifies them (a worker installs a digest once)."""

    entries: tuple[tuple[str, str, bytes], ...]
    digest: str = field(compare=False)

    @property
    def labels(self) -> list[str]:
        return [label for _, label, _ in self.entries]


_PROVIDERS: list[str] = []
_generation = 0
_captured: tuple[int, Registrations | None] | None = None
_installed: str | None = None


def add_provider(module: str) -> None:
    """Declare ``module`` a registry whose run-time entries ``capture`` collects."""
    if module not in _PROVIDERS:
        _PROVIDERS.append(module)
    changed()


def changed() -> None:
    """A registry's contents changed: the next ``capture`` gathers them again."""
    global _generation
    _generation += 1


def capture() -> Registrations | None:
    """Everything this process registered at run time (beyond tensorir's built-ins), or None."""
    global _captured
    if _captured is not None and _captured[0] == _generation:
        return _captured[1]
    import cloudpickle

    entries = []
    for provider in _PROVIDERS:
        module = sys.modules.get(provider)
        if module is None:
            continue
        for label, item in module.runtime_registrations():
            try:
                data = cloudpickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as error:  # noqa: BLE001 - any pickling failure is the user's object
                raise RegistrationError(
                    f"{label} cannot be sent to worker processes: {type(error).__name__}: {error}"
                ) from None
            entries.append((provider, label, data))
    registrations = None
    if entries:
        digest = hashlib.sha1(b"".join(p.encode() + b"\0" + label.encode() + b"\0" + d for p, label, d in entries))
        registrations = Registrations(tuple(entries), digest.hexdigest())
    _captured = (_generation, registrations)
    return registrations


def install(registrations: Registrations | None) -> None:
    """Install ``registrations`` in this (worker) process, once per digest. Raises
    ``RegistrationError`` naming the first registration that cannot be installed and why (most
    often a module it needs that this machine cannot import)."""
    global _installed
    if registrations is None or registrations.digest == _installed:
        return
    for provider, label, data in registrations.entries:
        try:
            item = pickle.loads(data)
        except ImportError as error:
            missing = getattr(error, "name", None) or str(error)
            raise RegistrationError(
                f"{_where()} cannot import module {missing!r}, needed by {label} registered in the tuning process "
                "(install it there, or define the registration in the tuning script itself)"
            ) from None
        except Exception as error:  # noqa: BLE001 - e.g. an attribute gone from a module of another version
            raise RegistrationError(f"{_where()} cannot load {label}: {type(error).__name__}: {error}") from None
        try:
            importlib.import_module(provider).install_registration(item)
        except Exception as error:  # noqa: BLE001 - reported in one line, naming the registration
            raise RegistrationError(f"{_where()} cannot install {label}: {type(error).__name__}: {error}") from None
    _installed = registrations.digest


def _where() -> str:
    return f"the worker process on {socket.gethostname()}"
