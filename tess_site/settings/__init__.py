"""Settings package: ``base`` holds what every environment shares; ``dev``, ``test`` and ``prod`` refine it."""
