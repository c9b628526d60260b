"""The frame of the course's interactive views (ipywidgets): an ``explorer`` is a VBox of
controls over an HTML view, so a test can set ``.value`` on its controls and read what the
view shows, and the HTML helpers the views draw with. The views themselves live by topic in
``translation_widgets`` (00-04) and ``pretraining_widgets`` (05-08). Moving a control never
retrains anything: the views are computed from models and data the notebook already has,
and bad input typed by a student (an empty sentence, an unknown word, a sentence too long)
gets a message in the view, never a traceback.

Every explorer also carries a **static fallback**: displayed, it sends the HTML of its
current view next to the widget, so a notebook read without a kernel (slides, a website,
GitHub) shows one state instead of "VBox(...)".

Taught in: every notebook with a view (00-08), through the two modules above.
"""

from __future__ import annotations

import base64
import html
import io
from typing import Callable, Mapping, Sequence


# ---- the common frame: controls over a view, with a static fallback ----

def _explorer_type():
    import ipywidgets as W

    class Explorer(W.VBox):
        """A VBox of ``controls`` over an HTML ``view``; displayed, it also sends the view's
        HTML as ``text/html`` (shown where widgets cannot be: slides, websites, GitHub)."""

        def static_html(self) -> str:
            settings = []
            for c in self.controls:
                label, value = getattr(c, "label", None), getattr(c, "value", None)
                if value is not None and getattr(c, "description", ""):
                    # a drop-down or selection slider shows its label, typed text is quoted
                    shown = label if label is not None else repr(value) if isinstance(value, str) else value
                    settings.append(f"{c.description} = {shown}")
            note = "static view (no kernel)" + (": " + ", ".join(settings) if settings else "")
            return (f'<div class="course-static-explorer"><div style="color: #666; font-style: italic">'
                    f'{html.escape(note)}</div>{self.view.value}</div>')

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            if bundle is not None:
                bundle["text/html"] = self.static_html()
            return bundle

    return Explorer


def explorer(controls: Mapping[str, object], render: Callable[..., str], *, watch: Sequence[str] | None = None):
    """An ``Explorer`` over ``controls`` (name -> ipywidget; each is also an attribute of
    the box) whose view is ``render(**values)``. The view is redrawn whenever a watched
    control changes (default: all); a ``ValueError`` from ``render`` is shown as a message."""
    import ipywidgets as W

    view = W.HTML()

    def refresh(*_):
        values = {name: c.value for name, c in controls.items() if hasattr(c, "value")}
        try:
            view.value = render(**values)
        except ValueError as err:
            view.value = message_html(str(err))

    for control in controls.values():
        if hasattr(getattr(control, "style", None), "description_width"):
            control.style.description_width = "initial"   # labels in full ("source words", not "source wo...")
    box = _explorer_type()([*controls.values(), view])
    box.controls, box.view, box.refresh = list(controls.values()), view, refresh
    for name, control in controls.items():
        setattr(box, name, control)
        if hasattr(control, "value") and (watch is None or name in watch):
            control.observe(refresh, names="value")
    refresh()
    return box


def fit_slider(slider, last: int) -> int:
    """Make ``slider`` range over 0..``last`` (the content behind it changed length), keeping
    its value where it can; returns the value to show."""
    if slider.max != last:
        slider.value = min(slider.value, last)
        slider.max = last
    return slider.value


def message_html(text: str) -> str:
    """A message in the view (what a student typed that cannot be shown)."""
    return (f'<div class="course-message" style="color: #a00; font-family: monospace; font-size: 14px">'
            f'{html.escape(text)}</div>')


def figure_html(fig, alt: str = "figure") -> str:
    """A matplotlib figure as an inline PNG ``<img>`` (closed afterwards)."""
    import matplotlib.pyplot as plt
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"/>'


def table_html(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None,
               shade: Callable[[int, int], float | None] | None = None) -> str:
    """A small HTML table; ``shade(i, j)`` in [0, 1] colours cell (i, j) blue."""
    out = ['<table style="border-collapse: collapse; font-family: monospace; font-size: 13px">']
    if header is not None:
        out.append("<tr>" + "".join(f'<th style="padding: 2px 6px">{html.escape(str(h))}</th>' for h in header) + "</tr>")
    for i, row in enumerate(rows):
        cells = []
        for j, value in enumerate(row):
            a = shade(i, j) if shade else None
            style = "padding: 2px 6px; border: 1px solid #ddd"
            if a is not None:
                style += f"; background: rgba(31,119,180,{max(0.0, min(1.0, a)):.3f})"
            cells.append(f'<td style="{style}">{html.escape(str(value))}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "".join(out) + "</table>"
