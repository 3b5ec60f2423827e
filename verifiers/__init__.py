"""Downstream verifiers: every candidate of a study is scored once (see bon.plugins.Verifier)."""

PLUGINS = {
    "synthetic": "verifiers.synthetic:SyntheticVerifier",
}
