"""Stand-ins for NVML and the host, driven by whole-machine fixture files.

Shipped with the package so that replaying a snapshot or an example machine runs the
real NVML source code anywhere, GPU or not.
"""
