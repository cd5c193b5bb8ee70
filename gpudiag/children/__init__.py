"""Programs gpudiag runs in child processes, and the one line protocol they speak.

gpudiag itself never imports torch or initialises CUDA: a torch that hangs, crashes or fails
to import is a finding, not a gpudiag failure. Each child is a real module run by path
(``python /…/children/torch_probe.py``), so ``check --python OTHER_INTERPRETER`` can run it
with another environment's interpreter: ``torch_probe``, ``functional`` and ``visible_probe``
import the standard library and :mod:`protocol` only. They import nothing else of gpudiag: the
transfer benchmark's child, which runs gpudiag's engine, is :mod:`gpudiag.bench.child`.
"""
