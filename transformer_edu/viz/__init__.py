"""Figures: ``figures`` (heatmaps, sliders and the book's plotting set-up; its names are
this package's), ``controls`` and ``control_grid`` (sliders and menus that work with no
kernel), ``diagram`` (the architecture figure), ``figure_text`` (each figure's text
alternative, generated from its data) and ``listing`` (the package's own code on the
page)."""

from .figures import *  # noqa: F403
from .figures import __all__  # noqa: F401
