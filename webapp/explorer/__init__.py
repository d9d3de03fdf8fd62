"""The runs explorer: every run a user may read, across experiments, as one table to search
(MLflow's filter language, `webapp/tracking/search.py`, with Troupe's fields), shape (columns,
sort, saved views), export and hand to the panel's views; tags and Markdown notes on runs and
experiments from the browser; parallel coordinates and a grouped chart over the chosen runs."""
