"""A key given in each of the four ways a user can give one, then a small study with judges behind a
local OpenAI-compatible server and a served stand-in engine: the key is in no byte of any file of the
run folder (the SQLite store included) and in nothing printed.

The four ways: the environment variable ``api_key_env`` names (quoted back by the server in an error),
inside ``base_url`` (user-info and query string), among a served judge's ``serve: {args: [--api-key,
KEY]}``, and pasted into ``api_key_env`` itself (refused without being echoed).
"""

from __future__ import annotations

import sys

import pytest
import yaml

from bon.cli import main
from bon.redact import redact, redact_args, redact_text, redact_url
from openai_server import OpenAIServer
from serve_helpers import STANDIN, assert_all_stopped

pytest.importorskip("openai")

KEYS = {"env": "envkey-7Hq2ZtW9xP", "url user-info": "urlpass-3Kd8sLmQ", "url query": "querykey-9Vb4nRt",
        "serve args": "argkey-5Jw7cXe2", "pasted": "pasted.key-Zr8Lq"}


def leaks(folder, text: str) -> list[str]:
    """Every file (any byte) and the printed text that holds one of the keys."""
    found = [f"printed: {name}" for name, key in KEYS.items() if key in text]
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(folder)}: {name}" for name, key in KEYS.items() if key.encode() in data]
    return found


def study(out, url: str, record) -> dict:
    launcher = [sys.executable, str(STANDIN), "--record", str(record)]
    return {
        "out": str(out), "seed": 4, "n": 3, "tasks": ["t2i"], "suite": {"name": "synthetic", "per_task": 2},
        "preference": {"prompts_per_task": 2, "pairs_per_prompt": 2},
        "generators": [{"name": "synthetic", "label": "strong", "options": {"skill": "strong"}}],
        "verifier": {"name": "synthetic"},
        "judges": [
            {"name": "openai-compatible:org/remote", "label": "remote",
             "options": {"base_url": url, "api_key_env": "BON_TEST_SECRET_KEY", "max_retries": 0, "timeout": 10,
                         "max_image_side": 32}},
            {"name": "openai-compatible:org/served", "label": "served",
             "serve": {"engine": "vllm", "replicas": 1, "launcher": launcher, "startup_timeout": 30,
                       "args": ["--api-key", KEYS["serve args"], "--max-model-len", "4096"]},
             "options": {"max_retries": 0, "timeout": 10, "max_image_side": 32}},
        ],
    }


def test_no_key_lands_in_any_file_or_output(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("BON_TEST_SECRET_KEY", KEYS["env"])
    record = tmp_path / "servers"
    record.mkdir()
    quoting = f"invalid request; header was Authorization: Bearer {KEYS['env']}"
    with OpenAIServer(fail=3, status=400, message=quoting) as server:
        host = server.url.split("//", 1)[1]
        url = f"http://bon:{KEYS['url user-info']}@{host}?key={KEYS['url query']}"
        config = tmp_path / "study.yaml"
        config.write_text(yaml.safe_dump(study(tmp_path / "run", url, record)))
        assert main(["run", str(config), "--dry-run"]) == 0
        assert main(["run", str(config)]) == 0
        assert main(["view", "--run", str(tmp_path / "run")]) == 0
    assert_all_stopped(record)
    printed = capfd.readouterr()
    run = tmp_path / "run"
    assert (run / "judgments.sqlite").exists() and (run / "config.yaml").exists()
    assert "argkey" not in (run / "config.yaml").read_text()  # the flag's value masked, the flag kept
    assert "--api-key" in (run / "config.yaml").read_text()
    assert not leaks(run, printed.out + printed.err)
    assert "Authorization: ***" in (run / "judgments.sqlite").read_bytes().decode("utf-8", "replace")  # the error, kept masked


def test_a_key_pasted_into_api_key_env_is_refused_without_echo(tmp_path, capfd):
    config = tmp_path / "study.yaml"
    entry = {"name": "openai-compatible:org/remote", "label": "remote", "options": {"api_key_env": KEYS["pasted"]}}
    config.write_text(yaml.safe_dump({"out": str(tmp_path / "run"), "judges": [entry], "tasks": ["t2i"],
                                      "generators": [{"name": "synthetic"}], "verifier": "synthetic"}))
    for argv in (["run", str(config), "--dry-run"], ["run", str(config)]):
        assert main(argv) == 2
        err = capfd.readouterr().err.strip()
        assert "\n" not in err and "api_key_env must be the NAME of an environment variable" in err
        assert KEYS["pasted"] not in err and not (tmp_path / "run").exists()


def test_redaction_rules():
    assert redact_url("https://u:p4ssword@h:8/v1?api-version=1&key=k3y", every_query=True) == \
        "https://***@h:8/v1?api-version=***&key=***"
    assert redact_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert redact_args(["--api-key", "x", "--token=y", "--max-tokens", "5"]) == ["--api-key", "***", "--token=***", "--max-tokens", "5"]
    assert redact_text('HTTP 401: {"error": "Authorization: Bearer abcdefgh12345 sk-abcdef123456"}') == \
        'HTTP 401: {"error": "Authorization: *** ***"}'
    assert redact_text("the bearer of good news; api_key_env: null") == "the bearer of good news; api_key_env: null"
    assert redact_text("/tmp/api_key_test/study.yaml: bad") == "/tmp/api_key_test/study.yaml: bad"
    data = {"base_url": "https://h/v1?api-version=2", "serve": {"args": ["--hf-token", "hf_abc"]}, "n": 3}
    assert redact(data) == {"base_url": "https://h/v1?api-version=***", "serve": {"args": ["--hf-token", "***"]}, "n": 3}


def test_stored_metadata_is_redacted_as_the_full_walk_redacts_it(monkeypatch):
    """The store's JSON of a verdict's metadata (redacted_json: one scan of the text when nothing could need
    masking) equals json.dumps(redact(...)) for plain data and for every shape a rule masks: a remembered
    value, a secret flag in a list (--credentials is no trigger word), a URL, escapes that hide a rule from
    the text (a newline inside 'api key=...'), a tuple and a value JSON cannot hold."""
    import json

    from bon import redact as R
    from bon.redact import redacted_json

    monkeypatch.setattr(R, "_known", {"hunter2hunter2"})
    cases = [{"score": 0.5, "reason": "left is clearer", "n": [1, 2.5, None, True]}, {},
             {"note": "said hunter2hunter2 twice"}, {"argv": ["serve", "--credentials", "abcd1234"]},
             {"url": "http://h/v1?q=1"}, {"why": "api\nkey=abcdefgh123"}, {"pair": ("a", "sk-abcdefgh12")},
             {"odd": object.__new__(type("Odd", (), {"__str__": lambda self: "odd"}))}, ["bearer abcdefghijk"]]
    for value in cases:
        assert redacted_json(value) == json.dumps(redact(value), default=str), value
    assert "hunter2hunter2" not in redacted_json(cases[2]) and "abcd1234" not in redacted_json(cases[3])
