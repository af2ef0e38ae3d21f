"""pytest setup: the binding from python/ of this source tree; the library from
$LAZYTENSOR_LIB or the tree's build folder (python/lazytensor/_lib.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
