"""Audio in: decoding files (:mod:`~voxwire.audio.decoding`, probed by
:mod:`~voxwire.audio.probe`), live chunk codecs (:mod:`~voxwire.audio.codecs`,
Opus through :mod:`~voxwire.audio.libopus`) and the sample type the engines read
(:mod:`~voxwire.audio.samples`). Builds on :mod:`voxwire.core` only."""
