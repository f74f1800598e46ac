"""The HTTP edge of Suli: FastAPI routes that parse input, call the core and render its answer."""
