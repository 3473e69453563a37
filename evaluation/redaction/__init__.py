"""The redaction sets: written text with its personal data labelled
(:mod:`.labelled`), and personal data spoken and written by the engine
(:mod:`.spoken`); each with its scoring."""
