"""The engine under every model family: data layouts, the problem a pass solves, and the
codes of the compiled passes (see the Architecture page of the documentation)."""
