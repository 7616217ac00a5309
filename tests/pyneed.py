"""pyneed.py — what the Python tests share: the import guard need("numpy", "torch")
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


def run_dump(exe, env_name, file_name):
    """The bytes a C test writes where the environment variable env_name points
    (its dump for a PyTorch comparison): runs `exe cpu` with it set to a
    temporary file; the test's failure ends the script with its output."""
    import os
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        dump = os.path.join(d, file_name)
        env = dict(os.environ, **{env_name: dump})
        r = subprocess.run([exe, "cpu"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            print(r.stdout)
            sys.exit("%s failed (exit %d)" % (exe, r.returncode))
        return open(dump, "rb").read()
