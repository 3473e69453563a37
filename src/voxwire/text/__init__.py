"""What is done with words once they are heard, pure and without I/O: normalising
(:mod:`~voxwire.text.normalization`), prompt matching (:mod:`~voxwire.text.matching`,
:mod:`~voxwire.text.standing_prompts`), redaction (:mod:`~voxwire.text.redaction`
with :mod:`~voxwire.text.number_runs` and :mod:`~voxwire.text.heard`), word timing
(:mod:`~voxwire.text.words`) and exports (:mod:`~voxwire.text.exports`).
Builds on :mod:`voxwire.core` only."""
