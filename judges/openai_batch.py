"""Batch-API submission for the ``openai-compatible`` judge (``batch: true``).

A referee batch (one knockout round's comparisons of every prompt, or a preference set's) becomes one
Batch API job: the requests the synchronous judge would send are written as JSONL lines keyed by
``custom_id``, uploaded (``files``, purpose ``batch``), submitted (``batches``), polled until the job
ends, and the output file is read back by ``custom_id``. A line that failed (in the error file, a
non-200 status, or absent because the job expired or was cancelled) is a *transient* missing verdict:
the store does not keep it and a rerun asks again. Costs use the judge's prices times
``batch_price_factor`` (OpenAI bills batch jobs at half price).
"""

from __future__ import annotations

import json
import time
from typing import Any, Sequence

from bon.protocol import Comparison, Verdict

ENDPOINT = "/v1/chat/completions"
DONE = ("completed", "failed", "expired", "cancelled")


def judge_in_batch(judge: Any, comparisons: Sequence[Comparison]) -> list[Verdict]:
    """Verdicts for ``comparisons`` from one Batch API job (``judge`` is an OpenAICompatibleJudge)."""
    endpoint = judge.endpoint  # the judge's own client: its key, base URL, timeout and the SDK's retries
    key = endpoint.key()
    client = endpoint.client()
    try:
        lines = [{"custom_id": f"c{i}", "method": "POST", "url": ENDPOINT, "body": judge.request(c)}
                 for i, c in enumerate(comparisons)]
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        upload = client.files.create(file=("bon-batch.jsonl", data, "application/jsonl"), purpose="batch")
        started = time.perf_counter()
        batch = client.batches.create(input_file_id=upload.id, endpoint=ENDPOINT, completion_window=judge.batch_window,
                                      metadata={"client": "bon", "judge": judge.name[:64]})
        judge.totals["batches"] = judge.totals.get("batches", 0) + 1
        while batch.status not in DONE:
            time.sleep(judge.batch_poll)
            batch = client.batches.retrieve(batch.id)
        seconds = time.perf_counter() - started
        answers = _read_lines(client, batch.output_file_id)
        errors = _read_lines(client, batch.error_file_id)
    except Exception as exc:  # noqa: BLE001 - an unreachable endpoint or a rejected upload: nothing was judged, retry later
        reason = endpoint.classify(exc, key).reason
        return [Verdict.failed(f"batch submission failed: {reason}", transient=True) for _ in comparisons]
    return [_verdict(judge, answers.get(f"c{i}"), errors.get(f"c{i}"), batch, seconds, key)
            for i in range(len(comparisons))]


def _read_lines(client: Any, file_id: str | None) -> dict[str, dict]:
    if not file_id:
        return {}
    text = client.files.content(file_id).text
    records = (json.loads(line) for line in text.splitlines() if line.strip())
    return {r["custom_id"]: r for r in records if isinstance(r, dict) and "custom_id" in r}


def _verdict(judge: Any, answer: dict | None, error: dict | None, batch: Any, seconds: float, key: str) -> Verdict:
    from bon.backends.openai_api import Reply, redact

    response = (answer or {}).get("response") or {}
    if answer is None or response.get("status_code") != 200 or not isinstance(response.get("body"), dict):
        failure = (error or answer or {}).get("error") or (error or {}).get("response") or {}
        detail = failure.get("message") if isinstance(failure, dict) else str(failure)
        reason = f"batch {batch.id} {batch.status}: line failed ({detail or 'no output line'})"
        return Verdict.failed(redact(reason, key)[:300], transient=True)
    reply = Reply(response["body"], 1, round(seconds, 3))
    judge.endpoint.record(1, reply)  # tokens and the synchronous price ...
    if reply.cost_usd is not None:  # ... discounted to the batch price
        discount = reply.cost_usd * (1 - judge.batch_price_factor)
        reply.cost_usd -= discount
        judge.totals["cost_usd"] -= discount
    verdict = judge._verdict(reply)
    verdict.meta["batch"] = batch.id
    return verdict
