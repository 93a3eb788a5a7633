"""Differential fuzzing of the compiler passes: random graphs against float64 NumPy."""
