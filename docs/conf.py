"""Sphinx configuration of the polylite documentation.

Build (from the repository root, with ``pip install ".[docs]"``)::

    python -m sphinx -W -b html docs docs/_build/html

Adding a model family to the docs takes three files' worth of changes:

1. a user-guide page ``docs/user_guide/<family>.rst``, listed in the toctree of
   ``docs/user_guide/index.rst``;
2. an autosummary list of its public names in ``docs/api.rst`` (a section per family);
3. a gallery example ``docs/examples/plot_<family>_<topic>.py`` (collected by itself),
   that runs in seconds on two cores and draws a plot.
"""
import os
import re
import sys

# Document the installed polylite.  ``python -m sphinx`` puts the current directory first
# on sys.path, and from the repository root that is the source tree, whose compiled
# modules live only in the installed package (an editable install finds them anyway).
_root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _root]

import polylite  # noqa: E402

# The benchmarks page's directives (docs/_ext), which read benchmarks/results/.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_ext"))

project = "polylite"
author = "the polylite developers"
copyright = "the polylite developers, BSD-3-Clause"
release = polylite.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax served from the built pages: math renders offline
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "benchmark_results",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_generated", "README.md", "examples/*.rst"]
default_role = "literal"
# Method entries of the page tables of contents without the class name in front.
toc_object_entries_show_parents = "hide"
nitpicky = False

# ---- API reference ------------------------------------------------------------------
autosummary_generate = True
autodoc_default_options = {"inherited-members": True}
numpydoc_show_class_members = False  # the class template lists the methods itself
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
# Every parameter documented, nothing documented that does not exist, a Returns section
# where a value is returned: checked on every page build (with -W, a missing one fails it).
numpydoc_validation_checks = {"PR01", "PR02", "PR10", "RT01"}
numpydoc_validation_exclude = {
    # scikit-learn's own methods, inherited unchanged
    r"\.get_params$", r"\.set_params$", r"\.score$", r"\.get_metadata_routing$",
    r"\.set_\w+_request$", r"\.fit_predict$", r"\.__init__$",
    # NamedTuples: their fields are documented as attributes, count/index are tuple's
    r"polylite\.preprocessing\.Field(\.count|\.index)?$",
    r"polylite\.datasets\.MovieLens(\.count|\.index)?$",
    r"polylite\.datasets\.LibffmScan(\.count|\.index)?$",
}

# ---- doctests -----------------------------------------------------------------------
# The docstrings' small examples stop at max_iter before tol; their ConvergenceWarnings
# would only clutter the build's log.
doctest_global_setup = """
import warnings
import numpy as np
from sklearn.exceptions import ConvergenceWarning
warnings.simplefilter("ignore", ConvergenceWarning)
"""

# ---- gallery ------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "remove_config_comments": True,
    "download_all_examples": False,
    "show_memory": False,
    "image_scrapers": ("matplotlib",),
    "doc_module": ("polylite",),
    "backreferences_dir": "generated/backreferences",
    "reset_modules": ("matplotlib",),
}

# ---- HTML ---------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"polylite {release}"
html_static_path = ["_static"]
html_css_files = ["polylite.css"]
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"index": [], "api": []}
html_show_sourcelink = False


# ---- scikit-learn's inherited docstrings ----------------------------------------------
# ``score`` (inherited from scikit-learn) links to labels of scikit-learn's own user guide;
# without network access for intersphinx they are shown as plain text.
_SKLEARN_LABELS = {"accuracy_score", "r2_score", "df_output_transform",
                   "sphx_glr_auto_examples_miscellaneous_plot_set_output.py"}


def _sklearn_label_as_text(app, env, node, contnode):
    if node.get("reftype") == "ref" and node.get("reftarget") in _SKLEARN_LABELS:
        return contnode
    return None


# scikit-learn's metadata-routing methods (set_fit_request, set_predict_request, ...,
# generated for every keyword argument of fit, predict, ...) are left out of the pages.
_METADATA_ROUTING = re.compile(r"set_\w+_request|get_metadata_routing")


def _skip_metadata_routing(app, what, name, obj, skip, options):
    return True if _METADATA_ROUTING.fullmatch(name) else None


def setup(app):
    app.connect("missing-reference", _sklearn_label_as_text)
    app.connect("autodoc-skip-member", _skip_metadata_routing)
