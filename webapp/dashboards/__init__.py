"""The Dash panel: matrix, curves and gradient views of experiments, mounted under /dash/.

`app.py` is the entry module (the Dash app and its frame), `pages/` holds one module per view,
`mount.py` puts the app beside Django behind Django's login, `data.py` queries, `figures.py`
and `tables.py` draw, `state.py` reads and writes the URL. The demo experiment that tests,
screenshots and benchmarks share is built by `webapp/demo/build.py`.
"""
