"""The redaction sets: written text with its personal data labelled
(:mod:`.labelled`), personal data spoken and written by the engine (:mod:`.spoken`,
said as :mod:`.said` says), the same sentences said in calls through the
platform's paths (:mod:`.calls`), and names (:mod:`.names`); each with its scoring."""
