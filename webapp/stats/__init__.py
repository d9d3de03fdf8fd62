"""The statistics page: an experiment's results across seeds, as a page and as JSON."""
