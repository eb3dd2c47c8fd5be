"""Phase 2, extraction: ship captured changes to the lake exactly once, from any change feed."""
