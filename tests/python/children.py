# SPDX-License-Identifier: Apache-2.0
# Functions that run in child processes started by the tests (an importable
# module: spawned and forkserver children import them by name).
import time

from conftest import cpus_allowed


def wait_for(path, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path):
                return
        except FileNotFoundError:
            time.sleep(0.01)


def spawned_rank(index, release_path):
    """torch.multiprocessing.spawn's function: stay alive until the parent has
    read this process's mask from /proc/<pid>/status."""
    wait_for(release_path)


def report_mask(queue):
    """A multiprocessing target: report this process's own mask."""
    queue.put(cpus_allowed())


class MaskDataset:
    """A map-style dataset whose every item is (worker id, the worker's mask)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch.utils.data

        info = torch.utils.data.get_worker_info()
        return (info.id if info is not None else -1, cpus_allowed())
