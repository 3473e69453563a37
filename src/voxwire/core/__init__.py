"""The lowest layer of the service: errors, settings, metrics, rate limits,
readiness and asyncio helpers. Imports nothing else of voxwire."""
