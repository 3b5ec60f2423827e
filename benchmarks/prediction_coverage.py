"""How often does a held-out judge's measured Best-of-N gain fall inside its nominal 90% prediction interval?

    python benchmarks/prediction_coverage.py [--studies 60] [--bootstrap 400] [--sizes 7 12 20] [--splits 4]

What it simulates (honestly: a vectorised stand-in for the synthetic world, not ``bon demo`` itself, which would
take minutes per study). Each simulated study draws a fresh world in the synthetic world's shape: prompts with N
candidates whose true quality is drawn per generator (a strong and a weak one, as in the demo), a downstream
verifier that reads the true quality with noise, and a preference set of candidate pairs labelled by three
simulated annotators (majority of noisy readings of the true quality; pairs at least 0.15 apart, as the demo's
margin keeps only clear pairs). A population of 30 judges answers in both orders: each judge scores a response
as its true quality plus a weight on an irrelevant feature of the response (as the synthetic world's ink, length
and colour judges follow a cue unrelated to what matters), plus Gaussian noise of its own level, and some say
"A" whatever they see with a probability (position bias). Six noise levels times five algorithms (clean, weak
and strong feature bias, position bias, both) make 30 judges with known parameters. Accuracy is measured as the
official scorer does (both orders, each counted once); the Best-of-N gain is a knockout of the N candidates with
both orders per match (the orders disagreeing: a seeded coin), scored by the verifier, minus a random pick.

For fits on 7, 12 and 20 judges drawn from the 30, the very code of ``bon predict`` and of the report's
held-out validation (:func:`analysis.prediction.fit_lines`) fits the line with its bootstrap (judges, prompts and
pairs resampled) and predicts every judge left out; the script prints the share of those judges' measured gains
inside their nominal 90% intervals, with the mean interval width and the mean absolute error; first for bon's
method (the line's variance from a bootstrap of the judges, the measurement noise in their scatter), then with
prompts and pairs resampled in the line's variance as well, which double-counts that noise and over-covers. Coverage from S
studies carries a binomial error of about ±1.64·sqrt(0.09/(held-out predictions)), wider in truth since the
predictions of one study share its fit.
"""

from __future__ import annotations

import time

import numpy as np

from _common import parser
from analysis.bon_metrics import multinomial_weights
from analysis.prediction import LEVEL, GainData, fit_lines

NOISES = (0.05, 0.1, 0.2, 0.35, 0.6, 1.0)
ALGORITHMS = {  # name -> (feature weight, position bias)
    "clean": (0.0, 0.0), "feature-weak": (0.15, 0.0), "feature-strong": (0.4, 0.0), "position": (0.0, 0.35),
    "position+feature": (0.25, 0.2)}
GENERATORS = {"strong": (4.0, 1.5), "weak": (2.0, 2.0)}  # Beta(a, b) of a candidate's true quality
VERIFIER_SD, ANNOTATOR_SD, MARGIN = 0.05, 0.08, 0.15


def population() -> list[tuple[str, float, float, float]]:
    """The 30 judges: (name, noise, feature weight, position bias)."""
    return [(f"{algo}-{noise:g}", noise, fw, pb) for algo, (fw, pb) in ALGORITHMS.items() for noise in NOISES]


def answers(rng: np.random.Generator, judges: np.ndarray, qa: np.ndarray, qb: np.ndarray, fa: np.ndarray,
            fb: np.ndarray) -> np.ndarray:
    """Whether each judge prefers A over B (judges x items), A shown first."""
    noise, fw, pb = judges[:, 1:2], judges[:, 2:3], judges[:, 3:4]
    margin = (qa - qb) + fw * (fa - fb) + noise * rng.standard_normal((len(judges), qa.shape[-1]))
    biased = rng.random((len(judges), qa.shape[-1])) < pb
    return np.where(biased, True, margin > 0)


