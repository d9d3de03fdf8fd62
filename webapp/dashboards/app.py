"""The panel's entry module: the Dash app, the frame around every page, and the pages.

Mounted by `webapp/wsgi.py` at /dash/ beside Django (see `mount.py`): Flask routes start at
"/", the browser's requests at "/dash/". Everything the browser loads — Dash's renderer,
plotly.js, the stylesheet in `assets/` — is served by this app itself: there is no CDN here
or on many clusters. The renderer sends Django's CSRF cookie back as X-CSRFToken with every
callback, which the login wrapper checks like any Django form post.
"""

from pathlib import Path

import dash
from dash import Dash, html
from django.conf import settings

from webapp.dashboards.callback_inputs import install as check_callback_inputs
from webapp.dashboards.pages import attribution, bands, compare, gradients, home, matrix

app = Dash(
    __name__,
    requests_pathname_prefix="/dash/",
    routes_pathname_prefix="/",
    use_pages=True,
    pages_folder="",  # the pages are imported below, so tests can import them as modules
    assets_folder=str(Path(__file__).with_name("assets")),
    serve_locally=True,
    title="Troupe panel",
    update_title=None,
    # Sync callbacks: Dash turns async on when asgiref is installed (Django brings it), and
    # Django refuses database queries from inside an event loop.
    use_async=False,
    csrf_token_name=settings.CSRF_COOKIE_NAME,
    csrf_header_name="X-CSRFToken",
)


def _frame() -> html.Div:
    # Plain links (not dcc.Link): these are Django pages, a full load away. The same places
    # as the site's own header (base.html).
    return html.Div(
        [
            html.Header(
                className="topbar",
                children=[
                    html.A("Troupe", href="/", className="brand"),
                    html.Nav(
                        className="nav",
                        children=[
                            html.A("Experiments", href="/"),
                            html.A("Panel", href="/dash/", className="current"),
                            html.A("Alerts", href="/alerts/"),
                            html.A("Account", href="/accounts/"),
                            # A link, not the site's POST form: the frame has no CSRF token.
                            html.A("Sign out", href="/accounts/sign-out/"),
                        ],
                    ),
                ],
            ),
            html.Main(dash.page_container, className="panel"),
        ]
    )


app.layout = _frame
check_callback_inputs(app)  # a wrongly typed input is a 400 before any callback sees it

# The pages are plain modules: importing one defines its layout and callbacks (Dash's global
# callback list, which the app reads at its first request) and never imports this module. The
# app registers them here; register_page needs `app` to exist.
for _page in (home, matrix, compare, bands, gradients, attribution):
    dash.register_page(_page.__name__, layout=_page.layout, **_page.PAGE)
