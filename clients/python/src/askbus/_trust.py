"""Which daemon a client agrees to talk to. Without ``XDG_RUNTIME_DIR`` the default socket is
``/tmp/askbus-<uid>/askbus.sock``, a path another local user can create first; whoever listens
there would read the questions and answer them. So every connect checks the listener's uid
(``SO_PEERCRED``, which a peer cannot forge) before a byte is sent.

A daemon is trusted when it runs as this process's uid or as root (a system bus whose socket
systemd created and passed on is listened on by root). A shared bus run by another account is
named explicitly in ``ASKBUS_DAEMON_UID`` (a uid, or several separated by commas); the same
rule as the Rust client's (clients/rust/src/trust.rs)."""

from __future__ import annotations

import os
import socket
import struct
from typing import Optional

from .errors import UntrustedDaemon

DAEMON_UID_ENV = "ASKBUS_DAEMON_UID"


def trusted_uid(uid: int, allowed: Optional[str] = None) -> bool:
    if uid in (os.geteuid(), 0):
        return True
    for part in (allowed or "").split(","):
        part = part.strip()
        if part.isdigit() and int(part) == uid:
            return True
    return False


def check_daemon(sock: Optional[socket.socket], socket_path: str) -> None:
    """Raises ``UntrustedDaemon`` unless the peer of ``sock`` is a trusted uid."""
    so_peercred = getattr(socket, "SO_PEERCRED", None)
    if sock is None or so_peercred is None:
        return  # not Linux: nothing to ask
    creds = sock.getsockopt(socket.SOL_SOCKET, so_peercred, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    if not trusted_uid(uid, os.environ.get(DAEMON_UID_ENV)):
        raise UntrustedDaemon(socket_path, uid)
