"""Data-parallel communication: the all-reduce each partition measures, and what it adds to a step."""
