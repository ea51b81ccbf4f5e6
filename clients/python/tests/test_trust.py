"""Who the client agrees to talk to (askbus/_trust.py): the listener's uid (SO_PEERCRED) must be
this process's, root's, or one named in ASKBUS_DAEMON_UID. The attack with real uids (another
user's daemon on the default path) runs in tests/e2e/shared_machine.rs against this client."""

import os
import socket
import unittest

import askbus
from askbus import _trust


class TrustTest(unittest.TestCase):
    def test_own_uid_and_root_are_trusted_others_only_when_named(self):
        own = os.geteuid()
        other = own + 4242
        self.assertTrue(_trust.trusted_uid(own))
        self.assertTrue(_trust.trusted_uid(0))
        self.assertFalse(_trust.trusted_uid(other))
        self.assertFalse(_trust.trusted_uid(other, "1,2"))
        self.assertTrue(_trust.trusted_uid(other, f"1, {other}"))

    def test_the_peer_of_a_real_socket_is_asked(self):
        a, b = socket.socketpair(socket.AF_UNIX)
        try:
            _trust.check_daemon(a, "/x.sock")  # our own uid
        finally:
            a.close()
            b.close()

    def test_the_error_names_the_uid_and_the_way_out(self):
        e = askbus.UntrustedDaemon("/tmp/askbus-1/askbus.sock", 4242)
        self.assertIsInstance(e, askbus.DaemonUnreachable)
        self.assertEqual(e.code, "untrusted-daemon")
        self.assertIn("ASKBUS_DAEMON_UID=4242", str(e))


if __name__ == "__main__":
    unittest.main()
