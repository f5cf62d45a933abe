"""Tools that drive or describe the pipeline from outside (stage: tools)."""
