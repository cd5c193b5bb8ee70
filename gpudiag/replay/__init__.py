"""Replaying a recorded machine: what ``--replay``, ``snapshot`` and ``python -m gpudiag.replay`` run on.

The fixture loader (:mod:`.fixtures`), a fake ``pynvml`` module answering from a machine
(:mod:`.fake_nvml`), the recorded host process table (:mod:`.fake_host`), and a runner that
puts the fake under another NVML program (:mod:`.run`). Shipped with the package so that a
replay runs the real NVML source code anywhere, GPU or not.
"""
