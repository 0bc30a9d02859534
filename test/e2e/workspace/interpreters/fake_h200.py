"""Stand-in for the Python of a machine with one NVIDIA H200, for the end-to-end tests of the benchmark view on a
machine without a GPU: Debian's python3 and torch, with torch.cuda answering as that GPU does, run the real
bench/benchmark.py --probe / --list-workloads (so the view gets the real env event and backend report). With
`with_te`, the benchmark tests' fake Transformer Engine (bench/tests/fake_te) is importable too. A benchmark run
is refused: nothing here can train on a GPU."""
import os
import runpy
import sys


def main(with_te):
    args = sys.argv[1:]
    if not args or not args[0].endswith("benchmark.py") or not ({"--probe", "--list-workloads"} & set(args)):
        sys.stderr.write("fake H200 interpreter: only `benchmark.py --probe` and `--list-workloads` are answered\n")
        return 2
    import torch

    class Properties(object):
        name = "NVIDIA H200"
        major, minor = 9, 0
        total_memory = 150 * 1024 ** 3
        multi_processor_count = 132

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_properties = lambda index: Properties()
    torch.version.cuda = "13.0"
    if with_te:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(args[0])), "tests", "fake_te"))
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
    return 0
