"""`gpudiag top`: the interactive monitor (Textual). ``rows`` makes its tables' rows from a sample and
sorts, filters and nests them (pure); ``host`` is what it asks the live host about a process (owner,
parent, environment) and the one place a signal is sent; ``app`` is the Textual application."""
