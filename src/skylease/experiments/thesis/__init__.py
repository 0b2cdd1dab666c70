"""Reproductions of C. O. Diaz's thesis (2014): chapter 3 mapping, chapters 5-6 placement."""
