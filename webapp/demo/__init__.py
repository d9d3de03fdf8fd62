"""The demo experiment: synthetic metric series to explore the pages and the panel."""
