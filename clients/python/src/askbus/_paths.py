"""Where the daemon's socket is by default: the same rule as askbusd's (src/paths.rs), so a
client and a daemon started with the same environment meet without configuration."""

from __future__ import annotations

import os
from typing import Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


def _non_empty_env(name: str) -> Optional[str]:
    value = os.environ.get(name)
    return value if value else None


def default_socket_path() -> str:
    """``$ASKBUS_SOCKET``, else ``$XDG_RUNTIME_DIR/askbus.sock``, else
    ``/run/askbus/askbus.sock`` for root, else ``/tmp/askbus-<uid>/askbus.sock``.

    Empty variables count as unset, as they do for the daemon.
    """
    explicit = _non_empty_env("ASKBUS_SOCKET")
    if explicit is not None:
        return explicit
    runtime_dir = _non_empty_env("XDG_RUNTIME_DIR")
    if runtime_dir is not None:
        return os.path.join(runtime_dir, "askbus.sock")
    uid = os.geteuid()
    if uid == 0:
        return "/run/askbus/askbus.sock"
    return f"/tmp/askbus-{uid}/askbus.sock"


def resolve_socket(socket: Optional[PathLike]) -> str:
    """The socket a client connects to: the one given, else the default."""
    if socket is None:
        return default_socket_path()
    return os.fspath(socket)
