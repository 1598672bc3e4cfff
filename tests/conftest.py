import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def fake_nvml(monkeypatch, devices: list[tuple[str, int]]) -> None:
    """Stand in for nvidia-ml-py's module: a host with these (name, total bytes) GPUs. Only the driver
    is faked; the code under test makes its real NVML calls."""
    import types

    class NVMLError(Exception):
        pass

    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.nvmlInit = lambda: None
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: len(devices)
    m.nvmlDeviceGetHandleByIndex = lambda i: devices[i]
    m.nvmlDeviceGetName = lambda h: h[0]
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=h[1], used=0, free=h[1])
    monkeypatch.setitem(sys.modules, "pynvml", m)
