"""Generator plugins: each turns a prompt and N seeds into N candidates (see bon.plugins.Generator)."""

PLUGINS = {
    "synthetic": "generators.synthetic.generator:SyntheticGenerator",
}
