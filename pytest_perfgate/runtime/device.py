"""Which device engines run on here: the CUDA device's name, or the CPU (torch imported lazily)."""

from __future__ import annotations

import os


def device_name() -> str:
    """``"cpu"`` or the CUDA device name."""
    try:
        import torch

        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name(0))
    except Exception:
        pass
    return "cpu"


def cuda_hint() -> bool:
    """Without importing torch (seconds): is an NVIDIA GPU likely visible here? The driver is loaded
    and ``CUDA_VISIBLE_DEVICES`` does not hide every device. A hint for choices that may be wrong
    at no cost (starting vLLM's fork server early); :func:`cpu_only` decides."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def cpu_only() -> bool:
    """True when no CUDA device is visible (the CPU backend of vLLM)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return True
    try:
        import torch

        return not torch.cuda.is_available()
    except Exception:
        return True
