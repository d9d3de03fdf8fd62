"""The accounts app: signing in, the home page and the account page."""
