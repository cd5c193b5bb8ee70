"""Fleet views over per-node gpudiag outputs: merge them (`report`), name node sets in Slurm's
hostlist syntax (`hostlists`), and drain what is broken the way NHC does (`drain`).

gpudiag stays a per-node tool: Slurm (srun, Prolog, HealthCheckProgram) does the fan-out.
"""
