"""The deep diagnostics of `check --level 2-4`: a ladder after DCGM Diagnostics' run levels, with
PyTorch alone. Their checks (``mem.test``, ``mem.bandwidth``, ``link.pcie``, ``link.peer``,
``link.nccl``, ``stress.gemm``) and thresholds are :mod:`gpudiag.checks.deep_rules`, with the other checks.

- ``levels``: what each level runs, how long it normally takes, its default budget, the options;
- ``facts``: what the tests found (typed, plain data), in :class:`gpudiag.checks.Facts`;
- ``run``: the parent that runs the tests one phase after another within the budget, each in a
  child process (``memtest``, ``links``, ``allreduce``, ``stress`` hold each phase's parent side), while
  ``sampler`` reads NVML (clocks, clock events, temperature, power, ECC, XIDs) beside them.
"""
