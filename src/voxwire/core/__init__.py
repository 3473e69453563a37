"""The lowest layer: errors, settings, audio, and the pure text logic (matching,
redaction, windows, standing prompts). Imports nothing else of voxwire."""
