"""pyneed.py — the import guard of the Python tests: need("numpy", "torch")
before importing them. A module that is not installed makes the test report
skipped (prints "SKIP: <why>", exits 77, ctest's SKIP_RETURN_CODE); one that
is installed but fails to import fails the test with its own error."""
import importlib
import sys


def need(*names):
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
            print(f"SKIP: {sys.executable} cannot import {name} "
                  f"(apt-get install python3-{name}, as scripts/dev.sh does)")
            sys.exit(77)
