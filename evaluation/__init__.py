"""What the tests and the benchmarks both measure with, apart from the product.

- :mod:`evaluation.corpus`: the recordings of ``../shared/eval`` with their
  references, and word error rates against them.
- :mod:`evaluation.speech`: German, French and Spanish sentences spoken by espeak-ng.
- :mod:`evaluation.redaction`: the labelled and spoken redaction sets and their scoring.
- :mod:`evaluation.distributed`: the distributed platform as real processes.
- :mod:`evaluation.ports`: free loopback ports, handed out once per process.

Tests import what is theirs from ``tests``; benchmarks import only this package
and the product.
"""
