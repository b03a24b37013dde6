"""thunder_viz: see what the thunder compiler did (filled in by the visualiser issue)."""
