"""Search index tests (OpenSearch against a real server)."""
