"""Commands for running beyond one process: ``bon merge`` joins the shard folders of ``bon run --shard``."""

from __future__ import annotations

from pathlib import Path

import click

from bon.cli import app, out


@app.command()
@click.option("--run", "shards", multiple=True, required=True, type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="A shard's run folder (repeat for all K, any order).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True, metavar="DIR",
              help="The merged run folder.")
def merge(shards: tuple[Path, ...], out_dir: Path) -> None:
    """Merge the folders of `bon run --shard I/K` (all K of one study) into one run folder and analyse it."""
    from bon.merge import merge_runs

    outcome = merge_runs(list(shards), out_dir)
    out.print(f"merged {len(shards)} shards: {len(outcome.results)} result rows; report: {outcome.run.report}")
