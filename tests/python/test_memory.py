# SPDX-License-Identifier: Apache-2.0
"""Host buffers from Python: the pages are where the kernel says, the bytes are
a writable buffer, a node that is not allowed raises naming it, and the torch
helper says plainly when there is no torch or no CUDA."""
import mmap

import pytest

import gpuaff


def allowed_node():
    # Mems_allowed_list of /proc/self/status: the nodes this process may use.
    for line in open("/proc/self/status"):
        if line.startswith("Mems_allowed_list:"):
            return min(gpuaff._gpuaff.parse_cpulist(line.split(":", 1)[1].strip()))
    pytest.skip("no Mems_allowed_list in /proc/self/status")


def test_every_page_is_on_the_node_and_the_bytes_are_writable():
    node = allowed_node()
    size = 1024 * 1024 + 1  # 256 pages of 4 KiB and one more for the last byte
    buf = gpuaff.host_buffer(size, str(node))
    page = mmap.PAGESIZE
    assert buf.size == size
    assert buf.mapped == (size + page - 1) // page * page
    assert buf.placement["nodes"] == {node: buf.mapped // page}
    assert buf.placement["not_present"] == 0
    view = memoryview(buf)
    assert view.nbytes == size and not view.readonly
    view[size - 1] = 7
    assert bytes(view[size - 1:]) == b"\x07"
    assert buf.query()["nodes"] == {node: buf.mapped // page}


def test_a_node_that_is_not_allowed_raises_naming_it():
    with pytest.raises(gpuaff.EmptyResult, match="NUMA node\\(s\\) 63 are not allowed"):
        gpuaff.host_buffer(4096, [63])


def test_bad_words_and_missing_nodes_are_usage_errors():
    with pytest.raises(gpuaff.InvalidArgument, match="fault='lazy' is not touch or populate"):
        gpuaff.host_buffer(4096, "0", fault="lazy")
    with pytest.raises(gpuaff.InvalidArgument, match="needs nodes="):
        gpuaff.host_buffer(4096)


def test_pinned_tensor_without_cuda_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: tools/gpu-probe-check.sh exercises the pinned tensor")
    buf = gpuaff.host_buffer(4096, str(allowed_node()))
    with pytest.raises(gpuaff.Unsupported, match="needs torch with CUDA"):
        gpuaff.pinned_tensor(buf)
    # The buffer still works as a plain buffer.
    assert memoryview(buf).nbytes == 4096


def test_host_nodes_are_the_cpu_node_beside_a_gb200_gpu_not_its_memory_node():
    # fixtures/README: gb200-tray-numa's GPU 2 (0018:01:00.0) sits on Grace 1 (node 1, its PCI
    # numa_node) and its HBM is the CPU-less node 18. Buffers the GPU copies from belong on node 1,
    # whatever mem_nodes says the memory policy binds to.
    from conftest import FIXTURES
    import os
    root = os.path.join(FIXTURES, "gb200-tray-numa")
    if not os.path.isdir(root):
        pytest.skip("%s is missing: configure the build" % root)
    plan = gpuaff.plan(root=root, gpu=2, mem_nodes="gpu", membind="local")
    assert plan.memory_nodes == {18}
    assert plan.host_nodes == {1}
    assert " host=1" in plan.environment["GPUAFF_PLAN"]
