"""A tiny application captured and served through environment variables alone."""
