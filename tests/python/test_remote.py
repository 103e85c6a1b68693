# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""Engine.sync_remote and lookup through the remote tier, against a real redis-server started
here (skipped without one or without hiredis in this build)."""
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import numpy as np

import kvtier


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(kvtier.built_with_remote() and shutil.which("redis-server"),
                     "needs hiredis in this build and redis-server")
class RemoteSyncTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR"))
        self.port = free_port()
        self.server = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", self.dir.name], stdout=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        self.seeds = f"redis://127.0.0.1:{self.port}"
        self.g = kvtier.Geometry.preset("tiny", chunk_tokens=64)

    def tearDown(self):
        self.server.kill()
        self.server.wait()
        self.dir.cleanup()

    def test_records_saved_without_the_remote_tier_reach_it_with_sync(self):
        rng = np.random.default_rng(11)
        tokens = rng.integers(0, 150000, size=1000, dtype=np.int32)
        kv = rng.integers(0, 2**16, size=(2, self.g.layers, 1000, self.g.kv_heads,
                                          self.g.head_dim), dtype=np.uint16)
        a_dir = os.path.join(self.dir.name, "a")
        a = kvtier.open(a_dir, self.g, io="posix", capacity="256M")
        self.assertEqual(a.save(tokens, kv), 16)
        with self.assertRaises(kvtier.Error):
            a.sync_remote()  # no remote tier
        del a
        a = kvtier.open(a_dir, self.g, io="posix", capacity="256M", remote=self.seeds)
        b = kvtier.open(os.path.join(self.dir.name, "b"), self.g, io="posix", capacity="256M",
                        remote=self.seeds)
        self.assertEqual(b.lookup(tokens), 0)
        r = a.sync_remote(tokens[:640])
        self.assertEqual((r["records"], r["already_present"], r["published"], r["failed"]),
                         (10, 0, 10, 0))
        self.assertEqual(b.lookup(tokens), 640)
        r = a.sync_remote()
        self.assertEqual((r["records"], r["already_present"], r["published"], r["failed"]),
                         (16, 10, 6, 0), r["problem"])
        self.assertEqual(b.lookup(tokens), 1000)
        out = np.zeros_like(kv)
        self.assertEqual(b.restore(tokens, out)["tokens_restored"], 1000)
        np.testing.assert_array_equal(out, kv)


if __name__ == "__main__":
    unittest.main()
