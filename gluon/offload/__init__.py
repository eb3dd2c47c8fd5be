"""The initial copy of a table into the lake, and partial-offload increments."""
