"""Developer and CI scripts (``python scripts/<name>.py``; the helpers they share are the installed ``cognis_dev``)."""
