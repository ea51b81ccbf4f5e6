"""The askbus Python client's test suite (see support.py). Run from the repository root with
``python3 -m unittest discover -s clients/python/tests`` (``-t clients/python`` works too)."""

import os
import sys

# The test modules import their helpers as `support`, however discovery names them.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
