"""The offline synthetic world: scenes of coloured shapes that every stage can read from pixels.

``scene`` (world model and renderer), ``perception`` (pixels back to objects, text and damage),
``language`` (prompt specs <-> English), ``suites`` (seeded prompt suites for the four MMRB2
tasks), ``checks`` (scoring a response against a spec), ``generator`` (simulated generators with a
skill knob). The verifier lives in ``verifiers/synthetic.py``, the judges in ``judges/synthetic/``.
"""
