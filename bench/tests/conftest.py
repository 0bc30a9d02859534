import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
SCRIPT = os.path.join(BENCH, "benchmark.py")
FAKE_TE = os.path.join(HERE, "fake_te")
FAKE_TORCH = os.path.join(HERE, "fake_torch")

if BENCH not in sys.path:
    sys.path.insert(0, BENCH)


def te_really_installed():
    try:
        import transformer_engine.pytorch  # noqa: F401
        return True
    except Exception:
        return False


class Run(object):
    def __init__(self, proc_rc, stdout, stderr):
        self.rc = proc_rc
        self.stdout = stdout
        self.stderr = stderr
        self.events = [json.loads(line) for line in stdout.splitlines() if line.strip()]

    def of(self, name):
        return [e for e in self.events if e["event"] == name]

    def errors(self, code=None):
        return [e for e in self.of("error") if code is None or e["code"] == code]


def run_bench(args, env_extra=None, pythonpath=None, cwd=None, timeout=240):
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["CUDA_VISIBLE_DEVICES"] = env.get("PL_TEST_CUDA_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES", ""))
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(pythonpath + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    if env_extra:
        env.update(env_extra)
    p = subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True, env=env,
                       cwd=cwd or BENCH, timeout=timeout)
    return Run(p.returncode, p.stdout, p.stderr)


@pytest.fixture
def bench():
    return run_bench


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU with FP8")
