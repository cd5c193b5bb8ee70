"""Model -> output: rich renderables, JSON, CSV. Pure: no probing here."""
