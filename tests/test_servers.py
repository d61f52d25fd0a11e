"""The test helpers' own guarantees (servers.py).

Usage: test_servers.py
"""
import unittest

import servers


class FreePortTest(unittest.TestCase):

    def test_never_the_same_port_twice(self):
        """3,000 ports asked for in a row, none of them bound meanwhile,
        are all different: two callers that bind later never share one.
        (Drawn at random from Linux's ~28,000 ephemeral ports, 3,000 would
        repeat one with near certainty.)"""
        ports = [servers.free_port() for _ in range(3000)]
        self.assertEqual(len(set(ports)), len(ports))


if __name__ == "__main__":
    unittest.main(verbosity=2)
