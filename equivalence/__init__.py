"""Checks that every path computes the same thing from the same weights and data.

``compare`` holds the framework-free comparison and the tolerance table;
``check`` runs the paths through workers and compares every pair; ``python -m
equivalence`` prints the table and exits non-zero on any disagreement.
"""
