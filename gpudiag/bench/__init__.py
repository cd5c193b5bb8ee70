"""Copy-bandwidth benchmark: planning, statistics and the link model are pure; only
:mod:`gpudiag.bench.engine` touches torch."""
