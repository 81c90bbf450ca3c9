"""The second stage of a recommendation: the job's candidates on the partitions screening allowed, each with
its predicted run, time limit, wait and cost (an `Estimate`, made by the `Estimator`).

Where the model predictor is unsure of the job and its earlier runs are known, history sets the level of
every prediction (the prior, `history_prior`): the estimator is built with that scale from the start.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def estimate(context: Context, screened: Screened, ask: Ask) -> Estimated | PassedThrough:
    """Every candidate estimated; the job passes through where nothing predicts it as submitted."""
    args = (context, screened.effective, ask, screened.description, screened.predictor)
    plain = Estimator(*args)
    offer = screened.offers[screened.written.name]
    asked = baseline(screened.description, offer, screened.gpus, screened.nodes)
    try:
        others = _candidates(screened, ask, plain, asked)
        history = ask.history
        prior = None if history is None else history_prior(history.forecast, *plain.predicted(asked))
        estimator = plain if prior is None else Estimator(*args, scale=prior)
        return Estimated(estimator.estimate([asked, *others]), prior, estimator.runs_on)
    except NoModelError as error:
        return PassedThrough("no model", screened.effective, error=str(error))


def _candidates(screened: Screened, ask: Ask, estimator: Estimator, asked: Candidate) -> list[Candidate]:
    """The candidates besides the job as submitted, each micro-batch within what one device holds."""
    allowed, tuning = screened.allowed, screened.effective.tuning
    largest = {(o.name, amp): estimator.largest_batch(o.name, amp) for o in allowed for amp in BOTH}
    others = job_candidates(screened.description, allowed, screened.gpus, tuning, largest, screened.nodes)
    # A job that counts its tasks (--ntasks) keeps its devices: the tasks are its ranks.
    ranked_by_tasks = ask.request.ntasks not in (None, 1)
    spread = (screened.gpus, screened.nodes)
    return [c for c in others if c != asked and not (ranked_by_tasks and (c.gpus, c.nodes) != spread)]
