"""CUDA's own answer to a CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER setting: the visible_probe child,
run with that setting in its environment (CUDA is never initialised in gpudiag's own process)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from gpudiag.errors import UsageError
from gpudiag.probe import child

TIMEOUT_S = 120.0  # cuInit on many GPUs without persistence mode takes seconds per GPU


def ask(setting: Mapping[str, str | None]) -> child.ChildResult:
    """Run the probe child with these variables set as given (None: unset); its result, whatever became of it."""
    for name, text in setting.items():
        if text is not None and "\0" in text:
            raise UsageError(f"{name} cannot contain a NUL character; the probe cannot pass it on")
    env = {name: text for name, text in os.environ.items() if name not in setting}
    env.update({name: text for name, text in setting.items() if text is not None})
    return child.run_child([str(child.script("visible_probe"))], env=env, timeout=TIMEOUT_S)
