"""Runs and queueing: the experiment and run pages, the queue, access, files and summaries."""
