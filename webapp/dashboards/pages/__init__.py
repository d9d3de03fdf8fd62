"""One module per view of the panel; each registers its page and its own callbacks."""
