"""Benchmarks (`make bench`): each bench_*.py has main() -> int and prints ratios it measured
against a baseline run in the same process or the same minute."""
