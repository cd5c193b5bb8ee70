"""gpudiag: GPU diagnostics for ML engineers and cluster admins."""

__version__ = "0.1.0"
