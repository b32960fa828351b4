"""cr_bench: checkpoint overhead of whole programs (docs/performance.md, "Overhead study")."""
