"""Target control planes as values: their reset and its proof (decision 0101)."""
