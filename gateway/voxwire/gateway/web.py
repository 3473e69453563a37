"""The web app: static pages at ``/app/``, the browser SDK at ``/app/sdk/`` and
mqtt.js at ``/app/vendor/``, all served from this machine (no CDN).

The SDK is ``client-sdk/js/src`` of the source tree and mqtt.js its npm
dependency (``make web`` installs it). Without them the app still loads and
says what to run.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

log = logging.getLogger(__name__)

PAGES = Path(__file__).resolve().parent / "webapp"
SDK = Path(__file__).resolve().parents[3] / "client-sdk" / "js"
MQTT_JS = SDK / "node_modules" / "mqtt" / "dist"


def mount_web_app(app: FastAPI) -> None:
    """Serve the web app; ``/`` leads to it."""
    if not (MQTT_JS / "mqtt.esm.js").is_file():
        log.warning("the web app needs mqtt.js, which is not installed: run `make web`")
    else:
        app.mount("/app/vendor", StaticFiles(directory=MQTT_JS), name="vendor")
    if (SDK / "src").is_dir():
        app.mount("/app/sdk", StaticFiles(directory=SDK / "src"), name="sdk")
    app.mount("/app", StaticFiles(directory=PAGES, html=True), name="app")

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        return RedirectResponse("/app/")
