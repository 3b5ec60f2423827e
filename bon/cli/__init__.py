"""The ``bon`` command line. Bad input ends in one line on stderr (exit 2), never a traceback.

Commands live by subject: ``study_commands`` (demo, run, generate, verify, select, curve, merge, plugins),
``analysis_commands`` (report, compare, power, leaderboard, tradeoff, figure), ``predict_commands`` (predict) and ``mmrb2_commands`` (the
benchmark group).

One grammar for all of them: ``--run DIR`` names an existing run folder, ``--out DIR`` is always a folder
(``--out-file FILE`` for a one-file output), ``--json FILE`` writes the printed numbers, ``--judge SPEC``
is a plugin spec, ``--label`` names what a command adds, and each plugin kind takes its own repeatable
``--<kind>-option K=V`` (YAML values), parsed by :func:`parse_options`.
"""

from bon.cli.common import (PLUGIN_KINDS, _fmt, app, check_output_file, exit_if_calls_pending, json_option, main,  # noqa: F401
                            mmrb2_app, out, parse_options, plugin_options, retry_missing_option, run_option, write_numbers)
from bon.cli import analysis_commands, mmrb2_commands, predict_commands, study_commands  # noqa: E402,F401  (register the commands)
