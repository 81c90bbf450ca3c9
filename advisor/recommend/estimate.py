"""The second stage of a recommendation: the job's candidates on the partitions screening allowed, each with
its predicted run, time limit, wait and cost (an `Estimate`, made by the `Estimator`).

Where the model predictor is unsure of the job and its earlier runs are known, history sets the level of
every prediction (the prior, `history_prior`): the estimator is built with that scale from the start. A
partition other than the job's own where nothing predicts the job (no model, no step times) is left out, and
said why; the job passes through only where nothing predicts it as submitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from advisor.predict.types import NoModelError
from advisor.recommend.advice import RunsOn
from advisor.recommend.ask import Ask
from advisor.recommend.candidates import Candidate, baseline, job_candidates
from advisor.recommend.choose import Estimate
from advisor.recommend.estimator import Context, Estimator
from advisor.recommend.history_limit import history_prior
from advisor.recommend.screen import PassedThrough, Screened

BOTH = (False, True)


@dataclass(frozen=True)
class Estimated:
    estimates: list[Estimate]
    """The job as submitted first, then every other candidate a predictor could predict."""
    prior: float | None
    """The level history set the predictions to; None where it set none."""
    runs_on: RunsOn
    """The time limit another candidate needs (no wait asked): for a request of several partitions."""
    unpredicted: dict[str, str]
    """The partitions left out because nothing predicts the job there, and why (`NoModelError`)."""


def estimate(context: Context, screened: Screened, ask: Ask) -> Estimated | PassedThrough:
    """Every candidate estimated; the job passes through where nothing predicts it as submitted."""
    args = (context, screened.effective, ask, screened.description, screened.predictor)
    plain = Estimator(*args)
    offer = screened.offers[screened.written.name]
    asked = baseline(screened.description, offer, screened.gpus, screened.nodes)
    try:
        largest, unpredicted = _largest_batches(screened, plain)
        others = _candidates(screened, ask, largest, asked)
        history = ask.history
        prior = None if history is None else history_prior(history.forecast, *plain.predicted(asked))
        estimator = plain if prior is None else Estimator(*args, scale=prior)
        runs_on = _runs_on(estimator, unpredicted)
        return Estimated(estimator.estimate([asked, *others]), prior, runs_on, unpredicted)
    except NoModelError as error:
        return PassedThrough("no model", screened.effective, error=str(error))


Largest = dict[tuple[str, bool], int | None]
"""The largest micro-batch one device holds, per partition and AMP."""


def _largest_batches(screened: Screened, estimator: Estimator) -> tuple[Largest, dict[str, str]]:
    """Each allowed partition's largest micro-batches, and why nothing predicts the job on the others; on
    the job's own partition that is no answer at all (`NoModelError` raised)."""
    largest: Largest = {}
    unpredicted: dict[str, str] = {}
    for offer in screened.allowed:
        try:
            largest |= {(offer.name, amp): estimator.largest_batch(offer.name, amp) for amp in BOTH}
        except NoModelError as error:
            if offer.name == screened.written.name:
                raise
            unpredicted[offer.name] = str(error)
    return largest, unpredicted


def _runs_on(estimator: Estimator, unpredicted: dict[str, str]) -> RunsOn:
    """The estimator's `runs_on`, with no limit (does not run there) on a partition nothing predicts."""

    def runs_on(candidate: Candidate) -> timedelta | None:
        return None if candidate.partition in unpredicted else estimator.runs_on(candidate)

    return runs_on


def _candidates(screened: Screened, ask: Ask, largest: Largest, asked: Candidate) -> list[Candidate]:
    """The candidates besides the job as submitted, on the partitions something predicts, each micro-batch
    within what one device holds."""
    tuning = screened.effective.tuning
    allowed = [offer for offer in screened.allowed if (offer.name, False) in largest]
    others = job_candidates(screened.description, allowed, screened.gpus, tuning, largest, screened.nodes)
    # A job that counts its tasks (--ntasks) keeps its devices: the tasks are its ranks.
    ranked_by_tasks = ask.request.ntasks not in (None, 1)
    spread = (screened.gpus, screened.nodes)
    return [c for c in others if c != asked and not (ranked_by_tasks and (c.gpus, c.nodes) != spread)]
