"""The ``--query*`` vocabulary, between the model and the renderers: which names exist (nvidia-smi's
and gpudiag's own), their aliases and units, the reading each answers and the part of it
(``gpu_fields``, from the data modules ``smi_names`` and ``reading_names``; the list queries:
``list_fields``), and a query string parsed into those columns, with the usage errors for a name
that is not there (``parse``). Formats stay names here and N/A rules stay out: the CSV renderer
(``render.csv_query``, ``render.csv_lists``) resolves and writes them. Imports neither ``render`` nor
``cli`` (tests/test_layers.py).
"""
