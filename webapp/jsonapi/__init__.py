"""The plumbing every JSON endpoint shares, below the apps that serve them: `bearer.py` (the one
bearer-token authenticator, the JSON API's and the MLflow endpoint's) and `http.py` (the
`@api_view` wrapper: authentication, errors as JSON, reading request bodies). The endpoints
themselves live with their apps; `webapp/api/` gathers them under /api/v1/."""
