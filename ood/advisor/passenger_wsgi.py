"""Passenger's startup file: the advisor's pages (`advisor.web.wsgi`), run as the logged-in user."""

from advisor.web.wsgi import application

__all__ = ["application"]
