"""Sphinx configuration of the course website (`make book`; scripts/build_book.py stages the
sources: these pages, the executed notebooks, the assignment pages and the vendored MathJax)."""

import os

#: The course's public git address: scripts/build_book.py passes it from pyproject.toml's
#: ``[project.urls] Repository`` (the one place it is set). "" while unset: no page then names
#: an address (the footer says to ask the lecturer).
repository_url = os.environ.get("COURSE_REPOSITORY_URL", "").strip()

project = "Attention-based models"
author = "the course authors"
copyright = "the course authors, MIT licence (code); see LICENSE-TEXT for the texts"
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "_readme.md", "_release", "_*.md"]

# the notebooks are shown as they were executed and stored (fast profile, CPU); nothing runs
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath"]
# docs/ARCHITECTURE.md draws its diagrams in mermaid, which GitHub renders; the site shows their source
suppress_warnings = ["mystnb.unknown_mime_type", "misc.highlighting_failure"]

# offline: MathJax 2 from _static (copied from slides/vendor/mathjax), no CDN
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS_CHTML"
# the theme marks <body> "tex2jax_ignore": typeset only Sphinx's math spans and cell outputs
mathjax2_config = {"tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]],
                               "processEscapes": True, "processClass": "math|output_area"}}

html_theme = "sphinx_book_theme"
html_title = "Attention-based models"
html_static_path = ["_static"]
html_css_files = ["course.css"]   # long code lines wrap, long outputs scroll
html_theme_options = {
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,   # the theme's button knows GitHub/GitLab/Bitbucket only
    "icon_links": ([{"name": "The course's repository (clone it to run the notebooks)",
                     "url": repository_url, "icon": "fa-solid fa-code-branch", "type": "fontawesome"}]
                   if repository_url else []),
    "extra_footer": (f'<p>Repository: <a href="{repository_url}">{repository_url}</a></p>' if repository_url
                     else "<p>To run the notebooks, get the course's repository from your lecturer.</p>"),
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
html_context = {"default_mode": "light"}   # unset, the theme logs "invalid theme mode" on every page
html_show_sourcelink = False
html_copy_source = True   # the .ipynb behind each page, for the download button

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}
autodoc_mock_imports = []
