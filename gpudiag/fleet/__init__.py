"""Fleet integration: what a cluster's monitoring and scheduling stack reads from gpudiag."""
