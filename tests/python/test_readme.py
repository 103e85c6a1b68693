# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""The README's Python examples run as written: every fenced ```python block of README.md, each in
a fresh temporary directory, as a user pasting it would run it, and then again in the same
directory, as a user trying it twice would (its store persists).

Usage: test_readme.py numpy|torch
  numpy: the blocks that do not use PyTorch (they must exist and pass)
  torch: the blocks that do; reported as skipped where torch is not installed
"""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import unittest

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "README.md")


def python_blocks(text):
    """The code of each ```python block, in order."""
    return re.findall(r"^```python\n(.*?)^```\s*$", text, re.S | re.M)


def uses_torch(code):
    return re.search(r"^\s*(from\s+torch\b|import\s+.*\btorch\b)", code, re.M) is not None


def selected_blocks(kind):
    with open(README, encoding="utf-8") as f:
        blocks = python_blocks(f.read())
    return [b for b in blocks if uses_torch(b) == (kind == "torch")]


class ReadmeExamples(unittest.TestCase):
    kind = "numpy"

    def test_examples_run_as_written(self):
        blocks = selected_blocks(self.kind)
        # An example removed or renamed out of the ```python fence would otherwise pass unseen.
        self.assertTrue(blocks, f"README.md has no {self.kind} ```python block")
        if self.kind == "torch" and importlib.util.find_spec("torch") is None:
            self.skipTest("torch is not installed")
        for i, code in enumerate(blocks):
            with self.subTest(block=i), tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as d:
                path = os.path.join(d, "example.py")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(code)
                for run in ("first", "second"):
                    r = subprocess.run([sys.executable, path], cwd=d, capture_output=True, text=True, timeout=300)
                    self.assertEqual(r.returncode, 0,
                                     f"README {self.kind} example {i} failed when run a {run} time:\n{code}\n"
                                     f"--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("numpy", "torch"):
        sys.exit(__doc__)
    ReadmeExamples.kind = sys.argv.pop(1)
    unittest.main(verbosity=2)
