"""The kubelet's pod-resources API v1, generated from the official api.proto (see README.md here)."""
