"""Runtime: load generated modules, launch, specialization cache, ref mode."""
