"""What crosses nodes, on Slurm: per-node output files merged into one report, the drain of the
nodes it judged not ready, and `check --mode` for the Prolog and the health check."""
