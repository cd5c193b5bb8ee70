"""What a node exports to monitoring, on the engines admins run: the Prometheus exporter (native and
DCGM-compatible families), node_exporter's textfile files, node-problem-detector's plugin answer,
and who owns each GPU process (cgroups, Slurm, the kubelet's pod-resources API)."""
