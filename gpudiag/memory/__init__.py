"""Where the GPU memory went: NVML's figures joined with PyTorch's allocator view (`gpudiag memory`).

Data types below, logic above, nothing imports upward (tests/test_layers.py):

- ``view``: the picture's types (``MemoryView`` and its rows) and the fact groups it reads;
- ``build``: NVML's processes matched with the tracker's entries (``gpudiag.track.entries``) -> a view;
- ``forecast``, ``ranks``, ``fragmentation``: the training figures (steps, a leak's time to full, a job's
  ranks, the allocator's split blocks); ``insights``: what the figures mean, in lines;
- ``state``: what a watch remembers between samples; ``tracked``: whose entries a view joins (live,
  or a replay's recording); ``log``: a ``--log`` file read back for ``--plot``;
- ``watch``: the ``--watch`` loop and its sinks (renderers, log, metrics); ``postmortem``: the machine's
  view for an OOM post-mortem, and reading one back;
- ``request``: the command's options checked, and the one-shot or watch they ask for.
"""
