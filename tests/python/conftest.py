"""pytest setup: the binding from python/ of this source tree, the library from
$LAZYTENSOR_LIB or the tree's build folder (python/lazytensor/_lib.py).

With LAZYTENSOR_TEST_INSTALLED set to an install prefix (tests/python_check.sh
sets it to the one it installed into), the source tree's python/ is not added:
the session imports the package that PYTHONPATH names and stops at once unless
that package and the library it loaded both lie under the prefix."""
import os
import sys

_installed = os.environ.get("LAZYTENSOR_TEST_INSTALLED")
if not _installed:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
else:
    import lazytensor

    _prefix = os.path.realpath(_installed)
    for _f in (lazytensor.__file__, lazytensor._lib.lib._name):
        if not os.path.realpath(_f).startswith(_prefix + os.sep):
            raise RuntimeError("LAZYTENSOR_TEST_INSTALLED=%s, but the session uses %s" %
                               (_installed, _f))