def one_study(rng: np.random.Generator, judges: np.ndarray, prompts: int, n: int, pairs: int, bootstrap: int,
              generator: str) -> GainData:
    a, b = GENERATORS[generator]
    J = len(judges)
    # preference set: pairs of candidates with their true qualities and features, labelled by 3 annotators
    qa, qb = rng.beta(a, b, 4 * pairs), rng.beta(a, b, 4 * pairs)
    clear = np.abs(qa - qb) >= MARGIN
    qa, qb = qa[clear][:pairs], qb[clear][:pairs]
    fa, fb = rng.standard_normal(pairs), rng.standard_normal(pairs)
    votes = ((qa + rng.normal(0, ANNOTATOR_SD, (3, pairs))) > (qb + rng.normal(0, ANNOTATOR_SD, (3, pairs)))).sum(0)
    label_a = votes >= 2
    fwd = answers(rng, judges, qa, qb, fa, fb) == label_a
    rev = answers(rng, judges, qb, qa, fb, fa) == ~label_a
    correct = fwd.astype(float) + rev.astype(float)
    w_pairs = multinomial_weights(pairs, bootstrap, int(rng.integers(2**31)))
    x, xb = 50.0 * correct.mean(1), 50.0 * (w_pairs @ correct.T) / pairs
    # Best-of-N: a knockout over n candidates per prompt, both orders per match
    q = rng.beta(a, b, (prompts, n))
    f = rng.standard_normal((prompts, n))
    v = np.clip(q + rng.normal(0, VERIFIER_SD, q.shape), 0, 1)
    alive = np.broadcast_to(np.arange(n), (J, prompts, n)).copy()
    while alive.shape[-1] > 1:
        left, right = alive[..., 0::2], alive[..., 1::2]
        take = lambda arr, idx: np.take_along_axis(np.broadcast_to(arr, (J, *arr.shape)), idx, -1)  # noqa: E731
        ql, qr, fl, fr = take(q, left), take(q, right), take(f, left), take(f, right)
        shape = ql.shape
        one = answers(rng, judges, ql.reshape(J, -1), qr.reshape(J, -1), fl.reshape(J, -1), fr.reshape(J, -1)).reshape(shape)
        two = ~answers(rng, judges, qr.reshape(J, -1), ql.reshape(J, -1), fr.reshape(J, -1), fl.reshape(J, -1)).reshape(shape)
        left_wins = np.where(one == two, one, rng.random(shape) < 0.5)
        alive = np.where(left_wins, left, right)
    pick = np.take_along_axis(np.broadcast_to(v, (J, prompts, n)), alive, -1)[..., 0]
    gain = pick - v.mean(1)[None, :]
    w_prompts = multinomial_weights(prompts, bootstrap, int(rng.integers(2**31)))
    names = [f"j{k:02d}" for k in range(J)]
    return GainData("t2i", generator, "knockout", names, x, gain.mean(1), xb, (w_prompts @ gain.T) / prompts,
                    float(v.mean()))


def coverage(studies: int, sizes: list[int], splits: int, prompts: int, n: int, pairs: int, bootstrap: int,
             seed: int, resample_measurement: bool = False) -> dict[int, dict[str, float]]:
    rng = np.random.default_rng(seed)
    judges = np.array([[0.0, noise, fw, pb] for _, noise, fw, pb in population()])
    hits: dict[int, list[np.ndarray]] = {k: [] for k in sizes}
    widths: dict[int, list[np.ndarray]] = {k: [] for k in sizes}
    errors: dict[int, list[np.ndarray]] = {k: [] for k in sizes}
    for s in range(studies):
        data = one_study(rng, judges, prompts, n, pairs, bootstrap, list(GENERATORS)[s % len(GENERATORS)])
        for k in sizes:
            keep = np.zeros((splits, len(judges)), bool)
            for row in keep:
                row[rng.choice(len(judges), k, replace=False)] = True
            fits = fit_lines(data, keep, int(rng.integers(2**31)), LEVEL, resample_measurement)
            pred = fits.predict(np.broadcast_to(data.x, keep.shape))
            out = ~keep
            y = np.broadcast_to(data.y, keep.shape)
            hits[k].append(((pred["lo"] <= y) & (y <= pred["hi"]))[out])
            widths[k].append((pred["hi"] - pred["lo"])[out])
            errors[k].append(np.abs(pred["point"] - y)[out])
    return {k: {"coverage": float(np.mean(np.concatenate(hits[k]))), "count": int(np.concatenate(hits[k]).size),
                "width": float(np.nanmean(np.concatenate(widths[k]))), "mae": float(np.nanmean(np.concatenate(errors[k])))}
            for k in sizes}


def main() -> None:
    ap = parser(__doc__, studies=60, bootstrap=400, sizes=[7, 12, 20], splits=4, prompts=40, n=8, pairs=160, seed=0)
    args = ap.parse_args()
    started = time.perf_counter()
    print(f"coverage of nominal {LEVEL:.0%} prediction intervals for a held-out judge's Best-of-N gain "
          f"({args.studies} simulated studies of {len(population())} judges, {args.prompts} prompts, N = {args.n}, "
          f"{args.pairs} preference pairs; {args.splits} random fits per size and study; {args.bootstrap} bootstrap "
          "replicates)")
    print(f"{'judges in fit':>14}{'coverage':>10}{'held-out':>10}{'mean width':>12}{'MAE':>8}   interval's fit variance")
    for measured, label in ((False, "judges resampled (bon's method)"),
                            (True, "judges, prompts and pairs resampled (counts measurement noise twice)")):
        result = coverage(args.studies, args.sizes, args.splits, args.prompts, args.n, args.pairs, args.bootstrap,
                          args.seed, measured)
        for k, r in result.items():
            print(f"{k:>14}{r['coverage']:>10.3f}{r['count']:>10}{r['width']:>12.3f}{r['mae']:>8.3f}   {label}", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
