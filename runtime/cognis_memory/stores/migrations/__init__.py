"""Schema migrations of the server-backed stores (PostgreSQL)."""
