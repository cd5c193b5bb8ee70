"""Memory per step from PyTorch Lightning and Hugging Face's Trainer, without depending on either.

Both frameworks call every hook of every callback, so a callback must be a subclass of theirs:
these functions make one from the framework the program already uses, at the moment it asks.

    trainer = lightning.Trainer(callbacks=[gpudiag.track.lightning_callback()])
    trainer = transformers.Trainer(..., callbacks=[gpudiag.track.hf_callback()])
"""

from __future__ import annotations

import importlib
import sys
from typing import Any


def _base(candidates: tuple[tuple[str, str], ...]) -> Any:
    for module, name in candidates:
        loaded = sys.modules.get(module)
        if loaded is None:
            try:
                loaded = importlib.import_module(module)
            except ImportError:
                continue
        base = getattr(loaded, name, None)
        if base is not None:
            return base
    wanted = " or ".join(m for m, _ in candidates)
    raise ImportError(f"gpudiag.track: {wanted} is not installed")


def lightning_callback(track: Any, per_step_peaks: bool = False) -> Any:
    """A Lightning ``Callback`` that starts the tracker and marks each training batch's end as a step.

    ``track`` is the tracker's module, which hands itself over: its functions are looked up when a hook runs.
    """
    base = _base((("lightning.pytorch", "Callback"), ("pytorch_lightning", "Callback")))

    class GpudiagTrack(base):  # type: ignore[misc, valid-type]
        def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
            track.start()
            track.per_step_peaks(per_step_peaks)

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            track.step(int(getattr(trainer, "global_step", 0)) or None)

    return GpudiagTrack()


def hf_callback(track: Any, per_step_peaks: bool = False) -> Any:
    """A Hugging Face ``TrainerCallback`` that marks each optimizer step (``state.global_step``)."""
    base = _base((("transformers", "TrainerCallback"), ("transformers.trainer_callback", "TrainerCallback")))

    class GpudiagTrack(base):  # type: ignore[misc, valid-type]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            track.start()
            track.per_step_peaks(per_step_peaks)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            track.step(int(getattr(state, "global_step", 0)) or None)

    return GpudiagTrack()
