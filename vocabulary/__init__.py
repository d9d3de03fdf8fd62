"""The vocabulary every process shares: `names.py`, the metric keys and matrix axes that are a
contract (docs/design.md §5). It sits below the trainer, the analysis and the web app and
imports nothing of ours, nor anything beyond the standard library.
"""
